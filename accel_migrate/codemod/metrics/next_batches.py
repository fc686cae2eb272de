"""Metrics summed or collected in a loop that takes its batches with ``next(it)``.

Reptile's ``do_evaluation(net, test_iter, iterations)`` (gabrielhuang/
reptile-pytorch) runs ``for iteration in range(iterations): data, labels =
next(test_iter)`` over an endless generator around a DataLoader, appends
``loss.item()`` and ``accuracy.item()`` and returns their ``np.mean``. The loop
is not a ``for`` over the loader, so AM009's rewrites (which read the batch from
the loop's target) do not apply; once the loader is sharded, each value is this
process's share's. This module reports such sums and collections, as
needs-review, for AM009: a loop without a backward (a training step's logged
loss is AM008's) whose body calls ``next(...)`` on a loader's iterator, also one
a function is handed (``ModuleIndex.reads_loader``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..batches import possible_values
from ..file_tests import collective_note
from ..subtrees import findall
from .accumulators import _COLLECTORS, _held_by, _made_before, sum_increments

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from ..rule import Rule

#: How far a ``next(...)`` argument is followed back through variables and
#: parameters.
_DEPTH = 3


def _generator_over_loader(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> bool:
    """Is ``expr`` a local generator function's result that loops over a data
    loader (``make_infinite(DataLoader(...))``, whose body is ``while True: for
    x in dataloader: yield x``), directly or through variables and parameters?"""
    if depth > _DEPTH:
        return False
    if isinstance(expr, cst.Call):
        target = index.callee(expr)
        if target is None or not findall(target[0].body, m.Yield()):
            return False
        return any(
            index.loader_loop(inner.iter)[0]  # type: ignore[attr-defined]
            for inner in findall(target[0].body, m.For())
        )
    if not isinstance(expr, cst.Name):
        return False
    values = possible_values(index, expr)
    return bool(values) and all(
        v is not None and _generator_over_loader(index, v, depth + 1) for v in values
    )


def _reads_batches(index: ModuleIndex, loop: cst.For) -> bool:
    """``index.reads_loader(loop)``, or ``next(it)`` in its body on an endless
    generator around a loader (also one a function is handed)."""
    if index.reads_loader(loop):
        return True
    for call in findall(loop.body, m.Call(func=m.Name("next"))):
        args = call.args  # type: ignore[attr-defined]
        if (
            "builtins.next" in index.qualnames(call.func)  # type: ignore[attr-defined]
            and args
            and _generator_over_loader(index, args[0].value)
        ):
            return True
    return False


def _collections(index: ModuleIndex, loop: cst.For) -> list[tuple[cst.Call, str]]:
    """``losses.append(loss.item())``: a collecting call on an object made
    before ``loop`` whose arguments read a variable the loop assigns (a value
    of its batch)."""
    assigned = {
        index.key(name)
        for statement in findall(loop.body, m.Assign() | m.AugAssign())
        for target in (
            [t.target for t in statement.targets]  # type: ignore[attr-defined]
            if isinstance(statement, cst.Assign)
            else [statement.target]  # type: ignore[attr-defined]
        )
        for name in findall(target, m.Name())
    }
    assigned.discard(None)
    found = []
    for call in findall(loop.body, m.Call(func=m.Attribute())):
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        if call.func.attr.value not in _COLLECTORS or any(a.star for a in call.args):
            continue
        if not _made_before(index, _held_by(index, call.func.value), loop):
            continue
        if not any(
            index.key(name) in assigned
            for arg in call.args
            for name in findall(arg.value, m.Name())
        ):
            continue
        receiver = cst.Module([]).code_for_node(call.func.value)
        found.append((call, f"{receiver}.{call.func.attr.value}(...)"))
    return found


def report_next_batches(rule: Rule, loop: cst.For) -> None:
    """Needs-review findings for the sums and collections of ``loop`` when it
    takes a loader's batches with ``next(...)`` and runs no backward."""
    index = rule.index
    if not _reads_batches(index, loop) or index.runs_backward(loop.body):
        return
    if not index.divergence.uniform(loop):
        return  # AM009's rank-dependent branch findings are for loader loops
    # under a test of the file system: reported, but no collective goes there
    fix_where = collective_note(rule, loop)
    how = (
        "in a loop that takes its batches with next(...) from a data loader, "
        "which is sharded: "
    )
    fix = (
        "combine it across processes (accel.global_loss(loss) for a batch mean, "
        "accel.reduce for a sum or a count) or loop over the loader itself"
        + (f", where every process goes{fix_where}" if fix_where else "")
    )
    for aug in sum_increments(index, loop):
        name = attr_chain(aug.target) or "the sum"
        rule.report(
            aug,
            "needs-review",
            f"`{name}` sums per-batch values {how}each process adds its own "
            f"share's, and they are not combined; {fix}",
            if_migrated=True,
        )
    for statement, what in _collections(index, loop):
        rule.report(
            statement,
            "needs-review",
            f"values collected with `{what}` {how}each holds this process's "
            f"share's value, not the whole batch's; {fix}",
            if_migrated=True,
        )
