"""``accel-migrate launch`` takes torchrun's spellings, checks every value before
anything starts, keeps the script's own arguments away from torchrun's parser,
and says in one line what it starts (cli/launch_options.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_OK, EXIT_USAGE
from tests import warm_python

torch_run = pytest.importorskip("torch.distributed.run")

LAUNCH = ["-m", "accel_migrate", "launch", "--nproc-per-node", "2"]
MIGRATED = "import accel_migrate.runtime as accel\naccel.print('hello')\n"


pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_", "PET_", "SLURM_"))


@pytest.fixture(autouse=True)
def _migrated_script(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(MIGRATED)


@pytest.fixture
def torchrun(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[argparse.Namespace]]:
    """torchrun's real parser; its run() records what it was given instead."""
    started: list[argparse.Namespace] = []
    fake = types.ModuleType("torch.distributed.run")
    fake.get_args_parser = torch_run.get_args_parser  # type: ignore[attr-defined]
    fake.run = started.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed.run", fake)
    import torch.distributed

    monkeypatch.setattr(torch.distributed, "run", fake, raising=False)
    saved = dict(os.environ)
    yield started
    os.environ.clear()
    os.environ.update(saved)


def launch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["launch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--nproc", "3"], "nproc_per_node", "3"),
        (["--nproc-per-node", "3"], "nproc_per_node", "3"),
        (["--nproc_per_node", "3"], "nproc_per_node", "3"),
        (["--nproc", "1", "--standalone"], "standalone", True),
        (
            ["--master-addr", "10.0.0.1", "--master-port", "29700"],
            "master_addr",
            "10.0.0.1",
        ),
        (["--master_addr", "10.0.0.1", "--master_port", "29700"], "master_port", 29700),
        (
            ["--nnodes", "2", "--node_rank", "1", "--rdzv-endpoint", "h:1"],
            "node_rank",
            1,
        ),
        (
            ["--nnodes", "2", "--rdzv_endpoint", "h:1", "--rdzv-backend", "etcd"],
            "rdzv_backend",
            "etcd",
        ),
        (
            ["--nnodes", "2", "--rdzv-endpoint", "h:1", "--rdzv_id", "job7"],
            "rdzv_id",
            "job7",
        ),
        (
            ["--nnodes", "2", "--rdzv-endpoint", "h:1", "--rdzv-conf", "timeout=60"],
            "rdzv_conf",
            "timeout=60",
        ),
        (["--nnodes", "1:2", "--rdzv-endpoint", "h:1"], "nnodes", "1:2"),
        (["--log-dir", "logs"], "log_dir", "logs"),
        (["--log_dir", "logs"], "log_dir", "logs"),
        (["--redirects", "3", "--log-dir", "logs"], "redirects", "3"),
        (["-r", "0:1,1:2"], "redirects", "0:1,1:2"),
        (["--tee", "3"], "tee", "3"),
        (["-t", "1"], "tee", "1"),
        (["--nproc", "2", "--local-ranks-filter", "1"], "local_ranks_filter", "1"),
        (["--nproc", "2", "--local_ranks_filter", "0,1"], "local_ranks_filter", "0,1"),
        (["--max_restarts", "2"], "max_restarts", 2),
    ],
)
def test_torchruns_spellings_reach_torchrun(
    argv: list[str],
    field: str,
    value: object,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = launch(capsys, *argv, "train.py")
    assert code == EXIT_OK, err
    [parsed] = torchrun
    assert getattr(parsed, field) == value
    assert parsed.training_script == "train.py"


def test_local_ranks_filter_alone_turns_on_tee(
    torchrun: list[argparse.Namespace], capsys: pytest.CaptureFixture[str]
) -> None:
    # torchrun filters only the output it captures: without --tee the filter
    # would do nothing.
    launch(capsys, "--nproc", "2", "--local-ranks-filter", "1", "train.py")
    assert torchrun[0].tee == "3"


def test_a_module_is_run_with_dash_m(
    tmp_path: Path,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("print('not migrated')\n")
    code, _, err = launch(capsys, "-m", "--nproc", "2", "pkg.train", "--epochs", "1")
    assert code == EXIT_OK, err
    [parsed] = torchrun
    assert parsed.module is True
    assert (parsed.training_script, parsed.training_script_args) == (
        "pkg.train",
        ["--epochs", "1"],
    )
    assert "never imports accel_migrate.runtime" in err, "the module's file was read"


def test_the_scripts_own_options_never_reach_torchruns_parser(
    torchrun: list[argparse.Namespace], capsys: pytest.CaptureFixture[str]
) -> None:
    # torchrun's argparse takes abbreviations: given to it, --log is ambiguous
    # with --log-dir/--logs-specs and --nproc with --nproc-per-node.
    script_args = ["--log", "run.txt", "--nproc", "3", "--max-restarts", "-1", "-m"]
    code, _, err = launch(capsys, "--nproc", "1", "train.py", *script_args)
    assert code == EXIT_OK, err
    [parsed] = torchrun
    assert parsed.training_script_args == script_args
    assert parsed.nproc_per_node == "1"
    assert parsed.max_restarts == 0
    assert parsed.module is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nprocs", "2"], "unknown option --nprocs (did you mean --nproc?)"),
        (
            ["--max-restart=2"],
            "unknown option --max-restart (did you mean --max-restarts?)",
        ),
        (["--nproc-per-nod", "2"], "(did you mean --nproc-per-node?)"),
        (["--start-method", "fork"], "unknown option --start-method"),
        (["--max-restarts", "-1"], "--max-restarts -1 must be 0 or more"),
        (["--nnodes", "two"], "--nnodes='two' is not N or MIN:MAX"),
        (["--nnodes", "3:2", "--rdzv-endpoint", "h:1"], "need 1 <= MIN <= MAX"),
        (
            ["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"],
            "--node-rank 2 does not fit --nnodes 2",
        ),
        (["--master-port", "70000"], "--master-port 70000 is not a port"),
        (["--standalone", "--nnodes", "2"], "--standalone runs one node"),
        (["--nnodes", "2"], "needs --rdzv-endpoint HOST:PORT (or --master-addr"),
        (["--master-addr", "a", "--rdzv-endpoint", "h:1"], "two kinds of rendezvous"),
        (
            ["--nnodes", "2", "--rdzv-endpoint", "h:1", "--rdzv-conf", "timeout"],
            "is not KEY=VALUE",
        ),
        (["--tee", "4"], "--tee='4' is not 0-3"),
        (["--redirects", "x"], "--redirects='x' is not 0-3"),
        (
            ["--strategy", "ddp", "--zero-stage", "3"],
            "--zero-stage is not read by strategy 'ddp' (from --strategy): it is an "
            "option of --strategy deepspeed",
        ),
        (
            ["--nproc", "2", "--fsdp-wrap", "root"],
            "--fsdp-wrap is not read by strategy 'ddp' (auto, from default): it is "
            "an option of --strategy fsdp or hsdp",
        ),
        (
            ["--strategy", "deepspeed", "--activation-checkpointing"],
            "--activation-checkpointing is not read by strategy 'deepspeed'",
        ),
        (["--nproc", "2", "--local-ranks-filter", "2"], "local rank 2 does not exist"),
        (["--local-ranks-filter", "a"], "is not comma-separated ranks"),
    ],
)
def test_bad_options_exit_2_before_anything_starts(
    argv: list[str],
    message: str,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = launch(capsys, *argv, "train.py")
    assert code == EXIT_USAGE
    assert out == ""
    assert message in err, err
    assert err.startswith("error: ")
    assert "Traceback" not in err and "usage:" not in err
    assert torchrun == []


def test_pet_variables_fill_the_options(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What Kubeflow's Trainer and other schedulers set for torchrun.
    for name, value in {
        "PET_NPROC_PER_NODE": "2",
        "PET_NNODES": "2",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "10.1.2.3",
        "PET_MASTER_PORT": "23456",
    }.items():
        monkeypatch.setenv(name, value)
    code, _, err = launch(capsys, "train.py")
    assert code == EXIT_OK, err
    [parsed] = torchrun
    assert (parsed.nproc_per_node, parsed.nnodes, parsed.node_rank) == ("2", "2", 1)
    assert (parsed.master_addr, parsed.master_port) == ("10.1.2.3", 23456)
    assert "accel-migrate launch:" not in err, "the banner is node 0's"


def test_a_flag_wins_over_its_pet_variable(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PET_NPROC_PER_NODE", "4")
    launch(capsys, "--nproc", "1", "train.py")
    assert torchrun[0].nproc_per_node == "1"


def test_the_banner_says_what_starts_and_where_each_part_came_from(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("PET_NPROC_PER_NODE", "2")
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "bf16")
    code, _, err = launch(capsys, "--strategy", "fsdp", "train.py")
    assert code == EXIT_OK, err
    assert err.splitlines() == [
        "accel-migrate launch: world size 2 (2 per node, PET_NPROC_PER_NODE), "
        "nodes 1 (default), strategy fsdp (--strategy), precision bf16 "
        "(ACCEL_MIGRATE_PRECISION), backend gloo (no GPU), batch mode global (default)"
    ]


def test_the_banner_says_gloo_for_a_script_kept_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A script with no device code is migrated to
    ``accel.device(accelerator=False)``: on a GPU machine its processes use gloo
    on the CPU, and the banner must not say nccl."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    _, _, err = launch(capsys, "--nproc", "2", "train.py")
    assert "backend nccl (GPUs found)" in err, err
    script = tmp_path / "train.py"
    script.write_text(
        MIGRATED.replace(
            "import accel_migrate.runtime as accel\n",
            "import accel_migrate.runtime as accel\n\naccel.device(accelerator=False)\n",
            1,
        )
    )
    _, _, err = launch(capsys, "--nproc", "2", "train.py")
    assert (
        "backend gloo (GPUs found; the script keeps every process on the CPU)" in err
    ), err


def test_nproc_auto_starts_one_process_for_a_script_kept_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """On a (faked) machine with 4 GPUs, ``--nproc auto`` starts one process per
    GPU for a script that uses them, and one for a script that keeps every
    process on the CPU (``accel.device(accelerator=False)``), as on a machine
    with no GPU: the GPU count says nothing of a CPU job; the banner says why,
    and ``--nproc N`` still starts N."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    code, _, err = launch(capsys, "train.py")
    assert code == EXIT_OK, err
    assert torchrun[-1].nproc_per_node == "4"
    assert "world size 4 (4 per node, default, auto: one per GPU)" in err, err
    (tmp_path / "train.py").write_text(
        MIGRATED.replace(
            "import accel_migrate.runtime as accel\n",
            "import accel_migrate.runtime as accel\n\naccel.device(accelerator=False)\n",
            1,
        )
    )
    code, _, err = launch(capsys, "train.py")
    assert code == EXIT_OK, err
    assert torchrun[-1].nproc_per_node == "1"
    assert (
        "world size 1 (1 per node, default, auto: one, not one per GPU, as the "
        "script keeps every process on the CPU; --nproc N starts N)"
    ) in err, err
    assert "strategy single (auto, default)" in err
    code, _, err = launch(capsys, "--nproc", "3", "train.py")
    assert code == EXIT_OK, err
    assert torchrun[-1].nproc_per_node == "3"
    assert "world size 3 (3 per node, flag)" in err, err


def test_nproc_auto_counts_gpus_for_a_script_with_a_cpu_fallback_branch(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A GPU script's CPU branch (``device = accel.device(accelerator=False)``
    under ``else:`` of ``if torch.cuda.is_available():``, as the device-choice
    rule writes it) does not keep the script on the CPU: on a (faked) machine
    with 4 GPUs ``--nproc auto`` starts 4 processes and the backend is nccl.
    Only the bare module-level statement the codemod writes into a script with
    no device code counts."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    (tmp_path / "train.py").write_text(
        "import torch\n"
        + MIGRATED
        + "\nif torch.cuda.is_available():\n    device = accel.device()\n"
        + "else:\n    device = accel.device(accelerator=False)\n"
    )
    code, _, err = launch(capsys, "train.py")
    assert code == EXIT_OK, err
    assert torchrun[-1].nproc_per_node == "4"
    assert "backend nccl (GPUs found)" in err, err


def test_the_banner_of_a_default_launch_and_of_slurm(
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _, _, err = launch(capsys, "train.py")
    assert err.splitlines() == [
        "accel-migrate launch: world size 1 (1 per node, default, auto: no GPU), "
        "nodes 1 (default), strategy single (auto, default), precision fp32 "
        "(default), backend gloo (no GPU), batch mode global (default)"
    ]
    for name, value in {
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "n[1-2]",
    }.items():
        monkeypatch.setenv(name, value)
    _, _, err = launch(capsys, "--nproc", "2", "train.py")
    assert "world size 4 (2 per node, flag), nodes 2 (Slurm), strategy ddp" in err


@pytest.mark.multiprocess
def test_for_real_script_options_pass_and_one_ranks_output_is_shown(
    tmp_path: Path,
) -> None:
    (tmp_path / "each.py").write_text(
        "import os, sys\n"
        "import accel_migrate.runtime as accel\n"
        "print('rank', os.environ['RANK'], sys.argv[1:], flush=True)\n"
    )
    done = subprocess.run(
        [
            warm_python.executable(),
            *LAUNCH,
            "--local-ranks-filter",
            "1",
            "each.py",
            "--log",
            "x",
            "--nproc",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert "[default1]:rank 1 ['--log', 'x', '--nproc', '3']" in done.stdout
    assert "rank 0" not in done.stdout
    assert "accel-migrate launch: world size 2 (2 per node, flag)" in done.stderr


def test_a_strategys_option_from_pyproject_is_a_default_not_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    torchrun: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``zero-stage = 3`` in ``[tool.accel-migrate]`` is for when DeepSpeed runs;
    a launch under another strategy starts as asked."""
    (tmp_path / "pyproject.toml").write_text("[tool.accel-migrate]\nzero-stage = 3\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = launch(capsys, "--strategy", "ddp", "--nproc", "2", "train.py")
    assert code == 0, err
    assert len(torchrun) == 1


def test_the_strategy_choices_are_the_registry_s() -> None:
    # --strategy's choices come from the runtime configuration's list (read
    # without torch: --help never imports it); they must name the registered
    # strategies, no more, no fewer
    from accel_migrate.cli.run_cli import StrategyChoice
    from accel_migrate.runtime.config import STRATEGIES
    from accel_migrate.runtime.strategies import strategy_names

    choices = StrategyChoice().choices
    assert choices[0] == "auto"
    assert sorted(choices[1:]) == strategy_names()
    assert set(choices) == set(STRATEGIES)
    assert len(STRATEGIES) == len(set(STRATEGIES))
