"""FSDP block by block: which submodules become units (no processes), and a
6-block model trained under FSDP at world 2 with activation checkpointing, which
must match the plain single-process run, units and checkpoint keys included."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

from accel_migrate.runtime.config import ConfigError, RuntimeConfig, load_config
from accel_migrate.runtime.strategies.fsdp_units import (
    ActivationCheckpointingError,
    block_units,
    checkpoint_block,
    describe_units,
)
from tests import warm_python

SCRIPT = Path(__file__).parent / "scripts" / "fsdp_blocks.py"
LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.layers = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_repeated_children_of_one_class_are_the_blocks() -> None:
    model = Tower()
    assert block_units(model, RuntimeConfig()) == list(model.layers)


def test_a_sequential_of_mixed_layers_has_no_blocks() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert block_units(model, RuntimeConfig()) == []


def test_parameterless_repeats_are_not_blocks() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.ReLU()))
    assert block_units(model, RuntimeConfig()) == []


def test_block_classes_override_the_detection() -> None:
    model = Tower()
    config = RuntimeConfig(fsdp_block_classes=("Sequential",))
    assert block_units(model, config) == [model.head]


def test_size_policy_for_models_without_repeated_blocks() -> None:
    model = nn.Sequential(nn.Linear(4, 100), nn.ReLU(), nn.Linear(100, 2))
    config = RuntimeConfig(fsdp_min_params=400)
    assert block_units(model, config) == [model[0]]
    assert block_units(model, RuntimeConfig()) == []


def test_root_only_wrap() -> None:
    assert block_units(Tower(), RuntimeConfig(fsdp_wrap="root")) == []


def test_config_values_are_checked(tmp_path: Path) -> None:
    environ = {
        "ACCEL_MIGRATE_FSDP_BLOCK_CLASSES": "Block, DecoderLayer",
        "ACCEL_MIGRATE_FSDP_MIN_PARAMS": "1000",
        "ACCEL_MIGRATE_ACTIVATION_CHECKPOINTING": "yes",
    }
    config = load_config(environ=environ, cwd=tmp_path)
    assert config.fsdp_block_classes == ("Block", "DecoderLayer")
    assert config.fsdp_min_params == 1000
    assert config.activation_checkpointing is True
    with pytest.raises(ConfigError, match="fsdp-min-params='-3'"):
        load_config(environ={"ACCEL_MIGRATE_FSDP_MIN_PARAMS": "-3"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="fsdp-wrap='layers'"):
        load_config(environ={"ACCEL_MIGRATE_FSDP_WRAP": "layers"}, cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-migrate]\nfsdp-block-classes = ["Block"]\n'
    )
    assert load_config(environ={}, cwd=tmp_path).fsdp_block_classes == ("Block",)


def test_tpu_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TPU/XLA is not supported"):
        load_config(environ={"ACCEL_MIGRATE_STRATEGY": "tpu"}, cwd=tmp_path)


def _plain_and_launched(
    tmp_path: Path, *flags: str
) -> tuple[list[float], subprocess.CompletedProcess[str]]:
    """The plain run's losses, and the six-block script launched at world 2 under
    FSDP with ``flags`` (its output saved to ``fsdp.pt``)."""
    plain = subprocess.run(
        [warm_python.executable(), str(SCRIPT), "plain", str(tmp_path / "plain.pt")],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(120),
        check=True,
    )
    launched = subprocess.run(
        [
            *warm_python.launcher(),
            *("--nproc", "2", "--strategy", "fsdp", *flags),
            *(str(SCRIPT), "runtime", str(tmp_path / "fsdp.pt")),
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(240),
        check=False,
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "units 7" in launched.stdout  # six blocks and the root
    # What the user sees of it (rank 0, once).
    seen = "accel-migrate: Net: 7 FSDP units (6 x Block, and the root)"
    assert launched.stderr.count(seen) == 1, launched.stderr
    return [float(v) for _, v in LOSS.findall(plain.stdout)], launched


@pytest.mark.multiprocess
def test_six_blocks_shard_one_by_one_and_match_the_original(tmp_path: Path) -> None:
    expected, launched = _plain_and_launched(tmp_path, "--activation-checkpointing")
    got = [float(v) for _, v in LOSS.findall(launched.stdout)]
    assert len(expected) == 8
    assert got == pytest.approx(expected, rel=1e-5)
    before = torch.load(tmp_path / "plain.pt")
    after = torch.load(tmp_path / "fsdp.pt")
    assert list(after) == list(before)
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, rtol=1e-5, atol=1e-6)


@pytest.mark.multiprocess
def test_six_blocks_in_bf16_hand_the_head_bf16_activations(tmp_path: Path) -> None:
    # Each block once returned fp32 (the root's output dtype) to the root's bf16
    # head: "mat1 and mat2 must have the same dtype, but got Float and BFloat16".
    expected, launched = _plain_and_launched(tmp_path, "--precision", "bf16")
    got = [float(v) for _, v in LOSS.findall(launched.stdout)]
    assert len(got) == len(expected) == 8
    # bf16's band (docs/runtime.md, "Precision and tolerances")
    assert got == pytest.approx(expected, rel=5e-2)


def _stage() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU())


def test_checkpointed_blocks_count_batchnorm_statistics_once() -> None:
    # A VGG stage under --activation-checkpointing: the recomputation in backward
    # ran BatchNorm's forward again and updated its running statistics twice
    # (num_batches_tracked 2 after one step; the eval and the checkpoint differed).
    plain, checkpointed = _stage(), _stage()
    checkpoint_block(checkpointed)
    x = torch.randn(4, 3, 6, 6, requires_grad=True)
    for model in (plain, checkpointed):
        for _ in range(2):
            model(x).square().mean().backward()
    assert int(checkpointed[1].num_batches_tracked) == 2
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(checkpointed.state_dict()[name], value)
    torch.testing.assert_close(checkpointed[0].weight.grad, plain[0].weight.grad)


def _spectral(kind: str, whole: bool) -> nn.Module:
    torch.manual_seed(0)
    norm = (
        nn.utils.spectral_norm
        if kind == "hook"
        else nn.utils.parametrizations.spectral_norm
    )
    layer = norm(nn.Linear(6, 6))
    return layer if whole else nn.Sequential(layer, nn.Tanh(), nn.Linear(6, 1))


def _vectors(model: nn.Module) -> list[torch.Tensor]:
    return [b for n, b in model.named_buffers() if n.endswith(("_u", "_v"))]


@pytest.mark.parametrize(
    ("kind", "whole"),
    [("hook", False), ("parametrization", False), ("parametrization", True)],
    ids=["hook", "parametrization", "parametrized-block"],
)
def test_checkpointed_blocks_iterate_spectral_norm_once(kind: str, whole: bool) -> None:
    # A spectral-norm block under --activation-checkpointing: the recomputation
    # ran the power iteration again (weight_u advanced twice a step) and divided
    # the recomputed weight by another estimate than the forward's (3 SGD steps of
    # one forward: weight_u 7.6e-2 and the parameters 1.1e-2 from the unchecked run).
    plain, checkpointed = _spectral(kind, whole), _spectral(kind, whole)
    checkpoint_block(checkpointed)
    x = torch.randn(5, 6)
    for model in (plain, checkpointed):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            # two forwards before one backward: each recomputation uses its own
            (model(x).square().mean() + model(x + 1).square().mean()).backward()
            optimizer.step()
        assert model.training
    assert len(_vectors(plain)) == 2
    for got, expected in zip(_vectors(checkpointed), _vectors(plain), strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    for got, expected in zip(
        checkpointed.parameters(), plain.parameters(), strict=True
    ):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


class _DropoutOwner(nn.Module):
    """A layer the spectral norm hook normalizes whose own forward reads
    ``training`` (a dropout of its output)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(x @ self.weight.t(), 0.5, self.training)


