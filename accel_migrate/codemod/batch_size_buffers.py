"""AM025's findings about buffers made with the configured batch size before a
loop over a prepared loader (``BufferFindings``, a part of the rule): the
Variable-era DCGAN's buffers filled in place in every step, and a GAN's targets
used whole beside the step's batch. The facts are ``preallocated_buffers``'s;
the rule (``rules/batch_size_shapes.py``) calls ``_preallocated`` for a shape
call outside every such loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from .analysis import Key, attr_chain
from .batch_size_derived import seed_keys
from .batch_size_part import SizeRulePart
from .preallocated_buffers import (
    _holders,
    assigned_name,
    buffer_fills,
    resized_first,
    step_uses,
)

if TYPE_CHECKING:
    pass


class BufferFindings(SizeRulePart):
    """Mixed into AM025's rule, whose methods it uses: ``_configured`` (is an
    expression a configured batch size), ``_enclosing_loops``, ``_what_size``,
    ``_line``, ``report``, ``index``."""

    def _preallocated(
        self, call: cst.Call, sizes: list[tuple[cst.Arg, cst.BaseExpression]]
    ) -> None:
        """``label = torch.FloatTensor(opt.batchSize)`` outside any loop over a
        prepared loader, a buffer that such a loop then fills in place
        (``label.data.resize_(batch_size).fill_(1)``, ``input.copy_(x)``):
        reported, unless every loop that fills it first resizes the buffer itself
        to the batch (``label.resize_(batch_size)``, ``input.resize_as_(x)``),
        after which the size it was made with no longer matters. A resize
        through ``.data`` resizes another tensor object: the buffer keeps the
        configured size."""
        hits = [expr for _, expr in sizes if self._configured(expr)]
        if not hits or self._enclosing_loops(call):
            return
        target = assigned_name(self.index, call)
        key = self.index.key(target) if target is not None else None
        if target is None or key is None:
            # `VGG(style.expand([B, C, H, W]))`: the names computed from it
            self._derived(call, hits[0], seed_keys(self.index, call))  # type: ignore[attr-defined]
            return
        fills = [
            fill
            for fill in buffer_fills(self.index, key, self._enclosing_loops)
            if not resized_first(self.index, fill[1], key, self._configured_size)
            # a resize_ to the configured size is reported where it is, once
            and not _resized_to_configured(fill[0], self._configured_size)
        ]
        if not fills:
            self._used_whole(call, target, key, hits[0])
            return
        shown = _code(target)
        fill = fills[0][0]
        spelled = attr_chain(hits[0]) or _code(hits[0])
        through_data = isinstance(fill.func, cst.Attribute) and isinstance(
            fill.func.value, cst.Attribute
        )
        why = (
            "a resize through `.data` resizes another tensor object and leaves "
            f"`{shown}` its configured size, so part of it is never filled"
            if through_data
            else f"`{shown}` keeps its configured size, so where the step "
            "uses it whole beside the batch's tensors their sizes differ"
        )
        self.report(
            call,
            "needs-review",
            f"`{shown}` is made with {self._what_size(spelled, hits[0])} "
            f"and filled in place in a step (`{_code(fill)}`, line "
            f"{self._line(fill)}): with the global batch split across processes "
            f"each process's batch has {spelled} / N samples, and {why} at world "
            "size > 1; resize the "
            f"tensor itself to the batch first in every step (`{shown}"
            f".resize_as_(x)`{', not through `.data`' if through_data else ''}), "
            "make it in the step from the batch's size, or launch with "
            "`--batch-mode per-device`",
            if_migrated=True,
        )

    def _used_whole(
        self,
        call: cst.Call,
        target: cst.Name | cst.Attribute,
        key: Key,
        size: cst.BaseExpression,
    ) -> None:
        """``y_real = torch.ones(opt.batch_size, 1)`` before the loop, then
        ``BCE_loss(D(x), y_real)`` in every step (``step_uses``): the buffer
        keeps the configured size beside each process's share of the batch."""
        uses = [
            (use, loop)
            for use, loop in step_uses(self.index, key, self._enclosing_loops)
            if not resized_first(self.index, loop, key, self._configured_size)
        ]
        reported: set[Key] = self.__dict__.setdefault("_whole_reported", set())
        if key in reported:
            return
        if not uses:
            self._sliced(call, target, key, size)
            if key not in reported and self._derived(call, size, {key}, key):  # type: ignore[attr-defined]
                reported.add(key)
            return  # (`torch.cat([torch.arange(n) + n, torch.arange(n)])`: once)
        reported.add(key)
        use, shown = uses[0][0], _code(target)
        spelled = attr_chain(size) or _code(size)
        self.report(
            call,
            "needs-review",
            f"`{shown}` is made with {self._what_size(spelled, size)} "
            f"before the loop and used whole beside the step's batch (`{_code(use)}`, "
            f"line {self._line(use)}): with the global batch split across "
            f"processes each process's batch has {spelled} / N samples, so "
            f"`{shown}` has N times its rows at world size > 1 (a size "
            "error in the loss, or a broadcast that changes it); make it in the "
            "step from the batch's own size (`x.size(0)` for a batch `x`, or "
            f"`torch.ones_like(output)`), or launch with `--batch-mode per-device`",
            if_migrated=True,
        )

    def _sliced(
        self,
        call: cst.Call,
        target: cst.Name | cst.Attribute,
        key: Key,
        size: cst.BaseExpression,
    ) -> None:
        """``noise = torch.randn(opt.batch_size, nz)`` before the loop, then
        ``noise[:b]`` in a step: every process takes the same first rows, where
        the original gave the second share's samples the rows after them. A
        constant buffer (``torch.ones(B)[:b]``) has the same rows everywhere:
        not reported."""
        if not self.qualnames(call.func) & ROW_VARYING:
            return
        for holder in _holders(self.index, self.index.module, key):
            loops = self._enclosing_loops(holder)
            subscript = self.index.parent(holder)
            if not loops or not _first_rows(subscript, holder):
                continue
            self.__dict__.setdefault("_whole_reported", set()).add(key)
            shown, spelled = _code(target), attr_chain(size) or _code(size)
            assert subscript is not None
            self.report(
                call,
                "needs-review",
                f"`{shown}` is made with {self._what_size(spelled, size)} "
                f"before the loop, and a step takes its first rows "
                f"(`{_code(subscript)}`, line {self._line(subscript)}): with the "
                "global batch split across processes every process takes the "
                "same first rows, where the original took the rows after them "
                "for the samples of the other processes' shares, so their "
                "values differ at world size > 1; take the rows of the "
                "process's share, make it in the step, or launch with "
                "`--batch-mode per-device`",
                if_migrated=True,
            )
            return

    def _configured_size(self, call: cst.Call) -> bool:
        """Does the shape call ``call`` take a configured batch size?"""
        return any(
            isinstance(expr, (cst.Name, cst.Attribute)) and self._configured(expr)
            for _, expr in shape_args(call)
        )


