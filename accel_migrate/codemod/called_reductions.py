"""How a loss class of a local module reduces the batch when an instance of it is
called: the project view's ``HelperFact.call_reduction``.

The FNO repository's ``utilities3.py`` defines ``class LpLoss(object)`` whose
``__call__`` returns ``self.rel(x, y)``, and ``rel`` returns
``torch.sum(diff_norms / y_norms)`` under ``size_average=False`` (a sum of the
per-sample relative errors over the batch) or ``torch.mean(...)`` otherwise;
the training script does ``myloss = LpLoss(size_average=False)`` and
``loss = myloss(out, y)``. Before this fact the call of such an instance was
taken for a mean over samples (the default of every ``torch.nn`` loss): each
process's gradient of its share's sum was averaged, half the original's at
world size 2, and the logged ``train_l2`` halved too, with no finding.

Read: ``forward`` where the class defines one, else ``__call__``; its
``return`` statements, a ``return self.method(...)`` followed into that method
of the class (a few levels), a returned local name through its assignments in
that method. A return counts as a ``sum`` where it is ``torch.sum(X)`` or
``X.sum()`` over every dimension (no ``dim``), a ``mean`` for ``torch.mean`` /
``.mean()`` likewise. Every return a sum: ``("sum", ...)``; every one a mean:
``("mean", ...)``; some a full reduction and the others another one or not read
(``if self.size_average: ... else: ...``, or a per-sample return under
``reduction=False``): ``("unknown", why)``, the reduction is chosen at run time
from the instance's settings, which this view does not follow. A return that
divides by a count over the whole batch (the SSD tutorial's MultiBoxLoss:
``conf_loss = (hard_neg.sum() + pos.sum()) / n_positives.sum().float()``, then
``return conf_loss + self.alpha * loc_loss``; a mean over matched priors, not
over samples) is ``("unknown", why)`` too. No return a full
reduction (a model returning logits): ``("", "")``, the fact says nothing.
Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast

from .names import FUNCTIONAL_LOSSES
from .project_nodes import _own_nodes, assigned_in

_DEPTH = 4
_HOW = {"sum": "sum", "mean": "mean", "nansum": "sum", "nanmean": "mean"}
# a return this view cannot read for sure (a sum over something already
# reduced, a name changed in place after its value): the reduction is unknown
_UNREAD = "?"
# calls that reduce a tensor over every dimension unless given a dimension
_REDUCING = frozenset(
    {"sum", "mean", "nansum", "nanmean", "norm", "std", "var", "prod", "logsumexp"}
)


def call_reduction(cls: ast.ClassDef) -> tuple[str, str]:
    """(kind, why) of what calling an instance of ``cls`` returns: ``("sum",
    "")``, ``("mean", "")``, ``("unknown", why)``, or ``("", "")`` where no
    return is a full sum or mean."""
    methods = {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    entry = methods.get("forward") or methods.get("__call__")
    if entry is None:
        return ("", "")
    kinds: list[str] = []
    _returns(entry, methods, kinds, 0, _unreduced_attributes(methods))
    if _counted_division(entry):
        # the SSD tutorial's MultiBoxLoss: `conf_loss = (...).sum() /
        # n_positives.sum().float()`, returned in `conf_loss + alpha * loc_loss`
        kinds.append(_UNREAD)
    read = {k for k in kinds if k in ("sum", "mean")}
    if _UNREAD in kinds:
        return (
            "unknown",
            f"`{cls.name}.{entry.name}` returns a value this tool cannot read as a "
            "plain sum or mean over the batch (a sum of values already reduced, "
            "such as a sum of losses or of a mean over a dimension, or a result "
            "changed in place, as `loss /= n`, after it is computed)",
        )
    if not read:
        return ("", "")
    if len(read) == 1 and len(set(kinds)) == 1:
        return (read.pop(), "")
    return (
        "unknown",
        f"`{cls.name}.{entry.name}` returns a sum over the batch on one path and "
        "a mean or an unreduced value on another, chosen at run time (a setting "
        "such as `size_average` or `reduction` of the instance)",
    )


def _returns(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    kinds: list[str],
    depth: int,
    unreduced: frozenset[str],
) -> None:
    for node in _own_nodes(method):
        if isinstance(node, ast.Return):
            if node.value is None:
                kinds.append("")
                continue
            _value(node.value, method, methods, kinds, depth, unreduced)


def _value(
    expr: ast.expr,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    kinds: list[str],
    depth: int,
    unreduced: frozenset[str],
) -> None:
    if depth > _DEPTH:
        kinds.append("")
        return
    if isinstance(expr, ast.IfExp):
        for branch in (expr.body, expr.orelse):
            _value(branch, method, methods, kinds, depth + 1, unreduced)
        return
    if isinstance(expr, ast.Name):
        values = assigned_in(method, expr.id)
        if not values:
            kinds.append("")
        found: list[str] = []
        for value in values:
            _value(value, method, methods, found, depth + 1, unreduced)
        if _rebound_unread(method, expr.id, found):
            found.append(_UNREAD)
        kinds.extend(found)
        return
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        func = expr.func
        if (
            isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr in methods
        ):
            _returns(methods[func.attr], methods, kinds, depth + 1, unreduced)
            return
        how = _HOW.get(func.attr)
        full = not expr.keywords
        if how is not None and full:
            torch_call = isinstance(func.value, ast.Name) and func.value.id == "torch"
            operand = None
            if torch_call and len(expr.args) == 1:
                operand = expr.args[0]  # torch.sum(x)
            elif not torch_call and not expr.args:
                operand = func.value  # x.sum()
            if operand is not None:
                # `torch.sum(torch.stack([F.mse_loss(..), ...]))`,
                # `((x - y) ** 2).mean(0).sum()`: a sum of values already
                # reduced is no sum over the batch that this view can tell
                held = _holds_reduction(operand, method, unreduced)
                kinds.append(_UNREAD if held else how)
                return
    kinds.append("")


def _counted_division(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Does a return of ``method`` divide (through the local names it reads) by
    a count taken over the whole batch: a divisor holding a reduction over every
    dimension (``/ n_positives.sum()``, ``/ mask.sum().float()``,
    ``/ torch.sum(mask)``)? Such a loss is a mean over the batch's matched
    priors, labelled pixels or tokens: neither a mean over samples nor a sum."""
    for node in _own_nodes(method):
        if isinstance(node, ast.Return) and node.value is not None:
            if _divides_by_count(node.value, method, 0, frozenset()):
                return True
    return False


