"""Files a function opens by an attribute of one of its parameters
(``HelperFact.reads_paths``): SQuAD's ``evaluate.main(args)`` opens
``args.prediction_file``. AM017 (``file_reads.handed_on``) asks it where a
script writes ``args.prediction_file`` on the main process and then hands
``args`` to such a function: the other processes would read the file before it
is written, so a barrier must follow the write. Handing ``args`` to a function
that reads no such path is no read back.

Static only: ``ast`` (the project view), nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

#: Calls that read the file their first argument names.
PATH_READERS = frozenset(
    {
        "builtins.open",
        "io.open",
        "torch.load",
        "numpy.load",
        "numpy.loadtxt",
        "numpy.genfromtxt",
        "pandas.read_csv",
        "pandas.read_json",
        "pandas.read_pickle",
        "PIL.Image.open",
    }
)
_OPENS = frozenset({"builtins.open", "io.open"})


def attribute_path(expr: ast.expr) -> tuple[str, str] | None:
    """``("args", "prediction_file")`` for ``args.prediction_file``, ``("cfg",
    "out.path")`` for ``cfg.out.path``; None for anything else."""
    attrs: list[str] = []
    while isinstance(expr, ast.Attribute):
        attrs.append(expr.attr)
        expr = expr.value
    if not attrs or not isinstance(expr, ast.Name):
        return None
    return expr.id, ".".join(reversed(attrs))


def _writes(call: ast.Call) -> bool:
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and len(call.args) > 1:
        mode = call.args[1]
    if mode is None:
        return False
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return True  # a mode not read: not known to read
    return any(c in mode.value for c in "wax+")


def reads_paths(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    dotted: Callable[[ast.expr], str],
) -> tuple[tuple[int, str, str], ...]:
    """(positional index or -1, parameter, attribute path) of each parameter's
    attribute ``function`` opens for reading (``open(args.prediction_file)``)."""
    params = [*function.args.posonlyargs, *function.args.args]
    positions = {p.arg: i for i, p in enumerate(params)}
    names = set(positions) | {p.arg for p in function.args.kwonlyargs}
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = dotted(node.func)
        if name not in PATH_READERS or (name in _OPENS and _writes(node)):
            continue
        path = attribute_path(node.args[0])
        if path is None or path[0] not in names:
            continue
        entry = (positions.get(path[0], -1), path[0], path[1])
        if entry not in found:
            found.append(entry)
    return tuple(found)
