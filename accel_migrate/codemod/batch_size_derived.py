"""AM025's finding about values computed before the loop from a tensor made with
the configured batch size (``DerivedFindings``, a part of the rule).

Fast neural style scripts make the style image's Gram matrices once, from the
style image repeated to the configured batch size, and compare them whole with
every batch's Gram matrices::

    style_features = VGG(style_tensor.expand([BATCH_SIZE, C, H, W]))
    style_gram = {}
    for key, value in style_features.items():
        style_gram[key] = utils.gram(value)
    for content_batch, _ in train_loader:
        ...
        s_loss = MSELoss(utils.gram(value), style_gram[key])

After migration each process's batch has ``BATCH_SIZE / N`` samples, and the
Gram matrices keep ``BATCH_SIZE`` rows: a size error in the loss at world size 2
(or a broadcast that changes it where a share has one row). The tensor is not
kept in a name of its own (it is handed to the feature net), so the buffer
checks (``batch_size_buffers``) do not see it: here the names computed from it
before the loop are followed (an assignment whose value reads one, the targets
of a loop over one, the container of ``d[k] = ...``), and a use of one in a
step beside a value of the step's batch is reported. A use that first takes the
step's rows (``gram_style[:n_batch]``, pytorch/examples' fast_neural_style) is
not one: a repeated image's rows are all alike. A loop in the step over one of
them zipped with the step's values (``for gm_y, gm_s in zip(grams_y,
gram_style)``) is followed to its targets' uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m

from .analysis import Key, attr_chain
from .batch_size_part import SizeRulePart
from .index_syntax import variable_names
from .model_methods import reads_step_value
from .preallocated_buffers import _beside
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Builtins whose result yields the items of their arguments (a loop over them
#: binds items of a derived value).
_ITEM_WRAPPERS = frozenset({"builtins.zip", "builtins.enumerate"})


class DerivedFindings(SizeRulePart):
    """Mixed into AM025's rule (``rules/batch_size_shapes.py``)."""

    def _derived(
        self,
        call: cst.Call,
        size: cst.BaseExpression,
        seeds: set[Key],
        kept: Key | None = None,
    ) -> bool:
        """Report the first use in a step, beside the step's batch, of a name
        computed before the loop from ``call`` (a shape call with the configured
        size ``size``); ``seeds``: the names that hold ``call``'s value, or a
        value computed from it, where it is made; ``kept``: the name ``call``
        is kept in itself, whose own uses are the buffer checks'
        (``batch_size_buffers``: a step may resize it first). True when
        reported."""
        scope = _scope(self.index, call)
        derived = _follow(self.index, scope, seeds, self._enclosing_loops)
        for key in sorted(derived - {kept}, key=str):
            use = self._step_use(scope, key)
            if use is None:
                continue
            holder, node = use
            made = _code(call)
            spelled = attr_chain(size) or _code(size)
            through = f"`{holder}`, computed from it before the loop"
            self.report(
                call,
                "needs-review",
                f"`{made}` is made with {self._what_size(spelled, size)}, and "
                f"{through}, is used whole beside the step's batch "
                f"(`{_code(node)}`, line {self._line(node)}): with the global "
                f"batch split across processes each process's batch has "
                f"{spelled} / N samples, so `{holder}` has N times its rows at "
                "world size > 1 (a size error in the loss, or a broadcast that "
                "changes it); take the step's rows of it (`[:x.size(0)]` for a "
                "batch `x`, where its rows are all alike), or launch with "
                "`--batch-mode per-device`",
                if_migrated=True,
            )
            return True
        return False

    def _step_use(self, scope: cst.CSTNode, key: Key) -> tuple[str, cst.CSTNode] | None:
        """(the name, the node using it whole beside the step's batch) for the
        first such use of ``key`` under ``scope``."""
        for name in findall(scope, m.Name()):
            if self.index.key(name) != key:  # type: ignore[arg-type]
                continue
            loops = self._enclosing_loops(name)
            if not loops:
                continue
            loop = loops[0][0]
            found = self._whole_use(name, loop, depth=0)
            if found is not None:
                return name.value, found  # type: ignore[attr-defined]
        return None

    def _whole_use(
        self, node: cst.CSTNode, loop: cst.For, depth: int
    ) -> cst.CSTNode | None:
        """The use of ``node`` (a derived name, or an item of one) beside a
        value of ``loop``'s batch; ``None`` where it is first cut to rows
        (``g[:n]``), or used otherwise."""
        parent = self.index.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if _sliced(parent):
                return None  # `gram_style[:n_batch]`: the step's rows
            node = parent  # `style_gram[key]`: an item, whole
        inner = self._zipped_loop(node)
        if inner is not None:
            loop_of, target = inner
            if depth > 1 or target is None:
                return None
            for item in variable_names(target):
                key = self.index.key(item)
                for name in findall(loop_of.body, m.Name()):
                    if key is not None and self.index.key(name) == key:  # type: ignore[arg-type]
                        found = self._whole_use(name, loop, depth + 1)
                        if found is not None:
                            return found
            return None
        user = _beside(self.index, node)  # type: ignore[arg-type]
        if user is None:
            return None
        use, others = user
        if any(_reads_step(self.index, other, loop) for other in others):
            return use
        return None

    def _zipped_loop(
        self, node: cst.CSTNode
    ) -> tuple[cst.For, cst.BaseExpression | None] | None:
        """(the loop, the part of its target bound to items of ``node``) for
        ``for t in node``, ``for a, b in zip(node, other)`` (``a``) and
        ``for i, t in enumerate(node)`` (``t``); None when ``node`` is not
        the iterable, or the part cannot be told (``None`` in the pair)."""
        parent = self.index.parent(node)
        if isinstance(parent, cst.For) and parent.iter is node:
            return parent, parent.target
        if not isinstance(parent, cst.Arg):
            return None
        call = self.index.parent(parent)
        holder = self.index.parent(call) if call is not None else None
        if not (
            isinstance(call, cst.Call)
            and self.qualnames(call.func) & _ITEM_WRAPPERS
            and isinstance(holder, cst.For)
            and holder.iter is call
        ):
            return None
        target = holder.target
        position = (
            1
            if "builtins.enumerate" in self.qualnames(call.func)
            else list(call.args).index(parent)
        )
        if isinstance(target, (cst.Tuple, cst.List)) and position < len(
            target.elements
        ):
            return holder, target.elements[position].value
        return holder, None


