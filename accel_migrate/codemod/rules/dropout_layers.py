"""AM027 dropout-layers: dropout in a trained model draws its masks on each process.

## What
Reports, as info, a dropout layer of a model class defined in the file
whose instances a training step calls (a loop that runs a backward and takes
its batches from a data loader): ``nn.Dropout``, ``nn.Dropout1d/2d/3d``,
``nn.AlphaDropout``, ``nn.FeatureAlphaDropout`` built in the class (also in
a function nested in one of its methods, as PyTorch-GAN's ``def
discriminator_block(...)`` inside ``__init__``), and ``F.dropout`` (and its
variants) called in its ``forward`` or a method ``forward`` calls. A model built from a local module (``model = GPT(config)``
with ``GPT`` in ``model.py``, ``net = vgg_tiny()``, ``build_model(cfg)``) is
reported where it is built when its class, or a class it builds as a submodule
or derives from, in any local module, has such a layer (minGPT's
``CausalSelfAttention`` with ``nn.Dropout(config.attn_pdrop)``); in batch mode
and when a script is migrated alone, its helpers read but unchanged. A model
picked by name at run time (``models.__dict__[args.arch]()``,
``getattr(models, name)()``, a registry dict ``MODELS[name]()``) is reported
where it is built when any of the candidates has dropout, naming those
(``model_lookups``): which one runs is not known statically. A
probability written as ``0`` and a functional call with ``training=False`` are
not reported; a probability read from a config (``p=cfg.dropout``) is, its value
being unknown. Nothing is rewritten.

## Why
In train mode dropout draws a random mask for every sample of the batch. The
original draws the masks of the whole batch from one random state; after
migration each process draws its own masks, from its own state, for its share
of the batch. They are not slices of the original's masks, so the losses at
world N match the original's only statistically, not step for step, and a
step-for-step comparison (``accel-migrate verify``) cannot tell this noise from
a bug of the migration. Where no data loader is sharded (``ModuleIndex.loaders``
is empty, and no trainer of another file runs the training: pyGAT's whole graph
each step, SASRec's batches from its own sampler), every process runs the whole
batch and draws masks for all of it: they are the original's where every
process's random state is the original's (seeded alike, with the same draws
before), and the finding says so instead of speaking of shares.

## Example
```python
# before
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)
        self.dropout = nn.Dropout(0.25)
    def forward(self, x):
        return self.fc(self.dropout(x))
# after
# (unchanged: reported as info)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)
        self.dropout = nn.Dropout(0.25)
    def forward(self, x):
        return self.fc(self.dropout(x))
```

## Fix safety
Report only, as info: the migrated training is as valid as the original's, and
nothing needs changing. ``accel-migrate verify --deterministic`` checks the rest
of the migration step for step: it runs the original and the migrated script with
dropout off and the step's random draws made identical per sample, and the losses
then match where nothing else differs. Plain ``verify`` does that check by itself
when the losses differ and reports "stochastic layers: statistically equivalent"
when they are the only cause.
"""

from __future__ import annotations

import libcst as cst

from ..amp import code
from ..analysis import ModuleIndex
from ..model_lookups import looked_up_models
from ..model_methods import forward_methods, stepped_classes
from ..rule import Rule
from ..stochastic_layers import DROPOUT_FUNCTIONS, DROPOUT_LAYERS


