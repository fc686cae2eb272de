"""A statistic over the batch that a loss goes through: the part of AM007
(``tensor_backward``) that finds one, for the finding that says the loss cannot
be averaged across processes (a mean over dimension 0 inside a non-linear term,
targets normalised over the whole batch without gradient, SwAV's Sinkhorn-Knopp
codes, a matrix product over dimension 0 such as Barlow Twins' cross-correlation
``z1.T @ z2``: ``batch_contractions``).

A mixin of the rule: it reads the rule's ``index``.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .analysis import variable_names as variable_names_of
from .batch_contractions import contracts_batch_cst
from .subtrees import findall
from .trained_models import returns_of


class BatchStatistics:
    """AM007's search for a statistic over the batch dimension in a loss."""

    def _batch_statistic(self, expr: cst.CSTNode | None, depth: int = 0) -> str | None:
        """A statistic over the batch dimension that the loss goes through
        non-linearly (``(f.mean(0) - g.mean(0)).pow(2)``, ``x.var(0)``,
        ``x.std()``), following variables a few assignments back and into what
        a local function returns (DRAGAN's ``compute_gradient_penalty(D, X)``,
        whose penalty is taken at ``X + 0.5 * X.std() * noise``): its spelling,
        or None."""
        if expr is None or depth > _DEPTH:
            return None
        inner = _inside_calls(expr)
        for product in findall(expr, m.BinaryOperation() | m.Call()):
            # `z1.T @ z2`: a sum over the batch's samples (Barlow Twins'
            # cross-correlation), which the loss then squares
            if product is not expr and contracts_batch_cst(
                product, self.index.qualnames
            ):
                return code_of(product)
        for call in findall(expr, m.Call()):
            assert isinstance(call, cst.Call)
            normalised = self._normalised_targets(call)
            if normalised is not None:
                return normalised
            statistic = self._statistic(call)
            if statistic is None:
                continue
            how, args = statistic
            dims = [
                a.value for a in args if a.keyword is None or a.keyword.value == "dim"
            ][:1]
            if not dims:
                # `criterion(D(real) - torch.mean(D(fake)), ones)`: over the whole
                # batch, inside what makes a per-sample loss (RaGAN); a spread
                # over the whole tensor (`X.std()`) is never a loss's mean
                if call in inner or how != "mean":
                    return code_of(call)
                continue
            if not m.matches(dims[0], m.Integer("0")):
                continue
            # The mean over the batch of per-sample losses, as the whole loss, is
            # what per-process weighting rebuilds exactly; anything else is not.
            if how != "mean" or call is not expr:
                return f".{how}(0)"
        for call in findall(expr, m.Call()):
            found = self._returned_statistic(call, depth)  # type: ignore[arg-type]
            if found is not None:
                return found
        for name in findall(expr, m.Name()):
            key = self.index.key(name)  # type: ignore[arg-type]
            if key is None:
                continue
            values = [*self.index.values.get(key, ()), *self._augmented_near(name)]
            for value in values:
                found = self._batch_statistic(value, depth + 1)
                if found is not None:
                    return found
        return None

    def _returned_statistic(self, call: cst.Call, depth: int) -> str | None:
        """A statistic in what the local function ``call`` runs returns
        (``gradient_penalty = compute_gradient_penalty(D, real_imgs.data)``):
        its spelling and the function's name, or None. A method of a class
        (a model's ``forward``) is AM037's."""
        function = self.index.local_function(call.func)
        if function is None or self.index.enclosing_class(function) is not None:
            return None
        for value in returns_of(self.index, function):
            found = self._batch_statistic(value, depth + 1)
            if found is not None:
                return f"{found}` in `{function.name.value}"
        return None

    def _augmented_near(self, name: cst.CSTNode) -> list[cst.BaseExpression]:
        """What ``name``'s variable is grown by in the loop (or function) that
        reads it: ``loss += subloss`` in this step, not in another loop."""
        key = self.index.key(name)
        region = _region(self.index, name)
        return [
            node.value
            for node in self.index.augmented.get(key, ())  # type: ignore[arg-type]
            if _region(self.index, node.value) is region
        ]

    def _normalised_targets(self, call: cst.Call) -> str | None:
        """``q = sinkhorn(out)``: a local function run without gradient (under
        ``torch.no_grad()``, or decorated with it) that divides by a reduction
        over the whole tensor or over dimension 0 (SwAV's Sinkhorn-Knopp codes,
        ``Q /= torch.sum(Q)``): targets normalised over the batch. Its spelling
        (``torch.sum(Q)` in `sinkhorn``), or None."""
        function = self.index.local_function(call.func)
        if function is None or self.index.enclosing_class(function) is not None:
            return None
        if not any(variable_names_of(a.value) for a in call.args):
            return None
        if not (
            _no_grad_decorated(self.index, function) or _under_no_grad(self.index, call)
        ):
            return None
        for divisor in _divisors(function):
            for candidate in self._bound_values(divisor, function):
                for reduction in findall(candidate, m.Call()):
                    assert isinstance(reduction, cst.Call)
                    if self._whole_batch_reduction(reduction):
                        return f"{code_of(reduction)}` in `{function.name.value}"
        return None

    def _bound_values(
        self, expr: cst.BaseExpression, function: cst.FunctionDef
    ) -> list[cst.CSTNode]:
        """``expr``, and the values its names are bound to in ``function``."""
        found: list[cst.CSTNode] = [expr]
        for name in variable_names_of(expr):
            key = self.index.key(name)
            for value in self.index.values.get(key, ()) if key else ():
                if (
                    value is not None
                    and self.index.enclosing_function(value) is function
                ):
                    found.append(value)
        return found

    def _whole_batch_reduction(self, call: cst.Call) -> bool:
        """``torch.sum(Q)``, ``Q.sum()``, ``x.norm()``, ``torch.sum(Q, dim=0)``:
        a reduction over every element or over dimension 0."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _NORMALISERS:
            return False
        names = self.index.qualnames(func)
        function_form = any(n.startswith("torch.") for n in names)
        args = call.args[1:] if function_form else call.args
        if function_form and not call.args:
            return False
        if func.attr.value == "norm":
            args = args[1:]  # `x.norm(p, dim)`: the order first
        dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
        return not dims or m.matches(dims[0], m.Integer("0"))

    def _statistic(self, call: cst.Call) -> tuple[str, Sequence[cst.Arg]] | None:
        """``x.mean(...)`` / ``torch.mean(x, ...)`` (var, std): which, and the
        arguments after the tensor."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STATISTICS:
            names = self.index.qualnames(func)
            if any(n.startswith("torch.") for n in names):
                return func.attr.value, call.args[1:]
            if not names or not m.matches(func.value, m.Name("torch")):
                return func.attr.value, call.args
        return None


