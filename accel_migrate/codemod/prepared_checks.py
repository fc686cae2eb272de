"""Whether a model is, or will be, prepared: the part of AM004 (``prepare_model``)
that answers it for a variable, a factory call, a class and the values of a
conditional expression.

A mixin of the rule, as ``AllOrNothing`` and ``OptimizedModels`` are: it reads
the rule's ``index``, ``models``, ``model_arguments``, ``_core``, ``_branches``
and ``_caller_prepared``, and ``OptimizedModels``' ``elements``,
``_container_state`` and ``_constructs``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from .analysis import Key
from .index_syntax import bind_arguments
from .names import SAME_OBJECT
from .project_callers import given_by_callers
from .shadowed_modules import shadowed_module
from .trained_models import relayed_parameter, returns_of


class PreparedChecks:
    """AM004's questions of whether a model is, or will be, prepared."""

    def _prepared_by_factory(self, value: cst.BaseExpression | None) -> bool:
        """``get_model()``, a function of this file each of whose ``return``s hands
        back a model this rule prepares there: wrapping the call too would say it
        twice."""
        core = self._core(value) if value is not None else None
        if not isinstance(core, cst.Call) or self.index.local_class(core.func):
            return False
        function = self.index.local_function(core.func)
        if function is None:
            return False
        returns = returns_of(self.index, function)
        return bool(returns) and all(
            r is not None
            and all(self._prepared_expr(self._core(b)) for b in self._branches(r))
            for r in returns
        )

    def _prepared_expr(self, core: cst.BaseExpression) -> bool:
        if self.index.is_runtime_call(core, "prepare_model"):
            return True
        key = self.index.key(core)
        return key is not None and key in (self.models | self.prepared)

    @cached_property
    def prepared(self) -> set[Key]:
        """Variables already holding a prepared model (a second run over the file)."""
        return self.index.tagged(
            lambda e: self.index.is_runtime_call(self._core(e), "prepare_model"),
            SAME_OBJECT,
        )

    def _is_prepared(self, key: Key) -> bool:
        """The variable is, or receives its value from, a model this rule prepares
        (here, in a factory function of this file, or as an element of a list)."""
        sources = self.index.flows_into({key}, SAME_OBJECT)
        if any(
            v is not None and shadowed_module(self, s, v, self._line)  # type: ignore[arg-type]
            for s in sources
            for v in self.index.values.get(s, [])
        ):
            # `model = model.RNNModel(...)` after `import model`, with a
            # `global model` assignment above it: not known to be the module's
            # class, nor a change of a prepared model (``shadowed_modules``)
            return False
        if any(self._unpacked_unprepared(s) for s in sources & self.models):
            # `model, criterion = set_model(opt)` then, later in the function,
            # `model = SupConResNet(...)` (SupContrast's second stage): only the
            # second binding is wrapped; the loop of the first trains the
            # unpacked model unprepared
            return False
        if sources & (self.models | self.prepared | set(self.model_arguments.values())):
            return True
        for source in sources:
            # `for model, opt in zip(self.members, ...)`: `self.train_member(model,
            # opt)`: an element of a list this rule wraps item by item
            container = self.elements.get(source)
            if container is not None and self._container_state(container) in {
                "wrap",
                "prepared",
            }:
                return True
        given = given_by_callers(self.index, "model")
        for source in sources:
            if source in given:
                # the batch's callers build it, and their AM004 prepares it there
                self._caller_prepared.setdefault(source, given[source])
                return True
        if any(self._unpacked_prepared(source) for source in sources):
            return True
        return any(
            self._prepared_by_factory(v) or self._branches_prepared(v)
            for source in sources
            for v in self.index.values.get(source, [])
            if v is not None
        )

    def _unpacked_prepared(self, key: Key) -> bool:
        """Every binding of ``key`` unpacks item i of a call of a function of this
        file whose every ``return`` is a tuple with a prepared model at i
        (SupContrast's ``model, criterion = set_model(opt)`` once ``set_model``
        builds ``model = accel.prepare_model(SupConResNet(...))``)."""
        values = self.index.values.get(key, ())
        unpacked = self.index.unpacked.get(key, ())
        if not unpacked or any(v is not None for v in values):
            return False
        for value, position, length in unpacked:
            if not self._item_prepared(value, position, length):
                return False
        return True

    def _unpacked_unprepared(self, key: Key) -> bool:
        """``key`` is a model this rule wraps where it is built, but another of
        its bindings unpacks it from a call (``model, criterion =
        set_model(opt)``) that no wrap reaches: the key is only partly prepared."""
        if None not in self.index.values.get(key, ()):
            return False
        return any(
            isinstance(value, cst.Call)
            and not self.index.is_runtime_call(value, "prepare_model")
            and not self._item_prepared(value, position, length)
            and not self._relays_prepared(value, position, length)
            for value, position, length in self.index.unpacked.get(key, ())
        )

    def _relays_prepared(self, call: cst.Call, position: int, length: int) -> bool:
        """``call`` is a project helper that hands back, unchanged at item
        ``position``, the parameter it is given a model this rule prepares for
        (DKT's ``model, optimizer = eval.train(loaders, model, optimizer, f)``):
        the item is the prepared model itself."""
        fact = self.index.helper(call.func)
        if fact is None:
            # a function of this file: `model, best = train_model(model, ...)`
            return self._relays_local(call, position, length)
        if len(fact.relayed) != length:
            return False
        index, name = fact.relayed[position]
        if not name:
            return False
        handed = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return False
        argument = next(
            (a.value for a in call.args if a.keyword and a.keyword.value == name),
            handed[index].value if 0 <= index < len(handed) else None,
        )
        key = self.index.key(self._core(argument)) if argument is not None else None
        return key is not None and key in (self.models | self.prepared)

    def _relays_local(self, call: cst.Call, position: int, length: int) -> bool:
        """``call`` runs a function of this file whose every ``return`` is a
        tuple of ``length`` with, at ``position``, one parameter its body never
        binds again (``return model, best_acc``), and the call hands that
        parameter a model this rule prepares: the item is that model."""
        target = self.index.callee(call)
        if target is None or any(a.star for a in call.args):
            return False
        function, bound = target
        name = relayed_parameter(self.index, function, position, length)
        argument = dict(bind_arguments(function, bound, call)).get(name or "")
        key = self.index.key(self._core(argument)) if argument is not None else None
        return key is not None and key in (self.models | self.prepared)

    def _item_prepared(
        self, value: cst.BaseExpression, position: int, length: int
    ) -> bool:
        """``value`` calls a function of this file whose every ``return`` is a
        tuple of ``length`` with a prepared model at ``position``."""
        function = (
            self.index.local_function(value.func)
            if isinstance(value, cst.Call) and not self.index.local_class(value.func)
            else None
        )
        if function is None:
            return False
        returns = returns_of(self.index, function)
        return bool(returns) and all(
            isinstance(r, cst.Tuple)
            and len(r.elements) == length
            and not any(isinstance(e, cst.StarredElement) for e in r.elements)
            and self._prepared_expr(self._core(r.elements[position].value))
            for r in returns
        )

    def _branches_prepared(self, value: cst.BaseExpression) -> bool:
        return all(
            self.index.is_runtime_call(self._core(b), "prepare_model")
            for b in self._branches(value)
        )

    def _class_is_prepared(self, cls: cst.ClassDef) -> bool:
        """An instance of ``cls`` is, or will be, wrapped by ``accel.prepare_model``."""
        built = [v for key in self.models for v in self.index.values.get(key, ())]
        built += self.model_arguments
        built += [
            call
            for call in self.index.calls
            if self.index.is_runtime_call(call, "prepare_model")
        ]
        return any(self._constructs(expr, cls) for expr in built)
