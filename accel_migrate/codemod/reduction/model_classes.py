"""The local model class a called model is an instance of, for the loss its
``forward`` returns (``forward``).

``logits, loss = model(x, y)`` runs ``type(model).forward``. ``model`` is traced
back to where it is built, through:

- its assignments (``model = GPT(cfg)``, ``model = get_model(cfg)``: a factory
  of one class, ``HelperFact.model_class``), also through ``.to(device)`` and
  ``accel.prepare_model(...)``;
- a parameter of a function of the file, to the argument every call of the
  function passes for it (``def train(model, ...)`` called as ``train(model,
  ...)``): every call must pass one, and the function must not be used as a
  value (handed to a thread, a callback), where calls the file does not show
  may pass another model;
- ``self.model`` of a class, to every value assigned to it in the class's methods
  (``self.model = model`` in ``__init__``, then the argument of every
  ``Trainer(model, ...)`` of the file).

Every way must reach a construction of the same local model class. Where one
does not (``getattr(models, args.arch)(...)``, ``torch.load(path)``, a model of a
library, a function called from another file), the class is not known and the
reason says why: a loss that ``forward`` returns then has a reduction the
analysis cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import libcst as cst
import libcst.matchers as m

from .. import python_ast
from ..constructor_methods import constructed_class
from ..patterns import prepared_models
from ..subtrees import findall
from .placement import code

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex
    from ..project_facts import HelperFact

#: Calls that hand back the model they are given.
_SAME_MODEL = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half"})
_DEPTH = 8


@dataclass(frozen=True)
class CalledModel:
    """What ``model(...)`` runs: ``fact``, the local model class (None when not
    known), or ``why`` it is not known."""

    fact: HelperFact | None = None
    why: str = ""


def called_model(index: ModuleIndex, call: cst.BaseExpression) -> CalledModel | None:
    """The class of the model ``call`` calls; None when ``call`` is not shown to
    be a call of a model (it is not a prepared model, nor built as one)."""
    if not isinstance(call, cst.Call):
        return None
    origins = _Tracer(index).origins(call.func, frozenset(), 0)
    model = index.key(call.func) in prepared_models(index)
    if isinstance(origins, str):
        return CalledModel(why=origins) if model else None
    classes: set[HelperFact] = set()
    for origin in origins:
        if not isinstance(origin, cst.Call):
            classes.add(origin)  # the class the batch's callers hand an instance of
            continue
        fact = (
            index.helper(origin.func, "model")
            or own_model(index, origin.func)
            or constructed_class(index, origin.func)
        )
        built = fact if fact is None or fact.kind == "class" else fact.model_class
        if built is None:
            if not model and fact is None:
                return None
            return CalledModel(why=_unknown_class(origin, fact))
        classes.add(built)
    if not classes:
        return (
            CalledModel(
                why=f"`{code(call.func)}` is not assigned a model the analysis follows"
            )
            if model
            else None
        )
    if len(classes) > 1:
        names = ", ".join(sorted(f"`{c.name}`" for c in classes))
        return CalledModel(
            why=f"`{code(call.func)}` may be a model of several classes ({names})"
        )
    return CalledModel(classes.pop())


def model_class_of(index: ModuleIndex, expr: cst.BaseExpression) -> HelperFact | None:
    """The one local model class every value of ``expr`` is traced to (as for
    ``called_model``); None where that is not one known class."""
    origins = _Tracer(index).origins(expr, frozenset(), 0)
    if isinstance(origins, str) or not origins:
        return None
    classes: set[HelperFact] = set()
    for origin in origins:
        if not isinstance(origin, cst.Call):
            classes.add(origin)
            continue
        fact = index.helper(origin.func, "model") or constructed_class(
            index, origin.func
        )
        built = fact if fact is None or fact.kind == "class" else fact.model_class
        if built is None:
            return None
        classes.add(built)
    return classes.pop() if len(classes) == 1 else None


def _unknown_class(origin: cst.Call, fact: HelperFact | None) -> str:
    if fact is not None:
        return f"it is built by {fact.where}, which builds no one known model class"
    return f"it is built by `{code(origin)}`"


class _Tracer:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    def origins(
        self, expr: cst.BaseExpression, seen: frozenset[Key], depth: int
    ) -> list[cst.Call | HelperFact] | str:
        """The calls that build what ``expr`` holds, or why they cannot be told."""
        index = self.index
        while isinstance(expr, cst.Call):
            if (
                isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value in _SAME_MODEL
            ):
                expr = expr.func.value
            elif index.is_runtime_call(expr, "prepare_model") and expr.args:
                expr = expr.args[0].value
            else:
                return [expr]
        key = index.key(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if key is None:
            return f"`{code(expr)}` is not a variable the analysis follows"
        if key in seen:
            return []  # `model = model.to(device)`: its other values decide
        if depth > _DEPTH:
            return f"`{code(expr)}` is passed on too many times to follow"
        seen = seen | {key}
        found: list[cst.Call | HelperFact] = []
        parameter = self._parameter(key)
        values = index.values.get(key, [])
        if parameter is not None:
            passed = self._passed(parameter, key, expr, seen, depth)
            if isinstance(passed, str):
                return passed
            found += passed
        elif not values:
            return f"`{code(expr)}` is not assigned in this file"
        for value in values:
            if value is None:
                return f"`{code(expr)}` is unpacked from a value the analysis does not see into"
            inner = self.origins(value, seen, depth + 1)
            if isinstance(inner, str):
                return inner
            found += inner
        return found

    def _parameter(self, key: Key) -> cst.FunctionDef | None:
        """The function of the file whose parameter ``key`` is."""
        for function in self.index.functions:
            params = function.params
            for param in (
                *params.posonly_params,
                *params.params,
                *params.kwonly_params,
            ):
                if param.name.value == key[1] and (
                    self.index.function_scope_key(function, key[1]) == key
                ):
                    return function
        return None

    def _passed(
        self,
        function: cst.FunctionDef,
        key: Key,
        expr: cst.BaseExpression,
        seen: frozenset[Key],
        depth: int,
    ) -> list[cst.Call | HelperFact] | str:
        """What every call of ``function`` passes for its parameter ``key``
        (with no call in this file: the class of the model every call from the
        batch's other files hands it, ``project_callers``)."""
        index = self.index
        name, where = key[1], f"`{function.name.value}`"
        calls = index.call_sites(function)
        if not calls:
            from ..project_callers import caller_model_class

            handed = caller_model_class(index, key)
            if handed is not None:
                return [handed]  # every batch call hands an instance of it
            return f"`{name}` is a parameter of {where}, which no call of this file is shown to run"
        if self._used_as_value(function, calls):
            return (
                f"`{name}` is a parameter of {where}, which is also used as a value "
                "(calls the file does not show may pass another model)"
            )
        found: list[cst.Call | HelperFact] = []
        for call in calls:
            passed = [arg for k, arg in index.arguments(call) if k == key]
            if not passed:
                return f"a call of {where} does not pass `{name}` (its default, or `*args`)"
            inner = self.origins(passed[0], seen, depth + 1)
            if isinstance(inner, str):
                return inner
            found += inner
        return found

    def _used_as_value(self, function: cst.FunctionDef, calls: list[cst.Call]) -> bool:
        """Is ``function`` (for ``__init__``: its class) named anywhere but as the
        callee of ``calls`` (handed to ``Thread(target=train)``, stored, called on
        an instance as ``trainer.fit(model)``, which ``calls`` do not hold)?"""
        index = self.index
        cls = index.enclosing_class(function.body)
        constructor = cls is not None and function.name.value == "__init__"
        name = cls.name.value if constructor else function.name.value  # type: ignore[union-attr]
        callees = {
            id(c.func.attr if isinstance(c.func, cst.Attribute) else c.func)
            for c in calls
        }
        defined = cls.name if constructor else function.name  # type: ignore[union-attr]
        for node in findall(index.module, m.Name(name)):
            if node is defined or id(node) in callees:
                continue
            parent = index.parent(node)
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue  # `IMBALANCECIFAR10(..., train=True)`: a keyword's name
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr is node
                and (cls is None or constructor)
            ):
                continue  # `model.train()` does not name the function `train`
            return True
        return False


