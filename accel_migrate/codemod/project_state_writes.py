"""Buffers a model class of a local module writes from its inputs in its
``forward`` (``HelperFact.state_writes``), and the calls of a training step
that run such a model (for AM032).

MoCo's ``ModelMoCo`` (in a ``model.py`` of its own) keeps a queue of keys in a
buffer and writes each step's keys into it from ``forward``, through
``_dequeue_and_enqueue`` (``self.queue[:, ptr:ptr + n] = keys.t()``); DINO's
loss keeps a centre rebuilt from itself and the batch's teacher outputs
(``self.center = self.center * m + batch_center * (1 - m)``). AM032 finds such
writes in a class of the file it migrates; this module finds them in a class a
local module defines, so that AM032 reports them where the script's training
step runs the model. A write counts when it is made in ``forward`` or a method
``forward`` calls on ``self`` (transitively), into ``self.<name>`` where
``<name>`` is a buffer (``self.register_buffer("name", ...)``) or a tensor the
class builds (``self.name = torch.zeros(...)``), and what it writes reads a
name other than ``self``: an item assignment (``self.queue[:, i:j] = keys.T``),
an in-place write (``self.bank.index_copy_(0, idx, feats)``, through ``.data``
too), or a rebinding that reads the buffer itself (a running statistic). A
method that gathers from every process (a call named ``*gather*`` or
``all_reduce``) is already distributed and does not count.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from .state_write_names import STATE_WRITES

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .project_facts import HelperFact


def state_writes(cls: ast.ClassDef, start: str = "forward") -> str:
    """How ``cls``'s ``forward`` (or ``start``; or a method it calls on ``self``)
    writes one of its buffers from values other than its own, as a phrase; ""
    if it does not."""
    from .project_draws import class_methods, self_calls

    methods = class_methods(cls)
    if start not in methods:
        return ""
    buffers = _buffers(cls)
    if not buffers:
        return ""
    seen: list[str] = []
    todo = [start]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in methods:
            continue
        seen.append(name)
        todo += self_calls(methods[name])
    for name in seen:
        method = methods[name]
        if _gathers(method):
            continue
        for node in ast.walk(method):
            written = _written_buffer(node, buffers)
            if written:
                return (
                    f"`{cls.name}.{name}` writes the buffer `self.{written}` "
                    f"(`{ast.unparse(node).splitlines()[0]}`)"
                )
    return ""


def method_state_writes(cls: ast.ClassDef) -> tuple[tuple[str, str], ...]:
    """For a class that is not a model (a trainer object: basicsr's
    ``RealESRGANModel``, whose ``feed_data`` refills a training-pair pool
    ``self.queue_lr`` from each batch in ``_dequeue_and_enqueue``): (method,
    ``state_writes`` from it) for each method a caller may call (not a dunder,
    nor ``_private``) that writes one of its tensors from other values."""
    from .project_draws import class_methods

    found = []
    for name in class_methods(cls):
        if name.startswith("_"):
            continue
        phrase = state_writes(cls, name)
        if phrase:
            found.append((name, phrase))
    return tuple(found)


def _buffers(cls: ast.ClassDef) -> set[str]:
    """The names of ``cls``'s registered buffers and the torch tensors it sets."""
    found: set[str] = set()
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
        elif isinstance(node, ast.Assign) and _torch_built(node.value):
            found |= {n for t in node.targets if (n := _self_name(t))}
    return found


def _torch_built(value: ast.expr) -> bool:
    """``torch.zeros(...)``, also moved: ``torch.zeros(...).to(self.device)``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("to", "cuda", "float", "half", "contiguous")
        and isinstance(value.func.value, ast.Call)
    ):
        value = value.func.value
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == "torch"
    )


def _self_name(node: ast.AST) -> str:
    """``name`` of ``self.name`` (also ``self.name.data``); "" otherwise."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return ""


def _reads_other(nodes: list[ast.AST]) -> bool:
    """Does any of ``nodes`` read a variable other than ``self``?"""
    return any(
        isinstance(n, ast.Name) and n.id != "self" and isinstance(n.ctx, ast.Load)
        for node in nodes
        for n in ast.walk(node)
    )


