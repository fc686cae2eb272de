"""Where a trained model comes from: what AM004 needs beyond ``ModuleIndex``.

- ``parameter_calls``: the ``x.parameters()`` calls whose parameters an optimizer
  receives, also through variables (``params = list(enc.parameters()) +
  list(dec.parameters())``, ``params += ...``, ``itertools.chain(...)``).
- ``element_containers``: loop and comprehension variables that step through a
  list of models (``for net in nets``, ``[SGD(n.parameters()) for n in nets]``).
- ``binding_story``: a true sentence on how a variable is bound, for a
  needs-review message (imported, a parameter, unpacked, built in a form that
  cannot be wrapped).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex, method_call, variable_names
from .scopes import Assignment, ImportAssignment
from .subtrees import findall

_PARAMETERS = m.Call(
    func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
)
#: How far ``opt = SGD(params)`` is followed back through variables.
_DEPTH = 4
_SNIPPET = 60


def extra_values(index: ModuleIndex) -> dict[Key, list[cst.BaseExpression]]:
    """What ``x += value``, ``x.extend(value)`` and ``x.append(value)`` add to ``x``
    (the collector records plain assignments only)."""
    found: dict[Key, list[cst.BaseExpression]] = defaultdict(list)
    for key, nodes in index.augmented.items():
        found[key].extend(node.value for node in nodes)
    for call in index.calls:
        attribute = method_call(call, "extend", "append", "add_param_group")
        if attribute is not None and call.args:
            key = index.key(attribute.value)
            if key is not None:
                found[key].extend(a.value for a in call.args)
    return found


def parameter_calls(
    index: ModuleIndex,
    call: cst.Call,
    extra: dict[Key, list[cst.BaseExpression]],
    seen: set[Key] | None = None,
) -> list[cst.Call]:
    """The ``.parameters()`` calls in an optimizer's arguments, and in the values
    of the variables they name (``seen``, when given, receives those variables)."""
    found: list[cst.Call] = []
    seen = set() if seen is None else seen

    def walk(node: cst.CSTNode, depth: int) -> None:
        for inner in findall(node, _PARAMETERS):
            if inner not in found:
                found.append(inner)  # type: ignore[arg-type]
        if depth >= _DEPTH:
            return
        for name in variable_names(node):
            key = index.key(name)
            if key is None or key in seen:
                continue
            seen.add(key)
            for value in [*index.values.get(key, ()), *extra.get(key, ())]:
                if value is not None:
                    walk(value, depth + 1)

    for inner in findall(call, _PARAMETERS):
        found.append(inner)  # type: ignore[arg-type]
    params = next(
        (
            a.value
            for a in call.args
            if a.keyword is None or a.keyword.value == "params"
        ),
        None,
    )
    if params is not None:
        # a variable, a list of groups, list(a) + list(b), itertools.chain(a, b)...
        walk(params, 0)
    return found


def element_containers(index: ModuleIndex) -> dict[Key, Key]:
    """Variables bound by ``for x in xs``, ``for i, x in enumerate(xs)``,
    ``for x, y in zip(xs, ys)`` (statements and comprehensions), and the variable
    ``xs`` each steps through."""
    found: dict[Key, Key] = {}
    loops: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [
        (loop.target, loop.iter) for loop in index.for_loops
    ]
    loops += [
        (c.target, c.iter)  # type: ignore[attr-defined]
        for c in findall(index.module, m.CompFor())
    ]
    for target, iterable in loops:
        for element, source in _pairs(index, target, iterable):
            element_key, source_key = index.key(element), index.key(source)
            if element_key is not None and source_key is not None:
                found[element_key] = source_key
    return found


def _pairs(
    index: ModuleIndex, target: cst.BaseExpression, iterable: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    if isinstance(iterable, cst.Name) or index.key(iterable) is not None:
        # `for net in nets`, and `for net in self.nets` (a list an instance holds)
        return [(target, iterable)]
    if not isinstance(iterable, cst.Call) or not isinstance(
        target, (cst.Tuple, cst.List)
    ):
        return []
    names = index.qualnames(iterable.func)
    positional = [a.value for a in iterable.args if a.keyword is None and not a.star]
    elements = [e.value for e in target.elements]
    if "builtins.enumerate" in names and len(positional) == 1 and len(elements) == 2:
        return [(elements[1], positional[0])]
    if "builtins.zip" in names and len(positional) == len(elements):
        return list(zip(elements, positional, strict=True))
    return []


def root_key(index: ModuleIndex, expr: cst.BaseExpression) -> Key | None:
    """The variable ``model`` of ``model.encoder`` or ``model[0]`` (a part of it)."""
    while True:
        key = index.key(expr)
        if key is not None or not isinstance(expr, (cst.Attribute, cst.Subscript)):
            return key
        expr = expr.value


def list_items(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """What a list or tuple display (no ``*``) or a list comprehension holds:
    its elements, or its one element expression; [] for anything else."""
    if isinstance(value, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(value, cst.ListComp):
        return [value.elt]
    return []


def list_variables(index: ModuleIndex) -> set[Key]:
    """Variables assigned a list or tuple display or a list comprehension."""
    return {
        key
        for key, values in index.values.items()
        if any(isinstance(v, (cst.List, cst.Tuple, cst.ListComp)) for v in values)
    }


def returns_of(
    index: ModuleIndex, function: cst.FunctionDef
) -> list[cst.BaseExpression | None]:
    """The values ``function`` returns (not those of functions defined in it)."""
    return [
        r.value  # type: ignore[attr-defined]
        for r in findall(function.body, m.Return())
        if index.enclosing_function(r) is function
    ]


def relayed_parameter(
    index: ModuleIndex, function: cst.FunctionDef, position: int, length: int
) -> str | None:
    """The parameter of ``function`` that every ``return`` hands back unchanged
    at ``position`` of a tuple of ``length`` (``return model, best_acc``), or
    None: one its body (nested functions included) never binds or deletes
    again, so the returned object is the one the caller handed in."""
    returns = returns_of(index, function)
    names = {
        (
            r.elements[position].value.value  # type: ignore[attr-defined]
            if isinstance(r, cst.Tuple)
            and len(r.elements) == length
            and not any(isinstance(e, cst.StarredElement) for e in r.elements)
            and isinstance(r.elements[position].value, cst.Name)
            else None
        )
        for r in returns
    }
    name = names.pop() if len(names) == 1 else None
    if name is None:
        return None
    scope, _ = index.function_scope_key(function, name)
    if scope is None or any(
        not isinstance(getattr(a, "node", None), cst.Param) for a in scope[name]
    ):
        return None
    deleted = findall(function.body, m.Del(target=m.Name(name)))
    declared = findall(
        function.body,
        m.Global(names=[m.ZeroOrMore(), m.NameItem(m.Name(name)), m.ZeroOrMore()])
        | m.Nonlocal(names=[m.ZeroOrMore(), m.NameItem(m.Name(name)), m.ZeroOrMore()]),
    )
    return None if deleted or declared else name


def snippet(node: cst.CSTNode) -> str:
    code = " ".join(cst.Module([]).code_for_node(node).split())
    return code if len(code) <= _SNIPPET else code[: _SNIPPET - 3] + "..."


def _self_trained(owner: cst.ClassDef, method: cst.FunctionDef, line: int) -> str:
    """AM004's reason for a model that trains itself: an optimizer built over
    ``self.parameters()`` in a method of the model's own class
    (pytorch/examples' forward-forward ``Layer``: ``self.opt =
    Adam(self.parameters())`` in ``__init__``, stepped in its ``train``)."""
    cls, where = owner.name.value, method.name.value
    return (
        f"the optimizer is built over the parameters of `self`, an instance of "
        f"`{cls}`, in `{cls}.{where}()` (line {line}): the model owns its optimizer, "
        f"and no call in this file hands it a model "
        f"accel-migrate prepares; build the model, then its optimizer, outside "
        f"`{cls}` and wrap them with accel.prepare_model(...) and "
        f"accel.prepare_optimizer(...) there"
    )


def placeholder(value: cst.BaseExpression | None) -> bool:
    """``model = None`` (or another constant) before the real binding: no
    object is built there."""
    return isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)) or (
        isinstance(value, cst.Name) and value.value in {"None", "False", "True"}
    )


def _weak(statement: cst.CSTNode) -> bool:
    """A binding that does not bind the model: a ``with`` item's value (a file,
    a lock) or a placeholder constant."""
    return isinstance(statement, cst.WithItem) or (
        isinstance(statement, (cst.Assign, cst.AnnAssign))
        and placeholder(statement.value)
    )


def reaching_first(
    index: ModuleIndex,
    nodes: list[cst.CSTNode],
    use: cst.CSTNode | None,
    line: Callable[[cst.CSTNode], int],
) -> list[cst.CSTNode]:
    """``nodes`` (bindings of one name: statements or values) ordered so that
    the one that reaches ``use`` (the training use) comes first: a loop whose
    body holds the use, else the latest binding above it, else the first below;
    placeholders and ``with`` items last. Without a use, in line order."""
    enclosing = set(index.ancestors(use)) if use is not None else set()
    here = line(use) if use is not None else 0

    def rank(node: cst.CSTNode) -> tuple[bool, bool, bool, int]:
        weak = _weak(node) or placeholder(node)  # type: ignore[arg-type]
        if use is None:
            return (weak, False, False, line(node))
        above = line(node) <= here
        return (
            weak,
            node not in enclosing,
            not above,
            -line(node) if above else line(node),
        )

    return sorted(nodes, key=rank)


def binding_story(
    index: ModuleIndex,
    key: Key,
    line: Callable[[cst.CSTNode], int],
    use: cst.CSTNode | None = None,
) -> tuple[cst.CSTNode | None, str]:
    """Where ``key`` is bound and a true sentence saying how, when it is not one
    of the plain ``x = <call>`` forms AM004 wraps. ``line``: a node's first line
    in the user's file (positions belong to the rule); ``use``: where the model
    is trained, so that the binding that reaches it is named (not ``model =
    None`` before it, nor a loop over other things)."""
    scope, name = key
    assignments = list(scope[name]) if hasattr(scope, "__getitem__") else []  # type: ignore[index]
    for assignment in assignments:
        if not hasattr(assignment, "node"):
            continue  # a builtin's binding: nothing of the user's file
        node = assignment.node
        if isinstance(assignment, ImportAssignment):
            return node, (
                f"`{name}` comes from an import (`{snippet(node)}`, line {line(node)}), "
                f"so it is built in another file; wrap it with accel.prepare_model(...) "
                f"where it is built, or right after the import (`{name} = accel.prepare_model({name})`)"
            )
        if isinstance(node, cst.Param):
            function = index.enclosing_function(node)
            where = (
                f"`{function.name.value}()`" if function is not None else "a function"
            )
            owner = index.enclosing_class(node) if name == "self" else None
            if owner is not None and function is not None:
                return node, _self_trained(owner, function, line(node))
            return node, (
                f"`{name}` is a parameter of {where} (line {line(node)}) and no call "
                f"in this file passes it a model accel-migrate prepares; wrap the model "
                f"with accel.prepare_model(...) where it is built"
            )
    bindings = [
        found
        for assignment in assignments
        if isinstance(assignment, Assignment) and isinstance(assignment.node, cst.Name)
        for found in [_statement(index, assignment.node)]
        if found is not None
    ]
    # A name bound by `with open(...) as f` and later by `f, buffer = build(...)`
    # (wgrathwohl/JEM's main()): the `with` binds a context manager's value (a
    # file, a lock), not the trained model, so another binding tells the story;
    # so does the one that reaches the training use, not `model = None` above it
    # nor an earlier `for model in ...` over other things. The scope's bindings
    # are a set: the order makes the choice deterministic.
    codes = dict(bindings)
    # A plain `model = create_model(...)` is a form AM004 wraps: where another
    # binding is not (CenterNet's `model, optimizer, start_epoch =
    # load_model(...)` after it), that one is the reason, whatever reaches.
    ordered = reaching_first(index, list(codes), use, line)
    ordered.sort(key=lambda statement: _plain_call(statement, name))
    for statement in ordered:
        code = codes[statement]
        return statement, (
            f"`{name}` is bound in this file at line {line(statement)} in a form "
            f"accel-migrate cannot wrap (`{code}`); wrap the model "
            f"with accel.prepare_model(...) where it is built"
        )
    return None, (
        f"`{name}` is trained but accel-migrate cannot find where it is built; wrap "
        f"the model with accel.prepare_model(...) where it is built"
    )


def _plain_call(statement: cst.CSTNode, name: str) -> bool:
    """Is ``statement`` ``name = <call>``, the form AM004 wraps?"""
    return (
        isinstance(statement, cst.Assign)
        and len(statement.targets) == 1
        and m.matches(statement.targets[0].target, m.Name(name))
        and isinstance(statement.value, cst.Call)
    )


def _statement(index: ModuleIndex, node: cst.CSTNode) -> tuple[cst.CSTNode, str] | None:
    """The assignment, ``for`` or ``with`` that binds ``node``, and its code (a
    loop's header only)."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.CompFor)):
            code = f"for {snippet(ancestor.target)} in {snippet(ancestor.iter)}"
            return ancestor, code
        if isinstance(
            ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.WithItem)
        ):
            return ancestor, snippet(ancestor)
        if isinstance(ancestor, cst.BaseStatement):
            return ancestor, snippet(node)
    return None
