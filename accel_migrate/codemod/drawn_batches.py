"""A training step that picks its batch out of data made before its loop by
indices it draws itself (AM019's ``drawn_pick``).

powerful-gnns' ``train()``: ``selected_idx =
np.random.permutation(len(train_graphs))[:args.batch_size]``, then
``batch_graph = [train_graphs[idx] for idx in selected_idx]``; also
``x[idx]`` with ``idx = torch.randint(0, n, (bs,))`` or ``random.sample(...)``.
No loader is read, so nothing shards the batch: every process draws the same
indices (the same seeds) and trains on the same whole batch. A name counts as
drawn when a value assigned to it in the step calls a random draw
(``random_names.is_random_draw``) or reads another drawn name; a comprehension
or ``for`` target over a drawn name is drawn too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from .random_names import is_random_draw
from .subtrees import findall


@dataclass(frozen=True)
class DrawnPick:
    """``train_graphs[idx]``: the stored data and the draw of its indices."""

    data: str  # "train_graphs"
    draw: cst.Call  # np.random.permutation(len(train_graphs))


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in findall(node, m.Name())}  # type: ignore[attr-defined]


def drawn_pick(
    body: cst.CSTNode,
    qualnames: Callable[[cst.CSTNode], set[str]],
    skip: set[str],
) -> DrawnPick | None:
    """The first subscript of ``body`` that picks items of a variable the step
    does not set (nor one of ``skip``) by indices drawn in the step."""
    drawn: dict[str, cst.Call] = {}
    bindings: list[tuple[set[str], cst.CSTNode]] = []
    for statement in findall(body, m.Assign()):
        assert isinstance(statement, cst.Assign)
        targets: set[str] = set()
        for target in statement.targets:
            targets |= _names(target.target)
        bindings.append((targets, statement.value))
    for loop in findall(body, m.CompFor() | m.For()):
        bindings.append((_names(loop.target), loop.iter))  # type: ignore[attr-defined]
    changed = True
    while changed:
        changed = False
        for targets, value in bindings:
            if targets <= set(drawn):
                continue
            draw = next(
                (
                    call
                    for call in findall(value, m.Call())
                    if any(is_random_draw(q) for q in qualnames(call.func))  # type: ignore[attr-defined]
                ),
                None,
            )
            if draw is None:
                draw = next((drawn[n] for n in _names(value) if n in drawn), None)
            if draw is None:
                continue
            assert isinstance(draw, cst.Call)
            for name in targets - set(drawn):
                drawn[name] = draw
                changed = True
    if not drawn:
        return None
    assigned = {name for targets, value in bindings for name in targets}
    for node in findall(body, m.Subscript(value=m.Name())):
        assert isinstance(node, cst.Subscript)
        base = node.value
        assert isinstance(base, cst.Name)
        if base.value in assigned or base.value in skip:
            continue
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                hit = [n for n in _names(element.slice.value) if n in drawn]
                if hit:
                    return DrawnPick(base.value, drawn[hit[0]])
    return None
