"""Who calls a batch file's functions from the batch's other files (the project
view's reverse direction), and what each call hands them.

In batch mode (``accel-migrate train.py engine.py``, or a folder) a helper
module learns its callers: ``engine.train_one_epoch(model, optimizer,
train_loader, epoch)`` in ``train.py`` tells ``engine.py`` that its ``model``
parameter receives a model ``train.py`` builds, ``optimizer`` an optimizer and
``loader`` a DataLoader. Each argument is classified in the caller's file as a
helper's return is (``HelperFacts.kind_of``: through the caller's variables,
``.to()``/``.cuda()``, conditional expressions and its own local imports).

Computed once per view (``ProjectView.callers_of``), over the files of the
batch only: a single file argument has no callers (its importers are not
read). Static only: ``ast``; nothing is imported or run.

``given_by_callers`` is the migrating file's side: which of its functions'
parameters every batch call hands a model (the caller prepares it: AM004 need
not) or a loader (the caller shards it: its loops are loader loops, and what is
summed over them is reduced here).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .optimizer_factories import optimizer_class_target
from .project_facts import CallSite, HelperFact

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import Key, ModuleIndex
    from .project_helpers import HelperFacts
    from .project_view import ProjectView, Target


def batch_callers(view: ProjectView) -> dict[Target, tuple[CallSite, ...]]:
    """Every call from one batch file to a top-level function of another, or to
    a class of another (its ``__init__``) and methods of its instances
    (``project_instances``), by the callee (its file's real path, its name:
    ``train_one_epoch``, ``Trainer.__init__``, ``Trainer.evaluate``)."""
    from .iterator_factories import handed_iterator
    from .project_helpers import HelperFacts
    from .project_instances import callee_of, model_class
    from .project_namespaces import HandedOption, handed_options
    from .project_view import roots_of

    found: dict[Target, list[CallSite]] = {}
    for caller in sorted(view.scripts):
        roots = roots_of(caller, view.base)
        if not view._may_import_local(caller, roots):
            continue  # a text scan: most files of a batch import nothing local
        tree = view.tree(caller)
        if tree is None:
            continue
        # read as from outside: the caller's own classes and factories are
        # followed too (`Trainer(Net(), ...)` with `class Net` in the caller)
        reader = HelperFacts(view, (caller, ""), roots, "", 0)
        for function, call in _calls(tree):
            callee = callee_of(view, reader, caller, function, call)
            if callee is None:
                continue
            target, defined, bound = callee
            kinds: list[tuple[str, str]] = []
            classes: list[tuple[str, HelperFact]] = []
            reductions: list[tuple[str, str]] = []
            iterators: list[tuple[str, str]] = []
            namespaces: list[tuple[str, tuple[HandedOption, ...]]] = []
            for name, arg in _bind(defined, call, bound):
                options = handed_options(reader, caller, function, arg, target[0])
                if options:
                    namespaces.append((name, options))
                kind = reader.kind_of(arg, function, 0)[0]
                criterion = "" if kind else _criterion(reader, function, arg)
                if criterion:
                    kind = "criterion"
                    reductions.append((name, criterion))
                if not kind:
                    kind = _unpacked_kind(reader, function, arg)
                if not kind and _optimized(reader, function, arg):
                    kind = "model"
                if not kind and _holds_loaders(reader, function, arg, 0):
                    kind = "loaders"
                kinds.append((name, kind))
                built = model_class(reader, arg, function) if kind == "model" else None
                if built is not None:
                    classes.append((name, built))
                iterator = "" if kind else handed_iterator(reader, function, arg)
                if iterator:
                    iterators.append((name, iterator))
            found.setdefault(target, []).append(
                CallSite(
                    view._display(caller, target[0]),
                    call.lineno,
                    tuple(kinds),
                    tuple(classes),
                    tuple(reductions),
                    tuple(iterators),
                    tuple(namespaces),
                )
            )
    return {target: tuple(sites) for target, sites in found.items()}


def _assigned(function: ast.AST, name: str) -> list[ast.expr]:
    """What ``name = ...`` statements in ``function`` assign it."""
    return [
        n.value
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]


def _criterion(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> str:
    """The reduction ("mean", "sum", "unknown") of the loss module ``arg`` holds,
    where every binding of it in the caller's function builds one
    (``criterion = nn.CrossEntropyLoss()``); "" otherwise."""
    if not isinstance(arg, ast.Name):
        return ""
    values = _assigned(function, arg.id)
    if not values or not all(isinstance(v, ast.Call) for v in values):
        return ""
    found = {reader._loss_module(v) for v in values}  # type: ignore[arg-type]
    if len(found) != 1:
        return ""
    kind, reduction, _ = found.pop()
    return reduction if kind == "loss" else ""


def _unpacked_kind(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> str:
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


#: How far ``_holds_loaders`` follows a caller's variables.
_LOADER_DEPTH = 4


def _holds_loaders(
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
        values = _bound_values(function, expr.id)
        return bool(values) and all(
            _holds_loaders(reader, function, v, depth + 1) for v in values
        )
    else:
        return False
    return bool(elements) and all(
        _is_loader(reader, function, e, depth + 1) for e in elements
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
        return _holds_loaders(reader, function, expr.value, depth + 1)
    if isinstance(expr, ast.Name):
        if _unpacked_kind(reader, function, expr) == "loader":
            return True
        values = _bound_values(function, expr.id)
        return bool(values) and all(
            _is_loader(reader, function, v, depth + 1) for v in values
        )
    return False


def _bound_values(function: ast.AST, name: str) -> list[ast.expr]:
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


def _optimized(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> bool:
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


def _calls(tree: ast.Module) -> list[tuple[ast.AST, ast.Call]]:
    """Each call of the module with the function it is in (the module itself at
    top level)."""
    found: list[tuple[ast.AST, ast.Call]] = []
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while todo:
        owner, node = todo.pop()
        for child in ast.iter_child_nodes(node):
            inner = (
                child
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                else owner
            )
            if isinstance(child, ast.Call):
                found.append((inner, child))
            todo.append((inner, child))
    return found


def _bind(
    function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, bound: int = 0
) -> list[tuple[str, ast.expr]]:
    """The parameters a call binds by position and keyword (none of ``*args``/
    ``**kwargs`` on either side: those are not followed), after the ``bound``
    leading ones (``self``)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return []
    positional = [*function.args.posonlyargs, *function.args.args][bound:]
    pairs = [(p.arg, a) for p, a in zip(positional, call.args, strict=False)]
    names = {p.arg for p in [*positional, *function.args.kwonlyargs]}
    pairs += [(k.arg, k.value) for k in call.keywords if k.arg in names]  # type: ignore[misc]
    return pairs


