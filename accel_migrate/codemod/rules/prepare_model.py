"""AM004 prepare-model: the trained model is wrapped by ``accel.prepare_model(...)``.

## What
Finds the models the script trains: modules built in this file (a class deriving
from ``nn.Module``, a ``torch.nn`` layer, a ``torchvision``/``timm``/``transformers``
factory, or any call) that are moved to the device or whose ``.parameters()`` feed
an optimizer, also through a variable (``params = list(enc.parameters()) +
list(dec.parameters())``, ``itertools.chain(a.parameters(), b.parameters())``).
A module of a class of this file that holds no parameter (DINO's ``DINOLoss``:
a ``center`` buffer, temperatures and a numpy schedule;
``parameterless_modules``) is no model where no optimizer reaches its
parameters (built over them, or handed them by ``opt.add_param_group(...)``),
moved to the device or not: it has no gradient to average (the runtime would
give it no DDP wrapper), and its buffer updates are AM032's to report.
Each construction is wrapped where it is built:

- ``model = accel.prepare_model(Net().to(device))``;
- ``encoder, decoder = accel.prepare_model(Encoder()), accel.prepare_model(Decoder())``;
- a list of models, each element: ``nets = [accel.prepare_model(Net(False)), ...]``
  (the script uses each one on its own);
- a conditional expression as a whole:
  ``accel.prepare_model(build().cuda() if cuda else build())``;
- a model named after the module it comes from (``from mnist import model;
  model = model.mnist()``);
- a model class's class method (of a local module or this file) that hands back
  a new instance (nanoGPT's ``GPT.from_pretrained(init_from)``, ``Net.build(cfg)``, every return
  ``cls(...)`` or a name bound only to it): ``accel.prepare_model(GPT.from_pretrained(...))``;
- in a factory function of this file (``def get_model(): net = Net(); ...;
  return net.cuda()``): there, and not again around ``get_model()``;
- right in the arguments of a call to a function or class of this file
  (``Trainer(accel.prepare_model(Net()), data)``);
- a model rebuilt around itself in the same block, after every other place
  that builds it (DINO's ``student = MultiCropWrapper(student, DINOHead(...))``):
  the wrapper, whose head the optimizer trains too, not the bare backbone
  (``codemod/model_rewraps.py``), when nothing but ``name = model.attribute``
  reads the model between its build and the rewrap; a model trained first and
  wrapped after (``model = Calibrated(model, head)`` below the loop) has its
  build prepared.

An optimizer over the parameter groups a local module's function hands back
for one model (DINO's ``AdamW(utils.get_params_groups(student))``: every return
a list of ``{"params": ...}`` dicts of that parameter's parameters,
``codemod/param_group_helpers.py``) trains that model.

``nn.DataParallel(...)`` around any of these is removed by AM003. A module class
whose own methods build an optimizer from ``self.parameters()`` is trained through
its instances. A method that only hands such an optimizer back (minGPT's
``configure_optimizers(train_config)``: every return is the optimizer, whose
parameters all come from ``self``: ``self.parameters()``, a loop over
``self.named_parameters()`` appending to ``decay``, or a dict
``{pn: p for pn, p in self.named_parameters()}`` indexed by sorted names, with
no container of them changed in a way that is not followed, such as
``param_dict.update(...)``) and that this file never calls trains the instance
it is called on, where it is called: ``model.configure_optimizers(config)`` in
another file is an optimizer over ``model``'s parameters, and that file prepares
the model. Its own file is then not asked for an instance. Where such a method
holds something the rule cannot show to be ``self``'s (``other.parameters()``,
``param_dict.update(extra)``), the needs-review finding names that statement and
its line instead of asking for an instance. Modules built inside another
module's ``__init__`` (sub-layers) and loss modules are not models.

A file that calls ``torch.ao.quantization.prepare_qat`` (or ``prepare``,
``fuse_modules``, ``fuse_modules_qat``; ``quantization_swaps``) is left whole
with a needs-review finding: quantization-aware training's observers keep the
running min/max of each activation from the batch a process sees, so on N
processes each quantizes with its own share's ranges, not the original's.

## All or nothing
A trained model that this rule cannot wrap or show prepared (it comes from an
import, it is a parameter no call of this file passes a model, it is unpacked from
a call, it is built in a form such as ``cached if ok else Net()``), or a model
that a training loop calls (``model.train()`` shows it is one) whose optimizer is
not built in this file (``build_optimizer(cfg, model)``; also a model whose
attribute is the optimizer the script steps, pix2pixHD's ``optimizer_G =
model.module.optimizer_G``: ``codemod/owned_optimizers.py``), stops the migration of
the whole file: the file is left unchanged, with one needs-review
finding at the model's place that says how it is bound and where to add
``accel.prepare_model(...)``. A ``self.model`` that a base class's constructor sets
from a method the class overrides (Informer2020's ``Exp_Basic.__init__``:
``self.model = self._build_model().to(self.device)``, ``_build_model`` written in
the subclass) is not followed through that constructor: the finding names the
base's assignment and the override (``codemod/base_built_models.py``). A
variable holding an instance of a plain class (no base but ``object``: not an
nn.Module) whose attributes' parameters an optimizer trains
(pointer_summarizer's ``self.model = Model(path)`` and
``Adagrad(list(self.model.encoder.parameters()) + ...)``) is not wrapped
(``prepare_model`` refuses a non-module) and stops the migration the same way,
the finding naming the holder (``codemod/holder_models.py``). A model
handed to a trainer class of another file of the batch that trains it (its
step runs it, or it builds an optimizer over its parameters, also through an
attribute: improved-diffusion's ``self.model_params =
list(self.model.parameters())``) is held to the same rule: one this rule
cannot wrap (``model, diffusion = create_model_and_diffusion(...)``) stops
the file. Sharding the data and rewriting ``backward`` without
the model would make every process train its own unsynchronised copy on its part
of the data, with nothing to show for it. The unit is the file: a file is never
half-migrated.

A container of models (``nn.ModuleList``, ``nn.ModuleDict``, an ``nn.Sequential``
indexed into) whose parts a training step calls one by one (``self.heads["fine"](x)``,
``sum(loss(m(x), y) for m in members)``), while no step calls the container itself,
blocks the file the same way: the prepared model averages gradients in its own
forward, which would never run. A trained ``nn.ModuleList`` or ``nn.ModuleDict``
has no forward at all, so it blocks the file wherever its modules are called
(RepDistiller's ``trainable_list = nn.ModuleList([])`` filled by ``.append``,
the optimizer over ``trainable_list.parameters()``, the step in another file;
``model_parts.forwardless_builds``). A plain list of models (``[Net() for _ in
range(n)]``, also held by the instance) is wrapped element by element instead.

In batch mode a function's parameter that every call from the batch's other
files hands a model built there (``train_one_epoch(model, optimizer, loader)``
in an ``engine.py`` called from ``train.py``: the project view's callers) is
prepared by those callers: an info finding names them, and the file is migrated.
A caller that hands a model to a function of such a file that builds an
optimizer over that parameter (pytorch-adda's ``train_src(encoder, classifier,
loader)``: ``HelperFact.optimized_parameters``) prepares it; a model built
through a local helper that hands back the net it is given
(``init_model(net=LeNetEncoder(), restore=...)``) is that net.

A model this rule prepares (or hands such a function to prepare) on which a
method of its class (a class of another module of the project) registers a
buffer or a module after it is prepared stops the file the same way:
pytorch-ewc's ``train(model, ...)`` calls ``model.consolidate(fisher)``, whose
``self.register_buffer("{}_mean".format(n), ...)`` the prepared model refuses
after its first forward (``LateRegistrationError``; a late parameter is
adopted, so ``register_parameter`` is not read), and the Fisher it keeps would
be each process's own. The finding is at the call that runs the method, or
that hands the model to the function that does (``late_registered_models``).

A model taken back from a function of this file that returns, at that position
of its tuple, the parameter it was handed, never bound again there
(``model, best = train_model(model, ...)`` with ``return model, best_acc``),
is the prepared model, as ``model = train_model(model, ...)`` is.

A library trainer splits a setup across files: minGPT's ``Trainer(config, model,
dataset)`` in ``mingpt/trainer.py`` is handed the model its caller builds and
trains it there (optimizer, loader, backward), so that file is left unchanged as
above. A script that hands a model to such a class of a local module (the project
view: a class whose method with a backward runs what ``__init__`` was handed) is
left unchanged too, with one needs-review finding at the call naming the library
file and the line of its backward: sharding the script's eval loaders, reducing
its metrics or moving its logs and saves while each process trains a full copy
in the library would mix a migrated half with an unmigrated one. A script with
no training loop of its own that only builds the model and calls
``Trainer(config, model, dataset).run()`` (minGPT's chargpt) gets the same
finding: it is a training entry point, trained through the library. So does a
script that calls a function of a local module returning its training step as
a closure (BigGAN-PyTorch's ``train = train_fns.GAN_training_function(G, D,
GD, ...)``, whose nested ``train(x, y)`` runs ``GD`` and the backward:
``codemod/closure_steps.py``). A script with no backward of its own
that calls a function of a local module running a whole training of its own
(daandouwe/glove's main.py: ``if args.mode == "train": train.main(args)``,
where ``main`` builds the model, its ``torch.optim.SparseAdam`` and calls
backward: ``HelperFact.runs_training``) is left unchanged with a needs-review
finding at that call, never skipped as "not a training entry point": the
training is all in the module, which migrating the script alone reads but does
not write. A subclass in the script of such a class (``SequenceTrainer(Trainer)``)
gets one at its base: where it overrides the step the base trains with
(``train_step``), the finding names the loop it inherits instead
(``train_iteration``, which calls ``self.train_step()``). With one
file argument the library is found as the script will import it: from the
script's folder up to the project root (the nearest folder with
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git`` below the home
folder, which ``pip install -e .`` puts on the path), read and never written.

In batch mode, with the class's file migrated too, the script prepares the
model it hands the class, once (every model it hands that the class builds an
optimizer over: ProGAN's ``ProGAN(gen, dis)``, ``codemod/handed_optimized.py``),
and the class's file learns from the batch's
calls (``Trainer(config, model, ...)``, ``trainer.evaluate(loader)``:
``project_callers``) that its model is prepared there (an info finding names
the calls), which loaders they shard, and the model's class (its
``configure_optimizers``, its ``forward`` loss). If either file is left
unchanged, so is the other (AM103).

A class of a local module built only for its other methods, none of which
trains (``tools = Toolkit()`` then ``tools.evaluate(model, loader)``, its
``finetune(model, opt, loader)`` never called), does not stop the file; calling
a method that trains a handed model, or one that reaches it, or handing the
instance on, does (``HelperFact.untraining_methods``).

A model whose class is picked at run time by name among a local module's
(``models.__dict__[args.model]()``, ``getattr(models, name)(...)``,
``MODELS[args.model]()`` over a dict of local classes) is prepared only where
every candidate (``codemod/model_lookups.py``) carries no fact beyond being a
model (dropout aside, which AM027 reports): the checks of a forward (draws,
reductions over the batch, a returned loss) read the class a call names, and
none names this one. Otherwise the file stops with a finding at the pick naming
the candidates and why (``codemod/picked_models.py``).

## Why
Under DDP the model must be wrapped so that gradients are averaged across
processes, and under FSDP its parameters are sharded. ``prepare_model`` also moves
it to the process's device. The wrapper is built at the model's first forward
call, so the script may still replace layers, freeze parameters or load weights
after this line.

## Example
```python
# before
encoder, decoder = Encoder().to(device), Decoder().to(device)
optimizer = optim.Adam(list(encoder.parameters()) + list(decoder.parameters()))
# after
encoder, decoder = accel.prepare_model(Encoder().to(device)), accel.prepare_model(Decoder().to(device))
optimizer = accel.prepare_optimizer(optim.Adam(list(encoder.parameters()) + list(decoder.parameters())))
```

```python
# left unchanged, with a needs-review finding at the call: train.py's main
# builds its model and optimizer and calls backward (a whole training of its own)
import train
if args.mode == "train":
    train.main(args)
```

```python
# left unchanged, with a needs-review finding at the import
from models import net
optimizer = optim.SGD(net.parameters(), lr=0.1)
```

## Fix safety
Safe: attribute reads and writes, ``state_dict()`` keys, ``train()``/``eval()`` and
``parameters()`` behave as on the user's module; with one process and fp32 the
call returns the module itself, and preparing a prepared model returns it. Where
a trained model cannot be shown prepared, nothing in the file is rewritten (see
All or nothing). A module class trained through its own optimizer with no
instance built in this file gets a needs-review finding. A
``# accel-migrate: skip`` comment on the statement the blocking finding points at
lifts the block (the user has taken that model over).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..all_or_nothing import ALL_OR_NOTHING, AllOrNothing
from ..analysis import Key
from ..holder_models import HolderModels
from ..late_registered_models import late_registered
from ..model_builds import ModelBuilds
from ..model_parts import (
    forwardless_builds,
    forwardless_message,
    part_use_message,
    part_uses,
)
from ..model_rewraps import rewrapped_later
from ..optimized_models import OptimizedModels
from ..optimizer_helpers import factory_model
from ..prepared_checks import PreparedChecks
from ..project_callers import given_by_callers, prepared_by_callers
from ..project_facts import CallSite
from ..rule import Rule


class PrepareModel(
    AllOrNothing, OptimizedModels, HolderModels, PreparedChecks, ModelBuilds, Rule
):
    code = "AM004"
    name = "prepare-model"
    summary = (
        "model = Net().to(device) -> model = accel.prepare_model(Net().to(device))"
    )
    prepares = True

    def _wrap(
        self, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.Call:
        core = self._core(original)
        helper = (
            self.index.helper(core.func, "model")
            if isinstance(core, cst.Call)
            else None
        )
        what = helper.describe() if helper is not None else "model"
        self.report(original, "fixed", f"{what} -> accel.prepare_model(...)")
        return self.runtime_call("prepare_model", [cst.Arg(value=updated)])

    def _wraps(self, key: Key | None, value: cst.BaseExpression | None) -> bool:
        return (
            key in self.models
            and self._fresh(key, value)  # type: ignore[arg-type]
            and not self._prepared_by_factory(value)
            and not rewrapped_later(
                self.index, key, value, lambda v: self._rewraps(key, v), self._line  # type: ignore[arg-type]
            )
        )

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        if len(original_node.targets) != 1:
            return updated_node
        target = original_node.targets[0].target
        key = self.index.key(target)
        if self._wraps(key, original_node.value):
            return updated_node.with_changes(
                value=self._wrap(original_node.value, updated_node.value)
            )
        if key in self.model_containers:
            return updated_node.with_changes(
                value=self._wrap_items(original_node.value, updated_node.value)
            )
        if isinstance(target, (cst.Tuple, cst.List)):
            return self._wrap_unpacked(target, original_node, updated_node)
        return updated_node

    def _wrap_items(
        self, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.BaseExpression:
        """``[Net(False), Net(True)]`` -> each element wrapped (a list of models:
        each one is prepared on its own, as the script uses each on its own)."""
        if isinstance(original, cst.ListComp) and isinstance(updated, cst.ListComp):
            return updated.with_changes(elt=self._wrap(original.elt, updated.elt))
        if isinstance(original, (cst.List, cst.Tuple)) and isinstance(
            updated, (cst.List, cst.Tuple)
        ):
            elements = [
                new.with_changes(value=self._wrap(old.value, new.value))
                for old, new in zip(original.elements, updated.elements, strict=False)
            ]
            return updated.with_changes(elements=elements)
        return updated

    def _wrap_unpacked(
        self,
        target: cst.Tuple | cst.List,
        original_node: cst.Assign,
        updated_node: cst.Assign,
    ) -> cst.Assign:
        """``encoder, decoder = Encoder(), Decoder()``: each model wrapped in place."""
        original, updated = original_node.value, updated_node.value
        if not (
            isinstance(original, (cst.Tuple, cst.List))
            and isinstance(updated, (cst.Tuple, cst.List))
            and len(original.elements) == len(target.elements)
            and len(updated.elements) == len(target.elements)
            and not any(isinstance(e, cst.StarredElement) for e in target.elements)
        ):
            return updated_node
        elements = []
        for name, old, new in zip(
            target.elements, original.elements, updated.elements, strict=True
        ):
            if self._wraps(self.index.key(name.value), old.value):
                new = new.with_changes(value=self._wrap(old.value, new.value))
            elements.append(new)
        return updated_node.with_changes(value=updated.with_changes(elements=elements))

    def leave_AnnAssign(
        self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign
    ) -> cst.AnnAssign:
        key = self.index.key(original_node.target)
        if updated_node.value is not None and self._wraps(key, original_node.value):
            return updated_node.with_changes(value=self._wrap(original_node.value, updated_node.value))  # type: ignore[arg-type]
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if original_node.value in self.model_arguments:
            return updated_node.with_changes(
                value=self._wrap(original_node.value, updated_node.value)
            )
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        made = factory_model(self.index, original_node)
        if made is not None:
            self._check_prepared(original_node, made)
        if not self.is_optimizer_call(original_node):
            return updated_node
        for inner in self._parameter_calls(original_node):
            if self.holder_trained(original_node, inner):
                continue  # `self.model.encoder` of a plain holder (blocked)
            receiver = inner.func.value  # type: ignore[attr-defined]
            owner = self._owner_class(receiver)
            if owner is not None:
                if not self._class_is_prepared(owner):
                    self._report_owner(original_node, inner, owner)
                continue
            self._check_prepared(inner, receiver)
        return updated_node

    def _report_owner(
        self, optimizer: cst.Call, inner: cst.Call, owner: cst.ClassDef
    ) -> None:
        """``owner``'s own parameters (``inner``) reach ``optimizer`` and no
        instance of it is built here: fine when a method hands the optimizer
        back to callers elsewhere (``_handed_to_callers``); reported otherwise."""
        why = self._handed_to_callers(optimizer, owner)
        name = owner.name.value
        if why is None:
            self.report(
                inner,
                "needs-review",
                f"`{name}` is trained but no instance is built in this file; wrap it with accel.prepare_model where it is built",
            )
        elif why:
            method = self.index.enclosing_function(optimizer).name.value  # type: ignore[union-attr]
            self.report(
                inner,
                "needs-review",
                f"`{name}.{method}` hands back the optimizer built at line "
                f"{self._line(optimizer)} from `{name}`'s parameters, but {why}, "
                f"so accel-migrate cannot show that it trains only the `{name}` it "
                "is called on, where it is called; build its parameter groups "
                "from `self.parameters()` / `self.named_parameters()` alone (lists "
                "appended to, sets of names, a dict of them indexed by name), or "
                "wrap the optimizer with accel.prepare_optimizer(...) and every "
                "model whose parameters it holds with accel.prepare_model(...) "
                "where they are built",
            )

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)
        # A model handed to a trainer class of another file of the batch (it
        # trains it and counts on this file to prepare it) that is not built
        # here in a form this rule wraps (`model, diffusion =
        # create_model_and_diffusion(...)`): all or nothing, as for a model
        # whose parameters feed an optimizer of this file.
        built = self.handed_constructions(self._core)
        for value in self.handed_models:
            if value not in built:
                self._check_prepared(value, value)  # type: ignore[arg-type]
        # A method of the prepared model's class that registers a buffer on
        # it, run after it is prepared (pytorch-ewc's `consolidate`): refused
        # at run time, and what it keeps is each process's own.
        for call, why in late_registered(self.index, self._is_wrapped, self._core):
            self.block(call, _late_message(why) + ALL_OR_NOTHING)
        # A container of models whose parts the script calls (`nets[0](x)`,
        # `for net in nets`): preparing it whole would sync nothing.
        wrapped = self.models - self.model_containers
        parts = part_uses(self.index, wrapped)
        for key, use in parts.items():
            self.block(
                use,
                part_use_message(self.index, key, use, self._line) + ALL_OR_NOTHING,
            )
        # An `nn.ModuleList` / `nn.ModuleDict` has no forward at all: wrapping
        # it syncs nothing wherever its modules are called.
        for key, built in forwardless_builds(self.index, wrapped).items():
            if key not in parts:
                self.block(
                    built,
                    forwardless_message(self.index, key, built, self._line)
                    + ALL_OR_NOTHING,
                )

    def _is_wrapped(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a model this rule prepares here, or one this file hands
        a trainer of the batch that counts on it to prepare it?"""
        key = self.index.key(value)
        return key is not None and (
            key in self.models or key in self._handed_to_batch_trainers
        )

    @cached_property
    def _caller_prepared(self) -> dict[Key, tuple[cst.Param, tuple[CallSite, ...]]]:
        """Parameters shown prepared by the batch's callers (``_is_prepared``)."""
        return {}

    def leave_Module(
        self, original_node: cst.Module, updated_node: cst.Module
    ) -> cst.Module:
        # every parameter the batch's callers hand a model they build, whether
        # or not a check here asked (``prepared_models`` counts them prepared)
        given = {**given_by_callers(self.index, "model"), **self._caller_prepared}
        for key, (param, sites) in given.items():
            self.report(param, "info", prepared_by_callers(key[1], sites))
        return updated_node


def _late_message(why: str) -> str:
    return (
        f"{why}: the prepared model refuses a buffer (or a module) registered "
        "after its first forward (`LateRegistrationError`), and what it would "
        "keep is each process's own, from its share of the data; register it "
        "in `__init__` (a zero buffer, filled in place later) so it is there "
        "when the model is prepared"
    )
