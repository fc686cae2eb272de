"""The rewriting half of AM009 (``metric_sums``): what its planning on the
original tree decided, applied to the updated one (a value collected per batch
made the whole batch's, an increment wrapped, a sum reduced after its loop).

A mixin of the rule: it reads the rule's plan (``_after``, ``_wrap``,
``_counts``, ``_collect``, ``_reads``, ``_scaled``) and ``_torch_name``.
"""

from __future__ import annotations

from typing import TypeVar

import libcst as cst
import libcst.matchers as m

from .metrics.kinds import quotient_part
from .metrics.row_scaled import RowScaled
from .reduction.logged import host_copy_of
from .rule import keyword_arg
from .subtrees import findall

#: What holds a value that may be collected per batch (``values.append(v)``'s
#: argument, ``values[k] = v``, ``values[k] += v``).
_Valued = TypeVar("_Valued", cst.Arg, cst.Assign, cst.AugAssign, cst.Element)


class MetricRewrites:
    """AM009's rewrites, from the plan its ``visit_For`` made."""

    # -- rewriting --------------------------------------------------------------------
    def _collected(
        self, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.BaseExpression:
        how = self._collect.get(original)
        if how == "reduce":
            return self.runtime_call("reduce", [cst.Arg(value=updated)])
        if how == "global_loss":
            return self._global_loss(updated)
        if how == "global_number":
            return self._global_number(updated)
        if how == "row_scaled":
            return self._row_weighted(updated, self._scaled[original])
        return updated  # "as_is": its batch-mean reads are made the whole batch's

    def _with_collected(self, original: _Valued, updated: _Valued) -> _Valued:
        """The statement or argument with its value collected as planned."""
        if original.value in self._collect:
            return updated.with_changes(
                value=self._collected(original.value, updated.value)
            )
        return updated

    def _global_number(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """A batch mean that is a number -> ``accel.global_loss(torch.as_tensor(v)).item()``."""
        tensor = cst.parse_expression(f"{self._torch_name}.as_tensor(x)")
        assert isinstance(tensor, cst.Call)
        tensor = tensor.with_changes(args=[cst.Arg(value=value)])
        inner = self.runtime_call("global_loss", [cst.Arg(value=tensor)])
        return cst.Call(func=cst.Attribute(value=inner, attr=cst.Name("item")))

    def _row_weighted(
        self, value: cst.BaseExpression, scaled: RowScaled
    ) -> cst.BaseExpression:
        """``acc1[0]`` -> ``accel.global_loss(acc1[0], count=target.size(0))``;
        ``v.item()`` -> ``accel.global_loss(v, count=n).item()``."""
        count = keyword_arg("count", scaled.count.deep_clone())
        if scaled.item:
            assert isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            func = value.func
            inner = self.runtime_call("global_loss", [cst.Arg(value=func.value), count])
            return value.with_changes(func=func.with_changes(value=inner))
        return self.runtime_call("global_loss", [cst.Arg(value=value), count])

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if original_node in self._reads:
            return self._global_loss(updated_node)
        return updated_node

    def leave_Name(
        self, original_node: cst.Name, updated_node: cst.Name
    ) -> cst.BaseExpression:
        if original_node in self._reads:
            return self.runtime_call("global_loss", [cst.Arg(value=updated_node)])
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return self._with_collected(original_node, updated_node)

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        return self._with_collected(original_node, updated_node)

    def leave_Element(
        self, original_node: cst.Element, updated_node: cst.Element
    ) -> cst.Element:
        # `accs += [v]`: the one element, collected as `accs.append(v)`'s argument
        return self._with_collected(original_node, updated_node)

    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign:
        if original_node.value in self._collect:
            return self._with_collected(original_node, updated_node)
        how = self._wrap.get(original_node)
        if how is None:
            return updated_node
        value = updated_node.value
        if how == "global_loss":
            value = self._global_loss(value, self._counts.get(original_node))
        elif how == "global_number":
            value = self._global_number(value)
        elif how == "row_scaled":
            value = self._row_weighted(value, self._scaled[original_node.value])
        elif how == "quotient":
            value = self._reduced_quotient(value)
        else:
            value = self.runtime_call("reduce", [cst.Arg(value=value)])
        return updated_node.with_changes(value=value)

    def _global_loss(
        self, value: cst.BaseExpression, count: cst.BaseExpression | None = None
    ) -> cst.BaseExpression:
        """``x.item()`` -> ``accel.global_loss(x).item()``, ``float(x)`` ->
        ``float(accel.global_loss(x))``, ``a / n`` and ``a * 2`` -> the loss's side,
        ``a + b`` -> both terms; other forms (tensors) wrapped whole (the walk of
        ``reduction.logged.loss_leaves``). ``global_loss`` takes a tensor, never a
        number. ``count``: the token count of the one loss wrapped."""
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.Add, cst.Subtract)):
                return value.with_changes(  # the global loss of each term
                    left=self._term(value.left),
                    right=self._term(value.right),
                )
            if isinstance(value.operator, cst.Divide) or findall(value.left, m.Call()):
                return value.with_changes(left=self._global_loss(value.left, count))
            return value.with_changes(right=self._global_loss(value.right, count))
        weight = [keyword_arg("count", count.deep_clone())] if count is not None else []
        if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
            func = value.func  # type: ignore[attr-defined]
            inner = self.runtime_call(
                "global_loss", [cst.Arg(value=func.value), *weight]
            )
            return value.with_changes(func=func.with_changes(value=inner))  # type: ignore[attr-defined]
        if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
            arg = value.args[0]  # type: ignore[attr-defined]
            inner = self.runtime_call(
                "global_loss", [cst.Arg(value=arg.value), *weight]
            )
            return value.with_changes(args=[arg.with_changes(value=inner)])  # type: ignore[attr-defined]
        tensor = host_copy_of(value)
        if tensor is not None:
            # `loss.detach().cpu().numpy()` -> `accel.global_loss(loss).detach().cpu().numpy()`
            wrapped = self.runtime_call("global_loss", [cst.Arg(value=tensor), *weight])
            return _replaced(value, tensor, wrapped)
        return self.runtime_call("global_loss", [cst.Arg(value=value), *weight])

    def _reduced_quotient(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """``a / n`` -> ``accel.reduce(a) / accel.reduce(n)``, also inside ``1 -
        a / n`` (``kinds.quotient_part``; the constant stays)."""
        part = quotient_part(value)
        assert isinstance(part, cst.BinaryOperation)
        reduced = part.with_changes(
            left=self.runtime_call("reduce", [cst.Arg(value=part.left)]),
            right=self.runtime_call("reduce", [cst.Arg(value=part.right)]),
        )
        if part is value:
            return reduced
        assert isinstance(value, cst.BinaryOperation)
        if value.left is part:
            return value.with_changes(left=reduced)
        return value.with_changes(right=reduced)

    def _term(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """A term of a sum of batch means: a number written in the code (``1 -
        acc.item()``) is every process's alike and stays as it is."""
        inner = value.expression if isinstance(value, cst.UnaryOperation) else value
        if isinstance(inner, (cst.Integer, cst.Float)):
            return value
        return self._global_loss(value)

    def leave_For(
        self, original_node: cst.For, updated_node: cst.For
    ) -> cst.For | cst.FlattenSentinel[cst.BaseStatement]:
        names = self._after.get(original_node)
        if not names:
            return updated_node
        lines = [
            cst.SimpleStatementLine(
                body=[
                    cst.Assign(
                        targets=[cst.AssignTarget(target=cst.parse_expression(name))],
                        value=self.runtime_call(
                            "reduce", [cst.Arg(value=cst.parse_expression(name))]
                        ),
                    )
                ]
            )
            for name in names
        ]
        return cst.FlattenSentinel([updated_node, *lines])


def _replaced(
    chain: cst.BaseExpression, receiver: cst.BaseExpression, by: cst.BaseExpression
) -> cst.BaseExpression:
    """The method chain ``chain`` with its innermost ``receiver`` replaced."""
    if chain is receiver:
        return by
    assert isinstance(chain, cst.Call) and isinstance(chain.func, cst.Attribute)
    func = chain.func
    return chain.with_changes(
        func=func.with_changes(value=_replaced(func.value, receiver, by))
    )
