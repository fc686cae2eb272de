"""What the AMP rules share: PyTorch's AMP APIs by qualified name, their
signatures, and what a call's arguments say about the script's precision.

Used by AM012 (amp-precision), AM013 (autocast) and AM014 (grad-scaler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import libcst as cst

from .patterns import string_value

if TYPE_CHECKING:
    from .analysis import ModuleIndex

PrecisionName = Literal["fp16", "bf16"]

_AUTOCAST_DEVICE = ("device_type", "dtype", "enabled", "cache_enabled")
_AUTOCAST_FIXED = ("enabled", "dtype", "cache_enabled")

#: autocast classes -> (parameters in order, default dtype when none is given;
#: None: it depends on the ``device_type`` argument).
AUTOCAST: dict[str, tuple[tuple[str, ...], PrecisionName | None]] = {
    "torch.autocast": (_AUTOCAST_DEVICE, None),
    "torch.amp.autocast": (_AUTOCAST_DEVICE, None),
    "torch.amp.autocast_mode.autocast": (_AUTOCAST_DEVICE, None),
    "torch.cuda.amp.autocast": (_AUTOCAST_FIXED, "fp16"),
    "torch.cuda.amp.autocast_mode.autocast": (_AUTOCAST_FIXED, "fp16"),
    "torch.cpu.amp.autocast": (_AUTOCAST_FIXED, "bf16"),
    "torch.cpu.amp.autocast_mode.autocast": (_AUTOCAST_FIXED, "bf16"),
}

_SCALER_SETTINGS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval")
#: GradScaler classes -> parameters in order.
GRAD_SCALER: dict[str, tuple[str, ...]] = {
    "torch.amp.GradScaler": ("device", *_SCALER_SETTINGS, "enabled"),
    "torch.amp.grad_scaler.GradScaler": ("device", *_SCALER_SETTINGS, "enabled"),
    "torch.cuda.amp.GradScaler": (*_SCALER_SETTINGS, "enabled"),
    "torch.cuda.amp.grad_scaler.GradScaler": (*_SCALER_SETTINGS, "enabled"),
    "torch.cpu.amp.GradScaler": (*_SCALER_SETTINGS, "enabled"),
    "torch.cpu.amp.grad_scaler.GradScaler": (*_SCALER_SETTINGS, "enabled"),
}
#: The settings of a GradScaler that the runtime's loss scaling does not take.
SCALER_SETTINGS = _SCALER_SETTINGS

_FP16 = {"torch.float16", "torch.half"}
_BF16 = {"torch.bfloat16"}


def amp_api(
    index: ModuleIndex, call: cst.CSTNode
) -> tuple[Literal["autocast", "grad_scaler"], str] | None:
    """Is ``call`` a call of torch's autocast or GradScaler? Which one, and its
    qualified name."""
    if not isinstance(call, cst.Call):
        return None
    for name in sorted(index.qualnames(call.func)):
        if name in AUTOCAST:
            return "autocast", name
        if name in GRAD_SCALER:
            return "grad_scaler", name
    return None


def bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, int] | None:
    """Parameter name -> position of its argument in ``call.args``; None when the
    call cannot be read (``*args``, ``**kwargs``, an unknown keyword)."""
    bound: dict[str, int] = {}
    position = 0
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(params):
                return None
            bound[params[position]] = i
            position += 1
        elif arg.keyword.value in params and arg.keyword.value not in bound:
            bound[arg.keyword.value] = i
        else:
            return None
    return bound


def argument(
    call: cst.Call, params: tuple[str, ...], name: str
) -> cst.BaseExpression | None:
    bound = bind(call, params)
    if bound is None or name not in bound:
        return None
    return call.args[bound[name]].value


def is_false(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def is_true(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def dtype_precisions(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> set[PrecisionName] | None:
    """The precisions a dtype expression may name (``torch.bfloat16``, or a variable
    set to one or to ``torch.float16 if ... else torch.bfloat16``); None when it
    cannot be told."""
    if isinstance(expr, cst.IfExp):
        body = dtype_precisions(index, expr.body, depth)
        orelse = dtype_precisions(index, expr.orelse, depth)
        return None if body is None or orelse is None else body | orelse
    names = (
        index.qualnames(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else set()
    )
    if names & _FP16:
        return {"fp16"}
    if names & _BF16:
        return {"bf16"}
    key = index.key(expr) if isinstance(expr, cst.Name) and depth < 3 else None
    values = index.values.get(key, []) if key is not None else []
    if not values or any(v is None for v in values):
        return None
    found: set[PrecisionName] = set()
    for value in values:
        assert value is not None
        inner = dtype_precisions(index, value, depth + 1)
        if inner is None:
            return None
        found |= inner
    return found


def autocast_precisions(
    index: ModuleIndex, call: cst.Call, qualname: str
) -> tuple[set[PrecisionName] | None, str | None]:
    """What an autocast call computes in: the precisions, or None with the
    expression that decides it (a dtype or device variable)."""
    params, default = AUTOCAST[qualname]
    dtype = argument(call, params, "dtype")
    if dtype is not None:
        found = dtype_precisions(index, dtype)
        if found is not None and len(found) == 1:
            return found, None
        return None, code(dtype)  # unknown, or chosen at run time
    if default is not None:
        return {default}, None
    device = argument(call, params, "device_type")
    if device is None:
        return None, None
    value = string_value(device)
    if value == "cuda":
        return {"fp16"}, None  # CUDA autocast defaults to float16
    if value == "cpu":
        return {"bf16"}, None  # CPU autocast defaults to bfloat16
    return None, code(device)


def enabled_keyword(arg: cst.Arg) -> cst.Arg:
    """The ``enabled`` argument as a keyword argument of a new call, formatted as the
    script wrote it when it was one already."""
    if arg.keyword is not None:
        return arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    tight = cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""),
        whitespace_after=cst.SimpleWhitespace(""),
    )
    return cst.Arg(keyword=cst.Name("enabled"), value=arg.value, equal=tight)
