"""Callbacks a trainer class runs once per training step, on every process.

minGPT's ``Trainer`` (``mingpt/trainer.py``) keeps the functions its caller
registers (``add_callback(onevent, callback)``: ``self.callbacks[onevent].append(
callback)``) and runs them with the instance (``trigger_callbacks``: ``for
callback in self.callbacks.get(onevent, []): callback(self)``), called in the
loop of ``run`` right after ``self.loss.backward()``. A callback the caller
registers there reads ``trainer.loss`` after that step's backward, on every
process that trains: ``accel.global_loss(trainer.loss)`` is a collective each
of them reaches at the same step (``HelperFact.step_callbacks``; the caller's
side is ``handed_losses``).

``step_callbacks`` shows it or finds nothing:

- a registering method only stores one of its parameters on the instance
  (``self.A[...].append(p)``, ``self.A.append(p)``, ``self.A[k] = [p]``,
  ``self.A = p``), and nothing else of the class reads or writes ``self.A``
  but ``__init__`` (setting it up), other such registering methods (minGPT's
  ``set_callback(onevent, callback)``: ``self.callbacks[onevent] = [callback]``,
  beside ``add_callback``) and one running method;
- the running method only loops over ``self.A`` (or what it holds) calling each
  with ``self`` alone (``cb(self)``), at its top level, or calls ``self.A(self)``;
- the running method is called exactly once in the class: as a statement of the
  body of the loop whose body holds the backward statement, after it, with no
  ``break``, ``continue`` or ``return`` between the two.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def step_callbacks(cls: ast.ClassDef) -> tuple[tuple[str, str, int], ...]:
    """(method, parameter, position after ``self``; -1: keyword only) of each
    method of ``cls`` whose parameter is a callback run once per training step,
    after the backward, with the instance (see the module docstring)."""
    methods = {m.name: m for m in cls.body if isinstance(m, _Function)}
    found: list[tuple[str, str, int]] = []
    for method in methods.values():
        stored = _registers(method)
        if stored is None:
            continue
        parameter, attribute = stored
        runner = _runner(methods, attribute, method.name)
        if runner is None or not _after_backward(methods, runner):
            continue
        positional = [a.arg for a in [*method.args.posonlyargs, *method.args.args][1:]]
        position = positional.index(parameter) if parameter in positional else -1
        found.append((method.name, parameter, position))
    return tuple(sorted(found))


def _self_root(expr: ast.expr) -> str | None:
    """``A`` of ``self.A``, ``self.A[k]``, ``self.A.get(k, [])``."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in ("get", "values")
        ):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self":
                return expr.attr
            expr = expr.value
        else:
            return None


def _registers(method: _Function) -> tuple[str, str] | None:
    """(parameter, attribute) when all ``method`` does is store one parameter
    on the instance."""
    names = {a.arg for a in [*method.args.posonlyargs, *method.args.args][1:]}
    names |= {a.arg for a in method.args.kwonlyargs}
    body = [
        s
        for s in method.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) != 1:
        return None
    statement = body[0]
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
        and statement.value.func.attr == "append"
        and len(statement.value.args) == 1
        and not statement.value.keywords
    ):
        value: ast.expr = statement.value.args[0]
        attribute = _self_root(statement.value.func.value)
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        value = statement.value
        if isinstance(value, ast.List) and len(value.elts) == 1:
            value = value.elts[0]
        attribute = _self_root(statement.targets[0])
    else:
        return None
    if isinstance(value, ast.Name) and value.id in names and attribute is not None:
        return value.id, attribute
    return None


def _runner(
    methods: dict[str, _Function], attribute: str, registrar: str
) -> str | None:
    """The one method that runs what ``self.<attribute>`` holds, each with
    ``self`` alone; None when another method also touches it."""
    runners: set[str] = set()
    for name, method in methods.items():
        uses = [
            n
            for n in ast.walk(method)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            and n.attr == attribute
        ]
        if not uses or name in (registrar, "__init__"):
            continue
        stored = _registers(method)
        if stored is not None and stored[1] == attribute:
            # another registering method (minGPT's `set_callback` beside
            # `add_callback`): it only stores a callback there too
            continue
        if not _only_runs(method, attribute):
            return None
        runners.add(name)
    return runners.pop() if len(runners) == 1 else None


def _only_runs(method: _Function, attribute: str) -> bool:
    """Every use of ``self.<attribute>`` in ``method`` is a top-level
    ``for cb in <it>: cb(self)`` or ``self.<attribute>(self)``."""
    for statement in method.body:
        if isinstance(statement, ast.For):
            if _self_root(statement.iter) != attribute:
                continue
            target = statement.target
            if not (
                isinstance(target, ast.Name)
                and not statement.orelse
                and len(statement.body) == 1
                and _calls_with_self(statement.body[0], target.id)
            ):
                return False
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if _self_root(func) == attribute and not _calls_with_self(
                statement, None, attribute
            ):
                return False
    uses = sum(
        1
        for n in ast.walk(method)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and n.attr == attribute
    )
    shown = sum(
        1
        for s in method.body
        if (isinstance(s, ast.For) and _self_root(s.iter) == attribute)
        or (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and _self_root(s.value.func) == attribute
        )
    )
    return uses == shown


def _calls_with_self(
    statement: ast.stmt, name: str | None, attribute: str | None = None
) -> bool:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    call = statement.value
    func = call.func
    if name is not None:
        right = isinstance(func, ast.Name) and func.id == name
    else:
        right = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr == attribute
        )
    return (
        right
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == "self"
        and not call.keywords
    )


def _after_backward(methods: dict[str, _Function], runner: str) -> bool:
    """``self.<runner>(...)`` is called once in the class, in the body of the
    loop that holds the backward statement, after it, nothing in between
    leaving the step."""
    calls = [
        (method, node)
        for method in methods.values()
        for node in ast.walk(method)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr == runner
    ]
    if len(calls) != 1:
        return False
    method, _ = calls[0]
    for loop in ast.walk(method):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        body = loop.body
        backward = next((i for i, s in enumerate(body) if _is_backward(s)), None)
        run = next((i for i, s in enumerate(body) if _runs(s, runner)), None)
        if backward is None or run is None or run < backward:
            continue
        between = body[backward + 1 : run]
        return not any(
            isinstance(n, (ast.Break, ast.Continue, ast.Return))
            for s in between
            for n in ast.walk(s)
        )
    return False


def _is_backward(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
        and statement.value.func.attr == "backward"
    )


def _runs(statement: ast.stmt, runner: str) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
        and isinstance(statement.value.func.value, ast.Name)
        and statement.value.func.value.id == "self"
        and statement.value.func.attr == runner
    )
