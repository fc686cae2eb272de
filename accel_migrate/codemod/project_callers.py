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

from .caller_arguments import (
    criterion_reduction,
    function_loss_reduction,
    holds_loaders,
    loader_or_loaders,
    optimized_model,
    unpacked_kind,
)
from .project_facts import CallSite, HelperFact

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import Key, ModuleIndex
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
                criterion = (
                    ""
                    if kind
                    else criterion_reduction(reader, function, arg)
                    or function_loss_reduction(reader, function, arg)
                )
                if criterion:
                    kind = "criterion"
                    reductions.append((name, criterion))
                if not kind:
                    kind = unpacked_kind(reader, function, arg)
                if not kind and optimized_model(reader, function, arg):
                    kind = "model"
                if not kind and holds_loaders(reader, function, arg, 0):
                    kind = "loaders"
                if not kind and loader_or_loaders(reader, function, arg):
                    kind = "loader or loaders"
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
    index: ModuleIndex, kind: str | tuple[str, ...]
) -> dict[Key, tuple[cst.Param, tuple[CallSite, ...]]]:
    """Parameters of this file's top-level functions, and of its classes'
    ``__init__`` and methods, that every call from the batch's other files
    (``ProjectFacts.callers``, at least one) hands a value of ``kind`` ("model",
    "loader"; or of one of the kinds of a tuple), with the calls. A function this file calls itself is left out:
    its own arguments decide (``ModuleIndex.arguments``); so is a method this
    file calls on anything but ``self``, or a class it constructs."""
    found: dict[Key, tuple[cst.Param, tuple[CallSite, ...]]] = {}
    if not index.project.callers:
        return found
    for function, param, sites in _caller_parameters(index):
        kinds = (kind,) if isinstance(kind, str) else kind
        if all(site.kind(param.name.value) in kinds for site in sites):
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
