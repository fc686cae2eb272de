"""The terms of one ratio: two sums a loop over a loader accumulates, divided
one by the other in the loop or after it (``train_loss / count``, DGCNN's
``train_loss * 1.0 / count``, a token-weighted ``epoch_loss / epoch_tokens``).

AM009 combines both terms across processes or neither: where it declines one
(the reduction of the loss the numerator adds is unknown), combining the other
alone would print this process's share of the numerator over the whole data's
count, a number the original never printed; left alone, the ratio is this
process's own (both terms its share's), which the finding names.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

_DIVISION = m.BinaryOperation(operator=m.Divide() | m.FloorDivide())


def following(index: ModuleIndex, loop: cst.For) -> Iterator[cst.CSTNode]:
    """The statements that run after ``loop`` in its function (or module): those
    that follow it, or follow a block around it."""
    child: cst.CSTNode = loop
    for block in index.ancestors(loop):
        body = getattr(block, "body", None)
        if isinstance(block, (cst.IndentedBlock, cst.Module)) and isinstance(
            body, Sequence
        ):
            position = next((i for i, s in enumerate(body) if s is child), None)
            if position is not None:
                yield from body[position + 1 :]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef)):
            return
        child = block


def _terms(side: cst.BaseExpression) -> set[str]:
    return {
        chain
        for reference in findall(side, m.Name() | m.Attribute())
        if (chain := attr_chain(reference))  # type: ignore[arg-type]
    }


def ratio_partner(
    index: ModuleIndex, loop: cst.For, name: str, others: set[str]
) -> tuple[str, cst.BinaryOperation] | None:
    """A name of ``others`` that ``name`` is divided by (or divides) in the body
    of ``loop`` or after it, and the division; None where there is none."""
    scopes: list[cst.CSTNode] = [loop.body, *following(index, loop)]
    for scope in scopes:
        for division in findall(scope, _DIVISION):
            assert isinstance(division, cst.BinaryOperation)
            left, right = _terms(division.left), _terms(division.right)
            for mine, theirs in ((left, right), (right, left)):
                if name in mine:
                    partner = sorted((theirs & others) - {name})
                    if partner:
                        return partner[0], division
    return None
