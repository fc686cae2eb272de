"""Where a loop over a sharded loader accumulates this process's share.

- an increment ``x += ...`` of a variable set to zero before the loop (and not
  a step counter, the same on every process), unless the loop sets the variable
  anew before it in every iteration (``loss = criterion(out, y)`` then ``loss +=
  loss.item()``): no running sum, but each iteration's own value
  (``rebound_increments``);
- a value collected into an object made before the loop (``meter.update(v)``,
  ``values.append(v)``, ``values[k] = v``); not into a loader, a progress bar,
  or a metric object that combines itself across processes (torchmetrics).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain, variable_names
from ..names import TQDM_CALLS
from ..output_collections import single_element
from ..subtrees import findall
from .kinds import inside
from .ratios import following

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Methods that collect a value into an object made before the loop.
_COLLECTORS = {"append", "insert", "update", "add", "add_"}
#: Objects whose collected values are already combined across processes.
_SYNCED_PREFIXES = ("torchmetrics.",)


def sum_increments(index: ModuleIndex, loop: cst.For) -> Iterator[cst.AugAssign]:
    """``x += ...`` in the loop, on a variable set to zero before the loop (and
    not set anew before it in every iteration: ``rebound_increments``)."""
    for aug, rebound in _zeroed_increments(index, loop):
        if rebound is None:
            yield aug


def rebound_increments(
    index: ModuleIndex, loop: cst.For
) -> Iterator[tuple[cst.AugAssign, cst.BaseExpression]]:
    """``x += ...`` in the loop, on a variable set to zero before the loop but set
    anew in the loop before the increment in every iteration; with the value it
    is set to. What it holds after the loop is the last iteration's value, which
    is not a sum over the batches (the shape of a sum, not one)."""
    for aug, rebound in _zeroed_increments(index, loop):
        if rebound is not None:
            yield aug, rebound


def _zeroed_increments(
    index: ModuleIndex, loop: cst.For
) -> Iterator[tuple[cst.AugAssign, cst.BaseExpression | None]]:
    """``x += ...`` of a rank-local value in the loop, on a variable set to zero
    before the loop; with the value ``rebound_before`` finds (or None)."""
    for aug in findall(loop.body, m.AugAssign(operator=m.AddAssign())):
        assert isinstance(aug, cst.AugAssign)
        name = attr_chain(aug.target)
        if name is None or has_runtime_call(index, aug.value):
            continue
        if not index.divergence.rank_local(aug):
            continue  # a step counter: the same on every rank
        if _zeroed_before(index, loop, name):
            yield aug, rebound_before(index, loop, aug)


def rebound_before(
    index: ModuleIndex, loop: cst.For, aug: cst.AugAssign
) -> cst.BaseExpression | None:
    """The value that ``aug``'s target is set to (``index.values``, also
    unpacked) inside ``loop``, before ``aug`` on every path to it in an iteration:
    by an assignment earlier in a block that holds ``aug`` (or in a ``with`` block
    there). None where there is none."""
    key = index.key(aug.target)
    if key is None:
        return None
    values = [v for v in index.values.get(key, ()) if v is not None]
    values += [v for v, _, _ in index.unpacked.get(key, ())]
    for value in values:
        if inside(index, value, loop) and _runs_before(index, value, aug, loop):
            return value
    return None


def _runs_before(
    index: ModuleIndex, value: cst.BaseExpression, aug: cst.AugAssign, loop: cst.For
) -> bool:
    """Does the assignment of ``value`` run before ``aug`` whenever ``aug`` runs
    in an iteration of ``loop``? Its statement (or the outermost ``with`` around
    it, whose body always runs) comes earlier in a block that holds ``aug``."""
    assignment = next(
        (
            a
            for a in index.ancestors(value)
            if isinstance(a, (cst.Assign, cst.AnnAssign))
        ),
        None,
    )
    if assignment is None:
        return False
    before: list[cst.CSTNode] = [assignment]
    for ancestor in index.ancestors(assignment):
        if ancestor is loop:
            break
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.With)):
            before.append(ancestor)
        elif not isinstance(ancestor, cst.IndentedBlock) or not isinstance(
            index.parent(ancestor), cst.With
        ):
            break
    child: cst.CSTNode = aug
    for block in index.ancestors(aug):
        if block is loop:
            return False
        body = getattr(block, "body", None)
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementLine)) and (
            isinstance(body, Sequence)
        ):
            position = next((i for i, s in enumerate(body) if s is child), None)
            if position is not None and any(
                s is b for s in body[:position] for b in before
            ):
                return True
        child = block
    return False


def has_runtime_call(index: ModuleIndex, node: cst.CSTNode) -> bool:
    return any(
        index.is_runtime_call(c, "reduce", "global_loss", "gather")
        for c in findall(node, m.Call())
    )


def _zeroed_before(index: ModuleIndex, loop: cst.For, name: str) -> bool:
    node: cst.CSTNode = loop
    for ancestor in index.ancestors(loop):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            body: Sequence[cst.CSTNode] = ancestor.body
            position = next((i for i, s in enumerate(body) if s is node), 0)
            if any(_zeroes(statement, name) for statement in body[:position]):
                return True
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return False
        node = ancestor
    return False


def reduced_after(index: ModuleIndex, loop: cst.For, name: str) -> bool:
    """``name = accel.reduce(name)`` already follows the loop (a second run)."""
    block = index.parent(loop)
    body = getattr(block, "body", ())
    position = next((i for i, s in enumerate(body) if s is loop), None)
    if position is None:
        return False
    for statement in body[position + 1 :]:
        assign = (
            statement.body[0]
            if isinstance(statement, cst.SimpleStatementLine)
            else None
        )
        if not (
            isinstance(assign, cst.Assign)
            and index.is_runtime_call(assign.value, "reduce")
        ):
            return False
        if attr_chain(assign.targets[0].target) == name:
            return True
    return False


def read_after(index: ModuleIndex, loop: cst.For, name: str) -> bool:
    """Is ``name`` read after ``loop`` in its function (or module): in a
    statement that follows it, or follows a block around it?"""
    return any(
        attr_chain(reference) == name  # type: ignore[arg-type]
        for statement in following(index, loop)
        for reference in findall(statement, m.Name() | m.Attribute())
    )


def read_inside(
    index: ModuleIndex, loop: cst.For, name: str, aug: cst.AugAssign
) -> bool:
    for reference in findall(loop.body, m.Name() | m.Attribute()):
        if attr_chain(reference) != name:  # type: ignore[arg-type]
            continue
        if any(a is aug for a in index.ancestors(reference)):
            continue
        return True
    return False


def collected_values(
    index: ModuleIndex, loop: cst.For
) -> Iterator[tuple[cst.CSTNode, list[cst.BaseExpression], str]]:
    """Per-batch values collected into an object made before the loop: the
    statement (or call), the values, and how it is written (``xs += [v]``
    read as ``xs.append(v)``)."""
    divergence = index.divergence
    for call in findall(loop.body, m.Call(func=m.Attribute())):
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        method = call.func.attr.value
        if method not in _COLLECTORS or call not in divergence.local_mutations:
            continue
        receiver = _held_by(index, call.func.value)
        if not _made_before(index, receiver, loop):
            continue
        if any(a.star for a in call.args):
            continue
        values = [a.value for a in call.args]
        name = cst.Module([]).code_for_node(call.func.value)
        yield call, values, f"{name}.{method}(...)"
    for statement in findall(loop.body, m.Assign() | m.AugAssign()):
        if isinstance(statement, cst.Assign):
            if statement not in divergence.local_stores:
                continue
            targets = [t.target for t in statement.targets]
        else:
            assert isinstance(statement, cst.AugAssign)
            if not divergence.rank_local(statement):
                continue
            appended = _appended(index, statement, loop)
            if appended is not None:
                yield statement, [appended], f"{attr_chain(statement.target)} += [...]"
                continue
            if not isinstance(statement.target, cst.Subscript):
                continue
            targets = [statement.target]
        if len(targets) != 1 or not isinstance(targets[0], cst.Subscript):
            continue
        container = targets[0].value
        while isinstance(container, cst.Subscript):
            # `probs[i][idxs] += p`: cells of a row of an array made before
            container = container.value
        if not _made_before(index, container, loop):
            continue
        name = attr_chain(container)
        op = "=" if isinstance(statement, cst.Assign) else "+="
        yield statement, [statement.value], f"{name}[...] {op} ..."  # type: ignore[union-attr]


def _appended(
    index: ModuleIndex, statement: cst.AugAssign, loop: cst.For
) -> cst.BaseExpression | None:
    """``v`` of ``xs += [v]`` on a list made before ``loop`` (an append)."""
    if not isinstance(statement.operator, cst.AddAssign):
        return None
    value = single_element(statement.value)
    if value is None or not isinstance(statement.target, (cst.Name, cst.Attribute)):
        return None
    return value if _made_before(index, statement.target, loop) else None


#: Writes that add into cells an index picks, of their first argument (numpy's
#: unbuffered ``np.add.at(confusion, (t, p), 1)``) or of their receiver.
_SCATTERED_FUNCTIONS = frozenset({"numpy.add.at", "numpy.subtract.at"})
_SCATTERED_METHODS = frozenset({"index_add_", "scatter_add_", "index_put_"})


def scattered_counts(
    index: ModuleIndex, loop: cst.For
) -> Iterator[tuple[cst.Call, str]]:
    """Counts added into cells of an array made before ``loop`` (a loop over a
    loader): ``np.add.at(confusion, (t, p), 1)``, ``hist.index_add_(0, y,
    ones)``, ``m.index_put_(idx, v, accumulate=True)``; with how it is written."""
    for call in findall(loop.body, m.Call()):
        assert isinstance(call, cst.Call)
        func = call.func
        if index.qualnames(func) & _SCATTERED_FUNCTIONS and call.args:
            target = call.args[0].value
        elif isinstance(func, cst.Attribute) and func.attr.value in _SCATTERED_METHODS:
            if func.attr.value == "index_put_" and not any(
                a.keyword is not None
                and a.keyword.value == "accumulate"
                and m.matches(a.value, m.Name("True"))
                for a in call.args
            ):
                continue
            target = func.value
        else:
            continue
        if _made_before(index, target, loop):
            yield call, cst.Module([]).code_for_node(call)


def _held_by(index: ModuleIndex, receiver: cst.BaseExpression) -> cst.BaseExpression:
    """The object a collecting method's receiver is part of: ``metric_logger``
    of ``metric_logger.meters["loss"].update(v)`` (an item of an object the
    analysis has no name for is that object's state)."""
    while isinstance(receiver, (cst.Subscript, cst.Attribute)) and (
        isinstance(receiver, cst.Subscript) or index.key(receiver) is None
    ):
        receiver = receiver.value
    return receiver


def _made_before(
    index: ModuleIndex, receiver: cst.BaseExpression, loop: cst.For
) -> bool:
    """A variable set before ``loop`` (and not in it): an object that outlives
    the loop's batches. Not a loader, a progress bar, or a metric object that
    combines itself across processes."""
    key = index.key(receiver)
    if key is None or key in index.loaders:
        return False
    values = index.values.get(key, [])
    if not values or any(v is not None and inside(index, v, loop) for v in values):
        return False
    for value in values:
        if isinstance(value, cst.Call):
            names = index.qualnames(value.func)
            if any(n.startswith(_SYNCED_PREFIXES) for n in names):
                return False
            if names & TQDM_CALLS:
                return False
    return True


def nested_sums(index: ModuleIndex, loop: cst.For, statement: cst.CSTNode) -> set[str]:
    """The sums that loops over loaders nested in ``loop`` (not ``statement``'s
    own) accumulate (``right += 1`` in an N-way test run every few training
    steps). AM009 combines each right after its own loop, or reports that loop
    and leaves it: a value computed from them (``right / (right + error)``,
    appended to a list in ``loop``) is the whole data's, or is named there."""
    enclosing = {id(a) for a in index.ancestors(statement)}
    names: set[str] = set()
    for inner in findall(loop.body, m.For()):
        assert isinstance(inner, cst.For)
        if id(inner) in enclosing or not index.loader_loop(inner.iter)[0]:
            continue
        for aug in sum_increments(index, inner):
            name = attr_chain(aug.target)
            if name is not None:
                names.add(name)
    return names


def batch_dependent(value: cst.BaseExpression) -> bool:
    """Does ``value`` depend on this process's batch? (A constant step of a
    counter, ``meter.update(x, 1)``'s ``1``, does not.)"""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
        return False
    return bool(variable_names(value)) or bool(findall(value, m.Call()))


def _zeroes(statement: cst.CSTNode, name: str) -> bool:
    """``name = 0`` / ``0.0`` / ``torch.zeros(...)`` / ``torch.tensor(0.0)`` (also ``a = b = 0``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(
            attr_chain(t.target) == name for t in small.targets
        ):
            return _is_zero(small.value)
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Tuple) and isinstance(
                    small.value, cst.Tuple
                ):
                    for t, v in zip(
                        target.target.elements, small.value.elements, strict=False
                    ):
                        if attr_chain(t.value) == name:
                            return _is_zero(v.value)
    return False


def _is_zero(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.evaluated_value) == 0.0
    if isinstance(value, cst.Call):
        chain = attr_chain(value.func) or ""
        if chain.endswith(("zeros", "zeros_like")):
            return True
        if (
            chain.endswith("tensor")
            and value.args
            and isinstance(value.args[0].value, (cst.Integer, cst.Float))
        ):
            return float(value.args[0].value.evaluated_value) == 0.0  # type: ignore[union-attr]
    return False