#: Makers of a tensor whose rows differ from each other (a constant one's first
#: rows are any rows).
ROW_VARYING = frozenset(
    f"torch.{name}"
    for name in (
        "arange",
        "randn",
        "rand",
        "randint",
        "randperm",
        "normal",
        "linspace",
        "logspace",
    )
)


def _first_rows(subscript: cst.CSTNode | None, holder: cst.CSTNode) -> bool:
    """``buf[:n]`` / ``buf[0:n]`` (also ``buf[:n, ...]``) with ``n`` not a
    literal: a step's first rows of ``buf``."""
    if not isinstance(subscript, cst.Subscript) or subscript.value is not holder:
        return False
    first = subscript.slice[0].slice if subscript.slice else None
    if not isinstance(first, cst.Slice) or first.step is not None:
        return False
    lower = first.lower
    starts = lower is None or (
        isinstance(lower, cst.Integer) and lower.evaluated_value == 0
    )
    return (
        starts and first.upper is not None and not isinstance(first.upper, cst.Integer)
    )


def _resized_to_configured(
    call: cst.Call, configured_size: Callable[[cst.Call], bool]
) -> bool:
    """``scale.resize_(opt.batchSize)`` in a step: the step's own finding."""
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "resize_"
        and configured_size(call)
    )


def _code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


def shape_args(call: cst.Call) -> list[tuple[cst.Arg, cst.BaseExpression]]:
    """The leading positional arguments, and the elements of a tuple or list given
    as the first (``torch.full((batch_size,), 1.0)``)."""
    found: list[tuple[cst.Arg, cst.BaseExpression]] = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        if isinstance(arg.value, (cst.Tuple, cst.List)):
            found += [(arg, e.value) for e in arg.value.elements]
        else:
            found.append((arg, arg.value))
    return found
