"""Random draws in the functions and classes of a local module (the project
view's part that finds them): ``HelperFact.draws``.

PyTorch-GAN's ``cyclegan.py`` swaps generated images through a
``ReplayBuffer.push_and_pop`` of ``utils.py`` that calls ``random.uniform`` and
``random.randint`` per image; pytorch-cifar100's ``get_training_dataloader`` in
``utils.py`` builds ``transforms.RandomCrop``; a VAE of ``models.py`` draws
``torch.randn_like(std)`` in its ``forward``. After migration each process
draws its own numbers for its own share of the batch, so the losses cannot
match the original's step for step. In the script itself AM020 reports such
draws; this module finds them in the modules the script imports, for AM020 to
report where the script calls them (``imported_draws``).

A draw is a call of a random function (``is_random_draw``) or of a tensor
method that fills a tensor with random numbers (``.normal_()``,
``.bernoulli_()``, ``.rsample()``, ``torch.distributions.X(...).sample()``);
the construction of a torchvision random augmentation is recorded apart
(``augmentation``): it draws nothing itself, but each time a data loader
applies it. A draw from an explicit ``generator=`` is
the same on every process and not counted. The module's own functions and the
class's ``self.`` methods that a function calls are followed, also the methods
it inherits from bases the project defines in other modules (a ``VanillaVAE`` of
``models.py`` whose ``forward`` is ``BaseVAE``'s of ``base_model.py``; a dataset
whose ``__getitem__`` is its base's), each read with its own module's names.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .call_draws import draw_of, transform_of
from .draw_guards import TestedDraw, guarded_draws
from .project_helpers import _own_nodes
from .project_nodes import assigned_in
from .random_names import random_transform, sampling_model

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: How many calls deep the module's functions and methods are followed.
_DEPTH = 3

Definition = ast.FunctionDef | ast.AsyncFunctionDef
#: Where a definition's calls are read: its module's functions, and the test
#: of a call (``draw_of``/``transform_of`` over the module's names).
Context = tuple[dict[str, Definition], Callable[[ast.Call], str]]
#: A class's methods by name, each with the context of its own module: the
#: class's and those it inherits from bases the project defines (``lineage``).
Methods = dict[str, tuple[Definition, Context]]
#: A class of a lineage: the class, its module's functions and name reader.
Owner = tuple[ast.ClassDef, dict[str, Definition], Callable[[ast.expr], str]]


def function_draws(
    function: Definition,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
    held: dict[str, str] | None = None,
) -> str:
    """The first draw ``function`` makes (itself or through the module's
    functions it calls, or by calling an object the module holds whose call
    draws: ``held``, from ``module_held_draws``), spelled for a finding; "" if
    none."""
    test = draw_of(dotted)
    if held:
        test = _module_held_test(test, held)
    return _draw(function, (functions, test), {}, _DEPTH, set())


def function_guarded_draws(
    function: Definition,
    functions: dict[str, Definition],
    test: Callable[[ast.Call], str],
) -> tuple[TestedDraw, ...]:
    """Each draw ``function`` makes (a call that ``test`` names, or one of the
    module's functions it calls that draws), with the tests of its parameters
    it runs under (``draw_guards``): only where some draw is guarded so, else
    ``()`` (``HelperFact.draws`` says all)."""

    def inner(call: ast.Call) -> str:
        callee = _local_callee(call, functions, (functions, test), {})
        if callee is None:
            return ""
        return _draw(callee[0], callee[1], {}, _DEPTH - 1, {id(function)})

    found = guarded_draws(function, test, inner)
    return found if any(guards for _, guards in found) else ()


#: Containers whose call runs each module or transform they are built with.
_CONTAINERS = frozenset(
    {
        "torch.nn.Sequential",
        "torch.nn.modules.container.Sequential",
        "torchvision.transforms.Compose",
        "torchvision.transforms.v2.Compose",
    }
)


def module_held_draws(
    assigned: dict[str, list[ast.expr]],
    dotted: Callable[[ast.expr], str],
    call_draw: Callable[[ast.Call], str],
) -> dict[str, str]:
    """name -> draw, for each module-level name bound once to an object whose
    call draws: an instance of a class the project defines whose ``__call__``
    (or ``forward``) draws, or a ``nn.Sequential`` / ``Compose`` built with one
    (AssemblyAI's speech tutorial: ``train_audio_transforms =
    nn.Sequential(MelSpectrogram(...), FrequencyMasking(...), ...)``, called in
    the collate function; ``call_draw``: the draw of such a construction, or
    "")."""
    found: dict[str, str] = {}
    for name, values in assigned.items():
        if len(values) != 1 or not isinstance(values[0], ast.Call):
            continue
        built = values[0]
        parts: list[ast.expr] = [built]
        if dotted(built.func) in _CONTAINERS:
            parts = list(built.args)
            if len(parts) == 1 and isinstance(parts[0], (ast.List, ast.Tuple)):
                parts = list(parts[0].elts)
        for part in parts:
            draw = call_draw(part) if isinstance(part, ast.Call) else ""
            if draw:
                found[name] = f"{draw}, called as `{name}(...)`"
                break
    return found


def _module_held_test(
    test: Callable[[ast.Call], str], held: dict[str, str]
) -> Callable[[ast.Call], str]:
    """``test``, also true of a call of a module-level object that draws."""

    def module_test(call: ast.Call) -> str:
        found = test(call)
        if found:
            return found
        func = call.func
        if isinstance(func, ast.Name) and func.id in held:
            return held[func.id]
        return ""

    return module_test


#: A draw from torch's global random state, and the parameter (with its position,
#: -1 if keyword-only) whose falsy default keeps it from running unless a call
#: passes that parameter ("" and -1 where it runs whatever the call passes).
GuardedDraw = tuple[str, str, int]


def function_torch_draws(
    function: Definition,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
) -> tuple[GuardedDraw, ...]:
    """The draws ``function`` makes from torch's global random state (not
    ``random``'s or numpy's: they leave torch's state, from which a loader
    shuffles, alone), itself or through the module's functions it calls, each
    with the parameter that guards it (``if augment:`` with ``augment=False``)."""
    test = draw_of(dotted)

    def torch_test(call: ast.Call) -> str:
        found = test(call)
        return "" if found.startswith(("`random.", "`numpy.")) else found

    guards = _falsy_guards(function)
    found: list[GuardedDraw] = []
    calls = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        draw = torch_test(call)
        inner = _local_callee(call, functions, (functions, torch_test), {})
        if not draw and inner is not None:
            draw = _draw(inner[0], inner[1], {}, _DEPTH - 1, {id(function)})
        if draw:
            found.append((draw, *guards.get(id(call), ("", -1))))
    return tuple(dict.fromkeys(found))


def _falsy_guards(function: Definition) -> dict[int, tuple[str, int]]:
    """id of each node under ``if NAME:`` (its body), where NAME is a parameter
    whose default is falsy (False, None, 0, "") -> (NAME, its position)."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    defaulted = positional[len(positional) - len(arguments.defaults) :]
    defaults = {a.arg: d for a, d in zip(defaulted, arguments.defaults, strict=True)}
    for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if d is not None:
            defaults[a.arg] = d
    falsy = {
        name: next((i for i, a in enumerate(positional) if a.arg == name), -1)
        for name, default in defaults.items()
        if isinstance(default, ast.Constant)
        and not default.value
        and not assigned_in(function, name)  # `augment = True` in the body
    }
    guarded: dict[int, tuple[str, int]] = {}
    for node in _own_nodes(function):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name):
            name = node.test.id
            if name in falsy:
                for statement in node.body:
                    for inner in ast.walk(statement):
                        guarded.setdefault(id(inner), (name, falsy[name]))
    return guarded


