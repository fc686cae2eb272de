"""Library trainer classes: a class of a local module that trains the model its
caller hands it (minGPT's ``Trainer(config, model, dataset)`` in
``mingpt/trainer.py``, whose ``run`` calls ``self.loss.backward()``).

The training setup of such a project is split across files: the model is built in
the script, and its optimizer, loader and backward live in the library. AM004
migrates a setup whole or not at all, one file at a time, so the library file is
left unmigrated (its model is a parameter no call of that file passes), and a
script that hands its model to the class must be left unmigrated too: sharding the
script's loaders, reducing its metrics or gating its logs while each process
trains a full, unsynchronised copy in the library would mix a migrated half with
an unmigrated one. ``handed_in_training`` finds such classes for the project view
(``HelperFact.trains``).

A class that trains models of its own is split the same way (the pix2pix /
CycleGAN ``Pix2PixModel``: ``__init__`` builds ``self.netG`` and its
``torch.optim.Adam``, ``optimize_parameters`` calls ``self.loss_G.backward()``,
and the script only loops ``model.set_input(data); model.optimize_parameters()``
over its loader): ``trains_own_models`` finds it (``HelperFact.trains_own``).
Functions that train a handed model are ``function_trainers``; what counts as using
a value as a model is ``model_uses``. Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from .handed_values import handed_value
from .model_uses import _backward_calls, _used_value_as_model
from .optimizer_defaults import optimizer_class_defaults
from .project_nodes import _own_nodes, self_attribute

Lineage = Sequence[ast.ClassDef]
"""A class and then its bases that the project defines, nearest first (the
pytorch-template ``Trainer(BaseTrainer)``, whose base's ``__init__`` stores the
model that ``super().__init__(model, ...)`` hands it)."""


def handed_in_training(lineage: Lineage) -> str:
    """How the class trains with what it is handed (``_handed``); "" if not."""
    found = _handed(lineage)
    return found[0] if found is not None else ""


def trained_parameter(lineage: Lineage) -> tuple[str, int]:
    """The ``__init__`` parameter whose value the class trains
    (``handed_in_training``) and its position among the positional parameters
    after ``self`` (-1: keyword only); ("", -1) when it trains none."""
    found = _handed(lineage)
    if found is None:
        return ("", -1)
    init = next(m for m in _methods(lineage) if m.name == "__init__")
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args][1:]]
    name = found[1]
    return (name, positional.index(name) if name in positional else -1)


def handed_training_step(lineage: Lineage) -> tuple[str, str, int]:
    """The method whose backward ``handed_in_training`` names (the step), the
    first method of the class that calls it on ``self`` (the loop: the
    decision-transformer ``Trainer.train_iteration`` calling
    ``self.train_step()``) and the line of that call; ("", "", 0) when the class
    trains nothing it is handed, ("step", "", 0) when no method of its calls the
    step. A subclass that overrides the step inherits the loop, not the step."""
    found = _handed(lineage)
    if found is None:
        return ("", "", 0)
    step = found[2]
    for method in _methods(lineage):
        for node in _own_nodes(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                and node.func.attr == step
                and method.name != step
            ):
                return (step, method.name, node.lineno)
    return (step, "", 0)


def method_trains_handed(lineage: Lineage) -> str:
    """How a method of the class, not ``__init__``, trains a model its caller
    hands that method (a hand-written Lightning-style ``Trainer`` whose
    ``fit(self, model, train_loader)`` runs ``loss.backward()``), as a phrase
    for a finding; "" when none does (``function_trains_handed`` of each
    method, its ``self`` left out)."""
    from .function_trainers import function_trained_parameter, function_trains_handed

    for method in _methods(lineage):
        if method.name == "__init__" or not method.args.args:
            continue
        name, position = function_trained_parameter(method)
        if not name or position == 0 or name == method.args.args[0].arg:
            continue  # the instance itself (a model class's own step)
        found = function_trains_handed(method)
        if found:
            return found
    return ""


def untraining_methods(
    lineage: Lineage,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> tuple[str, ...]:
    """The methods of a class whose call on an instance trains nothing: no
    backward in them, no handed model trained through a function of the module
    (``function_trains_handed``), and no ``self.X(...)`` of a method that is not
    quiet itself (``Toolkit.evaluate`` beside a ``finetune`` that trains). A
    script that builds the class and calls only these does not hand its model
    to the training (``TrainerBlocks._block_method_trainers``)."""
    from .function_trainers import function_trains_handed

    methods = {m.name: m for m in _methods(lineage) if m.name != "__init__"}
    quiet = {
        name
        for name, method in methods.items()
        if next(_backward_calls(method), None) is None
        and not function_trains_handed(method, functions or {})
    }
    changed = True
    while changed:
        changed = False
        for name in sorted(quiet):
            called = {
                node.func.attr
                for node in ast.walk(methods[name])
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
            }
            if any(c in methods and c not in quiet for c in called):
                quiet.discard(name)
                changed = True
    return tuple(sorted(quiet))


def backpropagated_attributes(lineage: Lineage) -> tuple[tuple[str, int], ...]:
    """``self.X`` that a method of the class backpropagates (``self.loss.backward()``,
    or ``accel.backward(self.loss, ...)`` once migrated), with the line of the
    first backward of each: the losses an instance hands its callers to read."""
    found: dict[str, int] = {}
    for method in _methods(lineage):
        for node in _backward_calls(method):
            tensor = node.args[0] if node.args else node.func.value
            attr = self_attribute(tensor)
            if attr is not None:
                found.setdefault(attr, node.lineno)
    return tuple(sorted(found.items()))


def _handed(lineage: Lineage) -> tuple[str, str, str] | None:
    """How the class trains with what it is handed, as a phrase for a finding
    (``"`run` calls backward (line 76) in a step that runs `self.model`, which
    it is handed (`__init__`'s `model`)"``), that parameter and the method that
    calls the backward; None when it does not.

    The class must store an ``__init__`` parameter on ``self`` (itself, or a
    base's ``__init__`` that it hands the parameter to) and, in a method that
    calls ``.backward()``, call that attribute, or a local bound to it, as a
    model (``model(x, y)``, ``model.train()``, ``model.parameters()``...)."""
    methods = _methods(lineage)
    owner = next(
        (i for i, cls in enumerate(lineage) if _own_method(cls, "__init__")), None
    )
    if owner is None:
        return None
    init = _own_method(lineage[owner], "__init__")
    if not isinstance(init, ast.FunctionDef):
        return None
    stored = _stored_through_bases(lineage[owner:])
    # an optimizer class handed as a default (pytorch_tabnet's
    # `optimizer_fn=torch.optim.Adam`) is called to build one, not run as a model
    classes = optimizer_class_defaults(init)
    stored = {k: v for k, v in stored.items() if v not in classes}
    if not stored:
        return None
    for method in methods:
        backward = next(_backward_calls(method), None)
        if backward is None:
            continue
        used = _used_as_model(method, set(stored))
        through = ""
        if used is None:
            # the step's forward in a method of its own (PyTorch-BYOL's
            # `loss = self.update(view_1, view_2)`)
            for helper in _self_methods_called(method, methods):
                used = _runs_stored(helper, set(stored))
                if used is not None:
                    through = f" (through `self.{helper.name}`)"
                    break
        if used is not None:
            return (
                f"`{method.name}` calls backward (line {backward.lineno}) in a step "
                f"that runs `self.{used}`{through}, which it is handed (`__init__`'s "
                f"`{stored[used]}`)",
                stored[used],
                method.name,
            )
    return None


def _runs_stored(
    method: ast.FunctionDef | ast.AsyncFunctionDef, attributes: set[str]
) -> str | None:
    """The stored attribute ``method`` calls (``self.online_network(x)``): a
    forward run in a helper of the step, not a read of its parameters (an EMA
    update)."""
    calls = sorted(
        (n for n in _own_nodes(method) if isinstance(n, ast.Call)),
        key=lambda n: (n.end_lineno or n.lineno, n.end_col_offset or n.col_offset),
    )
    for node in calls:
        attr = self_attribute(node.func)
        if attr in attributes:
            return attr
    return None


def _self_methods_called(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: list[ast.FunctionDef | ast.AsyncFunctionDef],
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods of the instance that ``method`` calls on ``self``, in the
    order of the calls."""
    by_name = {m.name: m for m in methods if m is not method}
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    calls = sorted(
        (n for n in _own_nodes(method) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in calls:
        if (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
            and node.func.attr in by_name
            and by_name[node.func.attr] not in found
        ):
            found.append(by_name[node.func.attr])
    return found


def trains_own_models(
    cls: ast.ClassDef, is_optimizer: Callable[[ast.Call], bool]
) -> str:
    """How ``cls``, not a model class, trains models it builds itself, as a
    phrase for a finding (``"`backward_G` calls backward (line 40), and
    `__init__` builds an optimizer (`torch.optim.Adam(...)`, line 21)"``); ""
    when it does not: a method calls ``.backward()`` and a method builds an
    optimizer (``is_optimizer``: the call constructs a ``torch.optim`` class)."""
    methods = [
        m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    backward = optimizer = None
    for method in methods:
        for node in _own_nodes(method):
            if not isinstance(node, ast.Call):
                continue
            if (
                backward is None
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ):
                backward = (method.name, node)
            elif optimizer is None and is_optimizer(node):
                optimizer = (method.name, node)
    if backward is None or optimizer is None:
        return ""
    built = ast.unparse(optimizer[1].func)
    return (
        f"`{backward[0]}` calls backward (line {backward[1].lineno}), and "
        f"`{optimizer[0]}` builds an optimizer (`{built}(...)`, line "
        f"{optimizer[1].lineno})"
    )


def stepping_methods(cls: ast.ClassDef) -> tuple[str, ...]:
    """The methods of ``cls`` whose call runs a backward: those that call
    ``.backward()`` in their own body, and those that call one of them on
    ``self`` (Graph-WaveNet's ``trainer.train(input, real_val)``, not its
    ``eval``). A caller's loop around such a call is a training loop."""
    methods = {
        m.name: m
        for m in cls.body
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    called: dict[str, set[str]] = {name: set() for name in methods}
    found: set[str] = set()
    for name, method in methods.items():
        for node in _own_nodes(method):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            ):
                continue
            receiver = node.func.value
            if node.func.attr == "backward" and not (
                isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
            ):
                found.add(name)
            elif isinstance(receiver, ast.Name) and receiver.id == "self":
                called[name].add(node.func.attr)
    changed = True
    while changed:
        changed = False
        for name, callees in called.items():
            if name not in found and callees & found:
                found.add(name)
                changed = True
    return tuple(sorted(found))


def builds_optimizer(
    cls: ast.ClassDef, is_optimizer: Callable[[ast.Call], bool]
) -> str:
    """Where ``cls``, not a model class, builds an optimizer in a method, as a
    phrase for a finding (``"`__init__` builds an optimizer
    (`torch.optim.SGD(...)`, line 16)"``); "" when it builds none. A base trainer
    (``trainer/base.py``'s ``BaseTrainer``) that owns the optimizer while a
    subclass in another file writes the step (``_train_epoch``)."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(method):
            if isinstance(node, ast.Call) and is_optimizer(node):
                return (
                    f"`{method.name}` builds an optimizer "
                    f"(`{ast.unparse(node.func)}(...)`, line {node.lineno})"
                )
    return ""


def _methods(lineage: Lineage) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods an instance has: each name from the nearest class of
    ``lineage`` that defines it."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for cls in lineage:
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault(method.name, method)
    return list(found.values())


def _own_method(
    cls: ast.ClassDef, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (
            m
            for m in cls.body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name
        ),
        None,
    )


def _stored_through_bases(lineage: Lineage) -> dict[str, str]:
    """``_stored_parameters`` of the first class's ``__init__``, and the attributes
    a base's ``__init__`` stores from the parameters that this one hands it
    (``super().__init__(model, ...)``, ``Base.__init__(self, model, ...)``):
    attr -> the first class's parameter."""
    init = _own_method(lineage[0], "__init__")
    if init is None:
        return {}
    found = _stored_parameters(init)
    base = next(
        (i for i in range(1, len(lineage)) if _own_method(lineage[i], "__init__")),
        None,
    )
    if base is None:
        return found
    base_init = _own_method(lineage[base], "__init__")
    assert base_init is not None
    names = _parameter_names(init)
    base_stored = _stored_through_bases(lineage[base:])
    for call in _own_nodes(init):
        handed = _handed_to_base(call, base_init)
        for attr, parameter in base_stored.items():
            value = handed.get(parameter)
            if isinstance(value, ast.Name) and value.id in names:
                found.setdefault(attr, value.id)
    return found


def _handed_to_base(
    node: ast.AST, base_init: ast.FunctionDef | ast.AsyncFunctionDef
) -> dict[str, ast.expr]:
    """What ``super().__init__(...)`` or ``Base.__init__(self, ...)`` hands the
    base's ``__init__``: its parameter -> the argument; {} for any other node."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
    ):
        return {}
    receiver = node.func.value
    args = list(node.args)
    if isinstance(receiver, ast.Call) and (
        isinstance(receiver.func, ast.Name) and receiver.func.id == "super"
    ):
        pass
    elif isinstance(receiver, (ast.Name, ast.Attribute)) and (
        args and isinstance(args[0], ast.Name) and args[0].id == "self"
    ):
        args = args[1:]
    else:
        return {}
    if any(isinstance(a, ast.Starred) for a in args):
        return {}
    positional = [a.arg for a in [*base_init.args.posonlyargs, *base_init.args.args]]
    handed = dict(zip(positional[1:], args, strict=False))
    for keyword in node.keywords:
        if keyword.arg is not None:
            handed[keyword.arg] = keyword.value
    return handed


def _parameter_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    arguments = function.args
    return {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs][1:]
    }


def _stored_parameters(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """``self.attr = param`` in ``__init__``: attr -> param."""
    arguments = init.args
    names = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs][1:]
    }
    kwargs = arguments.kwarg.arg if arguments.kwarg is not None else None
    found: dict[str, str] = {}
    for node in _own_nodes(init):
        if not isinstance(node, ast.Assign):
            continue
        param = handed_value(node.value, names, kwargs)
        if param is None:
            continue
        for target in node.targets:
            attr = self_attribute(target)
            if attr is not None:
                found.setdefault(attr, param)
    return found


def _used_as_model(
    method: ast.FunctionDef | ast.AsyncFunctionDef, attributes: set[str]
) -> str | None:
    """The stored attribute ``method`` uses as a model, directly or through a
    local bound to it (``model, config = self.model, self.config``)."""

    def attribute(expr: ast.expr) -> str | None:
        attr = self_attribute(expr)
        return attr if attr in attributes else None

    return _used_value_as_model(method, attribute)