class DropoutLayers(Rule):
    code = "AM027"
    name = "dropout-layers"
    summary = (
        "dropout in a trained model -> reported (each process draws its own masks)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        self._imported_model(node)
        names = self.qualnames(node.func)
        layer = sorted(names & DROPOUT_LAYERS)
        function = sorted(names & DROPOUT_FUNCTIONS)
        if not (layer or function) or _disabled(node, functional=bool(function)):
            return
        cls, method = _owner(self.index, node)
        if cls is None or cls not in stepped_classes(self.index):
            return
        if function and method not in forward_methods(cls):
            return
        name = (layer or function)[0]
        self.report(
            node,
            "info",
            f"dropout in `{cls.name.value}` (`{name}`), which runs in a model a "
            "training step calls: " + self._masks(),
        )

    def _masks(self) -> str:
        """Whose masks each process draws: for its share of each batch, or, where
        no loader is sharded (``ModuleIndex.loaders`` is empty and no trainer of
        another file is handed the model: pyGAT's whole graph, SASRec's
        sampler), for the whole batch every process runs."""
        if self.index.loaders or self.index.project.library_trainers:
            # (minGPT's Trainer of another file builds and shards its loader)
            return _masks_of_shares()
        return _masks_of_whole_batches()

    def _imported_model(self, node: cst.Call) -> None:
        """``model = GPT(config)`` or ``build_model(cfg)`` of a local module
        whose model class, or a class it builds, has dropout
        (``HelperFact.stochastic``): reported where the model is built (the
        engine keeps findings of training files only)."""
        fact = self.index.helper(node.func, returns="model")
        if fact is None:
            self._looked_up_model(node)
            return
        if not fact.stochastic:
            return
        self.report(
            node,
            "info",
            f"{fact.where} builds a model with dropout ({fact.stochastic}): "
            + self._masks(),
        )

    def _looked_up_model(self, node: cst.Call) -> None:
        """``models.__dict__[args.arch]()``, ``getattr(models, name)()``,
        ``MODELS[name]()``: a model chosen by name among a local module's
        (``model_lookups``), reported where any candidate has dropout."""
        candidates = looked_up_models(self.index, node.func)
        stochastic = [f for f in candidates or () if f.stochastic]
        if not stochastic:
            return
        names = [f.name for f in candidates or ()]
        listed = "`, `".join(names[:6]) + ("`, ..." if len(names) > 6 else "`")
        shown = "; ".join(f"{f.where}: {f.stochastic}" for f in stochastic[:3])
        more = f" and {len(stochastic) - 3} more" if len(stochastic) > 3 else ""
        self.report(
            node,
            "info",
            f"`{code(node.func)}` picks its model by name at run time among "
            f"{len(names)} of the project's models (`{listed}), and "
            f"{len(stochastic)} of them {'builds' if len(stochastic) == 1 else 'build'} "
            f"a model with dropout ({shown}{more}): " + self._masks(),
        )


def _masks_of_shares() -> str:
    return (
        "in train mode, where its probability is above 0, each process draws its "
        "own dropout masks for its share of the batch, not its slice of the "
        "original's, so the losses match the original's only statistically, not "
        "step for step; " + _VERIFY
    )


def _masks_of_whole_batches() -> str:
    return (
        "in train mode, where its probability is above 0, each process draws the "
        "dropout masks from its own random state; no data loader is sharded here, "
        "so every process runs the whole batch (a whole graph, a sampler's batch) "
        "and draws masks for all of it: they are the original's where every "
        "process's random state is the original's (seeded alike, with the same "
        "draws before), and otherwise the losses match the original's only "
        "statistically, not step for step; " + _VERIFY
    )


_VERIFY = (
    "`accel-migrate verify --deterministic` compares the rest of the migration "
    "exactly (dropout off in both runs)"
)


def _owner(
    index: ModuleIndex, node: cst.CSTNode
) -> tuple[cst.ClassDef | None, cst.FunctionDef | None]:
    """The class whose method ``node`` is in, and that method; also through
    functions nested in the method (PyTorch-GAN's ``def
    discriminator_block(...)`` inside ``__init__``, which builds the
    ``nn.Dropout2d(0.25)`` that ``__init__`` assembles). ``(None, None)`` when
    ``node`` is in no method."""
    function = index.enclosing_function(node)
    while function is not None:
        cls = index.enclosing_class(function.body)
        if cls is not None:
            return cls, function
        function = index.enclosing_function(function)
    return None, None


def _disabled(node: cst.Call, functional: bool) -> bool:
    """``nn.Dropout(0)``, ``F.dropout(x, 0.0)``, ``F.dropout(x, training=False)``."""
    positional = [a for a in node.args if a.keyword is None]
    p_arg = next((a for a in node.args if a.keyword and a.keyword.value == "p"), None)
    index = 1 if functional else 0
    if p_arg is None and len(positional) > index:
        p_arg = positional[index]
    if p_arg is not None and _zero(p_arg.value):
        return True
    training = next(
        (a for a in node.args if a.keyword and a.keyword.value == "training"), None
    )
    if training is None and functional and len(positional) > 2:
        training = positional[2]
    return (
        training is not None
        and isinstance(training.value, cst.Name)
        and training.value.value == "False"
    )


def _zero(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer | cst.Float):
        return float(expr.value) == 0.0
    return False
