"""``deepspeed-config = "ds.json"``: the user's DeepSpeed entries merged over the
generated config, and the one-line refusals of entries that would change the
runtime's own numbers (pure functions: DeepSpeed is not needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accel_migrate.runtime.config import ConfigError, config_environment, load_config
from accel_migrate.runtime.strategies.deepspeed_user import (
    check_user_config,
    merge_user_config,
    read_user_config,
)
from accel_migrate.runtime.strategies.deepspeed_zero import deepspeed_config


def _generated(precision: str = "fp32", stage: int = 2) -> dict[str, Any]:
    return deepspeed_config(
        micro_batch=4,
        world_size=2,
        zero_stage=stage,
        precision=precision,
        parameter_sizes=[1000, 10],
    )


def _merge(user: dict[str, Any], precision: str = "fp32", stage: int = 2) -> Any:
    return merge_user_config(
        _generated(precision, stage),
        user,
        precision=precision,
        zero_stage=stage,
        source="--deepspeed-config",
    )


def test_entries_are_merged_over_the_generated_ones_key_by_key() -> None:
    generated = _generated()
    merged = _merge(
        {
            "zero_optimization": {"reduce_bucket_size": 5000, "overlap_comm": True},
            "communication_data_type": "fp32",
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_clipping": "auto",
            "train_batch_size": 8,  # the runtime's own value: accepted
        }
    )
    zero = merged["zero_optimization"]
    assert zero["reduce_bucket_size"] == 5000 and zero["overlap_comm"] is True
    # Entries of the section the user did not name stay the generated ones.
    assert zero["stage"] == 2
    assert (
        zero["allgather_bucket_size"]
        == generated["zero_optimization"]["allgather_bucket_size"]
    )
    assert merged["communication_data_type"] == "fp32"
    assert merged["train_micro_batch_size_per_gpu"] == 4  # "auto": the runtime's
    assert merged["gradient_clipping"] == 0.0
    assert generated == _generated(), "the generated config is not edited in place"


def test_fp16_tuning_merges_under_fp16_and_auto_stage_is_accepted() -> None:
    merged = _merge(
        {"fp16": {"initial_scale_power": 12}, "zero_optimization": {"stage": "auto"}},
        precision="fp16",
        stage=3,
    )
    assert merged["fp16"] == {
        "enabled": True,
        "auto_cast": True,
        "initial_scale_power": 12,
    }
    assert merged["zero_optimization"]["stage"] == 3


@pytest.mark.parametrize(
    ("user", "message"),
    [
        (
            {"train_micro_batch_size_per_gpu": 16},
            r"deepspeed-config \(--deepspeed-config\): "
            r"train_micro_batch_size_per_gpu=16 conflicts with the runtime's 4",
        ),
        (
            {"train_batch_size": 64},
            r"train_batch_size=64 conflicts with the runtime's 8",
        ),
        ({"gradient_accumulation_steps": 4}, r"gradient_accumulation_steps=4"),
        ({"gradient_clipping": 1.0}, r"gradient_clipping=1.0 conflicts"),
        ({"managed_gradient_accumulation": True}, r"managed_gradient_accumulation"),
        (
            {"zero_optimization": {"stage": 3}},
            r"zero_optimization.stage=3 conflicts with --zero-stage 2",
        ),
        (
            {"bf16": {"enabled": True}},
            r"bf16.enabled=True conflicts with --precision fp32 .*autocast",
        ),
        (
            {"fp16": {"enabled": True}},
            r"fp16.enabled=True conflicts with --precision fp32",
        ),
        ({"optimizer": {"type": "AdamW"}}, r"'optimizer' conflicts with the script's"),
        ({"scheduler": {"type": "WarmupLR"}}, r"'scheduler' conflicts"),
        ({"zero_optimization": 3}, r"'zero_optimization' is not an object"),
    ],
)
def test_conflicting_entries_are_refused_by_name(
    user: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        _merge(user)
    assert "\n" not in str(refused.value)


def test_fp16_switched_off_under_fp16_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"fp16.enabled=False conflicts"):
        check_user_config(
            {"fp16": {"enabled": False}}, precision="fp16", zero_stage=2, source="x"
        )


def test_the_file_is_read_and_named_in_errors(tmp_path: Path) -> None:
    good = tmp_path / "ds.json"
    good.write_text(json.dumps({"zero_optimization": {"overlap_comm": True}}))
    assert read_user_config(str(good), "--deepspeed-config") == {
        "zero_optimization": {"overlap_comm": True}
    }
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(
        ConfigError, match=r"deepspeed-config='.*bad.json' from x is not JSON"
    ):
        read_user_config(str(tmp_path / "bad.json"), "x")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ConfigError, match="is not a JSON object"):
        read_user_config(str(tmp_path / "list.json"), "x")
    with pytest.raises(ConfigError, match="cannot read it"):
        read_user_config(str(tmp_path / "missing.json"), "x")


def test_the_setting_and_its_path(tmp_path: Path) -> None:
    assert load_config(environ={}, cwd=tmp_path).deepspeed_config == ""
    flagged = load_config({"deepspeed_config": "ds.json"}, environ={}, cwd=tmp_path)
    assert flagged.deepspeed_config == "ds.json"
    assert flagged.source_of("deepspeed_config") == "--deepspeed-config"
    # Named in pyproject.toml: next to it, wherever the job starts.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-migrate]\ndeepspeed-config = "conf/ds.json"\n'
    )
    (tmp_path / "sub").mkdir()
    config = load_config(environ={}, cwd=tmp_path / "sub")
    assert config.deepspeed_config == str(tmp_path / "conf" / "ds.json")
    children = load_config(environ=config_environment(config), cwd=Path("/"))
    assert children.deepspeed_config == config.deepspeed_config
    (tmp_path / "pyproject.toml").write_text(
        "[tool.accel-migrate]\ndeepspeed-config = 3\n"
    )
    with pytest.raises(ConfigError, match=r"deepspeed-config=3 .* is not a file name"):
        load_config(environ={}, cwd=tmp_path)
