"""The user's own DeepSpeed entries (``deepspeed-config = "ds.json"``), merged over
the generated config.

The generated config (``deepspeed_zero.deepspeed_config``) owns the numbers the
runtime decides: the batch-size triple, accumulation, clipping, precision and the
ZeRO stage. An entry of the user's file that would change one of them is refused
with a one-line error naming it; an entry that repeats the runtime's value, or
says ``"auto"`` (as Hugging Face's templates do), is accepted. Everything else
(bucket sizes, offload, communication options, ...) is merged over the generated
entries, nested sections key by key. Pure functions: no DeepSpeed needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import ConfigError

#: Entries whose value the runtime computes (see deepspeed_zero.deepspeed_config).
RUNTIME_NUMBERS = (
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "gradient_clipping",
    "managed_gradient_accumulation",
)
#: Sections that switch a precision mode on or off: the runtime's --precision.
PRECISION_SECTIONS = ("fp16", "bf16", "bfloat16", "amp", "torch_autocast")
#: The script's own optimizer and scheduler are what the engine steps.
SCRIPT_OWNED = ("optimizer", "scheduler")


def read_user_config(path: str, source: str) -> dict[str, Any]:
    """The JSON object in ``path``, or a ``ConfigError`` naming ``source``."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(
            f"deepspeed-config={path!r} from {source}: cannot read it ({exc.strerror})"
        ) from None
    except ValueError as exc:
        raise ConfigError(
            f"deepspeed-config={path!r} from {source} is not JSON: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"deepspeed-config={path!r} from {source} is not a JSON object"
        )
    return data


def check_user_config(
    user: dict[str, Any], *, precision: str, zero_stage: int, source: str
) -> None:
    """The checks that need no model: stage, precision sections, optimizer."""
    where = f"deepspeed-config ({source})"
    for key in SCRIPT_OWNED:
        if key in user:
            raise ConfigError(
                f"{where}: {key!r} conflicts with the script's own {key}, which "
                "the engine steps; remove the section"
            )
    zero = user.get("zero_optimization", {})
    if not isinstance(zero, dict):
        raise ConfigError(f"{where}: 'zero_optimization' is not an object")
    if "stage" in zero and not _agrees(zero["stage"], zero_stage):
        raise ConfigError(
            f"{where}: zero_optimization.stage={zero['stage']!r} conflicts with "
            f"--zero-stage {zero_stage}; set the stage with --zero-stage or zero-stage"
        )
    for key in PRECISION_SECTIONS:
        if key not in user:
            continue
        section = user[key]
        if not isinstance(section, dict):
            raise ConfigError(f"{where}: {key!r} is not an object")
        # Without "enabled" a section only tunes the mode (loss scaling...); the
        # merge keeps the runtime's switch.
        enabled = section.get("enabled", "auto")
        wanted = key == "fp16" and precision == "fp16"
        if enabled != "auto" and enabled is not wanted:
            how = (
                "fp16 is DeepSpeed's fp16 mode"
                if key == "fp16"
                else "bf16 is autocast around the forward"
            )
            raise ConfigError(
                f"{where}: {key}.enabled={enabled!r} conflicts with --precision "
                f"{precision} (the runtime sets the precision; {how}); remove "
                "it or change --precision"
            )


def merge_user_config(
    generated: dict[str, Any],
    user: dict[str, Any],
    *,
    precision: str,
    zero_stage: int,
    source: str,
) -> dict[str, Any]:
    """``generated`` with ``user``'s entries merged over it; a conflict with the
    runtime's own numbers is a ``ConfigError`` naming the entry."""
    check_user_config(user, precision=precision, zero_stage=zero_stage, source=source)
    for key in RUNTIME_NUMBERS:
        if key in user and not _agrees(user[key], generated.get(key)):
            raise ConfigError(
                f"deepspeed-config ({source}): {key}={user[key]!r} conflicts with "
                f"the runtime's {generated.get(key)!r} (computed from the script's "
                "batch, world size and loop); remove the entry"
            )
    return _merged(generated, user)


def _agrees(value: Any, runtime: Any) -> bool:
    if value == "auto":
        return True
    if isinstance(value, bool) or isinstance(runtime, bool):
        return value is runtime
    return value == runtime


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if value == "auto" and key in base:
            continue  # the runtime's value is the "auto" one
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merged(base[key], value)
        else:
            merged[key] = value
    return merged
