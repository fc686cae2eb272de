"""``fsdp-cpu-offload``: the setting from the flag, the environment and
pyproject.toml to the strategy, FSDP2's ``CPUOffloadPolicy`` on a CPU device (a
world of one in this process: the same losses as without it, since the shards
live in host memory anyway), the process group's backend, the launcher's note,
and ZeRO-Offload's entries under ``--strategy deepspeed``. The GPU run is
tests/gpu/test_gpu_parity.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from click.testing import CliRunner
from torch import nn

from accel_migrate.cli import launch_command
from accel_migrate.cli.group import cli
from accel_migrate.cli.launch_options import offload_note
from accel_migrate.runtime.comm import Collectives, process_group_backend
from accel_migrate.runtime.config import (
    ConfigError,
    RuntimeConfig,
    config_environment,
    load_config,
)
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.precision import precision_class
from accel_migrate.runtime.strategies import strategy_class
from accel_migrate.runtime.strategies.deepspeed_zero import deepspeed_config
from accel_migrate.runtime.strategies.fsdp import FSDPStrategy


def test_the_setting_comes_from_flag_environment_and_pyproject(tmp_path: Path) -> None:
    assert load_config(environ={}, cwd=tmp_path).fsdp_cpu_offload is False
    flagged = load_config({"fsdp_cpu_offload": True}, environ={}, cwd=tmp_path)
    assert flagged.fsdp_cpu_offload is True
    assert flagged.source_of("fsdp_cpu_offload") == "--fsdp-cpu-offload"
    env = {"ACCEL_MIGRATE_FSDP_CPU_OFFLOAD": "on"}
    assert load_config(environ=env, cwd=tmp_path).fsdp_cpu_offload is True
    (tmp_path / "pyproject.toml").write_text(
        "[tool.accel-migrate]\nfsdp-cpu-offload = true\n"
    )
    config = load_config(environ={}, cwd=tmp_path)
    assert config.fsdp_cpu_offload is True
    # The launcher hands it to the processes, which resolve the same value.
    children = load_config(environ=config_environment(config), cwd=Path("/"))
    assert children.fsdp_cpu_offload is True
    assert children.source_of("fsdp_cpu_offload").endswith("[tool.accel-migrate]")
    with pytest.raises(
        ConfigError,
        match=r"fsdp-cpu-offload='sometimes' from ACCEL_MIGRATE_FSDP_CPU_OFFLOAD "
        "is not true or false",
    ):
        load_config(
            environ={"ACCEL_MIGRATE_FSDP_CPU_OFFLOAD": "sometimes"}, cwd=tmp_path
        )


def test_the_launch_flag_reaches_the_processes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, str] = {}
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.setattr(
        launch_command,
        "start_torchrun",
        lambda argv, args: seen.update(os.environ),
    )
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli,
        [
            "launch",
            "--nproc",
            "1",
            "--strategy",
            "fsdp",
            "--fsdp-cpu-offload",
            "train.py",
        ],
    )
    assert result.exit_code == 0, result.output
    assert seen["ACCEL_MIGRATE_FSDP_CPU_OFFLOAD"] == "1"
    if not torch.cuda.is_available():
        assert "note: fsdp-cpu-offload (from --fsdp-cpu-offload) changes nothing" in (
            result.stderr if result.stderr_bytes is not None else result.output
        )


def test_the_note_says_where_the_setting_changes_nothing() -> None:
    asked = RuntimeConfig(strategy="fsdp", fsdp_cpu_offload=True)
    assert offload_note(asked, cuda=False) == (
        "note: fsdp-cpu-offload (from default) changes nothing without a GPU: the "
        "shards and the optimizer state are in host memory already"
    )
    assert offload_note(asked, cuda=True) is None
    assert offload_note(RuntimeConfig(strategy="fsdp"), cuda=False) is None
    zero = RuntimeConfig(strategy="deepspeed", fsdp_cpu_offload=True)
    assert offload_note(zero, cuda=True) is None
    assert "changes nothing without a GPU" in str(offload_note(zero, cuda=False))
    ddp = RuntimeConfig(strategy="ddp", fsdp_cpu_offload=True)
    assert offload_note(ddp, cuda=True) == (
        "note: fsdp-cpu-offload (from default) changes nothing under strategy "
        "'ddp': it offloads the shards of fsdp, hsdp and deepspeed"
    )


def test_offloaded_shards_get_a_gloo_backend_beside_nccl() -> None:
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert process_group_backend(cpu) == "gloo"
    assert process_group_backend(cpu, host_tensors=True) == "gloo"
    assert process_group_backend(gpu) == "nccl"
    assert process_group_backend(gpu, host_tensors=True) == "cpu:gloo,cuda:nccl"
    offload = RuntimeConfig(fsdp_cpu_offload=True)
    assert strategy_class("fsdp").host_collectives(offload) is True
    assert strategy_class("hsdp").host_collectives(offload) is True
    assert strategy_class("fsdp").host_collectives(RuntimeConfig()) is False
    # DDP keeps everything on the device; ZeRO-Offload moves tensors itself.
    assert strategy_class("ddp").host_collectives(offload) is False
    assert strategy_class("deepspeed").host_collectives(offload) is False


def _strategy(config: RuntimeConfig) -> FSDPStrategy:
    env, device = DistEnv(), torch.device("cpu")
    comm = Collectives(env, device)
    precision = precision_class("fsdp", config.precision)(device, comm)
    return FSDPStrategy(env, device, comm, precision, config)


def _losses(offload: bool) -> tuple[list[float], Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    strategy = _strategy(RuntimeConfig(strategy="fsdp", fsdp_cpu_offload=offload))
    policy = strategy.offload_policy()
    strategy.setup_module(model)
    x = torch.randn(5, 6)
    losses = []
    for _ in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        strategy.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, policy


def test_cpu_offload_on_a_cpu_device_trains_as_without_it(tmp_path: Path) -> None:
    from torch.distributed.fsdp import CPUOffloadPolicy

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        plain, no_policy = _losses(offload=False)
        offloaded, policy = _losses(offload=True)
    finally:
        dist.destroy_process_group()
    assert not isinstance(no_policy, CPUOffloadPolicy)
    # Unpinned: pinning needs an accelerator, and torch 2.13 raises without one.
    assert policy == CPUOffloadPolicy(pin_memory=False)
    assert offloaded == plain


def test_zero_offload_entries_per_stage() -> None:
    def zero(stage: int, offload: bool) -> dict[str, Any]:
        config = deepspeed_config(
            micro_batch=2,
            world_size=2,
            zero_stage=stage,
            precision="fp32",
            parameter_sizes=[8],
            cpu_offload=offload,
            pin_memory=True,
        )
        assert config["zero_force_ds_cpu_optimizer"] is False  # the script's optimizer
        return config["zero_optimization"]

    host = {"device": "cpu", "pin_memory": True}
    for stage in (1, 2):
        assert zero(stage, True)["offload_optimizer"] == host
        assert "offload_param" not in zero(stage, True)  # stage 3 only
    assert zero(3, True)["offload_param"] == host
    assert "offload_optimizer" not in zero(3, False)
