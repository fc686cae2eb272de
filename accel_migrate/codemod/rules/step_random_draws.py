"""AM020 step-random-draws: random numbers drawn in a training step differ from the original's.

## What
Reports, as needs-review, a random draw (``torch.randn``, ``torch.rand``,
``torch.randint``, ``torch.randperm``, ``torch.normal``, ``random.*``,
``numpy.random.*``; a tensor method that fills a tensor with random numbers,
``x.new(x.size()).normal_()``, ``.uniform_()``, ``.bernoulli_()``; a
``torch.distributions`` object's ``.rsample()`` or ``.sample()``) made in a training step that reads a data loader: inside a
loop that runs a backward and takes its batches from a loader, in the step
itself, in a function the step calls, or in a method of a model class defined
in the file (its ``forward`` and the methods ``forward`` calls on ``self``, as
a VAE's ``reparameterize`` draws ``torch.randn_like(std)``, and the file's
module-level functions those call, as the Beta-VAE's ``reparametrize``) when
the step calls an instance of that class. Also a draw in the code that makes the data: a
local Dataset's ``__getitem__`` / ``__iter__`` (or a class given to a DataLoader
as its dataset), a ``collate_fn`` given to a DataLoader, a generator the loader's
batches pass through (``def infinite(loader): ... yield x + noise``), a method a training step
calls on a local object (a CycleGAN ``ImagePool.query``, the ``__call__`` of a
Mixup object ``mix(x, y)``), and the local functions
those call (also the ``__call__`` of a local object they call, as a dataset
calls the transform it holds: DINO's ``self.transform(image)`` running
``DataAugmentationDINO.__call__``); and a torchvision random augmentation (``transforms.RandomCrop``,
``RandomHorizontalFlip``, ``ColorJitter``...) built in a file that builds a data
loader, or an instance of a local module's class, not a model, whose ``__call__``
draws (a transforms.py of the project's own, as torchvision's reference scripts
keep one: ``T.RandomCrop(crop_size)`` at ``random.randint`` offsets) built there,
also one that holds such objects or torchvision random augmentations and calls
them (ssd.pytorch's ``SSDAugmentation`` holding ``Compose([RandomMirror(),
...])`` applied in a loop; torchvision's ``ClassificationPresetTrain`` holding
``T.Compose(trans)`` of a list of ``T.RandomResizedCrop``...), and where the
loader is built by a local helper the file calls (``make_loader(dataset)``).
A library model that draws in train mode (torchvision's Faster, Mask and
Keypoint R-CNN, whose RPN and RoI heads sample anchors and proposals with
``torch.randperm``) is reported where it is built, by the file or a local
factory, in a file that shards a loader. The same draws in a local module the file imports are reported where
the file uses them: a training step's call of an imported function or of a
method of an imported object that draws (PyTorch-GAN's
``ReplayBuffer.push_and_pop`` in ``utils.py``), a model of another module whose
``forward`` draws (also through an object it holds whose call draws: the
anchors torchvision's detection heads sample with ``torch.randperm`` in a
``BalancedPositiveNegativeSampler``; and where the file hands such a model to
an imported function that trains it, torchvision's reference
``train_one_epoch(model, ...)``, or the step iterates a wrapper handed a
loader, ``metric_logger.log_every(data_loader, ...)``), a DataLoader over an imported dataset class that draws (or
builds a random augmentation), also in a method the class inherits from a base
of another module (``BaseVAE.forward`` in ``base_model.py``, a base dataset's
``__getitem__``), and a call of an imported helper that builds a
loader and draws (``get_training_dataloader`` with ``transforms.RandomCrop``). Also a DataLoader
whose ``sampler=`` (or ``batch_sampler=``) is an instance of an imported class
whose ``__iter__`` draws from torch's global random state (DeepAR's
``WeightedSampler`` with ``torch.multinomial``): the runtime draws the order
under the main process's random state, the original's only while no draw
before it was made for one process's share (a model sampling over a sharded
evaluation loader). And a call, between training epochs, of an imported
function that draws from torch's global random state and is handed a loader
of the file (DeepAR-style ``evaluate(model, test_loader)`` sampling its
forecasts): the loader is sharded, so each process draws for its own share, and
the draws move torch's random state, from which a shuffled loader draws its
next epoch's order, away from the original's (``random``'s and numpy's draws
there leave that state alone, and a draw under ``if augment:`` with a falsy
default the call does not pass does not run: neither is reported). Also the
draws of a method a training step calls on an object of another module that
trains models of its own (basicsr's ``model.feed_data(train_data)`` then
``model.optimize_parameters(it)``: the step's backward runs in that object);
a transform class defined in the file, whose instance is built and handed on
(ssd.pytorch's ``Compose([RandomMirror(), ...])`` handed to an imported
dataset's ``transform=``); and a local function that builds an instance of a
project class whose ``__call__`` draws (proxy-nca's
``dataset.utils.make_transform`` building ``RandomCropFlip``, a module of a
package reached as ``dataset.utils``). A draw of a local function that runs
only under a test of one of its parameters (``if data_type == "train":``,
``RandomCropFlip(sz) if is_train else CenterCrop(sz)``) is not the draw of a
call whose constant arguments (or the parameter's constant default) prove
the test false (``collate_fn=lambda x: data_processing(x, "valid")``,
``make_transform(..., is_train=False)``); a test of another shape, or an
argument that is not a constant, proves nothing and the draw is reported. Draws from an explicit ``generator=`` (seeded alike on every
process, it draws the original's numbers) are not reported unless their
arguments read the batch (``torch.randn(x.shape, generator=g)``), nor are
draws in setup code before training, nor are draws in a
loop that reads no loader (AM019 reports that loop: every process makes the
same data there). Nor is a draw of one row per sample of the batch
(``torch.randn(x.size(0), nz)``, a VAE's ``torch.randn_like(std)``): AM034
draws it for the global batch and hands each process its rows. Nothing is
rewritten.

## Why
The original script draws the random numbers of a step for the whole batch (GAN
noise ``torch.randn(b_size, nz)``, diffusion time steps, masks, augmentation
choices, a dataset's random crops) from one random state. After migration each process draws its own,
from its own state, for its share of the batch: the numbers are not slices of the
original's (processes seeded alike may even draw the same numbers), so the loss
curve cannot match the original's step for step, although training is just as
valid statistically.

## Example
```python
# before
for real, _ in loader:
    noise = torch.randn(real.size(0), nz, device=device)
    loss = criterion(netD(netG(noise)), ones)
    loss.backward()
# after
# (unchanged: reported as needs-review)
for real, _ in loader:
    noise = torch.randn(real.size(0), nz, device=device)
    loss = criterion(netD(netG(noise)), ones)
    accel.backward(loss)
```

## Fix safety
Report only. Where step-for-step parity matters, draw the numbers for the whole
global batch and take this process's rows (``accel.batch_draw(rows, lambda n:
torch.randn(n, nz))``, which AM034 writes where the row count is read off the
batch), or accept that the run is statistically, not numerically,
equivalent.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key
from ..batch_rows import batch_values, rows_draw
from ..data_pipeline import data_function_of
from ..divergence import distribution_values, is_random_draw, method_draw
from ..imported_draws import (
    epoch_draw,
    loader_draw,
    makes_loader,
    sampler_draw,
    step_draw,
    trained_model_draw,
    transform_draw,
)
from ..model_methods import stepped_function, stepped_method, training_step
from ..random_names import random_transform, sampling_model
from ..rule import Rule
from ..subtrees import findall


class StepRandomDraws(Rule):
    code = "AM020"
    name = "step-random-draws"
    summary = "random draws in a training step -> reported (each process draws its own)"

    def visit_Call(self, node: cst.Call) -> None:
        if rows_draw(self.index, node) is not None:
            return  # AM034 draws it for the global batch
        if any(
            self.index.is_runtime_call(a, "batch_draw")
            for a in self.index.ancestors(node)
        ):
            return  # drawn for the global batch already
        if self._imported_draw(node):
            return
        qualnames = self.qualnames(node.func)
        if self._sampling_model(node, qualnames):
            return
        transforms = sorted(q for q in qualnames if random_transform(q))
        local = transform_draw(self.index, node)
        if local is not None and makes_loader(self.index):
            self.report(
                node,
                "needs-review",
                f"random augmentation {local[0]} ({local[1]}), built here in a "
                "file that builds a data loader: the loader applies it to each "
                "process's own share of the samples, drawing from that process's "
                "random state, so the samples are not augmented as the original's "
                "were; the losses will not match the original's step for step",
            )
            return
        if transforms and makes_loader(self.index):
            self.report(
                node,
                "needs-review",
                f"random augmentation `{transforms[0]}`: the data loader applies it "
                "to each process's own share of the samples, drawing from that "
                "process's random state, so the samples are not augmented as the "
                "original's were; the losses will not match the original's step "
                "for step",
            )
            return
        names = [q for q in qualnames if is_random_draw(q)]
        if not names:
            method = method_draw(self.index, node, self._distributions)
            if method is None:
                return
            names = [method]
        if any(
            arg.keyword is not None and arg.keyword.value == "generator"
            for arg in node.args
        ) and not self._reads_batch(node):
            # A generator of its own, seeded alike on every process, draws the
            # original's numbers, unless the draw is shaped by this process's
            # share of the batch (``torch.randn(x.shape, generator=g)``).
            return
        name = sorted(names)[0]
        if self._object_method_draw(node, name):
            return
        if any(self._training_step(path) for path in self.index.loop_paths(node)):
            self.report(
                node,
                "needs-review",
                f"random draw in a training step (`{name}`): each process draws its own "
                "numbers for its share of the batch, not its slice of the original's; "
                "the losses will not match the original's step for step",
                if_migrated=True,
            )
            return
        runner = data_function_of(self.index, node)
        if runner is not None:
            self._report_data_draw(node, name, runner)
            return
        model = self._stepped_model_method(node)
        if model is not None:
            where, cls = model
            self.report(
                node,
                "needs-review",
                f"random draw in {where} (`{name}`), which runs on every call "
                f"of a `{cls}` model in a training step: each process draws its own "
                "numbers for its share of the batch, not its slice of the original's; "
                "the losses will not match the original's step for step",
                if_migrated=True,
            )

    def _sampling_model(self, node: cst.Call, qualnames: set[str]) -> bool:
        """A library model that draws in train mode (torchvision's Faster
        R-CNN: its RPN and RoI heads sample anchors and proposals with
        ``torch.randperm``), built here or by a local factory, in a file that
        shards a loader: reported where it is built."""
        names = sorted(q for q in qualnames if sampling_model(q))
        where = f"`{names[0]}`" if names else ""
        if not names:
            fact = self.index.helper(node.func, returns="model")
            if fact is None or not fact.sampling_model:
                return False
            where = f"{fact.where} (which builds {fact.sampling_model})"
        if not (self.index.loaders or self.index.project.library_trainers):
            return True
        self.report(
            node,
            "needs-review",
            f"{where} builds a model that draws in train mode: its region "
            "proposal network and RoI heads sample the anchors and proposals "
            "they train on with `torch.randperm` for each image; each process "
            "samples for its own share of the batch from its own random state, "
            "not the original's samples, so the losses will not match the "
            "original's step for step",
            if_migrated=True,
        )
        return True

    def _object_method_draw(self, node: cst.Call, name: str) -> bool:
        """A draw outside any loop of a method that a step calls on its object
        (CycleGAN's ``ImagePool.query``): reported as that method's, which says
        where the draw is better than "in a training step" (the step reaches it
        through the object's method, bound at its call since round 24t)."""
        function = self.index.enclosing_function(node)
        if function is None or self.index.enclosing_class(function.name) is None:
            return False
        for ancestor in self.index.ancestors(node):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                return False
        runner = data_function_of(self.index, node)
        if runner is None or "calls on its" not in runner:
            return False
        self._report_data_draw(node, name, runner)
        return True

    def _report_data_draw(self, node: cst.Call, name: str, runner: str) -> None:
        """The finding of a draw in ``runner``, a data function or a method a
        step calls on its object (``data_function_of``)."""
        self.report(
            node,
            "needs-review",
            f"random draw (`{name}`) in {runner}: each process runs it for its "
            "own share of the data, drawing from its own random state, so the "
            "samples do not get the numbers the original drew for them; the "
            "losses will not match the original's step for step",
        )

    def _imported_draw(self, node: cst.Call) -> bool:
        """Report a draw made through a local module (``imported_draws``)."""
        found = step_draw(self.index, node)
        if found is not None:
            where, draw = found
            self.report(
                node,
                "needs-review",
                f"random draw in {where} ({draw}), which a training step calls "
                "here: each process draws its own numbers for its share of the "
                "batch, not its slice of the original's; the losses will not "
                "match the original's step for step",
                if_migrated=True,
            )
            return True
        found = loader_draw(self.index, node)
        if found is not None:
            where, draw = found
            self.report(
                node,
                "needs-review",
                f"random draw in {where} ({draw}), which the data loader built "
                "here runs for each process's own share of the samples, drawing "
                "from that process's random state: the samples do not get the "
                "numbers the original drew for them; the losses will not match "
                "the original's step for step",
            )
            return True
        trained = trained_model_draw(self.index, node)
        if trained is not None:
            where, draw, model = trained
            self.report(
                node,
                "needs-review",
                f"random draw in {where} ({draw}): `{model}` is handed to a "
                "function that trains it, whose training step runs it on each "
                "process's own share of the batch; each process draws its own "
                "numbers, not its slice of the original's, so the losses will "
                "not match the original's step for step",
                if_migrated=True,
            )
            return True
        handed = epoch_draw(self.index, node)
        if handed is not None:
            where, draw, loader = handed
            self.report(
                node,
                "needs-review",
                f"random draw in {where} ({draw}), which runs here between "
                f"training epochs over `{loader}`: that loader is sharded, so each "
                "process draws for its own share of the samples, not the "
                "original's numbers, and its draws move torch's random state "
                "away from the original's; a loader that shuffles draws its "
                "next epoch's order from that state (the main process's), so "
                "the batches and the losses then differ from the original's",
                if_migrated=True,
            )
            return True
        found = sampler_draw(self.index, node)
        if found is not None:
            where, draw = found
            self.report(
                node,
                "needs-review",
                f"the loader's sampler draws its order in {where} ({draw}) from "
                "torch's global random state as each epoch starts: every process "
                "draws it under the main process's random state, which is the "
                "original's only while every draw before it there was the "
                "original's; a draw made for one process's share (a model that "
                "samples over a sharded evaluation loader, dropout on a share) "
                "moves it apart, and the batches then differ from the original's",
                if_migrated=True,
            )
            return True
        return False

    @cached_property
    def _batch_values(self) -> frozenset[Key]:
        return batch_values(self.index)

    def _reads_batch(self, node: cst.Call) -> bool:
        """Do the draw's arguments, or the tensor a method draw fills
        (``torch.empty_like(x).normal_(generator=g)``), read the batch?"""
        parts = [arg.value for arg in node.args]
        if isinstance(node.func, cst.Attribute):
            parts.append(node.func.value)
        return any(
            (key := self.index.key(name)) is not None and key in self._batch_values
            for part in parts
            for name in findall(part, m.Name())
        )

    @cached_property
    def _distributions(self) -> set[Key]:
        return distribution_values(self.index)

    def _training_step(self, path: tuple[cst.For | cst.While, ...]) -> bool:
        return training_step(self.index, path)

    def _stepped_model_method(self, node: cst.Call) -> tuple[str, str] | None:
        """Where the draw is, spelled for the finding, and the class a training
        step runs that runs it."""
        found = stepped_method(self.index, node)
        if found is not None:
            cls, method = found
            return f"`{cls.name.value}.{method.name.value}`", cls.name.value
        called = stepped_function(self.index, node)
        if called is not None:
            cls, method, function = called
            return (
                f"`{function.name.value}` (called by "
                f"`{cls.name.value}.{method.name.value}`)",
                cls.name.value,
            )
        return None
