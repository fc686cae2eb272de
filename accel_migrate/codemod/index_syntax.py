"""Small syntax helpers of the module index and the rules: variable keys, attribute
chains, the names an expression reads, the nodes a block runs, how a call binds a
function's parameters."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

import libcst as cst

from . import python_ast, subtrees

Key = tuple[object, str]
Seed = Callable[[cst.BaseExpression], bool]

RUNTIME = "accel_migrate.runtime"
_LOOP_WRAPPERS = {"enumerate", "zip", "iter", "tqdm"}
_LOOP_QUALNAMES = {
    "builtins.enumerate",
    "builtins.zip",
    "builtins.iter",
    "tqdm.tqdm",
    "tqdm.auto.tqdm",
    "tqdm.notebook.tqdm",
}


def attr_chain(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` as a string, or None for anything that is not names and dots."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = attr_chain(node.value)
        return None if inner is None else f"{inner}.{node.attr.value}"
    return None


def variable_names(node: cst.CSTNode) -> list[cst.Name]:
    """Names used as variables in ``node``: not attribute names, not keywords."""
    shared = subtrees.variable_names(node)
    if shared is not None:
        return shared
    names = _VariableNames()
    node.visit(names)
    return names.found


class _VariableNames(cst.CSTVisitor):
    # A module-level class (not one per call): fastvisit resolves a visitor
    # class's hooks once.
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Name] = []

    def visit_Name(self, name: cst.Name) -> None:
        self.found.append(name)

    def visit_Attribute(self, attribute: cst.Attribute) -> bool:
        attribute.value.visit(self)
        return False

    def visit_Arg(self, arg: cst.Arg) -> bool:
        arg.value.visit(self)
        return False


def method_call(node: cst.CSTNode, *names: str) -> cst.Attribute | None:
    """The ``receiver.method`` of a call to one of ``names``, if it is one."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in names
    ):
        return node.func
    return None


_MAX_PATHS = 32


def _returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression | None]:
    """What each ``return`` of ``function``'s own body hands back (None: a bare
    ``return``); empty for a function without one."""
    return [
        node.value
        for node in _nodes_run_by(function.body)
        if isinstance(node, cst.Return)
    ]


def _nodes_run_by(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes under ``node`` that run when it runs: not the bodies of the
    functions, classes and lambdas it defines."""
    shared = subtrees.nodes_run_by(node)
    if shared is not None:
        return shared
    walk = _RunBy(node)
    node.visit(walk)
    return walk.found


class _RunBy(cst.CSTVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.found: list[cst.CSTNode] = []

    def on_visit(self, inner: cst.CSTNode) -> bool:
        if inner is not self.root and isinstance(
            inner, (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        ):
            return False
        self.found.append(inner)
        return True


def _calls_run_by(node: cst.CSTNode) -> list[cst.Call]:
    return [n for n in _nodes_run_by(node) if isinstance(n, cst.Call)]


def assigned_targets(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets an assignment (``=``, chained or not, annotated, augmented)
    binds; none for any other node."""
    if isinstance(statement, cst.Assign):
        return [t.target for t in statement.targets]
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        return [statement.target]
    return []


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    return [
        *params.posonly_params,
        *params.params,
        *params.kwonly_params,
        *([params.star_arg] if isinstance(params.star_arg, cst.Param) else []),
        *([params.star_kwarg] if params.star_kwarg else []),
    ]


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    for statement in body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def bind_arguments(
    function: cst.FunctionDef, bound: int, call: cst.Call
) -> Iterator[tuple[str, cst.BaseExpression]]:
    positional = [*function.params.posonly_params, *function.params.params][bound:]
    by_name = {p.name.value for p in _all_params(function.params)}
    index = 0
    for arg in call.args:
        if arg.star == "*" and _literal_items(arg.value) is not None:
            # `train(*[args])`, `train(*(model, args))`: the display's items
            for item in _literal_items(arg.value) or ():
                if index < len(positional):
                    yield positional[index].name.value, item
                index += 1
            continue
        if arg.star:
            return  # *args / **kwargs: positions are unknown from here on
        if arg.keyword is None:
            if index < len(positional):
                yield positional[index].name.value, arg.value
            index += 1
        elif arg.keyword.value in by_name:
            yield arg.keyword.value, arg.value


def _literal_items(value: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The items of a list or tuple display without ``*`` items, else None."""
    if not isinstance(value, (cst.List, cst.Tuple)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    return [e.value for e in value.elements]


def _unpacked(
    target: cst.Tuple | cst.List, value: cst.BaseExpression | None
) -> list[cst.BaseExpression | None]:
    """What each element of ``a, b = value`` receives: the items of a tuple or list
    display of the same length without ``*`` (``enc, dec = Enc(), Dec()``), else
    unknown (None) for each."""
    if (
        isinstance(value, (cst.Tuple, cst.List))
        and len(value.elements) == len(target.elements)
        and not any(isinstance(e, cst.StarredElement) for e in value.elements)
        and not any(isinstance(e, cst.StarredElement) for e in target.elements)
    ):
        return [e.value for e in value.elements]
    return [None] * len(target.elements)


def ast_class(cls: cst.ClassDef) -> ast.ClassDef | None:
    """``cls`` parsed again with ``ast``, for the project view's class facts
    (``unimplemented_forward``, ``layer_methods``, ``unregistered_tensors``),
    which read ``ast``; its lines count from the class's first line."""
    try:
        tree = python_ast.parse(cst.Module(body=[cls]).code)
    except SyntaxError:  # pragma: no cover - libcst parsed it
        return None
    node = tree.body[0]
    return node if isinstance(node, ast.ClassDef) else None


def parameter_names(function: cst.FunctionDef) -> set[str]:
    """The names of ``function``'s positional and keyword-only parameters, not
    ``self``, ``*args`` or ``**kwargs``."""
    params = function.params
    positional = {p.name.value for p in (*params.posonly_params, *params.params)}
    return (positional - {"self"}) | {p.name.value for p in params.kwonly_params}