def augmentation(
    definition: Definition | ast.ClassDef,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
    lineage: list[Owner] | None = None,
) -> str:
    """The first torchvision random augmentation a function (or any method of a
    class, also one it inherits: ``lineage``) builds, itself or through the
    module's functions; "" if none. Built once, it draws each time the data
    loader applies it to a sample."""
    if isinstance(definition, ast.ClassDef):
        methods = lineage_methods(lineage or [(definition, functions, dotted)], True)
        for method, context in methods.values():
            found = _draw(method, context, methods, _DEPTH, set())
            if found:
                return found
        return ""
    return _draw(definition, (functions, transform_of(dotted)), {}, _DEPTH, set())


def sampling_model_built(
    function: Definition,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
) -> str:
    """The first library model that draws in train mode (``sampling_model``:
    torchvision's Faster R-CNN) a model factory builds, itself or through its
    module's functions; "" if none."""

    def test(call: ast.Call) -> str:
        name = dotted(call.func)
        return f"`{name}`" if name and sampling_model(name) else ""

    return _draw(function, (functions, test), {}, _DEPTH, set())


def class_draws(
    lineage: list[Owner], held: dict[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """(method, its first draw) for each method of the lineage's first class,
    its own or inherited from the bases the project defines (``lineage``: the
    class and those bases, in method resolution order, each with its module's
    functions and names) that draws (itself, through ``self.`` methods, which
    may be a base's or a subclass's, or its module's functions, or by calling
    an object it holds whose call draws: ``held``, from ``held_draws``)."""
    methods = lineage_methods(lineage, False)
    if held:
        methods = {
            name: (method, (functions, _held_test(test, held, methods)))
            for name, (method, (functions, test)) in methods.items()
        }
    found = []
    for name, (method, context) in methods.items():
        draw = _draw(method, context, methods, _DEPTH, set())
        if draw:
            found.append((name, draw))
    return tuple(found)


def held_draws(facts: HelperFacts, cls: ast.ClassDef, depth: int) -> dict[str, str]:
    """attribute -> draw, for each object an instance of ``cls`` holds
    (``self.fg_bg_sampler = BalancedPositiveNegativeSampler(...)`` in one of the
    methods of its lineage) of a class the project defines whose call draws (its
    ``__call__``, or ``forward`` for a module): torchvision's detection heads
    sample the anchors that train with ``torch.randperm`` in such an object.
    Also an object built over such objects or over torchvision random
    augmentations, directly or through a local list the method fills
    (``self.augment = Compose([RandomMirror(), SubtractMeans(mean)])`` of
    ssd.pytorch, ``self.transforms = T.Compose(trans)`` with ``trans =
    [T.RandomResizedCrop(size)]`` of torchvision's classification presets):
    calling it applies them. ``depth``: how many objects deep (an object
    held by a held object)."""
    found: dict[str, str] = {}
    if depth <= 0:
        return found
    for owner, node in _lineage_owners(facts, cls):
        for method in class_methods(node).values():
            for statement in ast.walk(method):
                if not isinstance(statement, ast.Assign):
                    continue
                for target in statement.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        and target.attr not in found
                    ):
                        draw = _built_draw(
                            owner, _built_calls(method, statement.value), depth
                        )
                        if draw:
                            found[target.attr] = draw.format(target.attr)
    return found


def _lineage_owners(
    facts: HelperFacts, cls: ast.ClassDef
) -> list[tuple[HelperFacts, ast.ClassDef]]:
    from .class_lineage import lineage_owners

    return lineage_owners(facts, cls)


def _built_calls(method: Definition, value: ast.expr) -> list[ast.Call]:
    """The calls that build ``value``: its own, and those of what a name it
    reads holds in ``method`` (``trans = [...]``, ``trans.append(...)``)."""
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} - {"self"}
    for node in ast.walk(method):
        parts: list[ast.expr] = []
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in node.targets
        ):
            parts.append(node.value)
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in names
        ):
            parts.append(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "insert")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in names
        ):
            parts.extend(node.args)
        for part in parts:
            calls.extend(n for n in ast.walk(part) if isinstance(n, ast.Call))
    return calls