_STATISTICS = frozenset({"mean", "var", "std"})
#: How many assignments (and returns of local functions) back a loss is followed.
_DEPTH = 5
#: Reductions a value may be divided by to normalise it (``_normalised_targets``).
_NORMALISERS = frozenset({"sum", "mean", "norm", "amax", "logsumexp"})
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode"})


def _no_grad_decorated(index: ModuleIndex, function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        target = decorator.decorator
        if isinstance(target, cst.Call):
            target = target.func
        if index.qualnames(target) & _NO_GRAD:
            return True
    return False


def _under_no_grad(index: ModuleIndex, node: cst.CSTNode) -> bool:
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.With) and any(
            isinstance(item.item, cst.Call)
            and index.qualnames(item.item.func) & _NO_GRAD
            for item in ancestor.items
        ):
            return True
    return False


def _region(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """The outermost loop around ``node`` in its function (the function, or the
    module, when none)."""
    found: cst.CSTNode | None = None
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            return found or ancestor
        if isinstance(ancestor, (cst.For, cst.While)):
            found = ancestor
    return found


def _divisors(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    """What ``function`` divides by: ``x / d``, ``x /= d``."""
    found: list[cst.BaseExpression] = [
        op.right  # type: ignore[attr-defined]
        for op in findall(function.body, m.BinaryOperation(operator=m.Divide()))
    ]
    found += [
        op.value  # type: ignore[attr-defined]
        for op in findall(function.body, m.AugAssign(operator=m.DivideAssign()))
    ]
    return found


def _inside_calls(expr: cst.CSTNode) -> set[cst.CSTNode]:
    """The calls under ``expr`` that are in the arguments of another call."""
    found: set[cst.CSTNode] = set()
    for outer in findall(expr, m.Call()):
        for arg in outer.args:  # type: ignore[attr-defined]
            found.update(findall(arg, m.Call()))
    return found


def code_of(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."