def _written_buffer(node: ast.AST, buffers: set[str]) -> str:
    """The buffer ``node`` writes from values other than its own; ""."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                name = _self_name(target.value)
                if name in buffers and _reads_other([node.value, target.slice]):
                    return name
            name = _self_name(target)
            if (
                name in buffers
                and any(_self_name(n) == name for n in ast.walk(node.value))
                and _reads_other([node.value])
            ):
                return name
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in STATE_WRITES
    ):
        # the tensor a chain of writes writes (`self.n.mul_(d).add_(x)`, as
        # the rule's `_written`), and every argument of the chain
        parts: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
        receiver = node.func.value
        while True:
            if (
                isinstance(receiver, ast.Call)
                and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr in STATE_WRITES
            ):
                parts += [*receiver.args, *(k.value for k in receiver.keywords)]
                receiver = receiver.func.value
            elif isinstance(receiver, ast.Subscript):
                parts.append(receiver.slice)
                receiver = receiver.value
            else:
                break
        name = _self_name(receiver)
        if name in buffers and _reads_other(parts):
            return name
    return ""


def _gathers(method: ast.AST) -> bool:
    """Does ``method`` gather from, or reduce over, every process?"""
    for node in ast.walk(method):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id if isinstance(func, ast.Name) else ""
            )
            if "gather" in name or name == "all_reduce":
                return True
    return False


def step_state_write(
    index: ModuleIndex, call: cst.Call
) -> tuple[HelperFact, str] | None:
    """The imported model class whose buffer-writing ``forward`` a training step
    runs with ``call`` (``loss = net(im_1, im_2)``), or the imported object,
    not a model, whose method ``call`` calls writes its tensors so
    (``model.feed_data(train_data)``), with how; None otherwise."""
    from .imported_draws import _wrapped_step, instance_facts, trainer_step
    from .model_methods import training_step

    if not index.project or not any(
        training_step(index, path)
        or _wrapped_step(index, path)
        or trainer_step(index, path)
        for path in index.loop_paths(call)
    ):
        return None
    if isinstance(call.func, cst.Attribute):
        method = call.func.attr.value
        for fact in sorted(
            instance_facts(index, call.func.value), key=lambda f: f.name
        ):
            phrase = dict(fact.method_state_writes).get(method)
            if phrase:
                return fact, phrase
        return None  # a method of the model, not its forward
    facts = set(instance_facts(index, call.func))
    key = index.key(call.func)
    if key is not None:
        from .project_callers import caller_model_class

        handed = caller_model_class(index, key)
        if handed is not None:
            facts.add(handed)
    for fact in sorted(facts, key=lambda f: f.name):
        if fact.state_writes:
            return fact, fact.state_writes
    return None


#: Calls on ``self`` that register a buffer (or a module, which may hold only
#: buffers) on the instance: the runtime refuses them on a prepared model after
#: its first forward (docs/runtime.md, late registrations). A late
#: ``register_parameter`` is adopted, so it is not one.
LATE_REGISTRATIONS = ("register_buffer", "add_module", "register_module")


def late_registrations(cls: ast.ClassDef) -> tuple[tuple[str, str], ...]:
    """(method, phrase) for each method of ``cls`` other than ``__init__`` and
    ``forward`` (a forward's registrations are every process's, and the runtime
    leaves them alone) that registers a buffer or a module on ``self``:
    pytorch-ewc's ``MLP.consolidate`` keeps each parameter's mean and Fisher
    diagonal with ``self.register_buffer("{}_mean".format(n), ...)``. A
    caller that calls it on the prepared model is refused at run time."""
    from .project_draws import class_methods

    found = []
    for name, method in class_methods(cls).items():
        if name in ("__init__", "forward"):
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LATE_REGISTRATIONS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
            ):
                found.append(
                    (
                        name,
                        f"`{cls.name}.{name}`, which registers on the model "
                        f"with `{ast.unparse(node).splitlines()[0]}`",
                    )
                )
                break
    return tuple(found)
