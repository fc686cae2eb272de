"""The facts of one class of a local module (``project_helpers.HelperFacts``'s
part that reads classes): a model class's (its optimizer and constructor
methods, its forward's loss, its draws and layers) and another class's (what it
writes and prints, whether it trains, builds or is an optimizer, a loader
subclass, a batch iterator). Static only: ``ast``, nothing runs."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .base_init_assignments import init_built
from .batch_mixing_models import batch_mixing
from .constructor_methods import constructor_methods
from .forward_losses import forward_loss
from .iterator_factories import iterator_class
from .layer_methods import layer_calls, layer_methods, training_methods
from .method_writes import quiet_methods
from .names import (
    DATALOADER_CALLS,
    MODULE_BASES,
    is_nn_module_constructor,
    is_optimizer_base,
    is_optimizer_class,
)
from .pairwise_helpers import pairwise_in
from .param_group_methods import param_group_methods
from .project_effects import _Effects, method_writes
from .project_facts import HelperFact
from .project_method_weights import method_losses, method_weights
from .project_nodes import _own_nodes
from .replay_buffers import stored
from .share_padding import share_padded
from .stochastic_layers import stochastic_layers
from .uncalled_methods import construction_quiet_effects, uncalled_effects

if TYPE_CHECKING:
    from .draw_guards import TestedDraw
    from .project_draws import Owner
    from .project_scans import _Scan
    from .project_view import ProjectView


class ClassFacts:
    """``HelperFacts``'s reading of classes (a base of it: ``scan``, ``view``,
    ``path``, ``file``, ``resolve``, ``_follow``, ``_dotted``, ``kind_of`` and
    ``_lineages`` are its)."""

    scan: _Scan
    view: ProjectView
    path: str
    file: str
    _lineages: dict[str, list[Owner]]

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
            from .batch_shaped_models import batch_shape, parameter_shapes
            from .method_parameter_grads import lineage_parameter_grads
            from .nonlinear_criteria import nonlinear_loss
            from .project_data_branches import data_branch
            from .project_state_writes import late_registrations, state_writes
            from .unimplemented_forward import unimplemented_forward
            from .unregistered_tensors import unregistered_tensors

            return HelperFact(
                cls.name,
                self.file,
                "class",
                returns="model",
                optimizer_methods=self._optimizer_methods(cls),
                constructor_methods=constructor_methods(cls),
                param_group_methods=param_group_methods(cls),
                forward_loss=forward_loss(self, cls),
                method_weights=method_weights([c for c, _, _ in self._lineage(cls)]),
                method_losses=method_losses(
                    self, [c for c, _, _ in self._lineage(cls)]
                ),
                layer_methods=layer_methods(cls),
                layer_calls=layer_calls(cls),
                training_methods=training_methods(cls),
                pairwise=self._forward_pairwise(cls),
                batch_shape=batch_shape(cls, self._dotted),
                param_shapes=parameter_shapes(cls, self._dotted),
                nonlinear_loss=nonlinear_loss(cls, self.file, self._dotted),
                **self._call_reductions(cls, model=True),
                draws=self._class_draws(cls),
                state_writes=state_writes(cls),
                late_registrations=late_registrations(cls),
                augmentation=self._augmentation(cls),
                parameter_grads=lineage_parameter_grads(
                    [(c, d) for c, _, d in self._lineage(cls)]
                ),
                data_branch=data_branch(self, cls),
                stochastic=stochastic_layers(self, cls),
                batch_mixing=batch_mixing(self, cls),
                share_padded=share_padded(self, cls),
                unimplemented_forward=unimplemented_forward(cls, self.file),
                method_writes=method_writes(self, cls),
                unregistered_tensors=unregistered_tensors(cls, self.file),
            )
        # (library_trainers and class_lineage import this module)
        from .class_lineage import class_lineage
        from .handed_optimized import optimized_parameters
        from .inherited_trainers import inherited_training, own_built_attributes
        from .library_trainers import (
            backpropagated_attributes,
            builds_optimizer,
            handed_in_training,
            handed_training_step,
            method_trains_handed,
            stepping_methods,
            trained_parameter,
            trains_own_models,
            untraining_methods,
        )
        from .plain_holders import plain_bases
        from .project_state_writes import method_state_writes
        from .relayed_trainers import trains_through
        from .step_callbacks import step_callbacks
        from .unfollowed_trainers import unfollowed_training

        lineage = class_lineage(self, cls)
        base_trains = (
            inherited_training(self, cls)
            if self.path not in self.view.scripts
            else ("", "")
        )
        effects = _Effects(self, in_class=True)
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                effects.body(statement.body)
            elif not isinstance(statement, (ast.Expr, ast.Pass, ast.Assign)):
                effects.pure = False
        method_trains = method_trains_handed(lineage)
        trains = handed_in_training(lineage)
        builds = builds_optimizer(
            cls, lambda call: is_optimizer_class(self._dotted(call.func))
        ) or self._base_builds_optimizer(cls)
        return HelperFact(
            cls.name,
            self.file,
            "class",
            writes=tuple(sorted(effects.writes)),
            method_writes=method_writes(self, cls),
            prints=effects.prints,
            collectives=effects.collectives,
            collective_calls=tuple(sorted(effects.collective_calls)),
            effects_only=effects.pure,
            trains=trains,
            trains_step=handed_training_step(lineage),
            method_trains=method_trains,
            untraining_methods=(
                untraining_methods(lineage, self.scan.functions)
                if method_trains
                else ()
            ),
            # `class SAM(torch.optim.Optimizer)`, `class MySGD(Base)` with
            # `class Base(torch.optim.SGD)`: through the class chain
            optimizer_subclass=any(
                is_optimizer_base(dotted(base))
                for node, _, dotted in self._lineage(cls)
                for base in node.bases
            ),
            builds_optimizer=builds,
            # none of the above follows the model it steps (fast.ai's Runner)
            unfollowed_training=(
                ""
                if trains or method_trains or builds or base_trains[0]
                else unfollowed_training(lineage)
            ),
            trained_parameter=trained_parameter(lineage),
            optimized_parameters=optimized_parameters(
                lineage, lambda call: is_optimizer_class(self._dotted(call.func))
            ),
            losses=backpropagated_attributes(lineage),
            step_callbacks=step_callbacks(cls),
            init_built=init_built(cls),
            plain=plain_bases(cls),
            batch_iterator=iterator_class(cls, self.file),
            stored=stored(cls),
            method_state_writes=method_state_writes(cls),
            draws=self._class_draws(cls),
            augmentation=self._augmentation(cls),
            batch_migrated=self.view.batch_trains(self.path),
            # a file of this run migrates its own models (and stays consistent
            # with its callers run after run); one it only reads is not written
            trains_own=(
                ""
                if self.path in self.view.scripts
                else trains_own_models(cls, self._optimizer_call(cls))
                or trains_through(self, cls)
                or base_trains[0]
            ),
            trains_in=base_trains[1],
            own_builds=own_built_attributes(cls) if base_trains[1] else (),
            quiet_methods=quiet_methods(self, cls) if effects.writes else (),
            uncalled_effects=(
                uncalled_effects(self, cls)
                if effects.writes or effects.prints or effects.collectives
                else ()
            ),
            method_effects=(
                construction_quiet_effects(self, cls)
                if effects.writes or effects.prints or effects.collectives
                else ()
            ),
            loader_subclass=self._loader_subclass(cls),
            **self._call_reductions(cls, model=False),
            migrated_trainer=(
                trains_own_models(cls, self._optimizer_call(cls))
                if self.path in self.view.scripts
                else ""
            ),
            step_methods=(
                stepping_methods(cls) if self.path in self.view.scripts else ()
            ),
        )

    def _call_reductions(self, cls: ast.ClassDef, model: bool) -> dict[str, object]:
        """``call_reduction``/``setting_reductions`` of ``cls``; a class with no
        call of its own takes its base's (``inherited_reductions``): a base of
        the project through its fact, a library's by its name (a model class's
        library base says nothing, as before: a loss-named one too)."""
        from .inherited_reductions import (
            PLAIN,
            BaseReading,
            class_call_reductions,
            entry_method,
            library_base,
        )

        bases: list[tuple[str, BaseReading]] = []
        for base in cls.bases if not entry_method(cls) else []:
            spelled = base.value if isinstance(base, ast.Subscript) else base
            target = self.resolve(spelled)
            reading: BaseReading = None
            if isinstance(target, str):
                reading = library_base(target)
            elif isinstance(target, tuple):
                fact = self._follow(target)
                if fact is not None and fact.kind == "class":
                    reading = (fact.call_reduction, fact.setting_reductions)
            if reading is None and model and not isinstance(target, tuple):
                reading = PLAIN
            bases.append((ast.unparse(base), reading))
        return class_call_reductions(cls, self.scan.tree, bases)

    def _loader_subclass(self, cls: ast.ClassDef) -> bool:
        """Does ``cls`` derive from torch's DataLoader (itself, or through a
        base the project defines)?"""
        for base in cls.bases:
            target = self.resolve(base)
            if isinstance(target, str) and target in DATALOADER_CALLS:
                return True
            if isinstance(target, tuple):
                fact = self._follow(target)
                if fact is not None and fact.loader_subclass:
                    return True
        return False

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

    def _class_draws(
        self, cls: ast.ClassDef, depth: int = 2
    ) -> tuple[tuple[str, str], ...]:
        from .project_draws import class_draws, held_draws

        return class_draws(self._lineage(cls), held_draws(self, cls, depth))

    def _function_draws(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> tuple[tuple[str, str], ...]:
        from .project_draws import function_draws

        draw = function_draws(
            function, self.scan.functions, self._dotted, self._held_by_module()
        )
        return (("", draw),) if draw else ()

    def _guarded_draws(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> tuple[TestedDraw, ...]:
        """Its draws with the tests of its parameters they run under, where
        some draw runs under one (``if data_type == "train":``)."""
        from .call_draws import draw_of
        from .project_draws import _module_held_test, function_guarded_draws

        test = draw_of(self._dotted)
        held = self._held_by_module()
        return function_guarded_draws(
            function,
            self.scan.functions,
            _module_held_test(test, held) if held else test,
        )

    def _guarded_augmentations(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> tuple[TestedDraw, ...]:
        """The random augmentations ``function`` builds (torchvision's, or an
        instance of a class of the project whose ``__call__`` draws: proxy-nca's
        ``RandomCropFlip``), itself or through the module's functions it calls
        (``steps = [_crop()]``), each with the tests it is built under; ``()``
        where none is built under a test of its parameters
        (``HelperFact.augmentation`` then says all)."""
        from .call_draws import transform_of
        from .project_draws import function_guarded_draws

        torchvision = transform_of(self._dotted)

        def test(call: ast.Call) -> str:
            return torchvision(call) or (
                self._class_call_draw(call) if self.depth <= 2 else ""
            )

        return function_guarded_draws(function, self.scan.functions, test)

    def _class_call_draw(self, call: ast.Call) -> str:
        """The draw of an instance of a class of the project that ``call``
        builds, where its ``__call__`` (or ``forward``) draws; ""."""
        from .class_lineage import _class_at

        resolved = self.resolve(call.func)
        located = _class_at(self, resolved) if isinstance(resolved, tuple) else None
        if located is None:
            return ""
        where, cls = located
        draws = dict(where._class_draws(cls, 1))
        draw = draws.get("__call__") or draws.get("forward")
        return f"{draw} (in `{cls.name}`)" if draw else ""

    def _held_by_module(self) -> dict[str, str]:
        """Module-level objects whose call draws (``module_held_draws``), read
        once per module, and only where its functions call a module-level name."""
        from .project_draws import module_held_draws

        cached = getattr(self, "_module_held", None)
        if cached is not None:
            return cached
        self._module_held: dict[str, str] = {}
        called = {
            node.func.id
            for function in self.scan.functions.values()
            for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assigned = {n: v for n, v in self.scan.assigned.items() if n in called}
        if not assigned or self.depth > 2:
            return self._module_held

        self._module_held = module_held_draws(
            assigned, self._dotted, self._class_call_draw
        )
        return self._module_held

    def _augmentation(
        self, definition: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    ) -> str:
        from .project_draws import augmentation

        lineage = (
            self._lineage(definition) if isinstance(definition, ast.ClassDef) else None
        )
        found = augmentation(definition, self.scan.functions, self._dotted, lineage)
        if found or isinstance(definition, ast.ClassDef):
            return found
        return self._built_transform(definition)

    def _built_transform(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        """The first draw of a transform of the project a function builds: an
        instance of a class of the project whose ``__call__`` draws (a
        ``get_train_transforms()`` returning ``Compose([RandomFlip(0.5)])`` of
        its own classes, whose ``__call__`` tests ``random.random() < p``).
        Built once, it draws each time a data loader applies it to a sample."""
        if self.depth > 2:
            return ""
        for call in ast.walk(function):
            draw = self._class_call_draw(call) if isinstance(call, ast.Call) else ""
            if draw:
                return draw
        return ""

    def _optimizer_call(self, cls: ast.ClassDef) -> Callable[[ast.Call], bool]:
        """Does a call of ``cls``'s methods build an optimizer: a ``torch.optim``
        class, ``self.optimizer_fn(...)`` where ``__init__`` stored an optimizer
        class handed as a default (``optimizer_defaults``), or a project
        function that returns one (ddim's ``get_optimizer(self.config,
        model.parameters())`` from functions/__init__.py)."""
        from .optimizer_defaults import builds_optimizer_call, optimizer_attributes

        builds = builds_optimizer_call(
            lambda expr: self._dotted(expr), optimizer_attributes([cls], self._dotted)
        )

        def is_optimizer(call: ast.Call) -> bool:
            return builds(call) or self._returns_optimizer(call)

        return is_optimizer

    def _returns_optimizer(self, call: ast.Call) -> bool:
        target = self.resolve(call.func)
        if not isinstance(target, tuple):
            return False
        fact = self._follow(target)
        return (
            fact is not None and fact.kind == "function" and fact.returns == "optimizer"
        )

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
