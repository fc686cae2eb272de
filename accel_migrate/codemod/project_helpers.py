"""The facts of one function or class of a local module (``project_view``'s
part that reads code): what its returns are, and what it writes, prints or calls.

A return is a loader, a model, an optimizer or a loss when every ``return`` of the
function is one (through local variables, ``.to()``/``.cuda()``, conditional
expressions and calls into other local modules). The effects are those of its
statements and of the local functions it calls; ``effects_only`` holds only when
nothing else is done (see ``_Effects``). Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .base_built_models import init_built
from .forward_losses import built_class, forward_loss
from .iterator_factories import iterator_class, returned_iterator
from .names import (
    DATALOADER_CALLS,
    FILE_CHANGERS,
    FUNCTIONAL_LOSSES,
    IGNORING_LOSSES,
    MODEL_FACTORY_PREFIXES,
    MODULE_BASES,
    SAVES,
    is_nn_module_constructor,
    is_optimizer_class,
)
from .optimizer_factories import class_expression, factory_over, optimizer_class
from .pairwise_helpers import pairwise_in
from .project_batch_kinds import batch_kind
from .project_facts import HelperFact
from .project_method_weights import method_losses, method_weights
from .project_row_scaled import row_scaled_return
from .project_sum_terms import SumTerms
from .reaching_values import reaching_value
from .shell_commands import RUNNERS, kind, literal_command
from .stochastic_layers import stochastic_layers

if TYPE_CHECKING:
    from .project_draws import Owner
    from .project_view import ProjectView, Target

_DEPTH = 12
_WRITERS = frozenset(
    {
        *SAVES,
        *FILE_CHANGERS,
        "os.makedirs",
        "os.mkdir",
        "numpy.save",
        "numpy.savez",
        "numpy.savetxt",
        "torchvision.utils.save_image",
        "matplotlib.pyplot.savefig",
    }
)
_PRINTS = frozenset({"builtins.print", "sys.stdout.write", "sys.stderr.write"})
_FLUSHES = frozenset({"sys.stdout.flush", "sys.stderr.flush"})
_COLLECTIVE_PREFIXES = ("torch.distributed.", "accel_migrate.runtime.")
#: Calls that change nothing (what an effects-only helper may also do).
_PURE_PREFIXES = ("os.path.", "time.", "datetime.", "math.", "json.dumps", "str.")
_PURE_BUILTINS = frozenset(
    f"builtins.{n}"
    for n in (
        "str int float bool len round format isinstance min max abs sorted list "
        "dict tuple range enumerate zip repr sum any all type getattr hasattr"
    ).split()
)
_PURE_METHODS = frozenset(
    {"format", "join", "item", "tolist", "strftime", "split", "strip", "keys", "items"}
)
_FILE_METHODS = frozenset({"write", "writelines", "flush", "close"})
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half"})
_LOSS_CLASSES = ("Loss",)


class HelperFacts:
    """The facts of one local function or class."""

    def __init__(
        self,
        view: ProjectView,
        target: Target,
        roots: tuple[str, ...],
        script: str,
        depth: int,
    ) -> None:
        self.view, self.roots, self.script, self.depth = view, roots, script, depth
        self.path, self.name = target
        self.scan = view._scan(self.path, roots)
        self.file = view._display(self.path, script)
        #: A loss's parameters summed over / scaling a term (project_sum_terms).
        self._terms = SumTerms(self, None, _assigned_in)
        self._lineages: dict[str, list[Owner]] = {}

    def result(self) -> HelperFact | None:
        name = self.name
        if name in self.scan.functions:
            return self._function(self.scan.functions[name])
        if name in self.scan.classes:
            return self._class(self.scan.classes[name])
        alias = self.scan.names.get(name)
        if isinstance(alias, tuple) and alias[1]:
            return self._follow(alias)
        return None

    def _follow(self, target: Target) -> HelperFact | None:
        return self.view.fact(target, self.roots, self.script, self.depth + 1)

    # -- names -------------------------------------------------------------------
    def resolve(self, expr: ast.expr) -> str | Target | None:
        if isinstance(expr, ast.Name):
            if expr.id in self.scan.names:
                return self.scan.names[expr.id]
            if expr.id in self.scan.functions or expr.id in self.scan.classes:
                return (self.path, expr.id)
            if hasattr(builtins, expr.id):
                return f"builtins.{expr.id}"
            return None
        if isinstance(expr, ast.Attribute):
            inner = self.resolve(expr.value)
            if inner is None:
                return None
            return self.view.attribute(inner, expr.attr)
        return None

    def _dotted(self, expr: ast.expr) -> str:
        target = self.resolve(expr)
        return target if isinstance(target, str) else ""

    # -- classes -----------------------------------------------------------------
    def is_model_class(self, cls: ast.ClassDef) -> bool:
        for base in cls.bases:
            target = self.resolve(base)
            if isinstance(target, str):
                if target in MODULE_BASES or is_nn_module_constructor(target):
                    return True
            elif isinstance(target, tuple):
                fact = self._follow(target)
                if (
                    fact is not None
                    and fact.kind == "class"
                    and fact.returns == "model"
                ):
                    return True
        return False

    def _optimizer_methods(self, cls: ast.ClassDef) -> tuple[str, ...]:
        """Methods whose every return is an optimizer (``torch.optim.AdamW(groups,
        ...)``) and that read the instance's own parameters (``self.parameters()``,
        ``self.named_parameters()``): they hand back the model's optimizer."""
        found = []
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            returns = [r for r in _own_nodes(method) if isinstance(r, ast.Return)]
            if not returns or any(r.value is None for r in returns):
                continue
            kinds = {self.kind_of(r.value, method, 0)[0] for r in returns}  # type: ignore[arg-type]
            reads_own = any(
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("parameters", "named_parameters")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                for node in _own_nodes(method)
            )
            if kinds == {"optimizer"} and reads_own:
                found.append(method.name)
        return tuple(found)

    def _class(self, cls: ast.ClassDef) -> HelperFact:
        if self.is_model_class(cls):
            from .batch_shaped_models import batch_shape
            from .project_data_branches import data_branch
            from .unimplemented_forward import unimplemented_forward

            return HelperFact(
                cls.name,
                self.file,
                "class",
                returns="model",
                optimizer_methods=self._optimizer_methods(cls),
                forward_loss=forward_loss(self, cls),
                method_weights=method_weights([c for c, _, _ in self._lineage(cls)]),
                method_losses=method_losses(
                    self, [c for c, _, _ in self._lineage(cls)]
                ),
                pairwise=self._forward_pairwise(cls),
                batch_shape=batch_shape(cls, self._dotted),
                draws=self._class_draws(cls),
                augmentation=self._augmentation(cls),
                data_branch=data_branch(self, cls),
                stochastic=stochastic_layers(self, cls),
                unimplemented_forward=unimplemented_forward(cls, self.file),
            )
        # (library_trainers and class_lineage import this module)
        from .class_lineage import class_lineage
        from .library_trainers import (
            backpropagated_attributes,
            builds_optimizer,
            handed_in_training,
            trained_parameter,
            trains_own_models,
        )
        from .step_callbacks import step_callbacks

        lineage = class_lineage(self, cls)
        effects = _Effects(self, in_class=True)
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                effects.body(statement.body)
            elif not isinstance(statement, (ast.Expr, ast.Pass, ast.Assign)):
                effects.pure = False
        return HelperFact(
            cls.name,
            self.file,
            "class",
            writes=tuple(sorted(effects.writes)),
            prints=effects.prints,
            collectives=effects.collectives,
            effects_only=effects.pure,
            trains=handed_in_training(lineage),
            builds_optimizer=(
                builds_optimizer(
                    cls, lambda call: is_optimizer_class(self._dotted(call.func))
                )
                or self._base_builds_optimizer(cls)
            ),
            trained_parameter=trained_parameter(lineage),
            losses=backpropagated_attributes(lineage),
            step_callbacks=step_callbacks(cls),
            init_built=init_built(cls),
            batch_iterator=iterator_class(cls, self.file),
            draws=self._class_draws(cls),
            augmentation=self._augmentation(cls),
            batch_migrated=self.view.batch_trains(self.path),
            # a file of this run migrates its own models (and stays consistent
            # with its callers run after run); one it only reads is not written
            trains_own=(
                ""
                if self.path in self.view.scripts
                else trains_own_models(
                    cls, lambda call: is_optimizer_class(self._dotted(call.func))
                )
            ),
        )

    def _lineage(self, cls: ast.ClassDef) -> list[Owner]:
        """``cls`` and the bases the project defines, each with its module's
        functions and names (``project_draws.Owner``)."""
        from .class_lineage import lineage_owners

        if cls.name not in self._lineages:  # (read once per class)
            self._lineages[cls.name] = [
                (node, owner.scan.functions, owner._dotted)
                for owner, node in lineage_owners(self, cls)
            ]
        return self._lineages[cls.name]

    def _class_draws(self, cls: ast.ClassDef) -> tuple[tuple[str, str], ...]:
        from .project_draws import class_draws

        return class_draws(self._lineage(cls))

    def _function_draws(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> tuple[tuple[str, str], ...]:
        from .project_draws import function_draws

        draw = function_draws(function, self.scan.functions, self._dotted)
        return (("", draw),) if draw else ()

    def _augmentation(
        self, definition: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    ) -> str:
        from .project_draws import augmentation

        lineage = (
            self._lineage(definition) if isinstance(definition, ast.ClassDef) else None
        )
        return augmentation(definition, self.scan.functions, self._dotted, lineage)

    def _base_builds_optimizer(self, cls: ast.ClassDef) -> str:
        """``HelperFact.builds_optimizer`` of a base of ``cls`` that the project
        defines (read in the base's own module), naming it: a class of
        trainer/trainer.py over base/base_trainer.py's ``BaseTrainer``."""
        for base in cls.bases:
            target = self.resolve(base)
            if not isinstance(target, tuple):
                continue
            fact = self._follow(target)
            if fact is not None and fact.kind == "class" and fact.builds_optimizer:
                inner = fact.builds_optimizer
                if not inner.startswith("its base "):
                    inner = f"its base {fact.where}: {inner}"
                return inner
        return ""

    # -- functions ---------------------------------------------------------------
    def _forward_pairwise(self, cls: ast.ClassDef) -> str:
        forward = next(
            (
                s
                for s in cls.body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                and s.name == "forward"
            ),
            None,
        )
        return pairwise_in(self, forward, cls) if forward is not None else ""

    def _function(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> HelperFact:
        from .library_trainers import (
            function_trained_parameter,
            function_trains_handed,
        )
        from .metrics.helper_ranking import helper_batch_ranking

        returns = [r for r in _own_nodes(function) if isinstance(r, ast.Return)]
        kind, reduction, unshardable = "", "", ""
        self._terms = SumTerms(self, function, _assigned_in)
        if returns and all(r.value is not None for r in returns):
            found = [self.kind_of(r.value, function, 0) for r in returns]  # type: ignore[arg-type]
            kinds = {f[0] for f in found}
            if len(kinds) == 1 and "" not in kinds:
                kind = kinds.pop()
                reductions = {f[1] for f in found}
                reduction = reductions.pop() if len(reductions) == 1 else "unknown"
                unshardable = next((f[2] for f in found if f[2]), "")
        if (
            not kind
            and returns
            and optimizer_class(
                [r.value for r in returns],  # type: ignore[misc]
                self.scan.assigned,
                self._dotted,
            )
        ):
            kind = "optimizer class"  # `get_optimizer_class(name)`
        container, items = "", ()
        if not kind and returns:
            container, items, why = self._container(returns, function)
            unshardable = unshardable or why
        effects = _Effects(self, in_class=False)
        effects.body(function.body)
        if any(r.value is not None for r in returns):
            effects.pure = False  # its value is used: it must run everywhere
        return HelperFact(
            function.name,
            self.file,
            "function",
            returns=kind,
            reduction=reduction if kind == "loss" else "",
            **(self._terms.fields() if kind == "loss" else {}),
            model_class=(
                built_class(self, returns, function) if kind == "model" else None
            ),
            unshardable=unshardable if kind == "loader" or container else "",
            container=container,
            items=items,
            writes=tuple(sorted(effects.writes)),
            prints=effects.prints,
            collectives=effects.collectives,
            effects_only=effects.pure and not effects.collectives,
            batch_migrated=self.view.batch_trains(self.path),
            trains=function_trains_handed(function, self.scan.functions),
            trained_parameter=function_trained_parameter(function, self.scan.functions),
            # a loss, or a function whose result is not known to be anything
            # else (``prototypical_loss`` returning ``loss_val, acc_val``)
            pairwise=pairwise_in(self, function) if kind in ("loss", "") else "",
            draws=self._function_draws(function),
            augmentation=self._augmentation(function),
            stochastic=stochastic_layers(self, function, builds_model=kind == "model"),
            batch_kind=batch_kind(function, self._dotted) if not kind else "",
            row_scaled=row_scaled_return(function, self._dotted) if not kind else None,
            optimizer_over=(
                factory_over(
                    function,
                    self._dotted,
                    self.scan,
                    lambda name: _assigned_in(function, name),
                )
                if kind == "optimizer"
                else ("", -1, "")
            ),
            ranks_batch=helper_batch_ranking(function),
            batch_iterator=(
                returned_iterator(self, returns, function) if not kind else ""
            ),
        )

    def _container(
        self, returns: list[ast.Return], function: ast.AST
    ) -> tuple[str, tuple[str, ...], str]:
        """("tuple" or "dict", the kinds of its items, why a loader of them cannot
        be sharded) when every return is a display of one shape holding a loader
        (``return train_loader, val_loader``; ``return {"train": ..., "val": ...}``)."""
        values = [r.value for r in returns]
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
        found = [[self.kind_of(e, function, 0) for e in each] for each in elements]
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
        if isinstance(expr, ast.Name):
            last = reaching_value(function, expr)
            values = (
                [last]
                if last is not None
                else _assigned_in(function, expr.id)
                or self.scan.assigned.get(expr.id, [])
            )
            # `net = net.cuda()` says nothing new of `net`: its other values decide
            values = [v for v in values if not _same_object_of(v, expr.id)]
            if not values:
                return ("", "", "")
            found = {self.kind_of(v, function, depth + 1) for v in values}
            return found.pop() if len(found) == 1 else ("", "", "")
        if not isinstance(expr, ast.Call):
            return ("", "", "")
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in _SAME_OBJECT:
            inner = self.kind_of(func.value, function, depth + 1)
            if inner[0] == "model":
                return inner
        if class_expression(
            func,
            lambda name: _assigned_in(function, name),
            self.scan.assigned,
            self._dotted,
        ):
            # `OPTIMIZERS[name](params, **kwargs)`, `getattr(torch.optim, name)(...)`
            return ("optimizer", "", "")
        target = self.resolve(func)
        if isinstance(target, str):
            return self._external(target, expr)
        if isinstance(target, tuple):
            fact = self._follow(target)
            if fact is not None and fact.returns:
                return (fact.returns, fact.reduction, fact.unshardable)
            return ("", "", "")
        # `criterion(out, y)`, with `criterion = nn.CrossEntropyLoss(...)`
        if isinstance(func, ast.Name):
            values = _assigned_in(function, func.id) or self.scan.assigned.get(
                func.id, []
            )
            modules = [v for v in values if isinstance(v, ast.Call)]
            if modules and len(modules) == len(values):
                found = {self._loss_module(v) for v in modules}
                if len(found) == 1:
                    return found.pop()
        return ("", "", "")

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


def _same_object_of(value: ast.expr, name: str) -> bool:
    """``name.cuda()``, ``name.to(device)``: the same object as ``name``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _SAME_OBJECT
    ):
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


def _reduction(name: str, call: ast.Call) -> str:
    values = {k.arg: k.value for k in call.keywords if k.arg}
    reduction = values.get("reduction")
    if reduction is not None:
        if not isinstance(reduction, ast.Constant):
            return "unknown"
        if reduction.value == "sum":
            return "sum"
        if reduction.value != "mean":
            return "unknown"
    size_average = values.get("size_average")
    if isinstance(size_average, ast.Constant) and size_average.value is False:
        return "sum"
    if "ignore_index" in values and name in IGNORING_LOSSES:
        return "token-mean"
    return "mean"


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``function``'s body, not of functions or classes in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            stack.extend(ast.iter_child_nodes(node))


def _assigned_in(function: ast.AST, name: str) -> list[ast.expr]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    values = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
    return values


class _Effects:
    """What statements write, print or call, and whether that is all they do."""

    def __init__(self, facts: HelperFacts, in_class: bool) -> None:
        self.facts = facts
        self.in_class = in_class
        self.writes: set[str] = set()
        self.prints = False
        self.collectives = False
        self.pure = True
        #: Names (and ``self.x`` attributes) bound to a file opened here.
        self.handles: set[str] = set()

    def body(self, statements: list[ast.stmt]) -> None:
        nodes = [n for s in statements for n in (s, *_own_nodes(s))]
        for node in nodes:  # the files opened here first: their writes are known
            if isinstance(node, ast.withitem) and node.optional_vars is not None:
                if isinstance(node.optional_vars, ast.Name) and self._opens(
                    node.context_expr
                ):
                    self.handles.add(node.optional_vars.id)
            elif isinstance(node, ast.Assign) and self._opens(node.value):
                self.handles.update(_spelling(t) for t in node.targets)
        for node in nodes:
            self._node(node)

    def _node(self, node: ast.AST) -> None:
        if isinstance(
            node, (ast.Global, ast.Nonlocal, ast.Delete, ast.Yield, ast.YieldFrom)
        ):
            self.pure = False
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                self._target(target, value)
        elif isinstance(node, ast.Call):
            self._call(node)

    def _target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            return
        if (
            self.in_class
            and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return  # the object's own state: a stand-in holds none of it
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, None)
            return
        self.pure = False  # an argument's attribute, an item, a global's field

    def _opens(self, expr: ast.expr) -> bool:
        return (
            isinstance(expr, ast.Call)
            and self.facts._dotted(expr.func) in ("builtins.open", "io.open")
            and _write_mode(expr)
        )

    def _call(self, call: ast.Call) -> None:
        facts = self.facts
        target = facts.resolve(call.func)
        if isinstance(target, str):
            if target in ("builtins.open", "io.open"):
                if _write_mode(call):
                    self.writes.add(f"open(..., {_mode(call)!r})")
                return
            if target in _WRITERS:
                self.writes.add(target)
                return
            if target in RUNNERS:
                if kind(literal_command(call)) == "read":
                    self.prints = True  # `nvidia-smi`: prints facts, changes nothing
                    return
                # a shell command (`os.system("cp ...")`): what it changes cannot
                # be seen, so the helper is never moved, only reported
                self.writes.add(f"{target} (a shell command)")
                self.pure = False
                return
            if target in _PRINTS:
                self.prints = True
                return
            if target in _FLUSHES or target in _PURE_BUILTINS:
                return
            if target.startswith(_COLLECTIVE_PREFIXES):
                self.collectives = True
                self.pure = False
                return
            if target.startswith(_PURE_PREFIXES):
                return
            self.pure = False
            return
        if isinstance(target, tuple):
            fact = facts._follow(target)
            if fact is None:
                self.pure = False
                return
            self.writes.update(fact.writes)
            self.prints = self.prints or fact.prints
            self.collectives = self.collectives or fact.collectives
            if not fact.effects_only:
                self.pure = False
            return
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = _spelling(func.value)
            if func.attr in _FILE_METHODS and receiver in self.handles:
                return
            if func.attr in _PURE_METHODS:
                return
            if (
                self.in_class
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                return  # another method of the class: its effects are counted there
        self.pure = False


def _spelling(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return ""


def _mode(call: ast.Call) -> str:
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return mode.value
    return "?"


def _write_mode(call: ast.Call) -> bool:
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if mode is None:
        return False
    if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
        return True  # a mode the analysis cannot read may write
    return any(c in mode.value for c in "wax+")
