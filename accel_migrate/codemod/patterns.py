"""Qualified names and small recognisers shared by several rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import libcst as cst
import libcst.matchers as m

from .names import COUNT_METHODS, DATALOADER_CALLS, SAME_OBJECT
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex


def prepared_models(index: ModuleIndex) -> frozenset[Key]:
    """Variables that may hold a model ``accel.prepare_model`` wrapped, also after
    methods that return it (``accel.prepare_model(net).to(device)``), and the
    parameters every call from the batch's other files hands a model built, and
    prepared, there (``project_callers``). Computed once per tree: several rules
    and facts ask it."""
    cached = _PREPARED.get(index)
    if cached is None:
        from .project_callers import given_by_callers

        handed = set(given_by_callers(index, "model"))
        tagged = index.tagged(
            lambda e: index.is_runtime_call(e, "prepare_model")
            or index.key(e) in handed,
            SAME_OBJECT,
        )
        cached = _PREPARED[index] = frozenset(tagged | handed)
    return cached


#: Per module index (one per tree): a fixpoint over the file's variables.
_PREPARED: WeakKeyDictionary[ModuleIndex, frozenset[Key]] = WeakKeyDictionary()


def is_loader_seed(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    if index.qualnames(expr.func) & DATALOADER_CALLS:
        from .unshardable import unshardable_reason

        # One the runtime cannot shard stays unwrapped (AM006): every process
        # reads all of it, so no rule may treat it as a sharded loader.
        return unshardable_reason(index, expr) is None
    # `utils.get_test_dataloader()`: a local module's function returning a loader
    # (the project view), wrapped by AM006 where it is called.
    helper = index.helper(expr.func, "loader")
    if helper is not None:
        return not helper.unshardable
    return index.is_runtime_call(expr, "prepare_dataloader")


#: Items of a returned tuple that are surely no loader (``project_return_kinds``).
NOT_LOADERS = frozenset({"none", "number", "dataset"})


def loader_tuple_helper(
    index: ModuleIndex, expr: cst.BaseExpression, mixed: bool = False
) -> Any:
    """The project fact of a local module's function that returns a tuple of
    shardable DataLoaders (``return train_loader, val_loader``), if ``expr`` calls
    one; with ``mixed``, also one of loaders beside ``None`` and numbers
    (``return train_loader, val_loader, None, num_class``)."""
    if not isinstance(expr, cst.Call):
        return None
    helper = index.helper(expr.func)
    allowed = {"loader"} | (NOT_LOADERS if mixed else set())
    if (
        helper is None
        or helper.container != "tuple"
        or helper.unshardable
        or "loader" not in helper.items
        or any(kind not in allowed for kind in helper.items)
    ):
        return None
    return helper


def prepared_loader_tuple(
    index: ModuleIndex, expr: cst.BaseExpression
) -> cst.BaseExpression | None:
    """The call of ``accel.prepare_dataloaders(call)``: AM006's rewrite of a call
    that returns a tuple of loaders beside ``None`` or numbers."""
    if not (
        isinstance(expr, cst.Call)
        and index.is_runtime_call(expr, "prepare_dataloaders")
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and not expr.args[0].star
    ):
        return None
    return expr.args[0].value


def loader_dict_helper(index: ModuleIndex, expr: cst.BaseExpression) -> Any:
    """The project fact of a local module's function that returns a dict of
    shardable DataLoaders (``return {"train": ..., "valid": ...}``), if ``expr``
    calls one."""
    if not isinstance(expr, cst.Call):
        return None
    helper = index.helper(expr.func)
    if (
        helper is None
        or helper.container != "dict"
        or helper.unshardable
        or set(helper.items) != {"loader"}
    ):
        return None
    return helper


def prepared_loader_map(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """``map(accel.prepare_dataloader, ...)``: AM006's rewrite of a call that
    returns a tuple of loaders."""
    if not (
        isinstance(expr, cst.Call)
        and len(expr.args) == 2
        and not any(a.keyword or a.star for a in expr.args)
        and "builtins.map" in index.qualnames(expr.func)
    ):
        return False
    from .analysis import RUNTIME, attr_chain

    first = expr.args[0].value
    names = {f"{RUNTIME}.prepare_dataloader"}
    return bool(index.qualnames(first) & names) or (
        attr_chain(first) == f"{index.alias}.prepare_dataloader"
    )


def strip_methods(
    expr: cst.BaseExpression, methods: frozenset[str]
) -> cst.BaseExpression:
    """``expr`` less the calls of ``methods`` it ends in: ``Net().to(d).eval()`` ->
    ``Net()`` for the methods that return their module, ``x.to(d).float()`` -> ``x``
    for those that keep a tensor's rows."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in methods
    ):
        expr = expr.func.value
    return expr


