"""State dict keys across wrappers: ``nn.DataParallel`` and DDP prefix every key
with ``module.``; a prepared model's keys are the plain ones.

A script migrated from one that wrapped its model in ``nn.DataParallel`` loads
the checkpoints the original wrote (``accel.load_state_dict`` drops the prefix),
and can write them in the original's format again (``accel.state_dict(model,
prefix="module.")``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from torch import nn

WRAPPER_PREFIX = "module."


def add_prefix(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """``state`` with ``prefix`` before every key (and its version metadata)."""
    out: OrderedDict[str, Any] = OrderedDict(
        (prefix + key, value) for key, value in state.items()
    )
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        # Keys of the metadata are module paths; "" is the root module.
        out._metadata = OrderedDict(  # type: ignore[attr-defined]
            (prefix + key if key else prefix.rstrip("."), value)
            for key, value in metadata.items()
        )
    return out


def without_wrapper_prefix(
    model: nn.Module, state: Mapping[str, Any]
) -> Mapping[str, Any]:
    """``state`` without the ``module.`` prefix when every key has it and the
    model itself has no submodule called ``module`` (whose keys it would be)."""
    if not state or not all(
        isinstance(key, str) and key.startswith(WRAPPER_PREFIX) for key in state
    ):
        return state
    if "module" in dict(model.named_children()):
        return state
    size = len(WRAPPER_PREFIX)
    out: OrderedDict[str, Any] = OrderedDict(
        (key[size:], value) for key, value in state.items()
    )
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = OrderedDict(  # type: ignore[attr-defined]
            (_strip(key), value) for key, value in metadata.items() if key != ""
        )
    return out


def _strip(key: str) -> str:
    if key == WRAPPER_PREFIX.rstrip("."):
        return ""
    return key[len(WRAPPER_PREFIX) :] if key.startswith(WRAPPER_PREFIX) else key
