"""What AM004 (``prepare_model``) counts as a model built in a file: the
constructions it wraps (a module class of this file, a ``torch.nn`` layer, a
model factory, a model class's class method), the variables holding them
(``models``: moved to the device or trained by an optimizer), the ones built
right in a call's arguments (``model_arguments``), and which values build a new
object rather than change the variable's own (``_fresh``).

A mixin of the rule, as ``AllOrNothing``, ``OptimizedModels`` and
``PreparedChecks`` are: it reads the rule's ``index``, ``qualnames``,
``optimized``, ``plain_holders``, ``handed_constructions``, ``original_line``
and metadata.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from .analysis import Key, method_call
from .constructor_methods import constructed_class
from .model_rewraps import follows_every_build, rewraps
from .names import (
    MODEL_FACTORY_PREFIXES,
    MODULE_BASES,
    SAME_OBJECT,
    is_nn_module_constructor,
    is_optimizer_class,
)
from .optimizer_lookups import looked_up_optimizer
from .optimizer_subclasses import local_optimizer_classes
from .patterns import strip_methods
from .scopes import ImportAssignment, ScopeProvider
from .subtrees import findall


class ModelBuilds:
    """AM004's facts on where models are built and which variables hold them."""

    @cached_property
    def module_classes(self) -> set[cst.ClassDef]:
        return self.index.local_subclasses(MODULE_BASES)

    @cached_property
    def optimizer_classes(self) -> set[cst.ClassDef]:
        return local_optimizer_classes(self.index)

    def is_optimizer_call(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Call):
            return False
        if self.index.local_class(node.func) in self.optimizer_classes:
            return True
        helper = self.index.helper(node.func)
        if helper is not None and helper.optimizer_subclass:
            return True  # a local module's torch.optim.Optimizer subclass (SAM)
        if looked_up_optimizer(self.index, node):
            return True  # `OPTIMIZERS[args.opt](model.parameters())`
        return any(is_optimizer_class(q) for q in self.qualnames(node.func))

    def _core(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        return strip_methods(expr, SAME_OBJECT)

    def _branches(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The values ``a if cond else b`` may take (``build().cuda() if
        torch.cuda.is_available() else build()``), or ``expr`` itself."""
        core = self._core(expr)
        if isinstance(core, cst.IfExp):
            return [*self._branches(core.body), *self._branches(core.orelse)]
        return [expr]

    def _builds_module(self, expr: cst.BaseExpression) -> bool:
        return any(self._builds_one(b) for b in self._branches(expr))

    def _builds_one(self, expr: cst.BaseExpression) -> bool:
        core = self._core(expr)
        if not isinstance(core, cst.Call):
            return False
        if self.index.local_class(core.func) in self.module_classes:
            return True
        if self.index.helper(core.func, "model") is not None:
            return True  # `get_network(args)` of a local module (the project view)
        if constructed_class(self.index, core.func) is not None:
            # `GPT.from_pretrained(config)`: a model class's class method that
            # hands back a new instance (constructor_methods)
            return True
        return any(
            is_nn_module_constructor(q) or q.startswith(MODEL_FACTORY_PREFIXES)
            for q in self.qualnames(core.func)
        )

    def _fresh(self, key: Key, value: cst.BaseExpression | None) -> bool:
        """A value that builds a new object rather than changing the variable's own."""
        if value is None:
            return False
        for branch in self._branches(value):
            core = self._core(branch)
            if not isinstance(core, cst.Call) or self.index.is_runtime_call(
                core, "prepare_model"
            ):
                return False
        if self._rewraps(key, value):
            return True  # `student = Wrapper(student, Head())` (model_rewraps)
        return self._anew(key, value)

    def _anew(self, key: Key, value: cst.BaseExpression | None) -> bool:
        """Does ``value`` not read the variable it binds?"""
        return value is not None and not any(
            self.index.key(n) == key and not self._reads_import(n)
            for n in findall(value, m.Name() | m.Attribute())
        )

    def _rewraps(self, key: Key, value: cst.BaseExpression | None) -> bool:
        return (
            key in self.optimized
            and value is not None
            and rewraps(self.index, key, value, self._core(value), self._builds_one)
            and follows_every_build(
                self.index, key, value, lambda v: self._anew(key, v), self._line  # type: ignore[arg-type]
            )
        )

    def _line(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    def _reads_import(self, node: cst.CSTNode) -> bool:
        """``model`` in ``model = model.mnist()`` after ``import model``: a name
        that, where it is read, is bound only by imports so far (the model shadows
        the module it is built from)."""
        if not isinstance(node, cst.Name):
            return False
        scope = self.get_metadata(ScopeProvider, node, None)
        if scope is None:
            return False
        here = self._line(node)
        earlier = [
            a
            for a in scope[node.value]
            if a.node is not None
            and self.get_metadata(PositionProvider, a.node, None) is not None
            and self._line(a.node) < here
        ]
        return bool(earlier) and all(isinstance(a, ImportAssignment) for a in earlier)

    @cached_property
    def model_arguments(self) -> dict[cst.BaseExpression, Key]:
        """Models built right in the arguments of a call to a function or class of
        this file (``Trainer(Net(), data)``), and the parameter each one binds."""
        found: dict[cst.BaseExpression, Key] = {}
        for call in self.index.calls:
            if self.index.local_class(call.func) in self.module_classes:
                continue  # a layer given to a module's constructor, not a model
            for key, value in self.index.arguments(call):
                core = self._core(value)
                if (
                    isinstance(core, cst.Call)
                    and not self.index.is_runtime_call(core, "prepare_model")
                    and key in self.optimized
                ):
                    found[value] = key
        # `Trainer(Net(), ...)` of a batch trainer class of another file
        found.update(self.handed_constructions(self._core))
        return found

    @cached_property
    def moved(self) -> set[Key]:
        """Variables moved to a device (``x.to(...)``, in a statement or in their value)."""
        keys: set[Key] = set()
        for call in self.index.calls:
            attribute = method_call(call, "to", "cuda")
            if attribute is not None:
                key = self.index.key(attribute.value)
                if key is not None:
                    keys.add(key)
        for key, values in self.index.values.items():
            if any(
                v is not None
                and findall(
                    v, m.Call(func=m.Attribute(attr=m.Name("to") | m.Name("cuda")))
                )
                for v in values
            ):
                keys.add(key)
        return self.index.flows_into(keys, SAME_OBJECT)

    @cached_property
    def models(self) -> set[Key]:
        models = set()
        for key, values in self.index.values.items():
            if isinstance(key[0], cst.ClassDef) and key[0] in self.module_classes:
                continue  # a layer of a module, not a model
            if key in self.plain_holders:
                continue  # `Model(object)` holding the trained modules (blocked)
            fresh = [v for v in values if self._fresh(key, v)]
            if not fresh:
                continue
            builds = any(self._builds_module(v) for v in fresh if v is not None)
            if key not in self.optimized and all(
                self._parameterless(v) for v in fresh if v is not None
            ):
                continue  # `DINOLoss(...).to(device)`: buffers only, nothing to sync
            if (
                builds and (key in self.moved or key in self.optimized)
            ) or key in self.optimized:
                models.add(key)
        return models

    def _parameterless(self, value: cst.BaseExpression) -> bool:
        """Does ``value`` build an instance of a class of this file that holds
        no parameter (``parameterless_modules``)?"""
        core = self._core(value)
        if not isinstance(core, cst.Call):
            return False
        return self.index.local_class(core.func) in self.index.parameterless_classes
