"""What a local function's returned expression is (a loader, a model, an
optimizer or a loss, with a loss's reduction): the part of the project view's
facts (``project_helpers.HelperFacts``) that reads returns. Static only: ``ast``."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .names import (
    DATALOADER_CALLS,
    FUNCTIONAL_LOSSES,
    IGNORING_LOSSES,
    MODEL_FACTORY_PREFIXES,
    is_nn_module_constructor,
    is_optimizer_class,
)
from .optimizer_factories import class_expression
from .project_nodes import SAME_OBJECT_METHODS, assigned_in, same_object_of
from .project_ranks import at_least_2d, loss_at_least_2d
from .reaching_values import reaching_value

if TYPE_CHECKING:
    from .project_facts import HelperFact
    from .project_scans import _Scan
    from .project_sum_terms import SumTerms

_DEPTH = 12
_LOSS_CLASSES = ("Loss",)


class ReturnKinds:
    """``HelperFacts``'s reading of returned expressions (a base of it: ``scan``,
    ``_terms``, ``resolve``, ``_follow`` and ``_dotted`` are its)."""

    scan: _Scan
    _terms: SumTerms

    def _container(
        self, returns: list[ast.Return], function: ast.AST
    ) -> tuple[str, tuple[str, ...], str]:
        """("tuple" or "dict", the kinds of its items, why a loader of them cannot
        be sharded) when every return is a display of one shape holding a loader
        (``return train_loader, val_loader``; ``return {"train": ..., "val": ...}``)."""
        values = [r.value for r in returns]
        relayed = self._relayed_container(values)
        if relayed is not None:
            return relayed
        if all(
            isinstance(v, ast.Tuple)
            and not any(isinstance(e, ast.Starred) for e in v.elts)
            for v in values
        ):
            shape, elements = "tuple", [v.elts for v in values]  # type: ignore[union-attr]
            if len({len(e) for e in elements}) != 1:
                return ("", (), "")
        elif all(isinstance(v, ast.Dict) and None not in v.keys for v in values):
            shape, elements = "dict", [v.values for v in values]  # type: ignore[union-attr]
        else:
            return ("", (), "")
        found = [[self._item_kind(e, function) for e in each] for each in elements]
        if shape == "tuple":
            columns = list(zip(*found, strict=True))
            items = tuple(
                c[0][0] if len({k for k, _, _ in c}) == 1 else "" for c in columns
            )
        else:
            kinds = {k for each in found for k, _, _ in each}
            items = (kinds.pop(),) if len(kinds) == 1 else ("",)
        if "loader" not in items and not any(
            k == "loader" for each in found for k, _, _ in each
        ):
            return ("", (), "")
        why = next((w for each in found for k, _, w in each if w), "")
        return (shape, items, why)

    def _item_kind(self, expr: ast.expr, function: ast.AST) -> tuple[str, str, str]:
        """An item of a returned tuple: its kind (``kind_of``), or "none" for
        ``None`` and "number" for a number (pytorch-deeplab-xception's ``return
        train_loader, val_loader, test_loader, num_class``, ``test_loader =
        None``, ``num_class = train_set.NUM_CLASSES``): values that are surely
        no loader, which AM006 leaves as they are beside the loaders it prepares."""
        found = self.kind_of(expr, function, 0)
        if found[0]:
            return found
        plain = _plain_kind(expr, function, 0)
        if not plain and self._dataset(expr, function, 0):
            plain = "dataset"
        return (plain, "", "") if plain else found

    def _dataset(self, expr: ast.expr, function: ast.AST, depth: int) -> bool:
        """A Dataset (``train_set = _dataset(128, 0)`` returning ``Toy(x, y)``,
        ``class Toy(TensorDataset)``): a torch or torchvision dataset, or a class
        or function of this module that builds one; surely no loader."""
        if depth > 4:
            return False
        if isinstance(expr, ast.Name):
            last = reaching_value(function, expr)
            values = [last] if last is not None else assigned_in(function, expr.id)
            return bool(values) and all(
                v is not None and self._dataset(v, function, depth + 1) for v in values
            )
        if not isinstance(expr, ast.Call):
            return False
        target = self.resolve(expr.func)
        if isinstance(target, str):
            return _dataset_name(target)
        if not isinstance(target, tuple) or target[0] != self.path:
            return False
        name = target[1]
        if name in self.scan.classes:
            return self._dataset_class(self.scan.classes[name], depth + 1)
        inner = self.scan.functions.get(name)
        if inner is None:
            return False
        returns = [n for n in ast.walk(inner) if isinstance(n, ast.Return)]
        return bool(returns) and all(
            r.value is not None and self._dataset(r.value, inner, depth + 1)
            for r in returns
        )

    def _dataset_class(self, cls: ast.ClassDef, depth: int) -> bool:
        if depth > 4:
            return False
        for base in cls.bases:
            target = self.resolve(base)
            if isinstance(target, str) and _dataset_name(target):
                return True
            if (
                isinstance(target, tuple)
                and target[0] == self.path
                and target[1] in self.scan.classes
                and self._dataset_class(self.scan.classes[target[1]], depth + 1)
            ):
                return True
        return False

    def _relayed_container(
        self, values: list[ast.expr | None]
    ) -> tuple[str, tuple[str, ...], str] | None:
        """A function each of whose returns hands back what another function of
        the project returns (capsule-net-pytorch's ``load_data(args)``: ``return
        load_mnist(args)``): that function's tuple or dict of loaders, followed
        through the chain (each link is a fact of the project view)."""
        found = set()
        for value in values:
            if not isinstance(value, ast.Call):
                return None
            target = self.resolve(value.func)
            if not isinstance(target, tuple):
                return None
            fact = self._follow(target)
            if fact is None or not fact.container:
                return None
            found.add((fact.container, fact.items, fact.unshardable))
        if len(found) != 1:
            return None
        return found.pop()

    def kind_of(
        self, expr: ast.expr, function: ast.AST, depth: int
    ) -> tuple[str, str, str]:
        """(kind, reduction, why unshardable) of a returned expression."""
        if depth > _DEPTH:
            return ("", "", "")
        if isinstance(expr, ast.IfExp):
            both = {
                self.kind_of(e, function, depth + 1) for e in (expr.body, expr.orelse)
            }
            return both.pop() if len(both) == 1 else ("", "", "")
        if isinstance(expr, ast.BinOp):
            return self._combined(expr, function, depth)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            # `-(one_hot * log_prb).sum(dim=1).mean()`: a negated loss is
            # reduced as the loss is
            inner = self.kind_of(expr.operand, function, depth + 1)
            return inner if inner[0] == "loss" else ("", "", "")
        if isinstance(expr, ast.Name):
            last = reaching_value(function, expr)
            values = (
                [last]
                if last is not None
                else assigned_in(function, expr.id)
                or self.scan.assigned.get(expr.id, [])
            )
            # `net = net.cuda()` says nothing new of `net`: its other values decide
            values = [v for v in values if not same_object_of(v, expr.id)]
            # `optimizer = None` then one optimizer per branch of the config
            # (human-pose-estimation's get_optimizer): an optimizer factory;
            # a loader or model that may be None is not one (callers test it)
            built = [v for v in values if not _is_none(v)]
            if built and len(built) < len(values):
                found = {self.kind_of(v, function, depth + 1) for v in built}
                if found == {("optimizer", "", "")}:
                    return ("optimizer", "", "")
                return ("", "", "")
            if not values:
                return ("", "", "")
            found = {self.kind_of(v, function, depth + 1) for v in values}
            return found.pop() if len(found) == 1 else ("", "", "")
        if not isinstance(expr, ast.Call):
            return ("", "", "")
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in SAME_OBJECT_METHODS:
            inner = self.kind_of(func.value, function, depth + 1)
            if inner[0] == "model":
                return inner
        if class_expression(
            func,
            lambda name: assigned_in(function, name),
            self.scan.assigned,
            self._dotted,
        ):
            # `OPTIMIZERS[name](params, **kwargs)`, `getattr(torch.optim, name)(...)`
            return ("optimizer", "", "")
        if isinstance(func, ast.Attribute) and func.attr in ("sum", "mean"):
            inner = self.kind_of(func.value, function, depth + 1)
            product = inner[0] != "loss" and _log_probability_product(
                func.value, function, self.resolve
            )
            if product:
                # DGCNN's label smoothing `(one_hot * log_prb).sum(dim=1)`, with
                # `log_prb = F.log_softmax(pred, dim=1)`: per element, and the
                # log-probabilities are proven 2-D (classes on dimension 1)
                inner = ("loss", "none", "")
            if inner[:2] == ("loss", "none"):
                # `F.kl_div(..., reduction="none").sum(1)`: per sample still
                ranked = product or self._ranked(func.value, function)
                return ("loss", _per_sample(func.attr, expr, ranked), "")
        target = self.resolve(func)
        if isinstance(target, str):
            found = self._external(target, expr)
            # imported here: the reduction package imports libcst, which a run
            # the cache answers whole must not (the project view runs there)
            from .reduction.summed_weights import ast_step_weighted

            if found[:2] == ("loss", "sum") and ast_step_weighted(
                target.rsplit(".", 1)[1], expr, function
            ):
                # SiamFC's BalancedLoss: weights normalised over the batch
                return ("loss", "unknown", "")
            return found
        if isinstance(target, tuple):
            fact = self._follow(target)
            if fact is not None and fact.returns:
                return (fact.returns, fact.reduction, fact.unshardable)
            handed = _handed_back(fact, expr) if fact is not None else None
            if handed is not None:
                # `init_model(net=LeNetEncoder(), restore=...)` (pytorch-adda):
                # a function handing back the model it is given is that model
                inner = self.kind_of(handed, function, depth + 1)
                if inner[0] == "model":
                    return inner
            return ("", "", "")
        # `criterion(out, y)`, with `criterion = nn.CrossEntropyLoss(...)`
        if isinstance(func, ast.Name):
            values = assigned_in(function, func.id) or self.scan.assigned.get(
                func.id, []
            )
            modules = [v for v in values if isinstance(v, ast.Call)]
            if modules and len(modules) == len(values):
                found = {self._loss_module(v) for v in modules}
                if len(found) == 1:
                    return found.pop()
        return ("", "", "")

    def _ranked(self, loss: ast.expr, function: ast.AST) -> bool:
        """Is ``loss`` an elementwise ``F.*`` loss of an input provably 2-D or
        more (``F.kl_div(F.log_softmax(pred, dim=1), ...)``)?"""
        if not isinstance(loss, ast.Call):
            return False
        target = self.resolve(loss.func)
        return isinstance(target, str) and loss_at_least_2d(
            target, loss, function, self.resolve
        )

    def _external(self, target: str, call: ast.Call) -> tuple[str, str, str]:
        if target in DATALOADER_CALLS:
            for keyword in call.keywords:
                if (
                    keyword.arg == "batch_size"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is None
                ):
                    return ("loader", "", "it is built with batch_size=None")
            return ("loader", "", "")
        if is_optimizer_class(target):
            return ("optimizer", "", "")
        if is_nn_module_constructor(target) or target.startswith(
            MODEL_FACTORY_PREFIXES
        ):
            return ("model", "", "")
        if target.startswith("torch.nn.functional."):
            name = target.rsplit(".", 1)[1]
            if name in FUNCTIONAL_LOSSES:
                return ("loss", _reduction(name, call), "")
        return ("", "", "")

    def _loss_module(self, construct: ast.Call) -> tuple[str, str, str]:
        target = self._dotted(construct.func)
        name = target.rsplit(".", 1)[-1]
        if target.startswith("torch.nn.") and name.endswith(_LOSS_CLASSES):
            return ("loss", _reduction(name, construct), "")
        return ("", "", "")

    def _combined(
        self, expr: ast.BinOp, function: ast.AST, depth: int
    ) -> tuple[str, str, str]:
        left = self.kind_of(expr.left, function, depth + 1)
        right = self.kind_of(expr.right, function, depth + 1)
        if isinstance(expr.op, ast.Add) and left[0] == right[0] == "loss":
            same = left[1] == right[1]
            return ("loss", left[1] if same else "unknown", "")
        if isinstance(expr.op, ast.Add) and "loss" in (left[0], right[0]):
            # `rec + beta * torch.sum(torch.abs(code))`: a loss plus a sum over
            # the elements of parameters (checked at each call: project_facts)
            loss, other = (
                (left, expr.right) if left[0] == "loss" else (right, expr.left)
            )
            if self._terms.batch_sum(other, depth + 1):
                return ("loss", "sum" if loss[1] == "sum" else "unknown", "")
        if isinstance(expr.op, (ast.Mult, ast.Div)):
            constant = expr.right if left[0] == "loss" else expr.left
            loss = left if left[0] == "loss" else right
            if loss[0] == "loss" and (
                isinstance(expr.op, ast.Mult) or constant is expr.right
            ):
                if self._terms.scale(constant):
                    return loss
        return ("", "", "")


def _per_sample(method: str, call: ast.Call, ranked: bool) -> str:
    """The reduction of ``loss.mean()`` / ``loss.sum(1)`` of a per-element loss
    (``reduction="none"``): over everything, a mean or a sum over its elements,
    which are the samples of the share where the loss is per sample (a mean of
    the share, as a mean criterion's); over one dimension counted from the
    start other than the batch's (a literal >= 1: of a 1-D loss it raises), or
    the last (``-1``) of a loss ``ranked`` (proven 2-D or more), per sample still
    ("none"); else unknown: ``.sum(-1)`` of a 1-D loss (a helper's parameters
    have no known number of dimensions) sums the batch itself."""
    dims = [a for a in call.args] + [k.value for k in call.keywords if k.arg == "dim"]
    others = [k for k in call.keywords if k.arg not in ("dim", "keepdim")]
    if others or len(dims) > 1:
        return "unknown"
    if not dims:
        return method
    dim = dims[0]
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub):
        # the last dimension of two or more is not the batch's; `-2` of two is
        return "none" if ranked and _literal(dim.operand) == 1 else "unknown"
    if (
        isinstance(dim, ast.Constant)
        and isinstance(dim.value, int)
        and not isinstance(dim.value, bool)
        and dim.value > 0
    ):
        return "none"
    return "unknown"


def _log_probability_product(
    expr: ast.expr, function: ast.AST, resolve: Callable[[ast.expr], object]
) -> bool:
    """Is ``expr`` a product (``*``) one of whose factors is, or is a name
    bound only to, ``F.log_softmax(x, dim=1)`` (a tensor of two dimensions or
    more, else it raises, with the classes on dimension 1 and the samples on
    dimension 0): the written-out cross entropy against a target distribution,
    a per-element loss of log-probabilities proven 2-D (``at_least_2d``). Any
    other ``dim`` is not read: a sequence-first ``log_softmax(x, dim=2)`` has
    the batch on dimension 1, which ``.sum(dim=1)`` then adds over."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult)):
        return False
    for factor in (expr.left, expr.right):
        if isinstance(factor, ast.UnaryOp) and isinstance(factor.op, ast.USub):
            factor = factor.operand
        values = [factor]
        if isinstance(factor, ast.Name):
            last = reaching_value(function, factor)
            values = [last] if last is not None else assigned_in(function, factor.id)
        if values and all(
            isinstance(v, ast.Call)
            and resolve(v.func) == "torch.nn.functional.log_softmax"
            and _softmax_dimension(v) == 1
            and at_least_2d(v, function, 0, resolve)  # type: ignore[arg-type]
            for v in values
        ):
            return True
    return False


def _softmax_dimension(call: ast.Call) -> int | None:
    """The literal ``dim`` of ``F.log_softmax(x, dim)`` (by keyword or second
    position); None where it is not written as an integer."""
    for keyword in call.keywords:
        if keyword.arg == "dim":
            return _literal(keyword.value)
    return _literal(call.args[1]) if len(call.args) > 1 else None


def _literal(node: ast.expr) -> int | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def _reduction(name: str, call: ast.Call) -> str:
    values = {k.arg: k.value for k in call.keywords if k.arg}
    reduction = values.get("reduction")
    if reduction is not None:
        if not isinstance(reduction, ast.Constant):
            return "unknown"
        if reduction.value == "sum":
            return "sum"
        if reduction.value == "none":
            return "none"  # per element: a `.mean()` of it decides
        if reduction.value != "mean":
            return "unknown"
    size_average = values.get("size_average")
    if isinstance(size_average, ast.Constant) and size_average.value is False:
        return "sum"
    if "ignore_index" in values and name in IGNORING_LOSSES:
        return "token-mean"
    weight = values.get("weight")
    if (
        weight is not None
        and not (isinstance(weight, ast.Constant) and weight.value is None)
        and name in IGNORING_LOSSES
    ):
        # class weights (LDAM-DRW's `F.cross_entropy(s * out, y,
        # weight=self.weight)`): a mean over the weights of the batch's targets,
        # whose sum differs between the processes' shares
        return "token-mean"
    return "mean"


def _dataset_name(target: str) -> bool:
    """``torch.utils.data.TensorDataset``, ``torchvision.datasets.MNIST``."""
    return (
        target.startswith("torch.utils.data.") and target.rsplit(".", 1)[1] in _DATASETS
    ) or target.startswith("torchvision.datasets.")


_DATASETS = frozenset(
    {
        "Dataset",
        "TensorDataset",
        "Subset",
        "ConcatDataset",
        "IterableDataset",
        "StackDataset",
        "ChainDataset",
    }
)


def _plain_kind(expr: ast.expr, function: ast.AST, depth: int) -> str:
    """ "none" for ``None``, "number" for a number, a class constant read off an
    object (``train_set.NUM_CLASSES``) or ``len(...)``, through the variables
    of ``function`` that hold one; "" for anything else."""
    if depth > 4:
        return ""
    if isinstance(expr, ast.Constant):
        if expr.value is None:
            return "none"
        is_number = isinstance(expr.value, (int, float))
        return "number" if is_number and not isinstance(expr.value, bool) else ""
    if isinstance(expr, ast.Attribute):
        return "number" if expr.attr.isupper() else ""
    if isinstance(expr, ast.Call):
        func = expr.func
        return "number" if isinstance(func, ast.Name) and func.id == "len" else ""
    if isinstance(expr, ast.Name):
        last = reaching_value(function, expr)
        values = [last] if last is not None else assigned_in(function, expr.id)
        kinds = {_plain_kind(v, function, depth + 1) for v in values}
        return kinds.pop() if len(kinds) == 1 else ""
    return ""


def _is_none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _handed_back(fact: HelperFact, call: ast.Call) -> ast.expr | None:
    """The argument of ``call`` for the parameter ``fact``'s function hands back
    unchanged (``HelperFact.returned_parameter``), or None."""
    position, name = fact.returned_parameter
    if not name or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if 0 <= position < len(call.args) else None
