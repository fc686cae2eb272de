"""A criterion class of a local module whose ``forward`` passes a loss that is
already a mean over the batch through a non-linear function
(``HelperFact.nonlinear_loss``).

ronghuaiyang/arcface-pytorch's ``FocalLoss`` (models/focal_loss.py) computes
``logp = self.ce(input, target)`` with ``self.ce = torch.nn.CrossEntropyLoss()``
(a mean over the batch), then ``p = torch.exp(-logp)`` and returns
``((1 - p) ** self.gamma * logp).mean()``: the focal term of the batch's mean
loss, not a mean of per-sample terms. The training script only writes
``criterion = FocalLoss(gamma=2)`` and ``loss = criterion(output, label)``.
After migration each process applies the focal term to its own share's mean,
and no weighting of the processes' losses gives the global batch's value (or
gradient) back. The reduction analysis (``reduction.reducer_calls``) reads this
fact where a criterion may be an instance of such a class, as it already reads
a criterion class of the training file itself.

Found: in ``forward``, a call of a loss module the class builds in
``__init__`` (``self.ce = nn.CrossEntropyLoss()``, an ``nn`` class whose name
ends in ``Loss``, with no ``reduction=`` other than ``"mean"``) or of a
``torch.nn.functional`` loss with its default reduction, whose value (through
``forward``'s local variables) reaches a non-linear function (``torch.exp``,
``.log()``, ``** gamma``, ...) whose result reaches a ``return``. Static only:
``ast``, nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .names import FUNCTIONAL_LOSSES
from .project_nodes import _own_nodes, self_attribute

#: Functions and methods through which a mean over the batch is not one any
#: more (the reduction analysis's ``_NONLINEAR``, of ``torch`` and of tensors).
NONLINEAR = frozenset(
    {"sqrt", "rsqrt", "log", "log1p", "exp", "pow", "square", "sigmoid", "tanh"}
)


def nonlinear_loss(
    cls: ast.ClassDef, file: str, dotted: Callable[[ast.expr], str]
) -> str:
    """How ``cls.forward`` passes a mean loss over its batch through a
    non-linear function, as a phrase for a finding (``"`FocalLoss.forward`
    passes `self.ce(input, target)`, a mean over the batch, through
    `torch.exp(...)` (models/focal_loss.py line 14)"``); "" when it does not.
    ``dotted``: a call's qualified name in the class's module."""
    methods = {
        m.name: m
        for m in cls.body
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    forward = methods.get("forward")
    if forward is None:
        return ""
    modules = _mean_loss_modules(methods.get("__init__"), dotted)
    means = [
        node
        for node in _own_nodes(forward)
        if isinstance(node, ast.Call) and _mean_loss_call(node, modules, dotted)
    ]
    if not means:
        return ""
    assigns = [n for n in _own_nodes(forward) if isinstance(n, ast.Assign)]
    holders = _holders(assigns, set(map(id, means)), set())
    # in the order of the source, so that the finding names the first
    nodes = sorted(
        (n for n in _own_nodes(forward) if isinstance(n, (ast.BinOp, ast.Call))),
        key=lambda n: (n.lineno, n.col_offset),
    )
    returns = [n for n in _own_nodes(forward) if isinstance(n, ast.Return)]
    for node in nodes:
        how = _nonlinear_use(node, means, holders, dotted)
        if not how:
            continue
        reached = _holders(assigns, {id(node)}, set())
        if any(
            r.value is not None and _uses(r.value, {id(node)}, reached) for r in returns
        ):
            mean = next(m for m in means if _uses(node, {id(m)}, holders))
            return (
                f"`{cls.name}.forward` passes `{ast.unparse(mean)}`, a mean over "
                f"the batch, through {how} ({file} line {node.lineno})"
            )
    return ""


def _mean_loss_modules(
    init: ast.FunctionDef | ast.AsyncFunctionDef | None,
    dotted: Callable[[ast.expr], str],
) -> set[str]:
    """The ``self`` attributes ``__init__`` sets to a mean ``nn`` loss module."""
    found: set[str] = set()
    if init is None:
        return found
    for node in _own_nodes(init):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        name = dotted(node.value.func)
        if not (name.startswith("torch.nn.") and name.endswith("Loss")):
            continue
        if not _default_mean(node.value):
            continue
        for target in node.targets:
            attribute = self_attribute(target)
            if attribute is not None:
                found.add(attribute)
    return found


def _default_mean(call: ast.Call) -> bool:
    """No ``reduction=`` other than "mean", no ``reduce=False`` or
    ``size_average=False``, no ``**`` settings."""
    for keyword in call.keywords:
        if keyword.arg is None:
            return False
        if keyword.arg == "reduction" and not (
            isinstance(keyword.value, ast.Constant) and keyword.value.value == "mean"
        ):
            return False
        if keyword.arg in ("reduce", "size_average"):
            return False
    return True


def _mean_loss_call(
    call: ast.Call, modules: set[str], dotted: Callable[[ast.expr], str]
) -> bool:
    attribute = self_attribute(call.func)
    if attribute is not None:
        return attribute in modules
    name = dotted(call.func)
    return (
        name.startswith("torch.nn.functional.")
        and name.rsplit(".", 1)[1] in FUNCTIONAL_LOSSES
        and _default_mean(call)
    )


def _holders(assigns: list[ast.Assign], sources: set[int], names: set[str]) -> set[str]:
    """The local names whose values (transitively) hold one of the nodes
    ``sources`` (by ``id``) or a name already found."""
    found = set(names)
    changed = True
    while changed:
        changed = False
        for assign in assigns:
            if not _uses(assign.value, sources, found):
                continue
            for target in assign.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in found:
                        found.add(name.id)
                        changed = True
    return found


def _uses(expr: ast.AST, sources: set[int], names: set[str]) -> bool:
    return any(
        id(n) in sources or (isinstance(n, ast.Name) and n.id in names)
        for n in ast.walk(expr)
    )


def _nonlinear_use(
    node: ast.AST,
    means: list[ast.Call],
    holders: set[str],
    dotted: Callable[[ast.expr], str],
) -> str:
    """How ``node`` is a non-linear function of a mean loss (its spelling), or ""."""
    sources = set(map(id, means))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        if _uses(node.left, sources, holders) or _uses(node.right, sources, holders):
            return f"`{_short(node)}`"
        return ""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    name = dotted(func)
    if name.startswith("torch.") and name.rsplit(".", 1)[1] in NONLINEAR:
        operands: list[ast.AST] = list(node.args)
        spelled = f"`{ast.unparse(func)}(...)`"
    elif isinstance(func, ast.Attribute) and func.attr in NONLINEAR and not name:
        operands = [func.value]
        spelled = f"`.{func.attr}(...)`"
    else:
        return ""
    if any(_uses(o, sources, holders) for o in operands):
        return spelled
    return ""


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 50 else text[:47] + "..."