def _owner_block(kind: str) -> nn.Module:
    torch.manual_seed(0)
    hook, parametrized = (
        nn.utils.spectral_norm,
        nn.utils.parametrizations.spectral_norm,
    )
    block = {
        "hook-batchnorm": lambda: nn.Sequential(
            hook(nn.Linear(4, 4)), nn.BatchNorm1d(4), parametrized(nn.Linear(4, 4))
        ),
        # the normalized layer is itself a BatchNorm (its weight, dim 0)
        "batchnorm-owner": lambda: nn.Sequential(
            nn.Linear(4, 4), hook(nn.BatchNorm1d(4))
        ),
        "dropout-owner": lambda: nn.Sequential(hook(_DropoutOwner()), nn.Tanh()),
    }[kind]()
    return nn.Sequential(block, nn.Linear(4, 1))


@pytest.mark.parametrize("kind", ["hook-batchnorm", "batchnorm-owner", "dropout-owner"])
@pytest.mark.parametrize("forwards", ["one", "two", "no-grad-first", "eval"])
def test_checkpointed_spectral_norm_leaves_the_layer_s_own_forward_alone(
    kind: str, forwards: str
) -> None:
    # r30e recomputed with the hook's layer in eval mode: a BatchNorm the hook
    # normalizes recomputed with its running statistics (CheckpointError at the
    # first backward), a dropout in the layer without its mask (a different
    # number of saved tensors). No module's mode changes now: the hook iterates
    # 0 times in the recomputation, from the forward's vectors. A forward in
    # eval mode recomputed after train() (`eval`) ran in training mode: a
    # BatchNorm's CheckpointError, a dropout's masks (1.3e-2 in the loss)
    results = []
    for checkpointed in (False, True):
        model = _owner_block(kind)
        if checkpointed:
            checkpoint_block(model[0])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        losses = []
        for step in range(3):
            x = torch.randn(8, 4, generator=g)
            optimizer.zero_grad()
            torch.manual_seed(100 + step)
            if forwards == "eval":  # a forward in eval mode, backward after train()
                model.eval()
                loss = model(x).pow(2).mean()
                model.train()
            elif forwards == "two":
                loss = model(x).pow(2).mean() + model(x * 2).pow(2).mean()
            else:
                if forwards == "no-grad-first":
                    with torch.no_grad():
                        model(x)
                loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert all(m.training for m in model.modules())
        results.append((losses, model.state_dict()))
    (plain, plain_state), (got, got_state) = results
    assert got == plain
    for name, value in plain_state.items():
        torch.testing.assert_close(got_state[name], value, rtol=0, atol=0)


