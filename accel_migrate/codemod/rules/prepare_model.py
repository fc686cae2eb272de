"""AM004 prepare-model: the trained model is wrapped by ``accel.prepare_model(...)``.

## What
Finds the model the script trains: a module built in this file (a class deriving
from ``nn.Module``, a ``torch.nn`` layer, a ``torchvision``/``timm``/``transformers``
factory, or any call) that is moved to the device or whose ``.parameters()`` feed an
optimizer. Its construction is wrapped: ``model = accel.prepare_model(Net().to(device))``,
also where it is built right in the arguments of a call to a function or class of
this file (``Trainer(accel.prepare_model(Net()), data)``). A module class whose own
methods build an optimizer from ``self.parameters()`` is trained through its
instances. Modules built inside another module's ``__init__`` (sub-layers) and loss
modules are not models.

## Why
Under DDP the model must be wrapped so that gradients are averaged across
processes, and under FSDP its parameters are sharded. ``prepare_model`` also moves
it to the process's device. The wrapper is built at the model's first forward
call, so the script may still replace layers, freeze parameters or load weights
after this line.

## Example
```python
# before
model = Net().to(device)
optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
# after
model = accel.prepare_model(Net().to(device))
optimizer = accel.prepare_optimizer(optim.Adadelta(model.parameters(), lr=args.lr))
```

## Fix safety
Safe: attribute reads and writes, ``state_dict()`` keys, ``train()``/``eval()`` and
``parameters()`` behave as on the user's module; with one process and fp32 the
call returns the module itself. When the parameters of a variable feed an
optimizer but the file never builds it (it arrives from another module), a
needs-review finding asks for ``accel.prepare_model`` where it is built.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, method_call
from ..patterns import (
    MODEL_FACTORY_PREFIXES,
    MODULE_BASES,
    OPTIMIZER_BASES,
    is_nn_module_constructor,
    is_optimizer_class,
)
from ..rule import Rule

#: Module methods that return the module itself.
SAME_OBJECT = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "apply",
    }
)


class PrepareModel(Rule):
    code = "AM004"
    name = "prepare-model"
    summary = (
        "model = Net().to(device) -> model = accel.prepare_model(Net().to(device))"
    )

    @cached_property
    def module_classes(self) -> set[cst.ClassDef]:
        return self.index.local_subclasses(MODULE_BASES)

    @cached_property
    def optimizer_classes(self) -> set[cst.ClassDef]:
        return self.index.local_subclasses(OPTIMIZER_BASES)

    def is_optimizer_call(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Call):
            return False
        if self.index.local_class(node.func) in self.optimizer_classes:
            return True
        return any(is_optimizer_class(q) for q in self.qualnames(node.func))

    def _core(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        while (attribute := method_call(expr, *SAME_OBJECT)) is not None:
            expr = attribute.value
        return expr

    def _builds_module(self, expr: cst.BaseExpression) -> bool:
        core = self._core(expr)
        if not isinstance(core, cst.Call):
            return False
        if self.index.local_class(core.func) in self.module_classes:
            return True
        return any(
            is_nn_module_constructor(q) or q.startswith(MODEL_FACTORY_PREFIXES)
            for q in self.qualnames(core.func)
        )

    def _fresh(self, key: Key, value: cst.BaseExpression | None) -> bool:
        """A value that builds a new object rather than changing the variable's own."""
        if value is None or self.index.is_runtime_call(
            self._core(value), "prepare_model"
        ):
            return False
        core = self._core(value)
        if not isinstance(core, cst.Call):
            return False
        return not any(
            self.index.key(n) == key for n in m.findall(value, m.Name() | m.Attribute())
        )

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

    def _constructs(self, expr: cst.BaseExpression | None, cls: cst.ClassDef) -> bool:
        """Does ``expr`` build an instance of ``cls`` (prepared or not)?"""
        if expr is None:
            return False
        core = self._core(expr)
        if self.index.is_runtime_call(core, "prepare_model") and core.args:  # type: ignore[attr-defined]
            core = self._core(core.args[0].value)  # type: ignore[attr-defined]
        return isinstance(core, cst.Call) and self.index.local_class(core.func) is cls

    @cached_property
    def optimized(self) -> set[Key]:
        """Variables whose parameters feed an optimizer."""
        keys: set[Key] = set()
        trained_classes: set[cst.ClassDef] = set()
        for call in self.index.calls:
            if self.is_optimizer_call(call):
                for inner in m.findall(
                    call,
                    m.Call(
                        func=m.Attribute(
                            attr=m.Name("parameters") | m.Name("named_parameters")
                        )
                    ),
                ):
                    receiver = inner.func.value  # type: ignore[attr-defined]
                    owner = self._owner_class(receiver)
                    if owner is not None:
                        trained_classes.add(owner)
                        continue
                    key = self.index.root_key(receiver)
                    if key is not None:
                        keys.add(key)
        for key, values in self.index.values.items():
            if any(self._constructs(v, c) for v in values for c in trained_classes):
                keys.add(key)
        return self.index.flows_into(keys, SAME_OBJECT)

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
                and m.findall(
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
            fresh = [v for v in values if self._fresh(key, v)]
            if not fresh:
                continue
            builds = any(self._builds_module(v) for v in fresh if v is not None)
            if (
                builds and (key in self.moved or key in self.optimized)
            ) or key in self.optimized:
                models.add(key)
        return models

    def _wrap(
        self, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.Call:
        self.report(original, "fixed", "model -> accel.prepare_model(...)")
        return self.runtime_call("prepare_model", [cst.Arg(value=updated)])

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        if len(original_node.targets) != 1:
            return updated_node
        key = self.index.key(original_node.targets[0].target)
        if key in self.models and self._fresh(key, original_node.value):
            return updated_node.with_changes(
                value=self._wrap(original_node.value, updated_node.value)
            )
        return updated_node

    def leave_AnnAssign(
        self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign
    ) -> cst.AnnAssign:
        key = self.index.key(original_node.target)
        if (
            key in self.models
            and updated_node.value is not None
            and self._fresh(key, original_node.value)
        ):
            return updated_node.with_changes(value=self._wrap(original_node.value, updated_node.value))  # type: ignore[arg-type]
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if original_node.value in self.model_arguments:
            return updated_node.with_changes(
                value=self._wrap(original_node.value, updated_node.value)
            )
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not self.is_optimizer_call(original_node):
            return updated_node
        for inner in m.findall(
            original_node, m.Call(func=m.Attribute(attr=m.Name("parameters")))
        ):
            owner = self._owner_class(inner.func.value)  # type: ignore[attr-defined]
            if owner is not None:
                if not self._class_is_prepared(owner):
                    self.report(
                        inner,
                        "needs-review",
                        f"`{owner.name.value}` is trained but no instance is built in this file; wrap it with accel.prepare_model where it is built",
                    )
                continue
            key = self.index.root_key(inner.func.value)  # type: ignore[attr-defined]
            if key is not None and not self._is_prepared(key):
                name = cst.Module([]).code_for_node(inner.func.value)  # type: ignore[attr-defined]
                self.report(
                    inner,
                    "needs-review",
                    f"`{name}` is trained but not built in this file; wrap it with accel.prepare_model where it is built",
                )
        return updated_node

    @cached_property
    def prepared(self) -> set[Key]:
        """Variables already holding a prepared model (a second run over the file)."""
        return self.index.tagged(
            lambda e: self.index.is_runtime_call(self._core(e), "prepare_model"),
            SAME_OBJECT,
        )

    def _is_prepared(self, key: Key) -> bool:
        """The variable is, or receives its value from, a model this rule prepares."""
        return bool(
            self.index.flows_into({key}, SAME_OBJECT)
            & (self.models | self.prepared | set(self.model_arguments.values()))
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