def torch_alias(module: cst.Module) -> str | None:
    """The name the file's first top-level ``import torch`` binds (``torch``, or
    ``t`` for ``import torch as t``), for the rewrites that write ``torch.`` calls;
    ``torch`` for ``import torch.nn`` too; None where there is none (``from torch
    import nn`` or ``import torch.nn as nn`` alone binds no ``torch``)."""
    from .analysis import attr_chain

    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Import):
                continue
            for alias in small.names:
                name = attr_chain(alias.name) or ""
                if alias.asname is None and name.partition(".")[0] == "torch":
                    return "torch"  # ``import torch.nn`` binds ``torch`` too
                if name == "torch" and alias.asname is not None:
                    return attr_chain(alias.asname.name)  # type: ignore[arg-type]
    return None


def argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """What ``call`` passes as ``keyword=``, else its positional argument at
    ``position`` (``*args`` not counted); None where it passes neither."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if 0 <= position < len(positional):
        return positional[position].value
    return None


def self_attribute(node: cst.CSTNode) -> str | None:
    """``x`` of ``self.x``; None for anything else."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    ):
        return node.attr.value
    return None


def string_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString) and node.prefix.lower() in ("", "u"):
        return node.evaluated_value  # type: ignore[return-value]
    return None


def is_cuda_string(node: cst.CSTNode) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``"cuda:3"``."""
    value = string_value(node)
    if value is None:
        return False
    return value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit())


def is_cuda_format(node: cst.CSTNode) -> bool:
    """A GPU name built from an index: ``f"cuda:{gpu_id}"``, ``"cuda:%d" % i``,
    ``"cuda:{}".format(i)``."""
    if isinstance(node, cst.FormattedString):
        parts = node.parts
        return (
            len(parts) == 2
            and isinstance(parts[0], cst.FormattedStringText)
            and parts[0].value == "cuda:"
            and isinstance(parts[1], cst.FormattedStringExpression)
        )
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return string_value(node.left) in ("cuda:%d", "cuda:%s", "cuda:%i")
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
        and len(node.args) == 1
    ):
        return string_value(node.func.value) in ("cuda:{}", "cuda:{0}")
    return False


def is_cuda_name(node: cst.CSTNode) -> bool:
    """``"cuda"``, ``"cuda:0"``, or a GPU name built from an index (``f"cuda:{i}"``)."""
    return is_cuda_string(node) or is_cuda_format(node)


def is_cpu_string(node: cst.CSTNode) -> bool:
    return string_value(node) == "cpu"


#: ``tqdm`` progress bars (the functions; each wraps an iterable or counts itself).
def counts_samples(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> bool:
    """Does ``expr`` count samples (``x.size(0)``, ``len(x)``, ``x.shape[0]``),
    directly or through a variable set to such a count (``batch = len(y)``)?"""
    for call in findall(expr, m.Call()):
        func = call.func  # type: ignore[attr-defined]
        if isinstance(func, cst.Attribute) and func.attr.value in COUNT_METHODS:
            return True
        if "builtins.len" in index.qualnames(func):
            return True
    if findall(expr, m.Subscript(value=m.Attribute(attr=m.Name("shape")))):
        return True
    key = index.key(expr) if isinstance(expr, cst.Name) and depth < 2 else None
    return key is not None and any(
        v is not None and counts_samples(index, v, depth + 1)
        for v in index.values.get(key, ())
    )
