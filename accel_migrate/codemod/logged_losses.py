"""Where a training script's backpropagated losses are, and where they may be read.

AM008 makes a logged loss global where it is read (``accel.global_loss(loss)``).
That needs to know, for a tensor read (``loss.item()``, ``float(loss)``), which
loss it reads and where that loss is backpropagated: the loops of each loss's
backward (``loss_loops``), the terms of a backpropagated sum (``rec`` and ``kld``
of ``loss = rec + kld``: ``term_loops``), backpropagated expressions
(``(loss / ntokens).backward()``: ``expression_loops``), losses returned by a step
function (``returned_loss``), and whether a read is in the loop of its loss's
backward or after it (``placement``). ``LossPlaces`` answers these for the rule
that mixes it in (which has ``index``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import Key
from .branch_backwards import under_other_branch
from .fixed_length import fixed_length
from .reduction import loss_reduction
from .reduction.placement import code
from .returned_loss import ReturnedLoss, backpropagated
from .rule import keyword_arg
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

_STRIPPED = {"data", "detach", "cpu", "clone", "float"}


def _fixed_iterable(iterable: cst.BaseExpression) -> bool:
    if isinstance(iterable, (cst.Tuple, cst.List)):
        return True
    return (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Attribute)
        and iterable.func.attr.value in ("keys", "values", "items")
        and isinstance(iterable.func.value, cst.Name)
        and not iterable.args
    )


def _terms(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """The variables a loss adds up: ``a + b - c`` (also weighted, ``0.5 * b``,
    ``beta * b``, ``b / n``), and the dict of ``sum(d.values())``."""
    if value is None:
        return []
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, (cst.Add, cst.Subtract)):
            return _terms(value.left) + _terms(value.right)
        if isinstance(value.operator, cst.Multiply):
            # `0.5 * kld`, `beta * kld`: a weight the same on every process is
            # unchanged by global_loss, so either named side may be the term.
            return [x for x in (value.left, value.right) if isinstance(x, cst.Name)]
        if isinstance(value.operator, cst.Divide):
            return [value.left] if isinstance(value.left, cst.Name) else []
        return []
    if isinstance(value, cst.Name):
        return [value]
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "sum"
        and len(value.args) == 1
    ):
        inner = value.args[0].value
        if (
            isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value == "values"
            and isinstance(inner.func.value, cst.Name)
        ):
            return [inner.func.value]
    return []


def _expression_code(node: cst.BinaryOperation | cst.Call) -> str:
    """``loss / ntokens`` for ``(loss / ntokens)`` and ``loss/ntokens``."""
    return code(node.with_changes(lpar=(), rpar=())).replace(" ", "")


def _mean_of_variable(node: cst.BaseExpression) -> bool:
    """``loss.mean()`` of a variable: TransE-PyTorch's per-sample margin losses,
    backpropagated as ``loss.mean().backward()`` and logged as
    ``loss.mean().item()``."""
    return (
        isinstance(node, cst.Call)
        and not node.args
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "mean"
        and isinstance(node.func.value, cst.Name)
    )


def read_steps(node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[str]]:
    """The tensor under ``.data``, ``.detach()``, ``.cpu()``... and those steps'
    names, outermost first (``loss.data.cpu()``: ``loss``, ["cpu", "data"])."""
    steps: list[str] = []
    while True:
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _STRIPPED
            and not node.args
        ):
            steps.append(node.func.attr.value)
            node = node.func.value
        elif isinstance(node, cst.Attribute) and node.attr.value == "data":
            steps.append("data")
            node = node.value
        else:
            return node, steps


def stripped(node: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor under ``.data``, ``.detach()``, ``.cpu()``..."""
    return read_steps(node)[0]


