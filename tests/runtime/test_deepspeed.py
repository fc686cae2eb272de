"""DeepSpeed ZeRO as a strategy (``--strategy deepspeed --zero-stage N``).

The checks without processes run everywhere. The multi-process one needs the
optional extra (``pip install "accel-migrate[deepspeed]"``) and is skipped,
with that reason, where DeepSpeed is not installed. It starts ONE torchrun
launch (world 2) that trains ZeRO stages 1, 2, 3 in fp32, stage 2 in bf16 and
stage 3 in fp32 with ``fsdp-cpu-offload`` (ZeRO-Offload)
(tests/runtime/scripts/deepspeed_zero.py), each against the single-process
original (4 optimizer steps of 2 accumulated micro-batches each, Adam with two
parameter groups, StepLR, clipping), and resumes stages 1 and 3 from a state
saved at step 2.

Tolerances (docs/runtime.md, "DeepSpeed ZeRO"): fp32 relative 1e-5 for the
first two steps, then a band of 1e-2 (Adam divides by the root of a second
moment that is still tiny, so a different order of the gradient reduction can
grow: about 0.6% by step 3 was measured in one setup; 1e-7 here); bf16 the
project's bf16 tolerance, 5e-2, from the first step (autocast kernels round
differently on half the batch).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from accel_migrate.runtime.config import ConfigError, RuntimeConfig, load_config
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.precision import PrecisionUnavailableError, precision_class
from accel_migrate.runtime.strategies import strategy_class
from accel_migrate.runtime.strategies.deepspeed_zero import (
    bucket_elements,
    check_launch,
    deepspeed_config,
    zero_buckets,
)

SCRIPT = Path(__file__).parent / "scripts" / "deepspeed_zero.py"
HAVE_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
EXACT_STEPS = 2
FP32_EXACT, FP32_BAND, BF16 = 1e-5, 1e-2, 5e-2
#: "+offload": with fsdp-cpu-offload (ZeRO-Offload of the optimizer state and,
#: at stage 3, the parameters; on the CPU the same memory, DeepSpeed's offload path).
CONFIGURATIONS = [
    (1, "fp32"),
    (2, "fp32"),
    (3, "fp32"),
    (2, "bf16"),
    (3, "fp32+offload"),
]


def test_the_batch_triple_is_built_from_the_runtime_numbers() -> None:
    config = deepspeed_config(
        micro_batch=4,
        world_size=2,
        zero_stage=3,
        precision="fp32",
        parameter_sizes=[8, 4],
    )
    assert config["train_batch_size"] == 4 * 1 * 2
    assert config["gradient_accumulation_steps"] == 1
    assert config["managed_gradient_accumulation"] is False  # the loop owns steps
    assert config["zero_optimization"]["stage"] == 3
    assert "fp16" not in config and "bf16" not in config
    fp16 = deepspeed_config(
        micro_batch=1,
        world_size=8,
        zero_stage=1,
        precision="fp16",
        parameter_sizes=[8, 4],
    )
    assert fp16["fp16"]["enabled"] is True
    assert fp16["train_batch_size"] == 8


def test_the_buckets_are_sized_from_the_model_not_deepspeeds_defaults() -> None:
    """DeepSpeed allocates ``reduce_bucket_size`` elements whole on every rank:
    its default (5e8, 1.9 GiB of fp32) for a 6.3 M-parameter model was the
    2 GiB ZeRO peak in docs/performance.md."""
    # bench/workloads/model_state_peak.py's model: Linear(32, 256), 12 blocks of
    # LayerNorm(256) and Linear 256 -> 1024 -> 256, Linear(256, 10).
    block = [256, 256, 1024 * 256, 1024, 256 * 1024, 256]
    sizes = [32 * 256, 256, *block * 12, 256 * 10, 10]
    assert sum(sizes) == 6_323_978
    bucket = 395_250  # ceil(total / 16), even: above the largest weight (262144)
    for stage in (1, 2, 3):
        zero = deepspeed_config(
            micro_batch=4,
            world_size=2,
            zero_stage=stage,
            precision="fp32",
            parameter_sizes=sizes,
        )["zero_optimization"]
        assert zero["reduce_bucket_size"] == bucket
        assert zero["allgather_bucket_size"] == bucket
        stage3 = {
            "stage3_prefetch_bucket_size": bucket,
            "stage3_max_live_parameters": 2 * bucket,
            "stage3_max_reuse_distance": bucket,
            "stage3_model_persistence_threshold": bucket,
            "sub_group_size": bucket,
        }
        assert {k: zero[k] for k in stage3 if k in zero} == (
            stage3 if stage == 3 else {}
        )
    # At least the largest parameter (DeepSpeed copies a larger one outside the
    # bucket), even for the stage 1/2 alignment assert, and never above the
    # defaults: a 10 B-parameter model keeps DeepSpeed's own sizes.
    assert bucket_elements([1000] * 8 + [10]) == 1000
    assert bucket_elements([7]) == 8
    assert bucket_elements([4096 * 4096] * 600) == 500_000_000
    big = zero_buckets(3, [4096 * 4096] * 600)
    assert big["stage3_prefetch_bucket_size"] == 50_000_000
    assert big["stage3_max_live_parameters"] == 1_000_000_000


def test_zero_stage_is_a_setting_like_the_others(tmp_path: Path) -> None:
    assert load_config(environ={}, cwd=tmp_path).zero_stage == 2
    assert (
        load_config(environ={"ACCEL_MIGRATE_ZERO_STAGE": "3"}, cwd=tmp_path).zero_stage
        == 3
    )
    assert load_config({"zero_stage": "1"}, environ={}, cwd=tmp_path).zero_stage == 1
    with pytest.raises(
        ConfigError, match=r"zero-stage='4' from --zero-stage is not one of: 1, 2, 3"
    ):
        load_config({"zero_stage": "4"}, environ={}, cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-migrate]\nstrategy = "deepspeed"\nzero-stage = 3\n'
    )
    config = load_config(environ={}, cwd=tmp_path)
    assert (config.strategy, config.zero_stage) == ("deepspeed", 3)


def test_a_missing_deepspeed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "deepspeed" else real(name, *a),
    )
    env = DistEnv(world_size=2, launched=True)
    config = RuntimeConfig(strategy="deepspeed", sources=(("strategy", "--strategy"),))
    with pytest.raises(ConfigError, match=r'pip install "accel-migrate\[deepspeed\]"'):
        strategy_class("deepspeed").check(env, config)


def test_the_launcher_refuses_before_starting_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One line from ``accel-migrate launch`` (exit 2), not a traceback per rank."""
    real = importlib.util.find_spec
    present = {"deepspeed": HAVE_DEEPSPEED}

    def find_spec(name: str, *args: Any) -> Any:
        if name == "deepspeed":
            return real("json") if present["deepspeed"] else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    present["deepspeed"] = False
    with pytest.raises(ConfigError, match=r"needs DeepSpeed: pip install"):
        check_launch(RuntimeConfig(strategy="deepspeed"))
    present["deepspeed"] = True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        ConfigError, match="fp16' under --strategy deepspeed needs a CUDA"
    ):
        check_launch(RuntimeConfig(strategy="deepspeed", precision="fp16"))
    check_launch(RuntimeConfig(strategy="deepspeed", precision="bf16"))