def test_a_block_normalized_by_the_spectral_norm_hook_is_refused_at_setup() -> None:
    # Its hook runs before checkpoint's: the backward stopped with torch's
    # "Recomputed values ... have different metadata" at the first step.
    with pytest.raises(ActivationCheckpointingError, match="parametrizations"):
        checkpoint_block(_spectral("hook", whole=True))


def test_the_units_are_described_and_a_root_alone_says_why() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    config = RuntimeConfig()
    assert block_units(model, config) == []
    # a small model alone says nothing; a larger one says why and what to do
    assert describe_units(model, [], config) is None
    large = nn.Sequential(nn.Linear(400, 300), nn.ReLU(), nn.Linear(300, 2))
    said = describe_units(large, [], config)
    assert said is not None
    assert said.startswith("Sequential: 1 FSDP unit, the root: no repeated blocks")
    assert "--fsdp-min-params N" in said
    # options that match nothing are named, not advised again
    given = RuntimeConfig(fsdp_block_classes=("Block",), fsdp_min_params=10**9)
    said = describe_units(model, [], given)
    assert said == (
        "Sequential: 1 FSDP unit, the root: the options given (--fsdp-block-classes "
        "Block --fsdp-min-params 1000000000) match no module, so every parameter "
        "is gathered for the whole step (about DDP's peak memory)"
    )
    root = RuntimeConfig(fsdp_wrap="root")
    assert describe_units(model, [], root).endswith("the root (fsdp-wrap root)")
    blocks = [model[0], model[2]]
    assert describe_units(model, blocks, config) == (
        "Sequential: 3 FSDP units (2 x Linear, and the root)"
    )
