"""Parsed namespaces handed from another file of the batch (the project view).

``rank_local_options`` makes ``args.local_rank`` rank-local on a namespace
parsed in the same file. A project often parses in one file and trains in
another::

    # main.py
    parser.add_argument("--local_rank", type=int,
                        default=int(os.environ.get("LOCAL_RANK", -1)))
    train(parser.parse_args(), model)
    # trainer.py
    def train(args, model):
        ...
        if args.local_rank in (-1, 0):
            torch.save(model.state_dict(), "m.pt")

The caller's side (``handed_options``, ``ast``, from ``project_callers``):
which rank-local options the namespace an argument holds carries. The argument
is a ``<parser>.parse_args()`` call (or ``parse_intermixed_args``), a call of
a local function (of the caller's file or a local module it imports) that
returns one, or a variable of the caller bound only to such values, or a
parameter of the caller's function that a call in the caller's file hands one
(``def main(args): train(args, model)`` ... ``main(parser.parse_args())``). The
options are those of the file whose parser is parsed: an ``add_argument`` or
``set_defaults`` whose default reads a variable the launcher sets per process,
directly or through a name the file assigns it to. A plain ``default=-1`` is
the same on every process: no option. Static only; nothing is run.

The migrating file's side (``handed_parameters``): the parameters of its
functions that a call from the batch's other files hands such a namespace
(any one call: the analysis errs towards rank-dependent), with the options.
Handed on from there (``def train(args): fit(args)``, ``cfg = args``), every
namespace of the file not parsed in it carries the same options
(``handed_keys``; ``parsed_namespaces`` follows it). A file migrated alone
has no callers: its importers are not read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .rank_variables import RANK_VARIABLES

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import Key, ModuleIndex
    from .project_helpers import HelperFacts

_PARSE = frozenset({"parse_args", "parse_intermixed_args"})
_DEPTH = 4  # variables, parameters and local functions followed


@dataclass(frozen=True)
class HandedOption:
    """A rank-local option of a namespace handed from another file."""

    dest: str  # the namespace's attribute: "local_rank"
    flag: str  # "--local_rank"
    file: str  # the file whose parser declares it, as findings show it
    line: int  # the line of its default
    read: str  # the rank variable's read: `os.environ.get('LOCAL_RANK', -1)`

    @property
    def origin(self) -> str:
        return f"`{self.read}` in {self.file} at line {self.line}"


def handed_options(
    reader: HelperFacts, caller: str, function: ast.AST, arg: ast.expr, shown: str
) -> tuple[HandedOption, ...]:
    """The rank-local options of the namespace ``arg`` holds in ``caller``'s
    ``function`` (the module at top level); () where it is none or not known.
    ``shown``: the file the finding is in (files are named from there)."""
    tree = reader.view.tree(caller)
    if tree is None or not isinstance(arg, (ast.Name, ast.Call)):
        return ()
    cache = reader.view._rank_options
    # (a variable is handed to many calls: `args`)
    key = (caller, id(function), arg.id, shown) if isinstance(arg, ast.Name) else None
    if key is not None and key in cache:
        return cache[key]
    found = _Namespaces(reader, caller, tree, shown).options(arg, function, 0)
    if key is not None:
        cache[key] = found
    return found


class _Namespaces:
    def __init__(
        self, reader: HelperFacts, caller: str, tree: ast.Module, shown: str
    ) -> None:
        self.reader, self.caller, self.tree = reader, caller, tree
        self.shown = shown

    def options(
        self, expr: ast.expr, function: ast.AST, depth: int
    ) -> tuple[HandedOption, ...]:
        if depth > _DEPTH:
            return ()
        if isinstance(expr, ast.Call):
            return self._call(expr, depth)
        if not isinstance(expr, ast.Name):
            return ()
        found: list[HandedOption] = []
        scope = function
        values = _bound(function, expr.id)
        if not values and isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if expr.id in _parameter_names(function):
                return self._parameter(function, expr.id, depth)
            scope, values = self.tree, _bound(self.tree, expr.id)  # a global
        for value in values:
            found.extend(self.options(value, scope, depth + 1))
        return tuple(dict.fromkeys(found))

    def _call(self, call: ast.Call, depth: int) -> tuple[HandedOption, ...]:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _PARSE:
            return (
                () if call.args else file_options(self.reader, self.caller, self.shown)
            )
        target = self.reader.resolve(func)
        if not isinstance(target, tuple) or not target[1]:
            return ()
        path, name = target
        tree = self.reader.view.tree(path)
        if tree is None:
            return ()
        defined = _function(tree, name)
        if defined is None:
            return ()
        # `args = get_args()`: a local function returning `parser.parse_args()`
        inner = self if path == self.caller else None
        found: list[HandedOption] = []
        for ret in ast.walk(defined):
            if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
                value = ret.value
                if isinstance(value.func, ast.Attribute) and value.func.attr in _PARSE:
                    if not value.args:
                        found.extend(file_options(self.reader, path, self.shown))
                elif inner is not None:
                    found.extend(inner._call(value, depth + 1))
        return tuple(dict.fromkeys(found))

    def _parameter(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, depth: int
    ) -> tuple[HandedOption, ...]:
        """``def main(args)`` called in the caller's file as ``main(ns)``."""
        from .project_callers import _bind, _calls

        found: list[HandedOption] = []
        for owner, call in _calls(self.tree):
            if not (isinstance(call.func, ast.Name) and call.func.id == function.name):
                continue
            if _function(self.tree, call.func.id) is not function:
                continue
            for bound, value in _bind(function, call):
                if bound == name:
                    found.extend(self.options(value, owner, depth + 1))
        return tuple(dict.fromkeys(found))


