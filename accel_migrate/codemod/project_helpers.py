"""The facts of one function or class of a local module (``project_view``'s
part that reads code): what its returns are, and what it writes, prints or calls.

A return is a loader, a model, an optimizer or a loss when every ``return`` of the
function is one (through local variables, ``.to()``/``.cuda()``, conditional
expressions and calls into other local modules). The effects are those of its
statements and of the local functions it calls; ``effects_only`` holds only when
nothing else is done (see ``_Effects``). Static only: ``ast``, nothing runs.

What returns are is read in ``project_return_kinds``, a class's facts in
``project_class_facts``, the effects in ``project_effects``; ``project_nodes``
has the walk of a function's own nodes.
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from .batch_mixing_models import batch_mixing
from .criterion_factories import criterion_factory
from .forward_losses import built_class, tuple_loss
from .handed_optimized import function_optimized_parameters, parameter_methods
from .iterator_factories import generated_batches, returned_iterator
from .loader_factory_sizes import batch_size_parameter
from .loader_sample_draws import sample_draws
from .names import is_optimizer_class
from .optimizer_factories import factory_over, optimizer_class
from .pairwise_helpers import pairwise_in
from .param_group_helpers import groups_over
from .path_reads import reads_paths
from .project_batch_kinds import batch_kind
from .project_class_facts import ClassFacts
from .project_effects import _Effects
from .project_facts import HelperFact
from .project_nodes import _own_nodes, assigned_in
from .project_return_kinds import ReturnKinds
from .project_row_scaled import row_scaled_return
from .project_sum_terms import SumTerms
from .relayed_parameters import relayed_parameters, returned_parameter
from .returned_items import item_reasons
from .share_padding import share_padded
from .stochastic_layers import stochastic_layers

if TYPE_CHECKING:
    from .project_draws import Owner
    from .project_view import ProjectView, Target

__all__ = ["HelperFacts", "_own_nodes", "assigned_in"]


class HelperFacts(ClassFacts, ReturnKinds):
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
        self._terms = SumTerms(self, None, assigned_in)
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

    # -- functions ---------------------------------------------------------------
    def _function(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> HelperFact:
        from .closure_optimizers import steps_closure
        from .function_trainers import (
            function_trained_parameter,
            function_trains_handed,
            function_trains_own,
        )
        from .metrics.helper_ranking import helper_batch_ranking
        from .project_draws import function_torch_draws, sampling_model_built

        returns = [r for r in _own_nodes(function) if isinstance(r, ast.Return)]
        kind, reduction, unshardable = "", "", ""
        stepped = steps_closure(
            function, lambda call: is_optimizer_class(self._dotted(call.func))
        )
        self._terms = SumTerms(self, function, assigned_in)
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
        returned = tuple_loss(self, function) if not kind and returns else None
        container, items, reasons = "", (), ()
        if not kind and returns:
            container, items, why = self._container(returns, function)
            unshardable = unshardable or why
            if container == "tuple" and "" in items:
                reasons = item_reasons(self, returns, function, items)
        factory = ("", "")
        if not kind and not stepped:
            # `get_net(name)` returning `Net(...)` of a class that trains
            from .factory_trainers import returned_trainer

            factory = returned_trainer(self, returns)
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
            **(self._terms.fields() if kind == "loss" or returned else {}),
            tuple_loss=returned,
            criterion=criterion_factory(self, function) if not kind else "",
            relayed=(
                relayed_parameters(function, returns, self.scan.functions)
                if not kind and returns
                else ()
            ),
            returned_parameter=(
                returned_parameter(function, returns, self.scan.functions)
                if not kind
                else (-1, "")
            ),
            model_class=(
                built_class(self, returns, function) if kind == "model" else None
            ),
            unshardable=unshardable if kind == "loader" or container else "",
            loader_batch_size=(
                batch_size_parameter(function, self._dotted)
                if kind == "loader" or (container and set(items) == {"loader"})
                else ("", -1)
            ),
            container=container,
            items=items,
            item_reasons=reasons,
            writes=tuple(sorted(effects.writes)),
            prints=effects.prints,
            collectives=effects.collectives,
            collective_calls=tuple(sorted(effects.collective_calls)),
            group_queries=tuple(sorted(effects.queries)),
            effects_only=effects.pure and not effects.collectives,
            batch_migrated=self.view.batch_trains(self.path),
            optimized_parameters=function_optimized_parameters(
                function, lambda call: is_optimizer_class(self._dotted(call.func))
            ),
            parameter_methods=parameter_methods(function),
            trains_own=factory[0],
            trains_in=factory[1],
            # a file of this run is migrated itself; one it only reads is not
            runs_training=(
                ""
                if self.path in self.view.scripts or stepped
                else function_trains_own(
                    function,
                    lambda call: is_optimizer_class(self._dotted(call.func)),
                    self.scan.functions,
                )
            ),
            trains=function_trains_handed(function, self.scan.functions)
            or (stepped[0] if stepped else ""),
            trained_parameter=(
                function_trained_parameter(function, self.scan.functions)
                if not stepped or function_trains_handed(function, self.scan.functions)
                else _position(function, stepped[1])
            ),
            # a loss, or a function whose result is not known to be anything
            # else (``prototypical_loss`` returning ``loss_val, acc_val``)
            pairwise=(
                pairwise_in(self, function, rankings=True)
                if kind in ("loss", "")
                else ""
            ),
            draws=self._function_draws(function),
            torch_draws=function_torch_draws(
                function, self.scan.functions, self._dotted
            ),
            augmentation=self._augmentation(function),
            guarded_draws=self._guarded_draws(function),
            guarded_augmentations=self._guarded_augmentations(function),
            sampling_model=(
                sampling_model_built(function, self.scan.functions, self._dotted)
                if kind == "model"
                else ""
            ),
            reads_paths=reads_paths(function, self._dotted),
            sample_draws=(
                sample_draws(self, function) if kind == "loader" or container else ""
            ),
            stochastic=stochastic_layers(self, function, builds_model=kind == "model"),
            batch_mixing=batch_mixing(self, function) if kind == "model" else "",
            share_padded=share_padded(self, function) if kind == "model" else "",
            batch_kind=batch_kind(function, self._dotted) if not kind else "",
            row_scaled=row_scaled_return(function, self._dotted) if not kind else None,
            optimizer_over=(
                factory_over(
                    function,
                    self._dotted,
                    self.scan,
                    lambda name: assigned_in(function, name),
                )
                if kind == "optimizer"
                else ("", -1, "")
            ),
            ranks_batch=helper_batch_ranking(function),
            param_groups_over=(
                groups_over(function, self.scan.functions) if not kind else ("", -1)
            ),
            batch_iterator=(
                returned_iterator(self, returns, function)
                or generated_batches(function)
                if not kind
                else ""
            ),
        )


def _position(
    function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> tuple[str, int]:
    """``name`` and its position among ``function``'s positional parameters
    (-1: keyword only), as ``HelperFact.trained_parameter``."""
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    return (name, positional.index(name) if name in positional else -1)