@pytest.mark.skipif(
    not HAVE_DEEPSPEED, reason='needs pip install "accel-migrate[deepspeed]"'
)
def test_deepspeed_needs_the_launcher() -> None:
    with pytest.raises(ConfigError, match="needs the launcher"):
        strategy_class("deepspeed").check(
            DistEnv(), RuntimeConfig(strategy="deepspeed")
        )


def test_fp16_on_the_cpu_is_refused_before_any_engine() -> None:
    plugin = precision_class("deepspeed", "fp16")
    with pytest.raises(
        PrecisionUnavailableError,
        match="fp16' under --strategy deepspeed needs a CUDA GPU",
    ):
        plugin(torch.device("cpu"))
    # bf16 is the runtime's autocast, as under DDP.
    assert precision_class("deepspeed", "bf16") is precision_class("ddp", "bf16")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], Any]:
    if not HAVE_DEEPSPEED:
        pytest.skip(
            'DeepSpeed is not installed: pip install "accel-migrate[deepspeed]"'
        )
    launched = subprocess.run(
        [
            sys.executable,
            "-m",
            "accel_migrate",
            "launch",
            "--nproc",
            "2",
            "--strategy",
            "deepspeed",
            str(SCRIPT),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        cwd=tmp_path_factory.mktemp("deepspeed"),
    )
    assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr[-4000:]
    found: dict[Any, Any] = {}
    for line in launched.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            key = (
                (result["stage"], result["precision"]) if "stage" in result else "extra"
            )
            found[key] = result
    extra = found.pop("extra", None)
    assert extra is not None, launched.stdout[-4000:]
    found["second_model"] = extra["second_model"]
    assert sorted(k for k in found if k != "second_model") == sorted(
        CONFIGURATIONS
    ), launched.stdout[-4000:]
    return found


def _relative(got: list[float], expected: list[float]) -> list[float]:
    return [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, expected, strict=True)]


