"""Library trainer functions: a function of a local module that trains the model its
caller hands it (a project's own ``fit(model, optimizer, loader)`` loop,
torchvision's reference ``train_one_epoch(model, ...)``), itself, through a
closure it returns, or through another function of its module it hands the model;
and a function that runs a whole training of its own (``function_trains_own``).
The function counterpart of ``library_trainers``' classes, for the project view
(``HelperFact.trains``). Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .closure_steps import closure_trains, returned_closures
from .model_uses import _backward_calls, _used_value_as_model
from .project_nodes import _own_nodes


def function_trains_handed(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> str:
    """How a function trains a model its caller hands it, as a phrase for a
    finding (``"`fit` calls backward (line 14) in a step that runs `model`, its
    parameter"``); "" when it does not: it calls ``.backward()`` and uses a
    parameter, or a local bound to one, as a model (called, or ``.train()``,
    ``.parameters()``...). A project's own ``fit(model, optimizer, loader)``
    loop, or torchvision's reference ``train_one_epoch(model, ...)``. Also
    through a function of its module (``functions``) it hands the parameter
    (``train(model, loaders, cfg)`` calling ``train_one_epoch(model=model,
    ...)``, which trains it)."""
    found = _function_trains(function, functions or {}, 0)
    return found[0] if found is not None else ""


def function_trained_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> tuple[str, int]:
    """The parameter ``function_trains_handed`` finds trained and its position
    among the positional parameters (-1: keyword only); ("", -1) for none."""
    found = _function_trains(function, functions or {}, 0)
    if found is None:
        return ("", -1)
    arguments = function.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    name = found[1]
    return (name, positional.index(name) if name in positional else -1)


#: How many calls deep ``function_trains_handed`` follows a handed model.
_CALL_DEPTH = 3


def _function_trains(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int,
) -> tuple[str, str] | None:
    """(phrase, parameter) for ``function_trains_handed``; None when it does not."""
    arguments = function.args
    names = {
        a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    }

    def parameter(expr: ast.expr) -> str | None:
        return expr.id if isinstance(expr, ast.Name) and expr.id in names else None

    backward = next(_backward_calls(function), None)
    if backward is not None:
        used = _used_value_as_model(function, parameter)
        if used is not None:
            return (
                f"`{function.name}` calls backward (line {backward.lineno}"
                f"{_branch(function, backward)}) in a step that runs `{used}`, "
                "its parameter",
                used,
            )
    for step, returned in returned_closures(function):
        # BigGAN's `GAN_training_function(G, D, GD, ...)` returning its `train`
        found = closure_trains(function.name, step, returned, parameter)
        if found is not None:
            return found
    if depth >= _CALL_DEPTH:
        return None
    for node in _own_nodes(function):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in functions
            and functions[node.func.id] is not function
        ):
            continue
        callee = functions[node.func.id]
        inner = _function_trains(callee, functions, depth + 1)
        if inner is None:
            continue
        handed = _argument_for(node, callee, inner[1])
        own = parameter(handed) if handed is not None else None
        if own is not None:
            return (
                f"`{function.name}` hands its parameter `{own}` to "
                f"`{callee.name}` (line {node.lineno}), where {inner[0]}",
                own,
            )
    return None


def function_trains_own(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    is_optimizer: Callable[[ast.Call], bool],
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> str:
    """How a function runs a whole training of its own, as a phrase for a
    finding (``"`main` calls backward (line 64) and builds an optimizer
    (`torch.optim.SparseAdam(...)`, line 51)"``); "" when it does not: its own
    body (not a nested function's) builds a ``torch.optim`` optimizer
    (``is_optimizer``) and calls ``.backward()``, itself or in a function of its
    module (``functions``) it calls, up to three calls deep. daandouwe/glove's
    ``train.main(args)``, which main.py calls with nothing but the arguments;
    Y. Nakama's Kaggle ``train_loop(folds, fold)``, which builds the optimizer
    and hands it to ``train_fn``, which calls backward."""
    backwards = _reached_backwards(function, functions or {}, 0, set())
    if not backwards:
        return ""
    built = sorted(
        (
            node
            for node in _own_nodes(function)
            if isinstance(node, ast.Call) and is_optimizer(node)
        ),
        key=lambda n: n.lineno,
    )
    if not built:
        return ""
    (where, backward), built = backwards[0], built[0]
    through = "" if where is function else f" in `{where.name}`"
    return (
        f"`{function.name}` calls backward (line {backward.lineno}{through}) and "
        f"builds an optimizer (`{ast.unparse(built.func)}(...)`, line {built.lineno})"
    )


def _reached_backwards(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int,
    seen: set[str],
) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]]:
    """The ``.backward()`` calls ``function`` runs, with the function each is
    in: its own first (by line), else those of the module's functions it calls
    by name (``train_fn(...)``), up to ``_CALL_DEPTH`` calls deep."""
    own = sorted(_backward_calls(function), key=lambda n: n.lineno)
    if own or depth >= _CALL_DEPTH:
        return [(function, call) for call in own]
    seen = seen | {function.name}
    for node in sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    ):
        if not isinstance(node.func, ast.Name) or node.func.id in seen:
            continue
        callee = functions.get(node.func.id)
        if callee is None:
            continue
        found = _reached_backwards(callee, functions, depth + 1, seen)
        if found:
            return found
    return []


def _branch(function: ast.AST, node: ast.AST) -> str:
    """``, where `distance == 'l_2'``` when ``node`` runs only under a test of
    ``function`` (TRADES' ``trades_loss``, whose one backward is the ``l_2``
    attack's): the innermost ``if``'s; "" when it always runs."""
    found = ""
    for branch in ast.walk(function):  # breadth first: an inner `if` comes later
        if isinstance(branch, ast.If) and any(
            inner is node for s in branch.body for inner in ast.walk(s)
        ):
            found = f", where `{ast.unparse(branch.test)}`"
    return found


def _argument_for(
    call: ast.Call, callee: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> ast.expr | None:
    """What ``call`` hands ``callee``'s parameter ``name`` (None: nothing, or
    through ``*args``/``**kwargs``)."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if name in positional and positional.index(name) < len(call.args):
        return call.args[positional.index(name)]
    return None