class LossPlaces:
    """The backpropagated losses of ``self.index``'s module and their loops."""

    index: ModuleIndex

    @cached_property
    def loss_loops(self) -> dict[Key, set[cst.CSTNode | None]]:
        """Backpropagated variables, and the innermost loop of each of their backward."""
        losses: dict[Key, set[cst.CSTNode | None]] = {}
        for call in self.index.calls:
            for each in backpropagated(self.index, call):
                key = self.index.key(each)
                if key is not None:
                    losses.setdefault(key, set()).add(self._loop(call))
        # `loss = self._run_batch(x, y)`: a loss the step function backpropagated and
        # returned is a loss of the caller's loop.
        for key, call in self.index.returned_losses.bound.items():
            losses.setdefault(key, set()).add(self._loop(call))
        # `errD = errD_real + errD_fake`: a sum of backpropagated losses, logged but
        # never backpropagated itself, is a loss of the same batch too.
        changed = True
        while changed:
            changed = False
            for key, values in self.index.values.items():
                if key in losses or not values:
                    continue
                loops = [self._sum_of_losses(v, losses) for v in values]
                if all(loops) and (common := set.intersection(*loops)):  # type: ignore[arg-type]
                    losses[key] = common
                    changed = True
        return losses

    @cached_property
    def term_loops(self) -> dict[Key, set[cst.CSTNode | None]]:
        """The terms of a backpropagated loss (``rec`` and ``kld`` of ``loss = rec +
        kld``; the dict ``losses`` of ``loss = sum(losses.values())``), and the
        loops of that loss's backward. Logged, each is a value of this process's
        share of the batch, made global with its own reduction."""
        terms: dict[Key, set[cst.CSTNode | None]] = {}
        for key, loops in self.loss_loops.items():
            for value in self.index.values.get(key, ()):
                for term in _terms(value):
                    term_key = self.index.key(term)
                    if term_key is not None and term_key not in self.loss_loops:
                        terms.setdefault(term_key, set()).update(loops)
        # A step helper's `(loss / accum_steps).backward()`, with no loop of its
        # own: `loss` is the term of the expression backpropagated (read as
        # `return loss.item()`, for the caller's loop to log).
        for call in self.index.calls:
            if not isinstance(self._loop(call), cst.FunctionDef):
                continue
            for each in backpropagated(self.index, call):
                if not isinstance(each, cst.BinaryOperation):
                    continue
                for term in _terms(each):
                    term_key = self.index.key(term)
                    if term_key is not None and term_key not in self.loss_loops:
                        terms.setdefault(term_key, set()).add(self._loop(call))
        return terms

    def _sum_of_losses(
        self,
        value: cst.BaseExpression | None,
        losses: dict[Key, set[cst.CSTNode | None]],
    ) -> set[cst.CSTNode | None] | None:
        """The loops in which every term of ``a + b - c`` (numbers aside, one loss
        at least) is backpropagated; None when ``value`` is not such a sum."""
        if not (
            isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, (cst.Add, cst.Subtract))
        ):
            return None
        terms: list[cst.BaseExpression] = []
        pending: list[cst.BaseExpression] = [value]
        while pending:
            term = pending.pop()
            if isinstance(term, cst.BinaryOperation) and isinstance(
                term.operator, (cst.Add, cst.Subtract)
            ):
                pending += [term.left, term.right]
            else:
                terms.append(term)
        loops: set[cst.CSTNode | None] | None = None
        for term in terms:
            if isinstance(term, (cst.Integer, cst.Float)):
                continue
            key = self.index.key(term)
            if key is None or key not in losses:
                return None
            loops = set(losses[key]) if loops is None else loops & losses[key]
        if loops is None:
            return None
        return {loop for loop in loops if self._loop(value) is loop} or None

    def _loader_loop(self, node: cst.CSTNode) -> cst.For | None:
        """The innermost loop over a data loader (sharded when the file is
        migrated) that ``node`` is in, with or without a backward: an evaluation
        loop's batch values are this process's share's as much as a training
        loop's."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                return None
            if (
                isinstance(ancestor, cst.For)
                and self.index.loader_loop(ancestor.iter)[0]
            ):
                return ancestor
        return None

    def _loop(self, node: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def _read_of(self, call: cst.Call) -> cst.BaseExpression | None:
        """The tensor that ``x.item()`` or ``float(x)`` reads, for either call."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item":
            return None if call.args else func.value
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "numpy"
            and not call.args
            and _same_numbers(func.value)
        ):
            # `loss.data.cpu().numpy()` (proxy-nca's losses_per_epoch): a read
            # of the same numbers, as `.item()` of a 0-d loss
            return func.value
        if "builtins.float" in self.index.qualnames(func) and len(call.args) == 1:
            return call.args[0].value
        return None

    def _returned(self, tensor: cst.BaseExpression) -> ReturnedLoss | None:
        """The returned loss that ``tensor`` (a call, or a variable set from one) is."""
        returned = self.index.returned_losses
        if isinstance(tensor, cst.Call):
            found = returned.returned_by(tensor)
            return found if found is not None and found.position is None else None
        key = self.index.key(tensor)
        call = returned.call_of(key) if key is not None else None
        return returned.returned_by(call) if call is not None else None

    def _placement(self, node: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """Is ``node`` a backpropagated loss, read in the loop of its backward
        ("loop"), in a loop nested in it that may not run as often on every
        process ("inner": ``for cb in callbacks`` over a list whose length is not
        followed), or later in the function of that loop ("after")?

        After the loop the name may hold something else by then; a needs-review
        finding says so instead of guessing.
        """
        node = stripped(node)
        if isinstance(node, cst.Call) and self._returned(node) is not None:
            return "loop"  # `self._run_batch(x, y).item()`: read where it is made
        loops = self._loops_of(node)
        if loops is None:
            return None
        if self._loop(at) in loops or self._fixed_inner_loop(at, loops):
            return "loop"
        if any(a in loops for a in self.index.ancestors(at)):
            return "inner"
        if self._rebound_in_loader_loop(node, at):
            return None  # another loop's own loss (an evaluation's): AM009's sums
        if self.index.enclosing_function(at) in {
            (
                self.index.enclosing_function(loop)
                if not isinstance(loop, cst.FunctionDef)
                else loop
            )
            for loop in loops
            if loop is not None
        }:
            return "after"
        return None

    def _rebound_in_loader_loop(
        self, node: cst.BaseExpression, at: cst.CSTNode
    ) -> bool:
        """Is ``at`` in a loop over a data loader (not the backward's) that sets
        the name ``node`` reads itself, on a line before ``at``: the name then
        holds that loop's value (PGD training's ``robust_loss``, assigned anew
        in the test loop), not the backpropagated loss?"""
        loop = self._loop(at)
        if not isinstance(node, cst.Name) or not isinstance(loop, cst.For):
            return False
        if not self.index.loader_loop(loop.iter)[0]:
            return False
        key = self.index.key(node)
        if key is None:
            return False
        line = self.original_line(at)
        for target in findall(loop.body, m.AssignTarget()):
            for name in findall(target, m.Name()):
                if self.index.key(name) == key and self.original_line(name) < line:
                    return True
        return False

    def _fixed_inner_loop(
        self, at: cst.CSTNode, loops: set[cst.CSTNode | None]
    ) -> bool:
        """Is ``at`` in loops nested in one of ``loops`` that each run the same
        number of times on every process (over a literal tuple or list, the
        keys/values/items of a dict: ``for name in ("cls", "reg"):``, or a list
        that holds as many items everywhere: ``for cb in self.callbacks:``)?"""
        for ancestor in self.index.ancestors(at):
            if ancestor in loops:
                return True
            if isinstance(ancestor, cst.FunctionDef | cst.While):
                return False
            if isinstance(ancestor, cst.For) and not (
                _fixed_iterable(ancestor.iter)
                or fixed_length(self.index, ancestor.iter)
            ):
                return False
        return False

    def _sum_string(self, at: cst.CSTNode) -> cst.SimpleString:
        """``"sum"``, in the quotes an enclosing f-string leaves free (before
        Python 3.12 an f-string cannot hold its own quote)."""
        for ancestor in self.index.ancestors(at):
            if isinstance(ancestor, cst.FormattedString):
                if '"' in ancestor.start:
                    return cst.SimpleString("'sum'")
                break
        return cst.SimpleString('"sum"')

    @cached_property
    def expression_loops(self) -> dict[str, set[cst.CSTNode | None]]:
        """Backpropagated losses that are an expression over variables, not one
        (``(loss / ntokens).backward()``), by their code, and the loops of their
        backward: the same expression read in that loop (``(loss /
        ntokens).item()``) is the same loss of this process's share."""
        found: dict[str, set[cst.CSTNode | None]] = {}
        for call in self.index.calls:
            for each in backpropagated(self.index, call):
                if isinstance(each, cst.BinaryOperation) or _mean_of_variable(each):
                    found.setdefault(_expression_code(each), set()).add(  # type: ignore[arg-type]
                        self._loop(call)
                    )
        return found

    def _loops_of(self, node: cst.BaseExpression) -> set[cst.CSTNode | None] | None:
        """The loops of the backward of the loss ``node`` is, or is a term of."""
        if isinstance(node, cst.BinaryOperation) or _mean_of_variable(node):
            return self.expression_loops.get(_expression_code(node))  # type: ignore[arg-type]
        key = self.index.key(node)
        if key is not None and key in self.loss_loops:
            return self.loss_loops[key]
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
            key = self.index.key(node.value)  # `losses["cls"]` of a summed dict
        if key is not None and key in self.term_loops:
            return self.term_loops[key]
        return None

    @cached_property
    def unweighed_losses(self) -> dict[Key, str]:
        """Backpropagated variables whose reduction AM007 cannot tell the
        runtime (not known, or a mean over tokens whose count cannot be written
        at the backward), and why: ``accel.backward`` weighs them as a mean over
        samples, so ``accel.global_loss`` of them, which reuses that weighting,
        would not be the original's value either (annotated-transformer's
        ``loss_node`` of a handed loss-compute object)."""
        found: dict[Key, str] = {}
        for call in self.index.calls:
            for each in backpropagated(self.index, call):
                key = self.index.key(each)
                if key is None or key in found:
                    continue
                reduction = loss_reduction(self.index, each, call)
                if reduction.kind == "unknown":
                    found[key] = f"its reduction is not known ({reduction.reason})"
                elif reduction.kind == "token-mean" and reduction.count is None:
                    found[key] = reduction.reason
        return found

    def _term_reduction(
        self, tensor: cst.BaseExpression, at: cst.CSTNode
    ) -> list[cst.Arg] | str:
        """The ``global_loss`` keywords of a logged term of the backpropagated
        loss (which the runtime did not see given to ``accel.backward``), or why
        it cannot be combined like the original's."""
        node = stripped(tensor)
        key = self.index.key(node)
        if key is not None and key in self.loss_loops:
            if not under_other_branch(self.index, key, at):
                return []  # the runtime combines it as accel.backward weighed it
            # `if train: loss.backward()`, read after the branch: in a pass
            # without the backward the runtime has no weighting to reuse
            reduction = loss_reduction(self.index, node, at)
            if reduction.kind == "sum":
                return [keyword_arg("reduction", self._sum_string(at))]
            if reduction.kind == "token-mean" and reduction.count is not None:
                return [keyword_arg("count", reduction.count)]
            return []
        if isinstance(node, cst.Subscript):
            reduction = loss_reduction(self.index, node.value, at)
            if reduction.kind != "mean":
                return (
                    f"`{code(node)}` is a term of the backpropagated loss whose "
                    "reduction the rule cannot read from the dict"
                )
            return []
        reduction = loss_reduction(self.index, node, at)
        if reduction.kind == "mean":
            return []
        if reduction.kind == "sum":
            return [keyword_arg("reduction", self._sum_string(at))]
        if reduction.kind == "token-mean" and reduction.count is not None:
            return [keyword_arg("count", reduction.count)]
        return f"`{code(node)}`, a term of the backpropagated loss: {reduction.reason}"


#: Reads of a tensor's own numbers that a ``.numpy()`` read may go through.
_NUMPY_PATH = frozenset({"data", "cpu", "detach"})


def _same_numbers(expr: cst.BaseExpression) -> cst.Name | None:
    """The variable ``expr`` reads through ``.data``, ``.detach()`` and ``.cpu()``
    only (at least one of them: ``.numpy()`` needs a CPU tensor without a graph),
    or None."""
    inner, steps = read_steps(expr)
    if steps and _NUMPY_PATH.issuperset(steps) and isinstance(inner, cst.Name):
        return inner
    return None


#: Steps of ``stripped`` that make a new tensor (on a GPU: ``.cpu()`` copies).
_COPIES = frozenset({"cpu", "clone", "float"})


def copies(expr: cst.BaseExpression) -> bool:
    """Does ``expr`` go through a step of ``stripped`` that copies the tensor
    (``loss.detach().cpu()``)? ``accel.global_loss`` knows the loss given to
    ``accel.backward`` by its identity and storage: a copy of it is taken for
    another tensor (a mean), so the copy is made of the global loss instead."""
    return not _COPIES.isdisjoint(read_steps(expr)[1])


def with_innermost(
    expr: cst.BaseExpression,
    change: Callable[[cst.BaseExpression], cst.BaseExpression | None],
) -> cst.BaseExpression | None:
    """``expr`` with the tensor under its ``stripped`` steps changed (``loss`` in
    ``loss.data.cpu()`` -> ``accel.global_loss(loss).data.cpu()``), or None when
    ``change`` gives None."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        inner = with_innermost(expr.value, change)
        return None if inner is None else expr.with_changes(value=inner)
    if (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _STRIPPED
    ):
        inner = with_innermost(expr.func.value, change)
        if inner is None:
            return None
        return expr.with_changes(func=expr.func.with_changes(value=inner))
    return change(expr)
