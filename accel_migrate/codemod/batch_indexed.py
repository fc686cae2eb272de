"""Outputs collected per batch and read back by batch number.

knowledge-distillation-pytorch computes its teacher's outputs once, over the
training loader, into a list (``teacher_outputs.append(out.numpy())`` in
``fetch_teacher_outputs``, which returns it), and every epoch's ``train_kd``
pairs its batch ``i`` with ``teacher_outputs[i]`` (``for i, (x, y) in
enumerate(dataloader)``). Over a sharded loader each process's entry ``i`` is
its share of batch ``i``, and it pairs, row for row, with its share of batch
``i`` in the later loop, as the original's entry pairs with the whole batch.
Gathered whole (``accel.gather_in_order(..., per_batch=True)``, AM029's
rewrite for outputs used as a whole), each entry would be the whole batch set
against a share: torch's size error, or a wrong broadcast. AM029 leaves such a
list as it is and reports it.

The list is followed from the loop that fills it through its function's
``return`` to the calls of that function in this file (``outputs =
fetch_teacher_outputs(...)``), and from there into the local functions it is
handed to (``train_kd(model, outputs, ...)``, its parameter); a read
``name[i]`` where ``i`` is the ``enumerate`` counter of a loop over a data
loader is a read by batch number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

_DEPTH = 3


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def batch_indexed_read(index: ModuleIndex, name: cst.Name, loop: cst.For) -> str | None:
    """Where the list ``name`` (filled in ``loop``) is read by batch number in a
    loop over a loader, as a phrase (```teacher_outputs[i]` in `train_kd```), or
    None."""
    scope = index.enclosing_function(loop)
    return _search(index, scope, name.value, 0, set())


def _search(
    index: ModuleIndex,
    scope: cst.FunctionDef | None,
    name: str,
    depth: int,
    seen: set[tuple[int, str]],
) -> str | None:
    if depth > _DEPTH or (id(scope), name) in seen:
        return None
    seen.add((id(scope), name))
    body: cst.CSTNode = scope.body if scope is not None else index.module
    found = _read_by_counter(index, body, name, scope)
    if found is not None:
        where = f" in `{scope.name.value}`" if scope is not None else ""
        return f"`{found}`{where}"
    # handed on to a local function: its parameter
    for call in findall(body, m.Call()):
        assert isinstance(call, cst.Call)
        if not any(m.matches(a.value, m.Name(name)) for a in call.args):
            continue
        for key, value in index.arguments(call):
            if m.matches(value, m.Name(name)):
                callee = index.callee(call)
                if callee is None:
                    continue
                found = _search(index, callee[0], key[1], depth + 1, seen)
                if found is not None:
                    return found
    # returned: what the callers bind it to
    if scope is not None and any(
        m.matches(r.value, m.Name(name))
        for r in findall(scope.body, m.Return())  # type: ignore[attr-defined]
    ):
        for call in index.call_sites(scope):
            parent = index.parent(call)
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                target = parent.targets[0].target
                if isinstance(target, cst.Name):
                    found = _search(
                        index,
                        index.enclosing_function(call),
                        target.value,
                        depth + 1,
                        seen,
                    )
                    if found is not None:
                        return found
    return None


def _read_by_counter(
    index: ModuleIndex,
    body: cst.CSTNode,
    name: str,
    scope: cst.FunctionDef | None,
) -> str | None:
    """``name[i]`` with ``i`` the ``enumerate`` counter of a loader loop around
    it, in ``scope`` itself (not in a function defined inside it)."""
    for loop in findall(body, m.For()):
        assert isinstance(loop, cst.For)
        if index.enclosing_function(loop) is not scope:
            continue
        is_loader, counted = index.loader_loop(loop.iter)
        if not (is_loader and counted and isinstance(loop.target, cst.Tuple)):
            continue
        counter = loop.target.elements[0].value
        if not isinstance(counter, cst.Name):
            continue
        for read in findall(loop.body, m.Subscript(value=m.Name(name))):
            assert isinstance(read, cst.Subscript)
            if len(read.slice) == 1 and m.matches(
                read.slice[0].slice, m.Index(value=m.Name(counter.value))
            ):
                return _code(read)
    return None


def batch_indexed_reason(
    index: ModuleIndex, name: cst.Name, loop: cst.For
) -> str | None:
    """AM029's needs-review message (after the list's name) for a list
    ``batch_indexed_read`` finds read back by batch number, or None."""
    read = batch_indexed_read(index, name, loop)
    if read is None:
        return None
    return (
        f"collects outputs per batch over a sharded loader and is read back by "
        f"batch number ({read}, in a loop over a sharded loader): each process's "
        "entry i is its share of batch i and pairs, row for row, with its share "
        "there, so it is not gathered (gathered whole, each entry would be the "
        "whole batch against a share); if it is also used whole, gather a copy "
        "with accel.gather_in_order"
    )
