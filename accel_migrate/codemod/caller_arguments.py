"""What a batch file hands another's function, beyond what ``HelperFacts.kind_of``
reads (``project_callers.batch_callers``): a loss module whose every binding in
the caller builds one (its reduction), an item of a local helper's tuple
unpacked into a variable, a model whose parameters an optimizer of the caller
receives, a dict, list or tuple of DataLoaders, and the values a caller's
variable is bound to.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .criterion_factories import unmoved
from .optimizer_factories import optimizer_class_target

if TYPE_CHECKING:
    from .project_helpers import HelperFacts
    from .project_view import Target


def _assigned(function: ast.AST, name: str) -> list[ast.expr]:
    """What ``name = ...`` statements in ``function`` assign it."""
    return [
        n.value
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]


def criterion_reduction(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> str:
    """The reduction ("mean", "sum", "unknown") of the loss module ``arg`` holds,
    where every binding of it in the caller's function builds one
    (``criterion = nn.CrossEntropyLoss()``, also moved: ``.to(device)``, or
    returned by a local factory: ``build_criterion(cfg)``); "" otherwise."""
    if not isinstance(arg, ast.Name):
        return ""
    values = [
        v
        for v in map(unmoved, _assigned(function, arg.id))
        # `criterion = criterion.cuda()`: the same module, moved
        if not (isinstance(v, ast.Name) and v.id == arg.id)
    ]
    if not values or not all(isinstance(v, ast.Call) for v in values):
        return ""
    if _settings_written(function, arg.id):
        # `criterion.reduction = "mean"` after `nn.MSELoss(reduction="sum")`
        return "unknown"
    found = set()
    for value in values:
        built = _factory_reduction(reader, value)  # type: ignore[arg-type]
        found.add(("loss", built, "") if built else reader._loss_module(value))  # type: ignore[arg-type]
    if len(found) != 1:
        return ""
    kind, reduction, _ = found.pop()
    return reduction if kind == "loss" else ""


def _settings_written(function: ast.AST, name: str) -> bool:
    """Does ``function`` write an attribute of ``name`` (``name.reduction = ...``,
    ``setattr(name, ...)``, ``vars(name)`` / ``name.__dict__``)?"""
    for node in ast.walk(function):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else (
                [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
        )
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == name
            ):
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("setattr", "vars") and any(
                isinstance(a, ast.Name) and a.id == name for a in node.args[:1]
            ):
                return True
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "__dict__"
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            return True
    return False


def _factory_reduction(reader: HelperFacts, call: ast.Call) -> str:
    """``HelperFact.criterion`` of the local function ``call`` calls (a
    criterion factory: ``build_criterion(cfg)``); "" where it is none."""
    target = reader.resolve(call.func)
    if not isinstance(target, tuple):
        return ""
    fact = reader.view.fact(target, reader.roots, reader.script, reader.depth + 1)
    return fact.criterion if fact is not None and fact.kind == "function" else ""


def function_loss_reduction(
    reader: HelperFacts, function: ast.AST, arg: ast.expr
) -> str:
    """The reduction ("mean", "sum", "token-mean", "unknown") of what the loss
    function ``arg`` names returns, where it is a function (of the caller's
    module or one it imports) the project view reads as returning a loss
    (the VAE's ``loss_function`` summing ``F.binary_cross_entropy(...,
    reduction="sum")`` and the KL term, handed to ``train(..., loss_function)``);
    "" otherwise, also where the caller binds the name to something else."""
    if not isinstance(arg, ast.Name) or _assigned(function, arg.id):
        return ""
    target = reader.resolve(arg)
    if not isinstance(target, tuple):
        return ""
    fact = reader.view.fact(target, reader.roots, reader.script, reader.depth + 1)
    if fact is None or fact.kind != "function":
        return ""
    if fact.returns == "loss":
        return fact.reduction or "unknown"
    if fact.returns:
        return ""
    # Not read as a loss at its definition (its terms depend on what it is
    # handed: `-0.5 * torch.sum(1 + logvar - ...)`): a function that sums may
    # return a sum, which the callee would weigh as a mean over samples.
    defined = reader.view._scan(target[0], reader.roots).functions.get(target[1])
    return "unknown" if defined is not None and _sums(defined) else ""


def _sums(function: ast.AST) -> bool:
    """Does ``function`` sum anything: ``reduction="sum"``,
    ``size_average=False``, ``torch.sum(...)``, ``x.sum(...)``?"""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "reduction" and isinstance(value, ast.Constant):
                if value.value == "sum":
                    return True
            if keyword.arg == "size_average" and isinstance(value, ast.Constant):
                if value.value is False:
                    return True
        if isinstance(node.func, (ast.Attribute, ast.Name)):
            name = (
                node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            )
            if name in ("sum", "nansum"):
                return True
    return False


def unpacked_kind(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> str:
    """The kind of ``arg`` where its one binding in the caller's function unpacks
    the tuple a local helper returns (``train_loader, val_loader =
    get_loaders(cfg)``, with ``get_loaders`` returning ``(DataLoader(...),
    DataLoader(...))``): that item's kind; "" otherwise."""
    if not isinstance(arg, ast.Name):
        return ""
    bindings = [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and any(arg.id in _bound_names(t) for t in n.targets)
    ]
    if len(bindings) != 1 or len(bindings[0].targets) != 1:
        return ""
    (binding,) = bindings
    target, value = binding.targets[0], binding.value
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, ast.Call):
        return ""
    names = [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
    callee = reader.resolve(value.func)
    if not isinstance(callee, tuple):
        return ""
    fact = reader.view.fact(callee, reader.roots, reader.script, reader.depth + 1)
    if fact is None or fact.container != "tuple" or len(fact.items) != len(names):
        return ""
    return fact.items[names.index(arg.id)]


#: How far ``holds_loaders`` follows a caller's variables.
_LOADER_DEPTH = 4


def holds_loaders(
    reader: HelperFacts, function: ast.AST, expr: ast.expr, depth: int
) -> bool:
    """Is ``expr`` a dict, list or tuple of DataLoaders and nothing else (``{"train":
    tl, "val": vl}``, or a variable bound to one, or a local helper's dict or
    tuple of them: ``build_loaders(cfg)``)? The kind "loaders" of a call site:
    each item is a loader the caller shards, as a "loader" argument is."""
    if depth > _LOADER_DEPTH:
        return False
    if isinstance(expr, ast.Dict):
        if None in expr.keys:
            return False
        elements = list(expr.values)
    elif isinstance(expr, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in expr.elts):
            return False
        elements = list(expr.elts)
    elif isinstance(expr, ast.Call):
        callee = reader.resolve(expr.func)
        if not isinstance(callee, tuple):
            return False
        fact = reader.view.fact(callee, reader.roots, reader.script, reader.depth + 1)
        return (
            fact is not None
            and fact.container in ("dict", "tuple")
            and bool(fact.items)
            and all(item == "loader" for item in fact.items)
        )
    elif isinstance(expr, ast.Name):
        values = bound_values(function, expr.id)
        return bool(values) and all(
            holds_loaders(reader, function, v, depth + 1) for v in values
        )
    else:
        return False
    return bool(elements) and all(
        _is_loader(reader, function, e, depth + 1) for e in elements
    )


def loader_or_loaders(reader: HelperFacts, function: ast.AST, expr: ast.expr) -> bool:
    """Is ``expr`` a variable that the caller binds to a dict, list or tuple of
    DataLoaders on one path and to a DataLoader on another (Deep-Mutual-Learning's
    ``data_loader = (train_loader, test_loader)`` when training, else
    ``data_loader = test_loader``)? The kind "loader or loaders" of a call site:
    the callee's constant subscripts of it (``data_loader[0]``) are loaders the
    caller shards (a DataLoader has no items), its other uses are not known."""
    if not isinstance(expr, ast.Name):
        return False
    values = bound_values(function, expr.id)
    containers = [holds_loaders(reader, function, v, 1) for v in values]
    return (
        any(containers)
        and not all(containers)
        and all(
            held or _is_loader(reader, function, v, 1)
            for held, v in zip(containers, values, strict=True)
        )
    )


def _is_loader(
    reader: HelperFacts, function: ast.AST, expr: ast.expr, depth: int
) -> bool:
    """Is ``expr`` a DataLoader in the caller: one by ``kind_of``, an item of a
    local helper's tuple of them, one item of a container of them
    (``loaders["train"]``), or a variable bound only to such values?"""
    if depth > _LOADER_DEPTH:
        return False
    if reader.kind_of(expr, function, 0)[0] == "loader":
        return True
    if isinstance(expr, ast.Subscript):
        return holds_loaders(reader, function, expr.value, depth + 1)
    if isinstance(expr, ast.Name):
        if unpacked_kind(reader, function, expr) == "loader":
            return True
        values = bound_values(function, expr.id)
        return bool(values) and all(
            _is_loader(reader, function, v, depth + 1) for v in values
        )
    return False


def bound_values(function: ast.AST, name: str) -> list[ast.expr]:
    """The values ``name`` is assigned in ``function`` (``x = v``, element-wise
    ``a, x = u, v``); [] when one of its bindings is of another form (unpacked
    from a call, a loop, an augmented assignment...)."""
    found: list[ast.expr] = []
    for node in ast.walk(function):
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and name in _bound_names(
            node.target
        ):
            return []
        if isinstance(node, (ast.For, ast.With, ast.comprehension)):
            targets = (
                [node.target]
                if not isinstance(node, ast.With)
                else [i.optional_vars for i in node.items if i.optional_vars]
            )
            if any(name in _bound_names(t) for t in targets):
                return []
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name:
                found.append(node.value)
            elif name in _bound_names(target):
                if not (
                    isinstance(target, (ast.Tuple, ast.List))
                    and isinstance(node.value, (ast.Tuple, ast.List))
                    and len(target.elts) == len(node.value.elts)
                    and all(isinstance(e, ast.Name) for e in target.elts)
                ):
                    return []
                for inner, value in zip(target.elts, node.value.elts, strict=True):
                    if isinstance(inner, ast.Name) and inner.id == name:
                        found.append(value)
    return found


def _bound_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound_names(e)]
    return []