def _flat(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [x for item in value.values() for x in _flat(item)]
    if isinstance(value, list):
        return [x for item in value for x in _flat(item)]
    return [value]


@pytest.mark.multiprocess
@pytest.mark.parametrize(("stage", "precision"), CONFIGURATIONS)
def test_zero_trains_like_the_original(
    results: dict[tuple[int, str], Any], stage: int, precision: str
) -> None:
    result = results[(stage, precision)]
    plain, got = result["plain"], result["runtime"]
    assert got["engine"] == "DeepSpeedEngine"
    assert got["zero_stage"] == stage
    assert got["zero_optimizer"] == (
        "DeepSpeedZeroOptimizer_Stage3" if stage == 3 else "DeepSpeedZeroOptimizer"
    )
    offload = precision.endswith("+offload")
    assert got["offload_optimizer"] == ("cpu" if offload else "None")
    assert got["offload_param"] == ("cpu" if offload and stage == 3 else "None")
    losses = _relative(got["losses"], plain["losses"])
    # Under stage-3 offload the norm was once read before DeepSpeed's boundary
    # copy into its host gradients: the last step's clipped norm (0.0, 0.5, ...).
    norms = _relative(got["norms"], plain["norms"])
    assert len(losses) == 4
    if precision.startswith("fp32"):
        assert max(losses[:EXACT_STEPS]) <= FP32_EXACT, losses
        assert max(losses) <= FP32_BAND, losses
        assert max(norms[:EXACT_STEPS]) <= FP32_EXACT, norms
        tolerance = dict(rtol=1e-4, atol=1e-5)
    else:
        assert max(losses) <= BF16, losses
        assert max(norms) <= BF16, norms
        tolerance = dict(rtol=BF16, atol=1e-3)
    # Clipping was applied (the original's norms exceed max_norm=0.5) and the
    # script's scheduler kept stepping the engine's optimizer: 0.01 halved twice.
    assert min(plain["norms"]) > 0.5
    assert got["lr"] == pytest.approx(0.0025)
    # Full state dicts with the original keys, and the optimizer in torch's layout.
    assert list(got["state"]) == list(plain["state"])
    for name in ("state", "exp_avg"):
        torch.testing.assert_close(
            torch.tensor(_flat(got[name])),
            torch.tensor(_flat(plain[name])),
            **tolerance,
        )


@pytest.mark.multiprocess
@pytest.mark.parametrize("stage", [1, 3])
def test_zero_resumes_from_a_saved_state(
    results: dict[tuple[int, str], Any], stage: int
) -> None:
    # Stage 1 with two parameter groups: DeepSpeed mapped the second group's
    # optimizer state before it existed, and saving failed ("exp_avg not found in
    # optimizer state fragment").
    result = results[(stage, "fp32")]
    uninterrupted = result["runtime"]["losses"][2:]
    resumed = result["resumed"]["losses"]
    assert resumed == pytest.approx(uninterrupted, rel=FP32_EXACT)
    torch.testing.assert_close(
        torch.tensor(_flat(result["resumed"]["state"])),
        torch.tensor(_flat(result["runtime"]["state"])),
        rtol=1e-5,
        atol=1e-6,
    )


def test_verify_applies_the_deepspeed_band_after_the_exact_steps() -> None:
    from accel_migrate.verify.compare import BANDS, compare

    def record(losses: list[float]) -> dict[str, Any]:
        return {
            "losses": losses,
            "loss_steps": list(range(len(losses))),
            "steps": len(losses),
            "parameters": [{"numel": 2, "sum": 1.0, "sumsq": 0.5}],
            "facts": {"batchnorm_training": False, "dropout_training": False},
        }

    band = BANDS[("deepspeed", "fp32")]
    assert band == (EXACT_STEPS, FP32_BAND)  # the test's numbers are verify's
    original = record([1.0, 0.5, 0.4, 0.3])
    drifted = record([1.0, 0.5, 0.4 * (1 + 5e-3), 0.3])
    assert compare(original, drifted, 1e-5, 2, band).agrees
    assert not compare(original, drifted, 1e-5, 2).agrees  # ddp's: exact throughout
    early = record([1.0, 0.5 * (1 + 5e-3), 0.4, 0.3])
    verdict = compare(original, early, 1e-5, 2, band)
    assert not verdict.agrees and verdict.first_divergence.step == 1


@pytest.mark.multiprocess
def test_a_second_trained_model_is_refused_in_one_line(
    results: dict[Any, Any],
) -> None:
    message = results["second_model"]
    assert message is not None, "a second engine was built"
    assert "--strategy deepspeed trains one prepared model" in message
    assert "\n" not in message