def own_model(index: ModuleIndex, func: cst.BaseExpression) -> HelperFact | None:
    """The fact of a model class (or a factory of one) this file defines at its
    top level, read as the project view reads another file's (``project_helpers``);
    None for anything else."""
    if not isinstance(func, cst.Name) or not (
        index.local_class(func) or index.local_function(func)
    ):
        return None
    facts = _OWN.get(index)
    if facts is None:
        facts = _OWN[index] = {}
    if func.value not in facts:
        facts[func.value] = _read_own(index, func.value)
    return facts[func.value]


def _read_own(index: ModuleIndex, name: str) -> HelperFact | None:
    from ..project_helpers import HelperFacts  # it imports the reduction rules
    from ..project_view import ProjectView

    try:
        tree = python_ast.parse(index.code)
    except (SyntaxError, ValueError, RecursionError):
        return None
    view = ProjectView()
    view._scan(_OWN_FILE, (), tree)
    fact = HelperFacts(view, (_OWN_FILE, name), (), _OWN_FILE, 0).result()
    if fact is None or fact.returns != "model":
        return None
    own = fact.model_class if fact.kind == "function" else fact
    own = replace(own, file="this file") if own is not None else None
    return (
        replace(fact, file="this file", model_class=own)
        if fact.kind == "function"
        else own
    )


#: The name the file's own facts are read under (no file on disk is opened).
_OWN_FILE = "<this file>"
#: Per module index: its top-level model classes and factories, by name.
_OWN: WeakKeyDictionary[ModuleIndex, dict[str, HelperFact | None]] = WeakKeyDictionary()