def given_by_callers(
    index: ModuleIndex, kind: str
) -> dict[Key, tuple[cst.Param, tuple[CallSite, ...]]]:
    """Parameters of this file's top-level functions, and of its classes'
    ``__init__`` and methods, that every call from the batch's other files
    (``ProjectFacts.callers``, at least one) hands a value of ``kind`` ("model",
    "loader"), with the calls. A function this file calls itself is left out:
    its own arguments decide (``ModuleIndex.arguments``); so is a method this
    file calls on anything but ``self``, or a class it constructs."""
    found: dict[Key, tuple[cst.Param, tuple[CallSite, ...]]] = {}
    if not index.project.callers:
        return found
    for function, param, sites in _caller_parameters(index):
        if all(site.kind(param.name.value) == kind for site in sites):
            key = index.function_scope_key(function, param.name.value)
            found[key] = (param, sites)
    return found


def prepared_by_callers(name: str, sites: tuple[CallSite, ...]) -> str:
    """AM004's info finding for a parameter every batch call hands a model."""
    return (
        f"`{name}` is a parameter that every call from the batch's other files "
        f"hands a model built there ({_shown(sites)}), which is prepared where it "
        "is built if it is trained (a frozen one is left as it is): not wrapped "
        "here"
    )


def caller_model_class(index: ModuleIndex, key: Key) -> HelperFact | None:
    """The local model class every batch call hands the parameter ``key`` an
    instance of (``Trainer(config, model, ...)`` with ``model = GPT(config)``
    in the caller); None where one call does not show it, or shows another."""
    for function, param, sites in _caller_parameters(index):
        if index.function_scope_key(function, param.name.value) != key:
            continue
        classes = {site.model_class(param.name.value) for site in sites}
        found = classes.pop() if len(classes) == 1 else None
        return found
    return None


def caller_iterator(index: ModuleIndex, key: Key) -> str:
    """How every batch call hands the parameter ``key`` a hand-written batch
    iterator of the project (``train(config, model, train_iter, ...)`` with
    ``train_iter = build_iterator(train_data, config)`` in the caller), as a
    phrase naming the calls; "" where one call does not, or hands another."""
    for function, param, sites in _caller_parameters(index):
        if index.function_scope_key(function, param.name.value) != key:
            continue
        handed = {site.iterator(param.name.value) for site in sites}
        if len(handed) != 1 or "" in handed:
            return ""
        return (
            f"a parameter that every call from the batch's other files "
            f"({_shown(sites)}) hands {handed.pop()}"
        )
    return ""


def _shown(sites: tuple[CallSite, ...]) -> str:
    """The first three calls' places, and how many more there are."""
    shown = ", ".join(site.where for site in sites[:3])
    more = f" and {len(sites) - 3} more" if len(sites) > 3 else ""
    return f"{shown}{more}"


def _caller_parameters(
    index: ModuleIndex,
) -> Iterator[tuple[cst.FunctionDef, cst.Param, tuple[CallSite, ...]]]:
    """The parameters of this file's functions (``_called_functions``) that the
    batch's other files call and this file does not, each with those calls."""
    for name, function in _called_functions(index):
        sites = index.project.callers_of(name)
        if not sites or index.call_sites(function):
            continue
        for param in _parameters(function):
            yield function, param, sites


def _parameters(function: cst.FunctionDef) -> tuple[cst.Param, ...]:
    params = function.params
    return (*params.posonly_params, *params.params, *params.kwonly_params)


def _called_functions(index: ModuleIndex) -> list[tuple[str, cst.FunctionDef]]:
    """This file's top-level functions and its top-level classes' methods, by
    the name the callers facts give them (``fn``, ``Class.method``)."""
    # The engine's side only: the project view imports this module for
    # batch_callers, with ast, before it knows whether any file needs libcst.
    import libcst as cst

    found: list[tuple[str, cst.FunctionDef]] = []
    external = {
        call.func.attr.value
        for call in index.calls
        if isinstance(call.func, cst.Attribute)
        and not (
            isinstance(call.func.value, cst.Name) and call.func.value.value == "self"
        )
    }
    for statement in index.module.body:
        if isinstance(statement, cst.FunctionDef):
            found.append((statement.name.value, statement))
        elif isinstance(statement, cst.ClassDef) and isinstance(
            statement.body, cst.IndentedBlock
        ):
            for inner in statement.body.body:
                if not isinstance(inner, cst.FunctionDef):
                    continue
                method = inner.name.value
                if method != "__init__" and method in external:
                    continue  # called on an instance this file makes: not followed
                found.append((f"{statement.name.value}.{method}", inner))
    return found