def _built_draw(owner: HelperFacts, calls: list[ast.Call], depth: int) -> str:
    """The first draw of an object built by ``calls``: a torchvision random
    augmentation among them, or a class of the project whose call draws."""
    from .class_lineage import _class_at

    for call in calls:
        name = owner._dotted(call.func)
        if name and random_transform(name):
            return f"`{name}` (built into `self.{{0}}`, applied as `self.{{0}}(...)`)"
        if name and sampling_model(name):
            return (
                f"`{name}`, which samples anchors and proposals with "
                f"`torch.randperm` in train mode (built into `self.{{0}}`, "
                f"run as `self.{{0}}(...)`)"
            )
        resolved = owner.resolve(call.func)
        located = _class_at(owner, resolved) if isinstance(resolved, tuple) else None
        if located is None:
            continue
        where, held = located
        draws = dict(where._class_draws(held, depth - 1))
        draw = draws.get("__call__") or draws.get("forward")
        if draw:
            return f"{draw} (in `{held.name}`, called as `self.{{0}}(...)`)"
    return ""


def _held_test(
    test: Callable[[ast.Call], str], held: dict[str, str], methods: Methods
) -> Callable[[ast.Call], str]:
    """``test``, also true of a call of a held object that draws (``held``),
    also of one taken from a held list in a loop (``for t in self.augs:
    x = t(x)``)."""
    loops = {
        loop.target.id: loop.iter.attr
        for method, _ in methods.values()
        for loop in ast.walk(method)
        if isinstance(loop, ast.For)
        and isinstance(loop.target, ast.Name)
        and isinstance(loop.iter, ast.Attribute)
        and isinstance(loop.iter.value, ast.Name)
        and loop.iter.value.id == "self"
        and loop.iter.attr in held
    }

    def held_test(call: ast.Call) -> str:
        found = test(call)
        if found:
            return found
        func = call.func
        if isinstance(func, ast.Name) and func.id in loops:
            # `for t in self.transforms: img = t(img)`: each object held there
            return held[loops[func.id]]
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr in held
            and func.attr not in methods
        ):
            return held[func.attr]
        return ""

    return held_test


