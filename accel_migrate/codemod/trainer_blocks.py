"""AM004's blocking findings about trainers (``TrainerBlocks``, a base of
``AllOrNothing``): a model handed to a library trainer, a trainer class picked
or subclassed, a model a helper's own trainer builds, that the rule cannot show
prepared, leaves the whole file unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .inherited_trainers import built_where
from .names import DATALOADER_CALLS, is_optimizer_class
from .optimizer_helpers import _argument
from .patterns import argument
from .subtrees import findall
from .trained_models import root_key, snippet

_OPTION_NAMES = frozenset(
    {"args", "opt", "opts", "options", "cfg", "config", "conf", "hparams", "params"}
)

if TYPE_CHECKING:
    from .project_facts import HelperFact


#: The end of every blocking message of AM004.
#: Methods that hand back the module they are called on.
_SAME_MODULE = frozenset(
    {"train", "eval", "to", "cuda", "cpu", "float", "half", "double"}
)
ALL_OR_NOTHING = (
    ". Nothing in this file was migrated: a training setup is migrated whole or "
    "not at all (sharding its data and rewriting its backward without preparing "
    "the model would train an unsynchronised copy in each process)"
)


class TrainerBlocks:
    """The trainer checks of ``AllOrNothing`` (a mixin of AM004's rule: it reads
    the rule's analysis)."""

    def _block_library_trainers(self) -> None:
        """``Trainer(config, model, dataset)`` of a local module whose class trains
        what it is handed (``library_trainers``): the setup is split across files,
        so this file is left whole, as the library's is. Not where the class's
        file is migrated in this batch too (``HelperFact.batch_migrated``): it
        learns from this file's call what it is handed (``project_callers``),
        and this file prepares the model where it builds it; if that file is
        left whole, so is this one (AM103), and the other way round."""
        seen: set[str] = set()
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                or fact.kind not in ("class", "function")
                or not (fact.trains or fact.trains_own)
                or fact.collectives  # the library already runs the runtime's calls
                or (
                    fact.trains
                    and fact.batch_migrated
                    and (fact.kind == "class" or self._handed_prepared(call, fact))
                )
                or fact.where in seen
            ):
                continue
            seen.add(fact.where)
            if not fact.trains:
                self._block_own_trainer(call, fact)
                continue
            if fact.batch_migrated:
                self._block_unprepared_handed(call, fact)
                continue
            model = self._model_named(call, fact, "the model")
            self.block(
                call,
                f"`{snippet(call)}` hands its arguments to {fact.where}, which "
                f"trains with them there: {fact.trains}. The backward that trains "
                f"{model} is in {fact.file}, which migrating this file alone reads "
                "but does not write (a file's local imports are read, never "
                f"written), so preparing {model} here would leave that backward "
                f"unmigrated: {model} is not prepared, nor is anything else. Wrap "
                f"{model} with accel.prepare_model(...) where it is built, and in "
                f"{fact.file} its optimizer with accel.prepare_optimizer(...), the "
                "loader with accel.prepare_dataloader(...), the backward with "
                "accel.backward(...), and make the loss it hands back global "
                "(accel.global_loss) where it is logged. Nothing in this file was "
                f"migrated: while each process trains a full copy in {fact.file}, "
                "sharding this file's loaders, reducing its metrics or moving its "
                "logs and saves to the main process would mix a migrated half with "
                "an unmigrated one",
            )

    def _block_training_functions(self) -> None:
        """``train.main(args)`` of a local module whose function runs a whole
        training of its own (``HelperFact.runs_training``: it builds its
        optimizer and calls backward), called by a file with no backward of its
        own (daandouwe/glove's main.py): the training is all in that module,
        which migrating this file alone reads but does not write, so this file
        is left whole with the reason, never skipped as "not a training entry
        point". A file that trains itself and also calls one (a probe fitted in
        an evaluation helper) is not blocked by it; nor is one that builds a
        loader or an optimizer of its own (the screen's training file, which is
        migrated, not skipped) and hands the function values of its own (an
        evaluation script's `fit_probe(torch.cat(feats), torch.cat(labels))`):
        only a call handed options alone (`train.main(args)`) is then one."""
        if findall(
            self.index.module, m.Call(func=m.Attribute(attr=m.Name("backward")))
        ):
            return
        builds = self._builds_loader_or_optimizer()
        seen: set[str] = set()
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                or fact.kind != "function"
                or not fact.runs_training
                or fact.trains
                or fact.trains_own
                or fact.collectives
                or fact.where in seen
                or (builds and not self._options_only(call))
            ):
                continue
            seen.add(fact.where)
            self.block(
                call,
                f"`{snippet(call)}` calls {fact.where}, which runs a whole training "
                f"of its own there: {fact.runs_training}. The model, its optimizer "
                f"and its backward are all in {fact.file}, which migrating this file "
                "alone reads but does not write, and this file has no training "
                "step of its own: nothing of it is prepared, and each process would "
                f"train a full copy. Migrate {fact.file} with this file (as a "
                "batch: `accel-migrate FOLDER`), or in it wrap the model with "
                "accel.prepare_model(...), the optimizer with "
                "accel.prepare_optimizer(...), the loader with "
                "accel.prepare_dataloader(...) and the backward with "
                "accel.backward(...)" + ALL_OR_NOTHING,
            )

    def _builds_loader_or_optimizer(self) -> bool:
        """Does this file build a DataLoader or an optimizer (what makes the
        screen take it for a training file)?"""
        for call in self.index.calls:
            names = self.index.qualnames(call.func)
            if names & DATALOADER_CALLS or any(is_optimizer_class(n) for n in names):
                return True
        return False

    def _options_only(self, call: cst.Call) -> bool:
        """Is ``call`` handed options alone: constants, and names (or their
        attributes) bound to ``parser.parse_args()`` or spelled as a config
        (``args``, ``opt``, ``cfg``, ``config``, ``hparams``)?"""
        parsed = {
            target.value
            for assign in findall(self.index.module, m.Assign())
            if m.matches(
                assign.value,  # type: ignore[attr-defined]
                m.Call(func=m.Attribute(attr=m.Name("parse_args"))),
            )
            for t in assign.targets  # type: ignore[attr-defined]
            if isinstance((target := t.target), cst.Name)
        }
        for arg in call.args:
            value = arg.value
            while isinstance(value, cst.Attribute):
                value = value.value
            if isinstance(value, (cst.SimpleString, cst.Integer, cst.Float)):
                continue
            if not isinstance(value, cst.Name) or not (
                value.value in parsed or value.value in _OPTION_NAMES
            ):
                return False
        return True

    def _block_method_trainers(self) -> None:
        """``trainer = Trainer(max_epochs=3)`` of a local module whose class
        trains the model handed to one of its methods (``trainer.fit(model=net,
        ...)``: ``HelperFact.method_trains``), from a file this run does not
        migrate: the backward is there, so this file is left whole, as for a
        trainer handed the model at construction. Where the class's file is
        migrated in this batch too, its callers' facts decide (AM103)."""
        seen: set[str] = set()
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                or fact.kind != "class"
                or fact.returns == "model"  # a model's own methods: AM042's
                or not fact.method_trains
                or fact.trains
                or fact.trains_own
                or fact.collectives
                or fact.batch_migrated
                or fact.where in seen
                or self._only_untraining_calls(call, fact)
            ):
                continue
            seen.add(fact.where)
            self.block(
                call,
                f"`{snippet(call)}` builds {fact.where}, whose method trains the "
                f"model a caller hands it there: {fact.method_trains}. That "
                f"backward is in {fact.file}, which migrating this file alone "
                "reads but does not write (a file's local imports are read, never "
                "written), so preparing the model here would leave it unmigrated: "
                "nothing is prepared. Wrap the model with accel.prepare_model(...) "
                "and its optimizer with accel.prepare_optimizer(...) where they "
                f"are built, in {fact.file} the backward with accel.backward(...), "
                "and make the losses it logs global "
                "(accel.global_loss), or migrate both files together (a batch). "
                "Nothing in this file was migrated: while each process trains a "
                f"full copy in {fact.file}, sharding this file's loaders, reducing "
                "its metrics or moving its logs and saves to the main process "
                "would mix a migrated half with an unmigrated one",
            )

    def _block_unfollowed_trainers(self) -> None:
        """``run = Runner(cbs=[...])`` of a local module whose class
        backpropagates and steps an optimizer it reaches through ``self``, on
        a model no other fact follows (``HelperFact.unfollowed_training``:
        fast.ai's ``Runner.fit(epochs, learn)``, the model a property of
        ``self.learn``): this file trains through it, yet accel-migrate cannot
        tell which model it would have to prepare, so the file is left whole,
        in a batch too (its loader module then follows it: AM103)."""
        seen: set[str] = set()
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                or fact.kind != "class"
                or fact.returns == "model"
                or not fact.unfollowed_training
                or fact.collectives
                or fact.where in seen
            ):
                continue
            seen.add(fact.where)
            self.block(
                call,
                f"`{snippet(call)}` builds {fact.where}, which trains there: "
                f"{fact.unfollowed_training}. The model, its optimizer and "
                f"that backward are reached only through {fact.file}, so no "
                "model of this training can be prepared here and the loaders "
                "it runs over cannot be sharded. Wrap the model with "
                "accel.prepare_model(...) and its optimizer with "
                "accel.prepare_optimizer(...) where they are built, the "
                "loaders with accel.prepare_dataloader(...), and in "
                f"{fact.file} the backward with accel.backward(...), and make "
                "the losses and metrics it logs global (accel.global_loss, "
                "accel.reduce)" + ALL_OR_NOTHING,
            )

    def _only_untraining_calls(self, call: cst.Call, fact: HelperFact) -> bool:
        """Is the instance ``call`` builds only ever the receiver of methods that
        train nothing (``HelperFact.untraining_methods``: ``tools = Toolkit()`` then
        ``tools.evaluate(model, loader)``, its ``finetune`` never called)? False
        where it escapes: handed on, aliased, stored, returned, an attribute read
        that is not a call, or bound to something other than one plain name."""
        quiet = set(fact.untraining_methods)
        parent = self.index.parent(call)
        if isinstance(parent, cst.Attribute) and parent.value is call:
            # `Toolkit().evaluate(model, loader)`
            outer = self.index.parent(parent)
            return (
                isinstance(outer, cst.Call)
                and outer.func is parent
                and parent.attr.value in quiet
            )
        if not (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return False
        target = parent.targets[0].target
        key = self.index.key(target)
        if key is None or len(self.index.values.get(key, [])) != 1:
            return False
        for name in findall(self.index.module, m.Name(value=target.value)):
            # every name spelt so, in any scope: a function reading the
            # global, or a local of the same name, is not told apart
            attribute = self.index.parent(name)
            if (
                name is target
                or isinstance(attribute, (cst.ImportFrom, cst.ImportAlias))
                or (isinstance(attribute, cst.Attribute) and attribute.attr is name)
            ):
                continue  # `from tools import ...`, `x.tools`: not the instance
            outer = self.index.parent(attribute) if attribute is not None else None
            if not (
                isinstance(attribute, cst.Attribute)
                and attribute.value is name
                and isinstance(outer, cst.Call)
                and outer.func is attribute
                and attribute.attr.value in quiet
            ):
                return False
        return True

    def _block_picked_trainers(self) -> None:
        """``getattr(alg, config["algorithm_type"])(config)`` of a local module
        whose classes train (``dynamic_trainers``): the class is picked by name,
        and each of them keeps its setup in its own file."""
        from .dynamic_trainers import picked_trainers

        for call, module, facts in picked_trainers(
            self.index.calls, self.index.qualnames, self.index.project
        ):
            how = "; ".join(
                f"{f.where} trains "
                + (
                    f"models of its own there: {f.trains_own}"
                    if f.trains_own
                    else (
                        f"what it is handed there: {f.trains}"
                        if f.trains
                        else "itself there (it backpropagates and steps in "
                        + ", ".join(f"`{n}`" for n in f.training_methods)
                        + ")"
                    )
                )
                for f in facts[:2]
            )
            picked = (
                "imports a module of the local package"
                if "import_module" in snippet(call.func)
                else "builds a class of the local module"
            )
            more = f" (and {len(facts) - 2} more)" if len(facts) > 2 else ""
            files = sorted(
                {f.file for f in facts} | {f.trains_in for f in facts} - {""}
            )
            self.block(
                call,
                f"`{snippet(call)}` {picked} `{module}` "
                f"picked by name, and its classes train: {how}{more}. accel-migrate "
                "migrates a training setup one file at a time and does not prepare "
                f"models across files, so {', '.join(files)} "
                f"{'is' if len(files) == 1 else 'are'} not migrated; there "
                "wrap each model with accel.prepare_model(...) where it is built, "
                "each optimizer with accel.prepare_optimizer(...), the backward "
                "with accel.backward(...), shard the loaders it is handed with "
                "accel.prepare_dataloader(...) and make the losses it logs global "
                "(accel.global_loss). Nothing in this file was migrated: while each "
                "process trains a full copy there, sharding this file's loaders, "
                "reducing its metrics or moving its logs and saves to the main "
                "process would mix a migrated half with an unmigrated one",
            )
            return

    def _handed_model(
        self, call: cst.Call, fact: HelperFact
    ) -> cst.BaseExpression | None:
        """What ``call`` hands the parameter ``fact`` trains (None: not shown)."""
        return _argument(call, *fact.trained_parameter)

    def _model_named(self, call: cst.Call, fact: HelperFact, otherwise: str) -> str:
        """The model ``call`` hands ``fact``'s trained parameter, as a finding
        names it: `GD`, `model` for ``model.train()`` or ``model.to(device)``."""
        handed = self._handed_model(call, fact)
        while (
            isinstance(handed, cst.Call)
            and isinstance(handed.func, cst.Attribute)
            and handed.func.attr.value in _SAME_MODULE
        ):
            handed = handed.func.value
        return f"`{snippet(handed)}`" if handed is not None else otherwise

    def _handed_prepared(self, call: cst.Call, fact: HelperFact) -> bool:
        """Does this file prepare the model it hands a function of a training
        file of this batch that trains it (``train_one_epoch(model, optimizer,
        loader)`` with ``model``'s optimizer built here)?"""
        handed = self._handed_model(call, fact)
        if handed is None:
            return False
        key = root_key(self.index, handed)
        if key is None:
            return False
        # `for i, model in enumerate(net_ensemble)` with each member's optimizer
        # built here over `model.parameters()` (omegafragger/DDU's
        # train_ensemble.py): the list is what `optimized` records
        optimized = self.optimized
        return (
            key in optimized
            or self.elements.get(key) in self.trained_containers
            or self._is_prepared(key)
        )

    def _block_unprepared_handed(self, call: cst.Call, fact: HelperFact) -> None:
        """``train(model=model, loaders=..., cfg=cfg)`` of a training file of this
        batch that trains the model it is handed, where nothing in this file
        shows that model trained (its optimizer is built over there): this file
        would not prepare it, so it is left whole, and that file with it (AM103)."""
        model = self._model_named(call, fact, "a model")
        self.block(
            call,
            f"`{snippet(call)}` hands {model} to {fact.where}, which trains it "
            f"there: {fact.trains}; no optimizer built in this file receives its "
            "parameters (one that another module builds over them, in a function "
            "or in the model class's own methods, is not followed), so "
            f"accel-migrate cannot show here that {model} is trained and does not "
            f"prepare it, while {fact.file} counts on its "
            "callers to prepare the models they hand it. Wrap the model with "
            "accel.prepare_model(...) where it is built, and its optimizer with "
            "accel.prepare_optimizer(...) where that is built" + ALL_OR_NOTHING,
        )

    def _block_subclassed_trainers(self) -> None:
        """``class ClsTrainer(BaseTrainer)`` of this file over a base of a local
        module that trains what it is handed (its loop calls the backward:
        ``HelperFact.trains``; the subclass writes ``training_step``), or that
        builds the optimizer while this class's methods run the backward
        (``HelperFact.builds_optimizer``; the subclass writes ``_train_epoch``):
        the model's optimizer, and the loop or the step, are in the base's file.
        accel-migrate prepares a model and its optimizer in one file, so this
        file is left whole (and the base's file is, by AM004 there)."""
        for cls in findall(self.index.module, m.ClassDef()):
            methods = findall(cls.body, m.FunctionDef())  # type: ignore[attr-defined]
            steps = any(self.index.runs_backward(f.body) for f in methods)  # type: ignore[attr-defined]
            for base in cls.bases:  # type: ignore[attr-defined]
                fact = self.index.helper(base.value)
                if (
                    fact is None
                    or fact.kind != "class"
                    or fact.collectives  # the base already runs the runtime's calls
                ):
                    continue
                name = cls.name.value  # type: ignore[attr-defined]
                step = fact.trains_step[0]
                override = next(
                    (f for f in methods if f.name.value == step),  # type: ignore[attr-defined]
                    None,
                )
                if fact.trains and override is not None:
                    how = _overridden_step(
                        name, self._line(cls), fact, self._line(override)
                    )
                elif fact.trains:
                    how = (
                        f"`{name}` (line {self._line(cls)}) inherits the training "
                        f"of its base {fact.where}: {fact.trains}"
                    )
                elif fact.builds_optimizer and steps:
                    how = (
                        f"`{name}` (line {self._line(cls)}) runs a backward in its "
                        f"methods, and its base {fact.where} sets up the training: "
                        f"{fact.builds_optimizer}"
                    )
                else:
                    continue
                self.block(
                    base,
                    f"{how}. accel-migrate prepares a model and its optimizer in one "
                    "file and does not follow a class into a base of another file, "
                    "so neither this file nor the base's is migrated for it; wrap "
                    "the model with accel.prepare_model(...) before it is handed to "
                    f"`{name}`, its optimizer with accel.prepare_optimizer(...) "
                    "where it is built, the loaders with "
                    "accel.prepare_dataloader(...), the backward with "
                    "accel.backward(...) and the base's saves with accel.save(...)"
                    + ALL_OR_NOTHING,
                )
                break

    def _built_model_handed(
        self, call: cst.Call, fact: HelperFact
    ) -> cst.BaseExpression | None:
        """The model this file builds that ``call`` hands ``fact``'s class: an
        argument for a parameter its optimizer is built over
        (``HelperFact.optimized_parameters``), else a plain name of this file
        bound to a model it builds (``Recmodel = LightGCN(config, dataset)``)."""
        for name, position in fact.optimized_parameters:
            handed = argument(call, position, name)
            if handed is not None:
                return handed
        for arg in call.args:
            key = self.index.key(arg.value) if isinstance(arg.value, cst.Name) else None
            values = self.index.values.get(key, []) if key is not None else []
            if any(v is not None and self._builds_module(v) for v in values):  # type: ignore[attr-defined]
                return arg.value
        return None

    def _block_own_trainer(self, call: cst.Call, fact: HelperFact) -> None:
        """``model = Pix2PixModel(opt)`` of a local module whose class builds and
        trains its own networks: nothing of its setup is in this file. Where
        this file hands it a model whose parameters its optimizer is built over
        (``HelperFact.optimized_parameters``: LightGCN's ``BPRLoss(Recmodel,
        config)``, improved-diffusion's ``TrainLoop(model=model, ...)``), the
        finding says so: the model is this file's, its training is there."""
        where = fact.trains_in or fact.file
        handed = self._built_model_handed(call, fact)
        if handed is not None:
            what = f"`{snippet(handed)}`"
            story = (
                f"`{snippet(call)}` hands {what}, a model this file builds, to "
                f"{fact.where}, which trains there: {fact.trains_own}. Migrating "
                f"this file "
                f"alone reads {where} but does not write it, so AM004 cannot "
                f"follow that training (migrating the files together, as a batch, "
                f"does), and {what} is not prepared here: nothing of it is. "
                f"Wrap {what} with accel.prepare_model(...) where it is built, and "
                f"in {where} each optimizer it builds with "
            )
        else:
            where, advised = built_where(fact)
            story = (
                f"`{snippet(call)}` builds {fact.where}, which trains models of its "
                f"own there: {fact.trains_own}. The models it trains and their "
                f"optimizers are built inside it, in {where}, which migrating this "
                "file reads but does not write, and this file builds no model or "
                "optimizer of that training to prepare: nothing of it is prepared. "
                f"In {advised} wrap each model it builds with "
                "accel.prepare_model(...) and each optimizer with "
            )
        self.block(
            call,
            story + "accel.prepare_optimizer(...), and its backward with "
            "accel.backward(...); where this file feeds it batches, shard that "
            "loader with accel.prepare_dataloader(...), and make the losses it "
            "hands back global (accel.global_loss) where they are logged. Nothing in this "
            f"file was migrated: while each process trains a full copy in "
            f"{fact.trains_in or fact.file}, sharding this file's loaders, reducing its metrics or "
            "moving its logs and saves to the main process would mix a migrated "
            "half with an unmigrated one",
        )


def _overridden_step(name: str, line: int, fact: HelperFact, step_line: int) -> str:
    """The phrase of a subclass that overrides the step of a base that trains
    what it is handed (the decision-transformer ``SequenceTrainer.train_step``):
    what it inherits is the loop that calls the step, and the model the base's
    ``__init__`` stores."""
    step, loop, call_line = fact.trains_step
    inherits = (
        f"inherits `{loop}` of its base {fact.where}, the loop that calls "
        f"`self.{step}()` (line {call_line}) there"
        if loop
        else f"inherits the setup of its base {fact.where}"
    )
    return (
        f"`{name}` (line {line}) overrides `{step}` (line {step_line}), the step "
        f"its base trains with, and {inherits}; the base trains what it is "
        f"handed: {fact.trains}"
    )
