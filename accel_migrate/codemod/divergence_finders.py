"""The visitors of the divergence analysis: does an expression read a rank-local
value, does a statement train, does a branch leave its block early."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .analysis import attr_chain
from .environment_steps import environment_step

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .divergence import Divergence


class _TaintFinder(cst.CSTVisitor):
    def __init__(self, divergence: Divergence, tainted: set[str]) -> None:
        super().__init__()
        self.divergence = divergence
        self.tainted = tainted
        self.hit = False

    def found(self, node: cst.CSTNode) -> bool:
        node.visit(self)
        return self.hit

    def visit_Call(self, node: cst.Call) -> bool:
        stop, hit = self.divergence.call_taint(node)
        if stop:
            return False  # the same on every rank, whatever its arguments
        if hit or _tainted_getattr(node, self.tainted):
            self.hit = True
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        chain = attr_chain(node)
        if chain is not None and chain in self.tainted:
            self.hit = True
        elif chain is None and self.divergence.environment_read(node):
            self.hit = True  # `cfg["args"].local_rank`: a rank-local option
        else:
            node.value.visit(self)  # not node.attr: an attribute name is not a variable
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # not the keyword's name
        return False

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        if self.divergence.environment_read(node):
            self.hit = True
        return True

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value in self.tainted:
            self.hit = True
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        # `[criterion(model(x), y) for x, y in val_loader]`: one value per batch
        # of this process's share of a sharded loader
        if self.divergence.loader_loop(node.iter)[0]:
            self.hit = True
        return True


class _TaintedLeaves(_TaintFinder):
    """The rank-local variables an expression reads (outside calls whose result
    is the same on every rank)."""

    def __init__(self, divergence: Divergence, tainted: set[str]) -> None:
        super().__init__(divergence, tainted)
        self.leaves: list[cst.Name | cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        chain = attr_chain(node)
        if chain is not None and chain in self.tainted:
            self.leaves.append(node)
        else:
            node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value in self.tainted:
            self.leaves.append(node)
        return False


class _TrainingFinder(cst.CSTVisitor):
    def __init__(self, divergence: Divergence) -> None:
        super().__init__()
        self.divergence = divergence
        self.found = False
        #: ``s, r, done, info = env.step(a)`` calls: an environment's step
        #: (``environment_steps``), not an optimizer's.
        self.environments: set[cst.Call] = set()

    def visit_Assign(self, node: cst.Assign) -> bool:
        call = environment_step(node)
        if call is not None:
            self.environments.add(call)
        return not self.found

    def visit_Call(self, node: cst.Call) -> bool:
        if self.found:
            return False
        index = self.divergence.index
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("backward", "step")
            and node not in self.environments
        ):
            self.found = True
        elif index.is_runtime_call(node, "backward"):
            self.found = True
        else:
            callee = index.callee(node)
            if callee is not None and callee[0].body is not None:
                if self.divergence.trains(callee[0].body):
                    self.found = True
        return not self.found

    def visit_For(self, node: cst.For) -> bool:
        if self.divergence.index.loader_loop(node.iter)[0]:
            self.found = True
        return not self.found

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


class _ExitFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Break(self, node: cst.Break) -> None:
        self.found = True

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_Return(self, node: cst.Return) -> None:
        self.found = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _next_batch(index: ModuleIndex, call: cst.Call) -> bool:
    """``next(iter(loader))``, ``next(it)`` with ``it = iter(loader)``: a batch
    drawn from a (sharded) data loader outside a loop over it (a fixed probe
    batch taken before training)."""
    if not call.args or call.args[0].keyword is not None:
        return False
    value: cst.BaseExpression | None = call.args[0].value
    while value is not None:
        if index.holds_tagged(value, index.loaders):
            return True
        value = index._loop_wrapped(value)
    return False


def _declared_globals(function: cst.FunctionDef) -> set[str]:
    names: set[str] = set()

    class _Globals(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            names.update(item.name.value for item in node.names)

        def visit_FunctionDef(self, inner: cst.FunctionDef) -> bool:
            return inner is function

    function.visit(_Globals())
    return names


def _tainted_getattr(node: cst.Call, tainted: set[str]) -> bool:
    """``getattr(opt, "local_rank", -1)``: the rank-local ``opt.local_rank``."""
    if not (
        isinstance(node.func, cst.Name)
        and node.func.value == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1].value, cst.SimpleString)
    ):
        return False
    owner = attr_chain(node.args[0].value)
    name = node.args[1].value.evaluated_value
    return owner is not None and isinstance(name, str) and f"{owner}.{name}" in tainted
