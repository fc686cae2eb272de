"""Which models an optimizer trains: the part of AM004 (``prepare_model``) that
reads the optimizers of a file.

- ``optimized``: the variables whose parameters an optimizer receives
  (``SGD(model.parameters())``, through variables and ``+=``, and
  ``opt.add_param_group({"params": criterion.parameters()})``), those built from a
  module class whose own method hands its ``self.parameters()`` to an optimizer,
  those that ``model.configure_optimizers(...)`` is called on, and those handed
  to a local module's optimizer factory (``build_optimizer(cfg, model)``,
  ``optimizer_helpers``).
- ``trained_containers`` and ``model_containers``: lists of models whose elements
  an optimizer trains (``for net in nets: SGD(net.parameters())``), and those of
  them the rule can wrap element by element.

A mixin of the rule, as ``AllOrNothing`` is: it reads the rule's ``index``,
``module_classes``, ``is_optimizer_call``, ``_fresh`` and ``_builds_module``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex, method_call
from .helper_effects import model_method, optimizer_method
from .names import SAME_OBJECT
from .optimizer_helpers import factory_model
from .param_group_helpers import grouped_argument, params_values
from .patterns import argument, strip_methods
from .subtrees import findall
from .trained_models import (
    element_containers,
    extra_values,
    list_items,
    list_variables,
    parameter_calls,
    returns_of,
    root_key,
    snippet,
)

#: Methods of a variable that feeds an optimizer that ``parameter_calls``
#: follows (what they add) or that only read it.
_FOLLOWED_OR_READ = frozenset(
    {
        *("append", "add", "extend"),
        *("keys", "values", "items", "get", "copy", "index", "count"),
        *("pop", "remove", "discard", "clear"),
        *("union", "intersection", "difference", "symmetric_difference"),
    }
)
#: Builtins that read a container handed to them (``sorted(list(decay))``).
_READING_BUILTINS = frozenset(
    f"builtins.{name}"
    for name in (
        *("sorted", "list", "set", "frozenset", "tuple", "dict", "len", "iter"),
        *("enumerate", "zip", "str", "repr", "any", "all", "sum", "min", "max"),
        *("isinstance", "print", "reversed"),
    )
)


class OptimizedModels:
    """AM004's reading of the optimizers: which variables and lists hold models
    whose parameters are trained."""

    def _owner_class(self, receiver: cst.BaseExpression) -> cst.ClassDef | None:
        """The module class of this file whose method reads ``self.parameters()``
        (or ``self.encoder.parameters()``): its instances are what is trained."""
        root = receiver
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value == "self":
            cls = self.index.enclosing_class(root)
            if cls in self.module_classes:
                return cls
        return None

    def _handed_to_callers(self, call: cst.Call, owner: cst.ClassDef) -> str | None:
        """Is the optimizer ``call`` built in a method of ``owner`` that only hands
        it back (minGPT's ``configure_optimizers``: every return is the
        optimizer, itself or through a variable bound to it alone), over
        ``owner``'s own parameters only (every ``.parameters()`` /
        ``.named_parameters()`` reaching it is ``self``'s or a part's of
        ``self``: through loops over them, ``decay.append(p)``, or a dict of
        them by name, ``param_dict[pn]``), and with that method called nowhere
        in this file? Then the model it trains is the one the method is called
        on, in the files that call it: there ``model.configure_optimizers(...)``
        is an optimizer over ``model``'s parameters (``optimizer_method``), and
        that model is prepared where it is built, not in this file.

        "" when it is; None when the method is not one that only hands the
        optimizer back, uncalled here; otherwise why its parameters cannot be
        shown to be ``self``'s only (a clause for AM004's message)."""
        method = self.index.enclosing_function(call)
        if method is None or self.index.enclosing_class(call) is not owner:
            return None
        returns = returns_of(self.index, method)
        if not returns or not all(self._is_value(r, call) for r in returns):
            return None
        # called here (`self.configure_optimizers()` in a `fit` of the class, or
        # on an instance of this file): this file trains it, as the rule reads
        if findall(self.index.module, m.Attribute(attr=m.Name(method.name.value))):
            return None
        feeding: set[Key] = set()
        inner = parameter_calls(self.index, call, self.extra_values, feeding)
        foreign = next(
            (
                c
                for c in inner
                if self._owner_class(c.func.value) is not owner  # type: ignore[attr-defined]
            ),
            None,
        )
        if foreign is not None:
            return (
                f"`{snippet(foreign)}` (line {self._line(foreign)}) is not "  # type: ignore[attr-defined]
                "a part of `self`"
            )
        changed = self._changed_unseen(method, feeding)
        if changed is not None:
            return (
                f"`{snippet(changed)}` (line {self._line(changed)}) changes "  # type: ignore[attr-defined]
                "what it is built from in a way accel-migrate does not follow"
            )
        return ""

    def _changed_unseen(
        self, method: cst.FunctionDef, keys: set[Key]
    ) -> cst.CSTNode | None:
        """Where a container that feeds the optimizer (a list, set or dict: its
        groups, ``decay``, ``param_dict``) is changed in ``method`` in a way
        ``parameter_calls`` does not follow: ``param_dict.update(...)``,
        ``param_dict[k] = v``, or handed to a function that may fill it.
        ``append``, ``add`` and ``extend`` are followed (``extra_values``);
        reads and removals add nothing."""
        containers = {
            k
            for k in keys
            if any(self._container_value(v) for v in self.index.values.get(k, ()))
        }
        if not containers:
            return None
        for node in findall(method, m.Call()):
            func = node.func  # type: ignore[attr-defined]
            if (
                isinstance(func, cst.Attribute)
                and self.index.key(func.value) in containers
                and func.attr.value not in _FOLLOWED_OR_READ
            ):
                return node
            handed = any(
                self.index.key(a.value) in containers
                for a in node.args  # type: ignore[attr-defined]
            )
            if (
                handed
                and not self.is_optimizer_call(node)  # type: ignore[attr-defined]
                and not (self.index.qualnames(func) & _READING_BUILTINS)
            ):
                return node
        for statement in findall(method, m.AssignTarget() | m.AugAssign() | m.Del()):
            target = statement.target  # type: ignore[attr-defined]
            if (
                isinstance(target, cst.Subscript)
                and root_key(self.index, target) in containers
            ):
                return statement
        return None

    def _container_value(self, value: cst.BaseExpression | None) -> bool:
        if isinstance(
            value,
            (cst.List, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp),
        ):
            return True
        return isinstance(value, cst.Call) and bool(
            self.index.qualnames(value.func)
            & {"builtins.list", "builtins.set", "builtins.dict"}
        )

    def _is_value(self, expr: cst.BaseExpression | None, call: cst.Call) -> bool:
        """``expr`` is ``call``, or a variable whose one value is ``call``."""
        if expr is call:
            return True
        key = self.index.key(expr) if isinstance(expr, cst.Name) else None
        return (
            key is not None
            and self.index.values.get(key) == [call]
            and not self.extra_values.get(key)
        )

    def _constructs(self, expr: cst.BaseExpression | None, cls: cst.ClassDef) -> bool:
        """Does ``expr`` build an instance of ``cls`` (prepared or not)?"""
        if expr is None:
            return False
        core = strip_methods(expr, SAME_OBJECT)
        if self.index.is_runtime_call(core, "prepare_model") and core.args:  # type: ignore[attr-defined]
            core = strip_methods(core.args[0].value, SAME_OBJECT)  # type: ignore[attr-defined]
        return isinstance(core, cst.Call) and self.index.local_class(core.func) is cls

    @cached_property
    def optimized(self) -> set[Key]:
        """Variables whose parameters feed an optimizer."""
        keys: set[Key] = set()
        trained_classes: set[cst.ClassDef] = set()
        for call in self.index.calls:
            if optimizer_method(self.index, call) is not None:
                # `model.configure_optimizers(cfg)`: an optimizer over `model`'s
                # parameters (its class's method, read in its module)
                key = self.index.key(call.func.value)  # type: ignore[attr-defined]
                if key is not None:
                    keys.add(key)
            made = factory_model(self.index, call)
            if made is not None:
                # `build_optimizer(cfg, model)`: a factory of a local module
                # builds it over `model`'s parameters (optimizer_helpers)
                key = root_key(self.index, made)
                if key is not None:
                    keys.add(key)
            if method_call(call, "add_param_group") is not None:
                # `opt.add_param_group({"params": criterion.parameters()})`
                for inner in self._parameter_calls(call):
                    key = root_key(self.index, inner.func.value)  # type: ignore[attr-defined]
                    if key is not None:
                        keys.add(key)
            if self.is_optimizer_call(call):
                grouped = call.args and grouped_model(self.index, call.args[0].value)
                if grouped:
                    # `SGD(model.get_optim_policies(), ...)` (param_group_methods)
                    keys.add(grouped)
                handed = call.args and grouped_argument(self.index, call.args[0].value)
                if handed:
                    # `AdamW(utils.get_params_groups(student))` (param_group_helpers)
                    key = root_key(self.index, handed)
                    if key is not None:
                        keys.add(key)
                for inner in self._parameter_calls(call):
                    receiver = inner.func.value  # type: ignore[attr-defined]
                    owner = self._owner_class(receiver)
                    if owner is not None:
                        trained_classes.add(owner)
                        continue
                    container = self._container(receiver)
                    if container is not None:
                        self.trained_containers.add(container)
                        continue
                    key = root_key(self.index, receiver)
                    if key is not None:
                        keys.add(key)
        for key, values in self.index.values.items():
            if any(self._constructs(v, c) for v in values for c in trained_classes):
                keys.add(key)
        keys |= self._handed_to_batch_trainers
        return self.index.flows_into(keys, SAME_OBJECT)

    @cached_property
    def _handed_to_batch_trainers(self) -> set[Key]:
        """Models handed to a class of another file of this batch that trains what
        it is handed (``Trainer(config, model, dataset)``, ``HelperFact.trains``,
        ``batch_migrated``): its optimizer is over their parameters there, and it
        counts on this file to prepare them (``project_callers``)."""
        keys: set[Key] = set()
        for value in self.handed_models:
            key = root_key(self.index, value)
            if key is not None:
                keys.add(key)
        return keys

    def handed_constructions(
        self, core: Callable[[cst.BaseExpression], cst.BaseExpression]
    ) -> dict[cst.BaseExpression, Key]:
        """Models built right in the call of such a class (``Trainer(Net(),
        ...)``): it counts on this file to prepare what it is handed, so AM004
        wraps them there (``core``: the construction inside ``.to()``...)."""
        found: dict[cst.BaseExpression, Key] = {}
        for value in self.handed_models:
            inner = core(value)
            if isinstance(inner, cst.Call) and not self.index.is_runtime_call(
                inner, "prepare_model"
            ):
                found[value] = (value, "handed model")
        return found

    @cached_property
    def handed_models(self) -> list[cst.BaseExpression]:
        """What this file hands such a class for the parameter it trains."""
        found: list[cst.BaseExpression] = []
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                # a class, or a function of a training file of the batch that
                # builds an optimizer over what it is handed (pytorch-adda's
                # `train_src(encoder, classifier, loader)`)
                or (fact.kind != "class" and not fact.optimized_parameters)
                # a step that runs what it is handed, or an optimizer built over
                # a handed model's parameters (improved-diffusion's TrainLoop
                # runs its model through `diffusion.training_losses`)
                or not (fact.trains or fact.optimized_parameters)
                or not fact.batch_migrated
                or any(a.star for a in call.args)
            ):
                continue
            # every model it is handed that it trains: the one its step runs,
            # and each whose parameters feed an optimizer it builds (a GAN
            # trainer's `gen` and `dis`, handed_optimized)
            trained = [fact.trained_parameter] if fact.trains else []
            for name, position in dict([*trained, *fact.optimized_parameters]).items():
                handed = argument(call, position, name)
                if handed is not None and handed not in found:
                    found.append(handed)
        return found

    def _parameter_calls(self, call: cst.Call) -> list[cst.Call]:
        return parameter_calls(self.index, call, self.extra_values)

    @cached_property
    def extra_values(self) -> dict[Key, list[cst.BaseExpression]]:
        return extra_values(self.index)

    @cached_property
    def elements(self) -> dict[Key, Key]:
        """Loop variables and the list they step through (``for net in nets``)."""
        return element_containers(self.index)

    @cached_property
    def trained_containers(self) -> set[Key]:
        """Lists of models whose elements' parameters feed an optimizer (filled by
        ``optimized``)."""
        return set()

    @cached_property
    def lists(self) -> set[Key]:
        return list_variables(self.index)

    def _container(self, receiver: cst.BaseExpression) -> Key | None:
        """The list ``nets`` that ``nets[0]`` or ``net`` (``for net in nets``) is
        an element of."""
        if isinstance(receiver, cst.Subscript):
            key = self.index.key(receiver.value)
            return key if key is not None and key in self.lists else None
        key = self.index.key(receiver)
        return self.elements.get(key) if key is not None else None

    def _container_state(self, key: Key) -> str:
        """ "wrap": every value is a list of models built right there; "prepared":
        they are wrapped already; "unknown": anything else."""
        values = self.index.values.get(key, [])
        items = [item for v in values for item in list_items(v)]
        if not values or not all(list_items(v) for v in values):
            return "unknown"
        if all(
            self.index.is_runtime_call(strip_methods(i, SAME_OBJECT), "prepare_model")
            for i in items
        ):
            return "prepared"
        if all(self._fresh(key, i) and self._builds_module(i) for i in items):
            return "wrap"
        return "unknown"

    @cached_property
    def model_containers(self) -> set[Key]:
        """Lists of trained models whose elements this rule wraps."""
        self.optimized  # noqa: B018  (fills trained_containers)
        return {
            k for k in self.trained_containers if self._container_state(k) == "wrap"
        }


def grouped_model(index: ModuleIndex, params: cst.BaseExpression) -> Key | None:
    """The model variable whose parameter-group method gave an optimizer its
    ``params`` argument (``SGD(policies, ...)`` with ``policies =
    model.get_optim_policies()``, or the call itself); None otherwise."""
    values = params_values(index, params)
    if not values or not all(isinstance(v, cst.Call) for v in values):
        return None
    found: Key | None = None
    for value in values:
        assert isinstance(value, cst.Call)
        if not isinstance(value.func, cst.Attribute):
            return None
        if model_method(index, value, lambda f: f.param_group_methods) is None:
            return None
        key = index.key(value.func.value)
        if key is None or (found is not None and key != found):
            return None
        found = key
    return found
