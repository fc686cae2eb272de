"""Losses stored on the instance and read back by other methods: the pix2pix /
CycleGAN model class (``backward_G``: ``self.loss_G = self.loss_G_GAN +
self.loss_G_L1``; ``self.loss_G.backward()``), whose ``get_current_losses`` hands
the caller ``float(getattr(self, "loss_" + name))`` for each name it logs.

Each such value is the loss of this process's share of the batch. AM008 makes a
loss global where it is read in the loop of its backward; a read in another
method (called later, by code the rule does not follow), or through an attribute
name computed at run time, is not one it can place a collective at, so it is
reported (``stored_loss_reads``). Static only: nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .patterns import self_attribute
from .returned_loss import backpropagated
from .subtrees import findall


def _stored_losses(
    index: ModuleIndex, cls: cst.ClassDef
) -> dict[str, tuple[cst.FunctionDef, cst.Call]]:
    """``self.X`` backpropagated in a method of ``cls``, and the terms of its sum
    (``self.loss_G = self.loss_G_GAN + self.loss_G_L1``): attr -> (the method of
    the backward, the backward call)."""
    found: dict[str, tuple[cst.FunctionDef, cst.Call]] = {}
    for method in cls.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        for call in findall(method, m.Call()):
            if not index.is_backward_call(call):
                continue
            for tensor in backpropagated(index, call):  # type: ignore[arg-type]
                attr = self_attribute(tensor)
                if attr is not None:
                    found.setdefault(attr, (method, call))  # type: ignore[arg-type]
        for assign in findall(method, m.Assign()):
            targets = [self_attribute(t.target) for t in assign.targets]  # type: ignore[attr-defined]
            for target in targets:
                if target not in found:
                    continue
                for term in findall(assign.value, m.Attribute()):  # type: ignore[attr-defined]
                    attr = self_attribute(term)  # type: ignore[arg-type]
                    if attr is not None:
                        found.setdefault(attr, found[target])
    return found


def _reads_value(index: ModuleIndex, call: cst.Call) -> cst.BaseExpression | None:
    """The tensor ``x.item()`` or ``float(x)`` reads."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not call.args:
        return func.value
    if "builtins.float" in index.qualnames(func) and len(call.args) == 1:
        return call.args[0].value
    return None


def stored_loss_reads(
    index: ModuleIndex, line_of: Callable[[cst.CSTNode], int]
) -> list[tuple[cst.Call, str]]:
    """Reads of losses stored on the instance, outside the method of their
    backward, with a true sentence for a needs-review finding."""
    found: list[tuple[cst.Call, str]] = []
    for cls in findall(index.module, m.ClassDef()):
        stored = _stored_losses(index, cls)  # type: ignore[arg-type]
        if not stored:
            continue
        example, (where, backward) = next(iter(stored.items()))
        line = line_of(backward)
        for method in cls.body.body:  # type: ignore[attr-defined]
            if not isinstance(method, cst.FunctionDef):
                continue
            for call in findall(method, m.Call()):
                assert isinstance(call, cst.Call)
                if (
                    "builtins.getattr" in index.qualnames(call.func)
                    and len(call.args) >= 2
                    and isinstance(call.args[0].value, cst.Name)
                    and call.args[0].value.value == "self"
                    and not isinstance(call.args[1].value, cst.SimpleString)
                ):
                    found.append(
                        (
                            call,
                            f"`{method.name.value}` reads the instance's attributes "
                            "by a name computed at run time, and they hold losses "
                            f"backpropagated in this class (`self.{example}`, "
                            f"`{where.name.value}` line {line}): each is this "
                            "process's share of the batch, so what it hands back "
                            "is this process's only; make the losses global with "
                            "accel.global_loss(...) where every process reads them",
                        )
                    )
                    continue
                tensor = _reads_value(index, call)
                attr = self_attribute(tensor) if tensor is not None else None
                if attr in stored and stored[attr][0] is not method:
                    found.append(
                        (
                            call,
                            f"`self.{attr}` is a loss backpropagated in "
                            f"`{stored[attr][0].name.value}`, read here in "
                            f"`{method.name.value}`: it is this process's share of "
                            "the batch; make it global with accel.global_loss(...) "
                            "where every process reads it",
                        )
                    )
    return found