def file_options(
    reader: HelperFacts, path: str, script: str
) -> tuple[HandedOption, ...]:
    """The options of ``path``'s parsers whose default reads a rank variable
    (read once per view), named from ``script``."""
    cache = reader.view._rank_options
    if (path,) not in cache:
        cache[path,] = _options(reader.view.tree(path))
    found = cache[path,]
    if not found:
        return ()
    shown = reader.view._display(path, script)
    return tuple(HandedOption(o.dest, o.flag, shown, o.line, o.read) for o in found)


def _options(tree: ast.Module | None) -> tuple[HandedOption, ...]:
    """``file_options`` of a parsed file, not yet named (``file`` empty)."""
    found: list[HandedOption] = []
    shown = ""
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "add_argument":
            flags = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            dest = keywords.get("dest")
            default = keywords.get("default")
            if not flags or default is None:
                continue
            long = [f for f in flags if f.startswith("--")]
            flag = long[0] if long else flags[0]
            name = (
                dest.value
                if isinstance(dest, ast.Constant) and isinstance(dest.value, str)
                else flag.lstrip("-").replace("-", "_")
            )
            pairs = [(name, flag, default)]
        elif node.func.attr == "set_defaults":
            pairs = [(k.arg, k.arg, k.value) for k in node.keywords if k.arg]
        else:
            continue
        for dest_name, flag, default in pairs:
            read = _rank_read(tree, default, 0)  # type: ignore[arg-type]
            if read is not None:
                found.append(
                    HandedOption(dest_name, flag, shown, read.lineno, ast.unparse(read))
                )
    return tuple(found)


def _rank_read(tree: ast.Module, expr: ast.expr, depth: int) -> ast.expr | None:
    """The read of a rank variable ``expr`` makes (``os.environ.get("LOCAL_RANK",
    -1)``, ``os.environ["RANK"]``, ``os.getenv(...)``), directly or through a
    name the module assigns it to; None for any other value."""
    for node in ast.walk(expr):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            named = func.attr if isinstance(func, ast.Attribute) else ""
            if isinstance(func, ast.Name):
                named = func.id
            if named in ("get", "getenv"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript):
            value = node.value
            if (isinstance(value, ast.Attribute) and value.attr == "environ") or (
                isinstance(value, ast.Name) and value.id == "environ"
            ):
                key = node.slice
        if isinstance(key, ast.Constant) and key.value in RANK_VARIABLES:
            return node  # type: ignore[return-value]
        if isinstance(node, ast.Name) and depth < _DEPTH:
            for value in _bound(tree, node.id, everywhere=True):
                found = _rank_read(tree, value, depth + 1)
                if found is not None:
                    return found
    return None


def _bound(scope: ast.AST, name: str, everywhere: bool = False) -> list[ast.expr]:
    """The values ``name = value`` statements of ``scope`` give it (not those
    of the functions it defines, unless ``everywhere``)."""
    found: list[ast.expr] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not everywhere:
                continue
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            found.append(node.value)
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            found.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _function(
    tree: ast.Module, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == name:
                return node
    return None


def _parameter_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def handed_parameters(
    index: ModuleIndex,
) -> dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]]:
    """For each function of this file that a call from the batch's other files
    hands a namespace with rank-local options: ``{"args.local_rank":
    (the option, ...)}`` by the attribute of its parameter."""
    from .project_callers import _called_functions

    found: dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]] = {}
    if not index.project.callers:
        return found
    for name, function in _called_functions(index):
        for site in index.project.callers_of(name):
            for parameter, options in site.namespaces:
                attributes = found.setdefault(function, {})
                for option in options:
                    attribute = f"{parameter}.{option.dest}"
                    known = attributes.get(attribute, ())
                    if option not in known:
                        attributes[attribute] = (*known, option)
    return found


def handed_keys(
    index: ModuleIndex,
) -> tuple[dict[Key, tuple[HandedOption, ...]], dict[Key, cst.CSTNode]]:
    """``handed_parameters`` by the key of the parameter's attribute (the
    provenance's, ``rank_local_sources``: ``args.local_rank`` in ``train``'s
    scope), with the node a finding points at (the function's name)."""
    found: dict[Key, tuple[HandedOption, ...]] = {}
    nodes: dict[Key, cst.CSTNode] = {}
    handed = index.rank_local_options.handed
    by_dest: dict[str, tuple[HandedOption, ...]] = {}
    for function, attributes in handed.items():
        for attribute, options in attributes.items():
            parameter, dest = attribute.split(".", 1)
            base = index.function_scope_key(function, parameter)
            key = (base[0], f"{base[1]}.{dest}")
            found[key] = options
            nodes[key] = function.name
            by_dest[dest] = tuple(dict.fromkeys((*by_dest.get(dest, ()), *options)))
    if not handed:
        return found, nodes
    # handed on again from there (`def train(args): fit(args)`, `cfg = args`):
    # the namespaces of this file not parsed here carry the same options
    import libcst as cst  # (not on the project view's path: a cache hit's)

    options = index.rank_local_options
    for base, anchors in options.namespaces.keys.items():
        if any(options.namespace(anchor) is not None for anchor in anchors):
            continue  # parsed in this file: its own options
        anchor = anchors[0]
        shown = anchor.name if isinstance(anchor, cst.FunctionDef) else anchor
        for dest, handed_options in by_dest.items():
            key = (base[0], f"{base[1]}.{dest}")
            if key not in found:
                found[key] = handed_options
                nodes[key] = shown
    return found, nodes