def class_methods(cls: ast.ClassDef) -> dict[str, Definition]:
    """The methods ``cls`` defines in its body, by name."""
    return {
        s.name: s
        for s in cls.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def lineage_methods(lineage: list[Owner], transforms: bool) -> Methods:
    """The methods an instance of the lineage's first class has: the first
    definition of each name in resolution order, with its module's context
    (draws, or random augmentations where ``transforms``)."""
    found: Methods = {}
    for cls, functions, dotted in lineage:
        test = transform_of(dotted) if transforms else draw_of(dotted)
        for name, method in class_methods(cls).items():
            found.setdefault(name, (method, (functions, test)))
    return found


def self_calls(function: ast.AST) -> list[str]:
    """The names of the methods ``function`` calls on ``self`` (``self.x()``)."""
    return [
        call.func.attr
        for call in ast.walk(function)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
    ]


def _draw(
    function: Definition,
    context: Context,
    methods: Methods,
    depth: int,
    seen: set[int],
) -> str:
    if depth < 0 or id(function) in seen:
        return ""
    seen.add(id(function))
    functions, test = context
    calls = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        found = test(call)
        if found:
            return found
    for call in calls:
        inner = _local_callee(call, functions, context, methods)
        if inner is not None:
            found = _draw(inner[0], inner[1], methods, depth - 1, seen)
            if found:
                return found
    return ""


def _local_callee(
    call: ast.Call,
    functions: dict[str, Definition],
    context: Context,
    methods: Methods,
) -> tuple[Definition, Context] | None:
    func = call.func
    if isinstance(func, ast.Name):
        found = functions.get(func.id)
        return (found, context) if found is not None else None
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return methods.get(func.attr)
    return None
