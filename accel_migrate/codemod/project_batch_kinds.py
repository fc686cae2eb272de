"""What a local module's metric helper returns over the batch it is handed: a
sum over its rows ("sum": ``count_correct(output, target)`` returning
``pred.eq(target).sum().item()``) or their mean ("mean": ``batch_accuracy``
returning ``(output.argmax(1) == target).float().mean().item()``).

``HelperFact.batch_kind`` carries it to the calling file, where AM009
(``metrics.kinds``) reads ``correct += count_correct(output, target)`` as a sum
it combines with ``accel.reduce``, as it reads a function of its own file.

A mean read as a Python number (``.item()``, ``float(...)``) is a "mean
number": ``accel.global_loss`` combines tensors only, so AM009 weights it as
one (``accel.global_loss(torch.as_tensor(v)).item()``, ``metrics.forms``). Only a plain shape is read, so that the kind holds whatever the caller hands:
every ``return`` is a full reduction (``x.sum()``, ``x.mean()``,
``torch.sum(x)``, ``torch.mean(x)``, no dimension given; a
``torch.nn.functional`` loss with its default mean reduction or
``reduction="sum"``: ``F.cross_entropy(output, target).item()`` is a mean over
the batch), optionally read with
``.item()`` or cast (``.float()``, ``.cpu()``, ``.detach()``, ``int(...)``,
``float(...)``), of an expression built from the function's parameters only
(their methods, operators, and ``torch`` functions; locals assigned once from
such expressions). A helper that reads anything else (a global, an attribute
of an object, a call of another function) gets no kind: AM009 then reports the
sum it feeds as unknown. Static only: ``ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .names import FUNCTIONAL_LOSSES

_CASTS = frozenset({"item", "float", "double", "cpu", "detach", "long", "int"})
#: Casts that make a Python number: ``accel.global_loss`` takes a tensor, so a
#: mean read so gets no kind (a sum is combined by ``accel.reduce`` either way).
_NUMBERS = frozenset({"item", "builtins.int", "builtins.float"})
_BUILTIN_CASTS = frozenset({"int", "float"})
_REDUCTIONS = {"sum": "sum", "count_nonzero": "sum", "mean": "mean"}
_DEPTH = 16
#: Builtins of numbers a value built from the parameters may go through.
_PURE_BUILTINS = frozenset(
    f"builtins.{n}" for n in ("max", "min", "len", "int", "float", "abs")
)


def batch_kind(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    dotted: Callable[[ast.expr], str],
) -> str:
    """ "sum", "mean", "mean number" or "" (see the module docstring)."""
    returns = [n for n in own_nodes(function) if isinstance(n, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return ""
    reader = reader_of(function, dotted)
    if reader is None:
        return ""
    kinds = {reader.kind(r.value, 0) for r in returns}  # type: ignore[arg-type]
    return kinds.pop() if len(kinds) == 1 else ""


def reader_of(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    dotted: Callable[[ast.expr], str],
) -> BatchReader | None:
    """The reader of ``function``'s values: what each local is assigned (a
    name unpacked from a tuple gets the whole value, which is built from the
    parameters or not; one bound by ``for k in <parameter>`` is an item of
    it); None when a parameter is assigned."""
    arguments = function.args
    parameters = {
        a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    }
    assigned: dict[str, list[ast.expr | None]] = {}
    loops: set[str] = set()

    def bind(target: ast.expr, value: ast.expr | None) -> None:
        for name in ast.walk(target):
            if isinstance(name, ast.Name):
                assigned.setdefault(name.id, []).append(value)

    for node in own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            bind(node.target, None)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            if (
                isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Name)
                and node.iter.id in parameters
            ):
                loops.add(node.target.id)  # `for k in topk`
            bind(node.target, None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, None)
    if any(p in assigned for p in parameters):
        return None
    return BatchReader(parameters, assigned, dotted, loops)


class BatchReader:
    def __init__(
        self,
        parameters: set[str],
        assigned: dict[str, list[ast.expr | None]],
        dotted: Callable[[ast.expr], str],
        loops: set[str],
    ) -> None:
        self.parameters, self.assigned, self.dotted = parameters, assigned, dotted
        #: Names bound by ``for k in <parameter>`` (indices, not batch values).
        self.loops = loops
        #: Names being read (``pred = pred.t()`` reads its own other value).
        self._reading: set[str] = set()

    def kind(self, expr: ast.expr, depth: int) -> str:
        found, number = self._kind(expr, depth, False)
        return "mean number" if found == "mean" and number else found

    def _kind(self, expr: ast.expr, depth: int, number: bool) -> tuple[str, bool]:
        """(kind, whether it is read as a Python number)."""
        if depth > _DEPTH:
            return ("", number)
        if isinstance(expr, ast.Name):
            values = self.assigned.get(expr.id, [])
            if len(values) != 1 or values[0] is None:
                return ("", number)
            return self._kind(values[0], depth + 1, number)
        if not isinstance(expr, ast.Call):
            return ("", number)
        loss = self._functional_loss(expr)
        if loss:
            return (loss, number)
        if expr.keywords:
            return ("", number)
        func = expr.func
        if isinstance(func, ast.Attribute):
            if func.attr in _CASTS and not expr.args:
                return self._kind(
                    func.value, depth + 1, number or func.attr in _NUMBERS
                )
            if func.attr in _REDUCTIONS and not expr.args:
                batch = self.batch(func.value, 0)
                return (_REDUCTIONS[func.attr] if batch else "", number)
        target = self.dotted(func)
        if target in {f"builtins.{c}" for c in _BUILTIN_CASTS} and len(expr.args) == 1:
            return self._kind(expr.args[0], depth + 1, True)
        if target in {"torch.sum", "torch.mean"} and len(expr.args) == 1:
            kind = "sum" if target == "torch.sum" else "mean"
            return (kind if self.batch(expr.args[0], 0) else "", number)
        return ("", number)

    def _functional_loss(self, call: ast.Call) -> str:
        """ "mean" or "sum" for ``F.cross_entropy(output, target)`` (a
        ``torch.nn.functional`` loss of the parameters, reduced by default or
        with a literal ``reduction="mean"``/``"sum"`` and no other keyword: a
        ``weight=`` or ``ignore_index=`` makes it a mean over other counts);
        "" otherwise."""
        target = self.dotted(call.func)
        if not target.startswith("torch.nn.functional."):
            return ""
        if target.rsplit(".", 1)[1] not in FUNCTIONAL_LOSSES:
            return ""
        reduction = "mean"
        for keyword in call.keywords:
            value = keyword.value
            if (
                keyword.arg != "reduction"
                or not isinstance(value, ast.Constant)
                or value.value not in ("mean", "sum")
            ):
                return ""
            reduction = value.value
        if not call.args or not all(self.batch(a, 0) for a in call.args):
            return ""
        return reduction

    def batch(self, expr: ast.expr, depth: int) -> bool:
        """Is ``expr`` built from the parameters only (see the docstring)?"""
        if depth > _DEPTH:
            return False
        if isinstance(expr, ast.Name):
            if expr.id in self.parameters or expr.id in self._reading:
                return True
            values = self.assigned.get(expr.id, [])
            if not values or any(v is None for v in values):
                return False
            self._reading.add(expr.id)
            try:
                return all(self.batch(v, depth + 1) for v in values)  # type: ignore[arg-type]
            finally:
                self._reading.discard(expr.id)
        if isinstance(expr, ast.Constant):
            return True
        if isinstance(expr, (ast.List, ast.Tuple)):
            # `torch.tensor([0], device=device)` (TransE-PyTorch's hit_at_k)
            return all(self.batch(e, depth + 1) for e in expr.elts)
        if isinstance(expr, ast.Attribute):
            return self.batch(expr.value, depth + 1)  # `output.data`
        if isinstance(expr, (ast.BinOp, ast.Compare, ast.UnaryOp, ast.BoolOp)):
            return all(self.batch(e, depth + 1) for e in _operands(expr))
        if isinstance(expr, ast.Subscript):
            # `pred[:k]`, `output[:, 0]`: indices of constants and parameters
            index = list(ast.walk(expr.slice))
            return self.batch(expr.value, depth + 1) and all(
                not isinstance(n, (ast.Call, ast.Attribute))
                and (
                    not isinstance(n, ast.Name)
                    or n.id in self.parameters
                    or n.id in self.loops
                )
                for n in index
            )
        if isinstance(expr, ast.Call):
            arguments = [*expr.args, *(k.value for k in expr.keywords)]
            if not all(self.batch(a, depth + 1) for a in arguments):
                return False
            if isinstance(expr.func, ast.Attribute) and not self.dotted(expr.func):
                return self.batch(expr.func.value, depth + 1)  # `output.argmax(1)`
            target = self.dotted(expr.func)
            return target.startswith("torch.") or target in _PURE_BUILTINS
        return False


def _operands(expr: ast.expr) -> list[ast.expr]:
    if isinstance(expr, ast.BinOp):
        return [expr.left, expr.right]
    if isinstance(expr, ast.Compare):
        return [expr.left, *expr.comparators]
    if isinstance(expr, ast.UnaryOp):
        return [expr.operand]
    return list(expr.values)  # type: ignore[attr-defined]


def own_nodes(function: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found