def _divides_by_count(
    expr: ast.expr,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    depth: int,
    seen: frozenset[str],
) -> bool:
    if depth > _DEPTH:
        return False
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if any(_full_reduction(c) for c in ast.walk(node.right)):
                return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in seen:
                continue
            inner = seen | {node.id}
            if any(
                _divides_by_count(v, method, depth + 1, inner)
                for v in assigned_in(method, node.id)
            ):
                return True
    return False


def _full_reduction(node: ast.AST) -> bool:
    """``x.sum()``, ``x.mean()``, ``torch.sum(x)``: over every dimension."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr not in ("sum", "count_nonzero") or node.keywords:
        return False
    if _is_name(node.func.value, "torch"):
        return len(node.args) == 1
    return not node.args


def _changed_in_place(
    method: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> bool:
    """Is ``name`` bound in ``method`` other than by a plain ``name = value``
    (``name /= n``, a loop or ``with`` target, an unpacking), or changed by an
    in-place method (``name.div_(n)``)?"""
    for node in _own_nodes(method):
        if isinstance(node, ast.AugAssign) and _is_name(node.target, name):
            return True
        if isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem)):
            target = (
                node.optional_vars if isinstance(node, ast.withitem) else node.target
            )
            if target is not None and any(_is_name(n, name) for n in ast.walk(target)):
                return True
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if not isinstance(target, ast.Name) and any(
                    _is_name(n, name) for n in ast.walk(target)
                ):
                    return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.endswith("_")
            and not node.func.attr.startswith("_")
            and _is_name(node.func.value, name)
        ):
            return True
    return False


def _rebound_unread(
    method: ast.FunctionDef | ast.AsyncFunctionDef, name: str, found: list[str]
) -> bool:
    """Does a binding of ``name`` other than ``name = value`` hide how the
    returned value reduces? An in-place change of a sum or mean (``loss /=
    x.size(0)``, ``loss.div_(n)``); a loss added in place (``loss +=
    F.mse_loss(..., reduction="sum")`` onto ``torch.zeros(())``); an unpacking,
    loop or ``with`` target (``loss, n = ...``). A block's ``out +=
    self.shortcut(x)`` adds no loss and says nothing."""
    if set(found) & {"sum", "mean"} and _changed_in_place(method, name):
        return True
    for node in _own_nodes(method):
        if isinstance(node, ast.AugAssign) and _is_name(node.target, name):
            if _adds_loss(node.value):
                return True
        elif isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem)):
            target = (
                node.optional_vars if isinstance(node, ast.withitem) else node.target
            )
            if target is not None and any(_is_name(n, name) for n in ast.walk(target)):
                return True
        elif isinstance(node, ast.Assign) and any(
            not isinstance(t, ast.Name) and any(_is_name(n, name) for n in ast.walk(t))
            for t in node.targets
        ):
            return True
    return False


def _adds_loss(value: ast.expr) -> bool:
    """A loss call (not per sample) or a full ``sum``/``mean`` in ``value``."""
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.attr
            if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else ""
        )
        lowered = name.lower()
        if (
            name in FUNCTIONAL_LOSSES
            or lowered.endswith("loss")
            or "criterion" in lowered
        ):
            if not _per_sample_loss(node):
                return True
        if name in _HOW and not node.keywords and len(node.args) <= 1:
            return True
    return False


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _holds_reduction(
    operand: ast.expr,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    unreduced: frozenset[str],
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """Does the summed ``operand`` hold a reduction over the batch: a loss call,
    a call of a callable attribute of the instance (``self.criterion(x, y)``),
    a method of the class, or a full or batch-dimension reduction (``.mean()``,
    ``.mean(0)``, ``torch.norm(d)``); through the local names it reads? A
    reduction over a literal dimension other than 0 (``torch.norm(d, p, 1)``,
    ``.sum(dim=1)``) is per sample and does not count."""
    if depth > _DEPTH:
        return True
    for node in ast.walk(operand):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id == "self" or node.id in seen:
                continue  # `X = F.normalize(X, dim=-1)`: its other values decide
            values = assigned_in(method, node.id)
            inner = seen | {node.id}
            if _changed_in_place(method, node.id) or any(
                _holds_reduction(v, method, unreduced, depth + 1, inner) for v in values
            ):
                return True
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.attr
            if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else ""
        )
        if isinstance(func, ast.Attribute) and _is_name(func.value, "self"):
            # `self.criterion(x, y)`, `self.rel(x, y)`; not a loss the class
            # builds per sample (`self.ce = nn.CrossEntropyLoss(reduction="none")`)
            if func.attr in unreduced:
                continue
            return True
        if name in FUNCTIONAL_LOSSES or name.lower().endswith("loss"):
            if _per_sample_loss(node):
                continue  # `F.cross_entropy(x, y, reduction="none")`
            return True
        if name in _REDUCING and not _per_sample_dim(node, name, func):
            return True
    return False


def _per_sample_loss(call: ast.Call) -> bool:
    """A loss built or called per sample: ``reduction="none"`` or ``reduce=False``."""
    for keyword in call.keywords:
        value = keyword.value
        if not isinstance(value, ast.Constant):
            continue
        if keyword.arg == "reduction" and value.value == "none":
            return True
        if keyword.arg == "reduce" and value.value is False:
            return True
    return False


def _unreduced_attributes(
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> frozenset[str]:
    """The attributes ``__init__`` binds only to losses built per sample
    (``self.ce = nn.CrossEntropyLoss(reduction="none")``)."""
    init = methods.get("__init__")
    if init is None:
        return frozenset()
    found: dict[str, bool] = {}
    for node in _own_nodes(init):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and _is_name(target.value, "self"):
                value = node.value
                per_sample = isinstance(value, ast.Call) and _per_sample_loss(value)
                found[target.attr] = found.get(target.attr, True) and per_sample
    return frozenset(name for name, per_sample in found.items() if per_sample)


def _per_sample_dim(call: ast.Call, name: str, func: ast.expr) -> bool:
    """A reduction over a literal dimension other than 0: ``x.sum(1)``,
    ``x.mean(dim=-1)``, ``torch.norm(d, p, 1)``."""
    dims = [k.value for k in call.keywords if k.arg in ("dim", "axis")]
    if not dims:
        torch_call = isinstance(func, ast.Attribute) and _is_name(func.value, "torch")
        position = (
            (2 if name == "norm" else 1) if torch_call else (1 if name == "norm" else 0)
        )
        if len(call.args) > position:
            dims = [call.args[position]]
    if len(dims) != 1:
        return False
    dim = dims[0]
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub):
        return isinstance(dim.operand, ast.Constant) and isinstance(
            dim.operand.value, int
        )
    return (
        isinstance(dim, ast.Constant)
        and isinstance(dim.value, int)
        and not isinstance(dim.value, bool)
        and dim.value != 0
    )