def _reads_step(index: ModuleIndex, part: cst.CSTNode, loop: cst.For) -> bool:
    """Does ``part`` read a value of ``loop``'s batch: one the step binds
    (``reads_step_value``), or an item of a loop in the step over one
    (``value`` of ``for key, value in generated_features.items():``,
    ``generated_features`` the feature net's output for the step's batch)?"""
    if reads_step_value(index, part, loop):
        return True
    keys = {index.key(n) for n in variable_names(part)} - {None}
    for inner in index.ancestors(part):
        if inner is loop:
            break
        if not isinstance(inner, cst.For):
            continue
        bound = {index.key(n) for n in variable_names(inner.target)}
        if keys & bound and reads_step_value(index, inner.iter, loop):
            return True
    return False


def seed_keys(index: ModuleIndex, call: cst.Call) -> set[Key]:
    """The names the statement holding ``call`` binds, where ``call`` is part of
    the value of an assignment (``style_features = VGG(x.expand([B, C, H,
    W]))``): they hold a value computed from it."""
    node: cst.CSTNode | None = call
    while node is not None and not isinstance(node, cst.BaseStatement):
        parent = index.parent(node)
        if isinstance(parent, cst.Assign) and parent.value is node:
            return _bound(index, [t.target for t in parent.targets])
        node = parent
    return set()


def _scope(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode:
    """The function that holds ``node`` (the module outside every function)."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
    return index.module


def _follow(
    index: ModuleIndex,
    scope: cst.CSTNode,
    seeds: set[Key],
    enclosing_loops: Callable[[cst.CSTNode], list[Any]],
) -> set[Key]:
    """``seeds`` and every name of ``scope`` computed from them outside the
    loops over a prepared loader (``enclosing_loops``: the rule's): a fixed
    point over its assignments and loops."""
    derived = set(seeds)
    binders = [
        node
        for node in findall(scope, m.Assign() | m.For())
        if not enclosing_loops(node)
    ]
    changed = True
    while changed:
        changed = False
        for node in binders:
            if isinstance(node, cst.Assign):
                read, targets = node.value, [t.target for t in node.targets]
            else:
                assert isinstance(node, cst.For)
                read, targets = node.iter, [_item_target(index, node)]
            if not _reads(index, read, derived):
                continue
            new = _bound(index, targets) - derived
            if new:
                derived |= new
                changed = True
    return derived


def _item_target(index: ModuleIndex, loop: cst.For) -> cst.BaseExpression:
    """What a loop over a derived value binds to its items: the value part of
    ``for i, v in enumerate(d)`` and ``for k, v in d.items()`` (the counter and
    the keys are no part of it), else the whole target."""
    target, it = loop.target, loop.iter
    pair = isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
    keyed = isinstance(it, cst.Call) and (
        "builtins.enumerate" in index.qualnames(it.func)
        or (isinstance(it.func, cst.Attribute) and it.func.attr.value == "items")
    )
    if pair and keyed:
        assert isinstance(target, (cst.Tuple, cst.List))
        return target.elements[1].value
    return target


def _bound(index: ModuleIndex, targets: list[cst.BaseExpression]) -> set[Key]:
    """The names assigned by ``targets``: a name, each name of a tuple, the
    container of ``d[k] = ...``."""
    found: set[Key] = set()
    for target in targets:
        while isinstance(target, cst.Subscript):
            target = target.value
        if isinstance(target, cst.Name):
            names = [target]
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = variable_names(target)
        else:
            continue
        for name in names:
            key = index.key(name)
            if key is not None:
                found.add(key)
    return found


def _reads(index: ModuleIndex, node: cst.CSTNode, keys: set[Key]) -> bool:
    return any(index.key(n) in keys for n in variable_names(node))


def _sliced(subscript: cst.Subscript) -> bool:
    """``g[:n]``, ``g[a:b, ...]``: a slice of the first dimension."""
    first = subscript.slice[0].slice if subscript.slice else None
    return isinstance(first, cst.Slice)


def _code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."
