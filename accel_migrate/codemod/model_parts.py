"""Models a script trains by their parts: what AM004 must not wrap whole.

``accel.prepare_model(m)`` averages gradients in ``m``'s own forward (DDP's
wrapper, FSDP's root). A container of models (``nn.ModuleList``,
``nn.ModuleDict``, an ``nn.Sequential`` indexed into) whose training step calls
the models inside it one by one (``self.nets["a"](x)``, ``for net in nets:
net(x)``) and never the container itself never runs that forward: wrapping the
container would train one unsynchronised copy per process. ``part_uses`` finds
these among the models AM004 would wrap. The value is followed through plain
aliasing (``nets = self.nets``), ``.to(device)``, the returns of this file's
functions (``self.nets = self.build()``) and the parameters its calls bind;
a part through a subscript, a loop or comprehension over the container (also
``enumerate``/``zip``), an attribute (``model.members``), or a variable bound
to one of those.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex
from .model_methods import training_step
from .names import SAME_OBJECT
from .patterns import strip_methods
from .subtrees import findall
from .trained_models import returns_of, snippet


def _origin(index: ModuleIndex, expr: cst.BaseExpression | None) -> Key | None:
    if expr is None:
        return None
    return index.key(strip_methods(expr, SAME_OBJECT))


def _bindings(index: ModuleIndex) -> list[tuple[Key, cst.BaseExpression]]:
    """Every ``variable = value`` of the file, and every parameter a call of a
    local function binds with its argument."""
    found = [
        (key, value)
        for key, values in index.values.items()
        for value in values
        if value is not None
    ]
    for call in index.calls:
        found.extend(index.arguments(call))
    return found


def _reached(
    index: ModuleIndex, model: Key, bindings: list[tuple[Key, cst.BaseExpression]]
) -> set[Key]:
    """``model`` and the variables that may hold the same object."""
    reached = {model}
    changed = True
    while changed:
        changed = False
        for key, value in bindings:
            if key not in reached and _holds(index, value, reached):
                reached.add(key)
                changed = True
    return reached


def _holds(index: ModuleIndex, value: cst.BaseExpression, reached: set[Key]) -> bool:
    if _origin(index, value) in reached:
        return True
    core = strip_methods(value, SAME_OBJECT)
    if not isinstance(core, cst.Call):
        return False
    function = index.local_function(core.func)
    if function is None:
        return False
    # `self.nets = self.build()`: a function of this file that hands one back
    return any(_origin(index, r) in reached for r in returns_of(index, function))


def part_uses(index: ModuleIndex, keys: set[Key]) -> dict[Key, cst.CSTNode]:
    """For each model of ``keys`` whose parts a training step calls
    (``nets[0](x)``, ``for net in nets: net(x)``, ``head = nets["a"]; head(x)``)
    while no training step calls the model itself, the first such call.

    Other reads by parts are left to the runtime: a prepared model hands out its
    parts (``model[0].requires_grad_(False)``), and one whose parts received
    gradients without its own forward having run fails loudly at the first
    backward."""
    if not keys:
        return {}
    holders: dict[Key, Key] = {}  # a variable -> the model it may hold
    bindings = _bindings(index)
    for model in sorted(keys, key=lambda k: k[1]):
        for key in _reached(index, model, bindings):
            holders.setdefault(key, model)
    sources = _loop_sources(index)
    # Variables bound to a part: `head = self.nets["a"]`, `members = model.members`.
    parts: dict[Key, Key] = {}
    for key, value in bindings:
        if key not in holders and isinstance(value, (cst.Subscript, cst.Attribute)):
            holder = _holder(index, value.value, holders)
            if holder is not None:
                parts.setdefault(key, holder)
    within = {**parts, **holders}  # a name that holds a model or one of its parts

    def part_of(func: cst.BaseExpression) -> Key | None:
        if isinstance(func, cst.Subscript):
            return _holder(index, func.value, within)
        key = index.key(func)
        if key is None:
            return None
        if key in parts:
            return parts[key]
        iterable = sources.get(key)
        return _holder(index, iterable, within) if iterable is not None else None

    whole: set[Key] = set()
    found: dict[Key, cst.CSTNode] = {}
    for call in index.calls:
        func_key = index.key(call.func)
        model = holders.get(func_key) if func_key is not None else None
        part = part_of(call.func) if model is None else None
        if model is None and (part is None or part in found):
            continue
        if not any(training_step(index, p) for p in index.loop_paths(call)):
            continue
        if model is not None:
            whole.add(model)
        else:
            found[part] = call  # type: ignore[index]
    return {model: call for model, call in found.items() if model not in whole}


def _holder(
    index: ModuleIndex, expr: cst.BaseExpression, holders: dict[Key, Key]
) -> Key | None:
    """The model ``expr`` is, or is a part of (``nets``, ``model.members``,
    ``model.blocks[0]``)."""
    node: cst.BaseExpression = strip_methods(expr, SAME_OBJECT)
    while True:
        key = index.key(node)
        if key is not None and key in holders:
            return holders[key]
        if not isinstance(node, (cst.Attribute, cst.Subscript)):
            return None
        node = node.value


def _loop_sources(index: ModuleIndex) -> dict[Key, cst.BaseExpression]:
    """Loop and comprehension variables and what they step through
    (``for m in model.members``; ``enumerate``/``zip`` seen through)."""
    loops: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [
        (loop.target, loop.iter) for loop in index.for_loops
    ]
    loops += [(c.target, c.iter) for c in findall(index.module, m.CompFor())]  # type: ignore[attr-defined]
    found: dict[Key, cst.BaseExpression] = {}
    for target, iterable in loops:
        pairs = [(target, iterable)]
        if isinstance(iterable, cst.Call) and isinstance(target, (cst.Tuple, cst.List)):
            names = index.qualnames(iterable.func)
            args = [a.value for a in iterable.args if a.keyword is None and not a.star]
            items = [e.value for e in target.elements]
            if "builtins.enumerate" in names and len(args) == 1 and len(items) == 2:
                pairs = [(items[1], args[0])]
            elif "builtins.zip" in names and len(args) == len(items):
                pairs = list(zip(items, args, strict=True))
        for element, source in pairs:
            key = index.key(element)
            if key is not None:
                found.setdefault(key, source)
    return found


def part_use_message(
    index: ModuleIndex, model: Key, use: cst.CSTNode, line: Callable[[cst.CSTNode], int]
) -> str:
    """Why a model read by its parts is not wrapped: where it is built, where it
    is read so, and what to do instead."""
    values = [v for v in index.values.get(model, []) if v is not None]
    built = (
        f"built at line {line(values[0])}: `{snippet(values[0])}`"
        if values
        else "built in this file"
    )
    return (
        f"`{model[1]}` is a trained model ({built}) whose parts a training step "
        f"calls one by one (`{snippet(use)}`, line {line(use)}), while no training "
        "step calls the model itself: accel.prepare_model averages the gradients "
        "across processes in the model's own forward, which never runs, so "
        "wrapping it would train an unsynchronised copy in each process, and "
        "accel-migrate does not wrap the models inside a container; keep each "
        "trained model in its own variable or a plain list and wrap each with "
        "accel.prepare_model(...) where it is built, or call the container itself "
        "(a module whose forward runs them)"
    )


#: Containers of modules with no forward of their own (calling one raises).
_FORWARDLESS = frozenset(
    {
        "torch.nn.ModuleList",
        "torch.nn.ModuleDict",
        "torch.nn.modules.container.ModuleList",
        "torch.nn.modules.container.ModuleDict",
    }
)


def forwardless_builds(index: ModuleIndex, keys: set[Key]) -> dict[Key, cst.Call]:
    """For each model of ``keys`` built as an ``nn.ModuleList`` or ``nn.ModuleDict``
    (also with ``.to(device)``/``.cuda()``), that construction.

    Such a container has no forward (calling it raises ``NotImplementedError``),
    so ``accel.prepare_model`` around it never averages a gradient: the script
    calls the modules inside it (RepDistiller's ``trainable_list =
    nn.ModuleList([])`` filled with ``.append(model_s)``, the optimizer built over
    ``trainable_list.parameters()``, the step calling ``module_list[0]`` in
    another file). Seen whatever the training step does with it, in this file or
    in one the analysis does not read."""
    found: dict[Key, cst.Call] = {}
    for key in sorted(keys, key=lambda k: k[1]):
        for value in index.values.get(key, []):
            core = strip_methods(value, SAME_OBJECT) if value is not None else None
            if isinstance(core, cst.Call) and index.qualnames(core.func) & _FORWARDLESS:
                found.setdefault(key, core)
    return found


def forwardless_message(
    index: ModuleIndex, model: Key, built: cst.Call, line: Callable[[cst.CSTNode], int]
) -> str:
    """Why a trained ``nn.ModuleList``/``nn.ModuleDict`` is not wrapped."""
    return (
        f"`{model[1]}` is trained (an optimizer holds its parameters or it is "
        f"moved to the device) but is built as `{snippet(built)}` (line "
        f"{line(built)}), a container with no forward of its own: the script "
        "calls the modules inside it, so accel.prepare_model around it would "
        "never average a gradient and each process would train its own copy; "
        "wrap each trained model it holds with accel.prepare_model(...) where "
        "that model is built and build the optimizer over those prepared models"
    )