def optimized_model(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> bool:
    """Is ``arg`` a variable the caller builds with a call and whose
    ``.parameters()`` it hands an optimizer in the same function
    (``model = build_model(cfg)``, ``opt = AdamW(model.parameters())``, also
    through a variable bound in the function: ``params = [p for p in
    model.parameters() if p.requires_grad]``, ``SGD(params, ...)``), or
    that it hands a local optimizer factory for what it trains (``opt =
    create_optimizer(args, model)``, ``optimizer_factories``)? Its
    value is then a model however it is built (``build_model(cfg)``, a registry
    lookup the view cannot read), and the caller's AM004 prepares it there, as it
    prepares every model whose parameters an optimizer of the file receives."""
    if not isinstance(arg, ast.Name):
        return False
    # built there by a call (not imported, not a parameter): where the caller's
    # AM004 wraps it
    values = _assigned(function, arg.id)
    if not values or not all(isinstance(v, ast.Call) for v in values):
        return False
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        target = reader.resolve(node.func)
        if _factory_over(reader, target, node, arg.id):
            return True
        if not optimizer_class_target(reader, target):
            continue
        values = [*node.args, *(k.value for k in node.keywords)]
        # `params = [p for p in model.parameters() if p.requires_grad]` (the
        # torchvision references), then `SGD(params, ...)`: one step back
        values += [
            bound
            for value in list(values)
            for name in ast.walk(value)
            if isinstance(name, ast.Name) and name.id != arg.id
            for bound in _assigned(function, name.id)
        ]
        for value in values:
            for inner in ast.walk(value):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in ("parameters", "named_parameters")
                    and isinstance(inner.func.value, ast.Name)
                    and inner.func.value.id == arg.id
                ):
                    return True
    return False


def _factory_over(
    reader: HelperFacts, target: str | Target | None, call: ast.Call, name: str
) -> bool:
    """Is ``call`` a local optimizer factory's (``HelperFact.optimizer_over``)
    handed ``name`` for the model it trains (``create_optimizer(args, model)``),
    or ``name.parameters()`` for the parameters (``make_optimizer(
    model.parameters(), args)``)?"""
    if not isinstance(target, tuple):
        return False
    fact = reader._follow(target)
    if fact is None or fact.returns != "optimizer":
        return False
    parameter, position, over = fact.optimizer_over
    if not parameter:
        return False
    given = [k.value for k in call.keywords if k.arg == parameter]
    if not given and 0 <= position < len(call.args):
        given = [call.args[position]]
    if not given or any(isinstance(a, ast.Starred) for a in call.args[:position]):
        return False
    value = given[0]
    if over == "model":
        return isinstance(value, ast.Name) and value.id == name
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("parameters", "named_parameters")
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == name
    )
