"""What a file learns from the local modules it imports (the project view).

For each function and class of a local module (``utils.py``, ``models/``,
``mingpt/trainer.py``) the view records what calling it gives and does:

- ``returns``: "loader" (a ``torch.utils.data.DataLoader``), "model" (an
  ``nn.Module`` subclass instance, also through a factory such as
  ``get_network(args)`` whose every return is one), "optimizer" (a
  ``torch.optim`` class), "optimizer class" (the class itself, looked up by
  name: ``optimizer_factories.optimizer_class``), "loss" (with its ``reduction``: "mean", "sum",
  "token-mean" or "unknown"); for a model class, the loss its ``forward``
  returns (``forward_loss``, ``forward_losses``), and for a factory of one, that
  class (``model_class``);
- ``writes``: what it writes or removes (``torch.save``, ``shutil.copyfile``,
  ``os.remove``, ``open(..., "w")``, a class whose constructor opens a file);
  ``prints``: it prints (``print``, ``sys.stdout.write``);
- ``collectives``: it calls ``torch.distributed`` or the runtime itself;
  ``collective_calls``: those of its calls that are more than a question
  about the process (``get_rank``, ``is_initialized``): collectives;
  ``effects_only``: all it does is those writes and prints (no value handed
  back, nothing of its arguments or of the module changed), so it may run on
  the main process alone;
- ``trains``: a class trains the model its caller hands it (a library trainer,
  ``library_trainers``); ``trains_own``: a class (not a model) of a file this
  run does not migrate trains models it builds itself (pix2pix's
  ``Pix2PixModel.optimize_parameters``).

Facts are plain frozen data: they cross into the batch's worker processes and
are part of the cache key of the file that imports them (``digest``); what one
file learns in all is its ``ProjectFacts`` (``project_file_facts``).

Static only: modules are parsed with ``ast`` (see ``project_view``); nothing is
imported, run or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .draw_guards import TestedDraw
from .project_call_sites import CallSite
from .project_row_scaled import RowScaledReturn

if TYPE_CHECKING:
    from .reduction_settings import SettingReductions

__all__ = ["RETURN_KINDS", "CallSite", "ForwardLoss", "HelperFact"]

#: What a helper's call returns.
RETURN_KINDS = ("loader", "model", "optimizer", "loss", "optimizer class")
_DESCRIBED = {
    "loader": "a DataLoader",
    "model": "a model (an nn.Module)",
    "optimizer": "an optimizer",
    "loss": "a loss",
    "optimizer class": "an optimizer class",
}


@dataclass(frozen=True)
class ForwardLoss:
    """The loss a model class's ``forward`` returns (``forward_losses``): at
    ``position`` of its tuple of ``length``, reduced as ``reduction`` (mean /
    sum / token-mean / unknown); ``what``: for a token mean, what it averages
    over, as a finding says it."""

    position: int
    length: int
    reduction: str
    what: str = ""
    #: For a token mean whose count the caller can write: the ``forward``
    #: parameter that holds the targets (``targets``), its position among the
    #: positional parameters after ``self`` (-1: keyword only), and the ignored
    #: value as written (``-1``); the count is ``(<argument> != <ignored>).sum()``.
    target_parameter: str = ""
    target_position: int = -1
    ignored: str = ""


@dataclass(frozen=True)
class HelperFact:
    """What one function or class of a local module gives and does."""

    #: Its name in its module: ``get_test_dataloader``, ``Logger``.
    name: str
    #: The file it is defined in, as the user names it (``utils.py``, ``models/__init__.py``).
    file: str
    kind: str = "function"  # or "class"
    returns: str = ""  # one of RETURN_KINDS, or "" when not known
    reduction: str = (
        ""  # for a loss: mean / sum / token-mean / none (per sample) / unknown
    )
    #: Why a returned loader cannot be sharded ("" when it can).
    unshardable: str = ""
    #: "tuple" or "dict" when every return is a display of that shape holding a
    #: loader (``return train_loader, val_loader``); ``items``: the kind of each
    #: item of the tuple ("" where not known), or of the dict's values.
    container: str = ""
    items: tuple[str, ...] = ()
    #: For a tuple with items of unknown kind (""), why each is not known, in
    #: order (``returned_items``: a parameter handed back, a value the analysis
    #: does not recognise, a kind that differs between returns).
    item_reasons: tuple[str, ...] = ()
    #: For a model class: its methods whose every return is an optimizer built
    #: over the instance's own parameters (minGPT's ``configure_optimizers``).
    optimizer_methods: tuple[str, ...] = ()
    #: For a model class: its class methods that hand back a new instance
    #: (``GPT.from_pretrained``: ``constructor_methods``).
    constructor_methods: tuple[str, ...] = ()
    #: For a model class: methods that take only ``self`` and hand back groups
    #: of its own parameters (tsn-pytorch's ``get_optim_policies``), which an
    #: optimizer is then built over (``param_group_methods``).
    param_group_methods: tuple[str, ...] = ()
    #: For a function whose every return is an optimizer it builds over what one
    #: of its parameters holds (``optimizer_factories``): that parameter, its
    #: position among the positional parameters (-1: keyword only) and "model"
    #: (``build_optimizer(cfg, model)``: the model's parameters) or "params"
    #: (``make_optimizer(model.parameters(), args)``: the parameters themselves).
    optimizer_over: tuple[str, int, str] = ("", -1, "")
    #: For a function whose every return is a list of parameter groups (dicts
    #: with "params") of one of its parameters (DINO's ``get_params_groups(model)``):
    #: that parameter and its position (-1: keyword only), ``param_group_helpers``;
    #: ("", -1) otherwise.
    param_groups_over: tuple[str, int] = ("", -1)
    #: For a function whose every return is a full sum or mean of what it is
    #: handed (``count_correct(output, target)``: ``pred.eq(target).sum().item()``),
    #: "sum", "mean" or "mean number" (a mean read as a Python number:
    #: ``.float().mean().item()``) (``project_batch_kinds``); "" otherwise.
    batch_kind: str = ""
    #: For a function whose return is a sum over the rows it is handed times a
    #: constant over their count (the ImageNet example's ``accuracy``): how
    #: (``project_row_scaled``); None otherwise.
    row_scaled: RowScaledReturn | None = None
    #: For a model class: the loss its ``forward`` computes and returns in a
    #: tuple (minGPT's ``return logits, loss``), or None.
    forward_loss: ForwardLoss | None = None
    #: For a plain function whose every return is a tuple: the loss at one of
    #: its positions (``return loss, to_cpu(components)``), read as a forward's
    #: (``forward_losses.tuple_loss``), or None where none can be read.
    tuple_loss: ForwardLoss | None = None
    #: For a function whose returns build ``torch.nn`` loss modules (a criterion
    #: factory, ``build_criterion(cfg)``): their reduction ("unknown" where they
    #: differ; ``criterion_factories``); "" for any other function.
    criterion: str = ""
    #: For a plain function whose every return is a tuple of one length: per
    #: position, (positional index, name) of the parameter it hands back
    #: unchanged there (DKT's ``return model, optimizer``), or (-1, "")
    #: (``relayed_parameters``).
    relayed: tuple[tuple[int, str], ...] = ()
    #: For a plain function whose every return is one of its parameters,
    #: unchanged (pytorch-adda's ``init_model(net, restore)``: ``return net``):
    #: (positional index, name), or (-1, "") (``relayed_parameters``).
    returned_parameter: tuple[int, str] = (-1, "")
    #: For a loss function or a model class's ``forward``: how it compares the
    #: batch's samples with each other (``pairwise_helpers``); "" if it does not.
    pairwise: str = ""
    #: For a model class: its methods (not ``forward``) whose returns weigh a
    #: term by a parameter (``loss_function(..., kld_weight)`` returning
    #: ``recons_loss + kld_weight * kld_loss``): (method, its positional
    #: parameters after ``self``, the weighing ones) (``project_method_weights``).
    method_weights: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    #: For a model class: its methods (not ``forward``) that return a loss
    #: (PyTorch-VAE's ``loss_function``), with its reduction ("mean", "sum",
    #: "token-mean", "unknown"; "" where the method computes a loss whose
    #: return cannot be read) (``project_method_weights``).
    method_losses: tuple[tuple[str, str], ...] = ()
    #: For a class: its methods that store what they are handed in a list
    #: attribute another method reads back (igebm's ``SampleBuffer.push``),
    #: each with that attribute (``replay_buffers``).
    stored: tuple[tuple[str, str], ...] = ()
    #: For a model class: its methods that take ``torch.autograd.grad`` of what
    #: they are handed with respect to the instance's own parameters (VQGAN's
    #: ``calculate_lambda``), with that call as written
    #: (``method_parameter_grads``).
    parameter_grads: tuple[tuple[str, str], ...] = ()
    #: For a model class: its methods other than ``forward`` that run its layers
    #: themselves (the BiLSTM-CRF's ``loss(xs, tags)``), past a prepared model's
    #: own call (``layer_methods``).
    layer_methods: tuple[str, ...] = ()
    #: For a model class: each of its ``layer_methods`` with the first call, as
    #: written, by which it runs the layers (``self.encoder(x)``)
    #: (``layer_methods.layer_calls``).
    layer_calls: tuple[tuple[str, str], ...] = ()
    #: For a model class: those of its ``layer_methods`` that also run a backward
    #: (a model that trains itself: ``DKT.train_model(loaders, ..., opt)``)
    #: (``layer_methods.training_methods``).
    training_methods: tuple[str, ...] = ()
    #: For a function that returns a model: the local model class every one of
    #: its returns builds (``def get_model(cfg): return GPT(cfg)``), whose
    #: ``forward`` its models run; None where that is not one known class.
    model_class: HelperFact | None = None
    #: For a model class: how its ``forward`` shapes a tensor with a batch size
    #: its ``__init__`` stores (``x.view(self.batch_size, ...)``), as a phrase
    #: (``batch_shaped_models``); "" if it does not.
    batch_shape: str = ""
    #: For a model class: (method, parameter, position after ``self``, shape code,
    #: line) of the methods shaping a tensor with a parameter (``parameter_shapes``).
    param_shapes: tuple[tuple[str, str, int, str, int], ...] = ()
    #: Random draws it makes when called (``project_draws``): for a function,
    #: ``(("", draw),)``; for a class, (method, draw) for each method that
    #: draws (``ReplayBuffer.push_and_pop``'s ``random.uniform``, a dataset's
    #: ``transforms.RandomCrop``, a VAE's ``forward``).
    draws: tuple[tuple[str, str], ...] = ()
    #: For a function: its draws from torch's global random state, each with
    #: the parameter (name, position) whose falsy default guards it (``if
    #: augment:``), or ("", -1) (``project_draws.function_torch_draws``).
    torch_draws: tuple[tuple[str, str, int], ...] = ()
    #: For a function some of whose draws run only under a test of one of its
    #: parameters (``if data_type == "train":``): every draw with those tests,
    #: which a call's constant arguments may prove false (``draw_guards``);
    #: ``()`` where no draw is guarded so.
    guarded_draws: tuple[TestedDraw, ...] = ()
    #: For a function: each random augmentation it builds (a torchvision one,
    #: or an instance of a class of the project whose ``__call__`` draws:
    #: proxy-nca's ``RandomCropFlip`` in ``make_transform``), with the tests of
    #: its parameters it is built under (``draw_guards``).
    guarded_augmentations: tuple[TestedDraw, ...] = ()
    #: The first torchvision random augmentation it builds (``RandomCrop``), as
    #: written; "" if none: a loader it builds, or one over an instance of it,
    #: draws for each sample (``project_draws.augmentation``).
    augmentation: str = ""
    #: For a function that returns a model: the library model it builds that
    #: draws in train mode (torchvision's ``fasterrcnn_resnet50_fpn``, whose
    #: heads sample anchors and proposals with ``torch.randperm``), as written;
    #: "" if none (``project_draws.sampling_model_built``).
    sampling_model: str = ""
    #: For a function that returns a loader (or a tuple or dict of them): the
    #: first draw a dataset class it builds makes for each sample, in its
    #: ``__getitem__`` or ``__iter__``, as a phrase; "" if none
    #: (``loader_sample_draws``).
    sample_draws: str = ""
    #: For a model class: how its ``forward`` (or a class of the project it
    #: builds) runs a submodule only when its batch says so, as a phrase
    #: (``project_data_branches``); "" if it does not.
    data_branch: str = ""
    #: For a model class: its own ``forward`` raises NotImplementedError, so it
    #: runs through its other methods (``act``, ``evaluate_actions``), as a
    #: phrase (``unimplemented_forward``); "" if not.
    unimplemented_forward: str = ""
    #: For a model class: a tensor with a gradient of its own that it keeps as
    #: an attribute without registering it as an nn.Parameter (DARTS's
    #: ``self.alphas_normal``), as a phrase (``unregistered_tensors``); "" if none.
    unregistered_tensors: str = ""
    #: For a function: a loop of it that ranks its batch's samples against each
    #: other (``torch.topk(predictions, k)`` whose indices pick the batch's
    #: rows), as a phrase (``metrics.batch_ranking``); "" if none.
    ranks_batch: str = ""
    #: For a model class, or a function returning a model: where it (or a class
    #: it builds or derives from, in any local module) draws dropout masks in
    #: train mode, as a phrase (``stochastic_layers``); "" if it does not.
    stochastic: str = ""
    #: For a model class, or a function returning a model: where it (or a class
    #: it builds or derives from, in any local module) reduces over the samples
    #: of its batch in ``forward``, as a phrase (``batch_mixing_models``); "" if
    #: it does not.
    batch_mixing: str = ""
    #: For a model class: how its ``forward`` (or a method it calls) writes a
    #: buffer of its own from its inputs (MoCo's queue of keys), as a phrase
    #: (``project_state_writes``); "" if it does not.
    state_writes: str = ""
    #: For a class that is not a model: (method, how it, or a method it calls on
    #: ``self``, writes a tensor the instance keeps from other values) for each
    #: public method that does (basicsr's ``feed_data`` refilling its pool in
    #: ``_dequeue_and_enqueue``) (``project_state_writes``).
    method_state_writes: tuple[tuple[str, str], ...] = ()
    #: For a model class: (method, how) for each method other than ``__init__``
    #: and ``forward`` that registers a buffer or a module on ``self``
    #: (pytorch-ewc's ``consolidate``: ``self.register_buffer(...)``), refused
    #: on a prepared model (``project_state_writes.late_registrations``).
    late_registrations: tuple[tuple[str, str], ...] = ()
    #: For a function: (parameter, positional index or -1, method, line) for
    #: each call of a method on one of its parameters, never bound again there
    #: (``train(model, ...)`` calling ``model.consolidate(...)``)
    #: (``handed_optimized.parameter_methods``).
    parameter_methods: tuple[tuple[str, int, str, int], ...] = ()
    #: For a model class used as a criterion: how its ``forward`` passes a loss
    #: that is already a mean over the batch through a non-linear function
    #: (arcface-pytorch's ``FocalLoss``: ``torch.exp(-self.ce(input, target))``),
    #: as a phrase (``nonlinear_criteria``); "" if it does not.
    nonlinear_loss: str = ""
    #: For a class: how calling an instance reduces the batch, from the returns
    #: of its ``forward`` (else ``__call__``): ("sum", ""), ("mean", ""),
    #: ("unknown", why) or ("", "") (``called_reductions``: the FNO's
    #: ``LpLoss(size_average=False)``).
    call_reduction: tuple[str, str] = ("", "")
    #: For such a class whose reduction is chosen by attributes of the instance
    #: (``call_reduction`` unknown): each return with the attribute tests that
    #: lead to it, and where ``__init__`` takes the attributes from
    #: (``reduction_settings``): a construction with literal arguments picks its
    #: paths (FNO's ``LpLoss(size_average=False)`` sums). None where not read.
    setting_reductions: SettingReductions | None = None
    #: For a model class, or a function returning a model: where it (or a class
    #: it builds or derives from, in any local module) unpacks an RNN's output
    #: to the longest sequence of its batch (``pad_packed_sequence`` without a
    #: fixed ``total_length``), as a phrase (``share_padding``); "" otherwise.
    share_padded: str = ""
    #: For a function: the files it opens for reading by an attribute of one of
    #: its parameters, as (positional index or -1, parameter, attribute path):
    #: SQuAD's ``evaluate.main(args)`` opens ``args.prediction_file``
    #: (``path_reads``).
    reads_paths: tuple[tuple[int, str, str], ...] = ()
    #: For a class that trains what its caller hands it (a library trainer such
    #: as minGPT's ``Trainer``), or a function that does (a project's own
    #: ``fit(model, optimizer, loader)``): how, as a phrase (``library_trainers``);
    #: "" if not.
    trains: str = ""
    #: For such a class: the method whose backward ``trains`` names (the step),
    #: the method of the class that calls it on ``self`` (the loop) and that
    #: call's line (``library_trainers.handed_training_step``): a subclass that
    #: overrides the step inherits the loop, not the step.
    trains_step: tuple[str, str, int] = ("", "", 0)
    #: For a class that trains none it is handed at construction, one of whose
    #: methods trains a model handed to that method (a hand-written Trainer's
    #: ``fit(model, loader)``): how, as a phrase (``method_trains_handed``);
    #: "" if not.
    method_trains: str = ""
    #: For a class, not a model, that calls ``.backward()`` and steps an
    #: optimizer it reaches through ``self``, with none of ``trains``,
    #: ``method_trains``, ``builds_optimizer`` nor an inherited training
    #: (fast.ai's ``Runner.fit(epochs, learn)``, the model read through a
    #: property of ``self.learn``): how, as a phrase
    #: (``unfollowed_trainers``); "" if not.
    unfollowed_training: str = ""
    #: For such a class: its methods whose call trains nothing
    #: (``library_trainers.untraining_methods``): an instance only they are
    #: called on is not handed the model to train.
    untraining_methods: tuple[str, ...] = ()
    #: For such a class: the ``__init__`` parameter it trains, and its position
    #: among the positional parameters after ``self`` (-1: keyword only).
    trained_parameter: tuple[str, int] = ("", -1)
    #: For such a class: the ``__init__`` parameters (and positions) stored on
    #: ``self`` whose parameters feed an optimizer one of its methods builds
    #: (ProGAN's ``gen`` and ``dis``), ``handed_optimized``: a caller prepares
    #: each model it hands one of them.
    optimized_parameters: tuple[tuple[str, int], ...] = ()
    #: For a class: the attributes its methods backpropagate (``self.loss``),
    #: with the line of the backward, which callers may read on an instance.
    losses: tuple[tuple[str, int], ...] = ()
    #: For a class: its methods whose parameter is a callback it runs with the
    #: instance once per training step, after the backward, on every process
    #: (``step_callbacks``): (method, parameter, position after ``self``).
    step_callbacks: tuple[tuple[str, str, int], ...] = ()
    #: For a class, not a model, that builds its own optimizer and calls backward
    #: (pix2pix's ``Pix2PixModel``), in a file this run reads but does not
    #: migrate: how, as a phrase (``library_trainers``); "" if not.
    trains_own: str = ""
    #: For a function, in a file this run reads but does not migrate, that
    #: builds an optimizer and calls backward in its own body (daandouwe/glove's
    #: ``train.main(args)``): how, as a phrase (``function_trains_own``); "" if
    #: not. A script with no backward of its own that calls it trains through
    #: it (``ProjectFacts.training_functions``, AM004).
    runs_training: str = ""
    #: For a class whose ``trains_own`` is its base's (pytorch_tabnet's
    #: ``TabNetClassifier(TabModel)``): the file of the class that trains, where
    #: the models and optimizers to prepare are built; "" when it is its own.
    trains_in: str = ""
    #: For such a class (``trains_in`` another file): the attributes of
    #: ``self`` its own methods set from a call (``own_built_attributes``):
    #: where one is set, what it trains may be built in its own file too.
    own_builds: tuple[str, ...] = ()
    #: For a class, not a model, of a file this run migrates, that trains
    #: models it builds itself (sfujim/TD3's ``TD3`` with its ``train``
    #: method): how, as a phrase (``trains_own_models``); "" if not. A script
    #: that imports it drives that training on every process (``drivers``).
    migrated_trainer: str = ""
    #: For such a class: its methods whose call runs a backward (directly, or
    #: through other methods of ``self``; ``library_trainers.stepping_methods``):
    #: a caller's loop around one of them is a training loop (Graph-WaveNet's
    #: ``engine.train(trainx, trainy)`` over batches no process splits).
    step_methods: tuple[str, ...] = ()
    #: For a class that writes files: the methods it defines that write none,
    #: directly or through the other methods of ``self`` they call
    #: (``method_writes``): a call of one needs no barrier after it.
    quiet_methods: tuple[str, ...] = ()
    #: For a class that prints or writes files only in methods that nothing in
    #: the project names (LSTNet's ``Optim.updateLearningRate``): those
    #: methods (``uncalled_methods``); () otherwise. Building one prints and
    #: writes nothing, so AM017 leaves its construction alone.
    uncalled_effects: tuple[str, ...] = ()
    #: For a class: its methods that print or write, when building an instance
    #: runs none of them (``uncalled_methods.construction_quiet_effects``): the
    #: writes run where those methods are called, not where it is built.
    method_effects: tuple[str, ...] = ()
    #: For a class, not a model: it derives from torch's DataLoader
    #: (torch_geometric's NeighborSampler, written in a project's sampler.py);
    #: accel-migrate does not prepare an instance of it (AM019 names it so).
    loader_subclass: bool = False
    #: For a class, not a model: where a method of it builds an optimizer, as a
    #: phrase (``library_trainers.builds_optimizer``); "" if none does. A base
    #: trainer whose subclass in another file writes the training step.
    builds_optimizer: str = ""
    #: For a class: it derives from ``torch.optim.Optimizer`` (davda54/sam's
    #: ``SAM``, stepped by its own ``first_step``/``second_step``) or from a
    #: library optimizer (``torch.optim.SGD``), also through the project's own
    #: bases: constructing it builds an optimizer (``optimizer_subclass``).
    optimizer_subclass: bool = False
    #: For a class, not a model, that defines ``__next__`` or ``__iter__`` (a
    #: hand-written batch iterator: Chinese-Text-Classification's
    #: ``DatasetIterater``), and for a function whose every return builds an
    #: instance of one (``build_iterator``): the phrase that names it
    #: (``iterator_factories``); "" otherwise.
    batch_iterator: str = ""
    #: For a class, not a model: the attributes its own ``__init__`` sets from a
    #: call of one of its methods (Informer2020's ``Exp_Basic``: ``self.model =
    #: self._build_model().to(self.device)``, the method a subclass overrides),
    #: as (attribute, method, line, code) (``base_built_models``).
    init_built: tuple[tuple[str, str, int, str], ...] = ()
    #: For a class: it has no base but ``object``, so it is not an nn.Module
    #: (pointer_summarizer's ``class Model(object)`` holding the encoder and
    #: decoder as attributes: ``plain_holders``).
    plain: bool = False
    #: Its file is a training file of this batch (it runs a backward of its
    #: own), rewritten in its own right: its prints and writes are made
    #: main-process ones there, and its sums over the loaders the batch hands it
    #: reduced there (``project_callers``), not at the call.
    batch_migrated: bool = False
    #: Its file is a helper module of this batch (no backward of its own)
    #: migrated for the batch's calls of it (``ProjectView.migrated_library``):
    #: its writes and prints are made main-process ones there, and what it sums
    #: or collects over the loaders its callers hand it is reduced there. A call
    #: of it runs on every process as written.
    batch_library: bool = False
    #: For a function of such a module: the parameters every call from the
    #: batch's other files hands a loader (name, position among the positional
    #: parameters, -1 keyword only), when its module never calls it itself:
    #: those its module reduces over (``project_callers.given_by_callers``).
    handed_loaders: tuple[tuple[str, int], ...] = ()
    #: For a function that returns a DataLoader: the parameter (name, position
    #: among the positional parameters, -1 keyword only) it takes its batch size
    #: from (``loader_factory_sizes``); ("", -1) where not known.
    loader_batch_size: tuple[str, int] = ("", -1)
    #: For a sum-reduced loss with a term summed over some of its parameters
    #: (``return rec + beta * torch.sum(torch.abs(code))``): those parameters,
    #: which a caller must hand values of the batch's samples (model outputs)
    #: for the term to be a sum over the batch, and the parameters that scale a
    #: term (``beta``), which a caller must leave at their constant defaults or
    #: pass a setting; ``params``: its positional parameters, in order.
    summed_params: tuple[str, ...] = ()
    scale_params: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    #: For a class: each method that writes files itself (``open(..., "w")``,
    #: ``torch.save``, ``numpy.save``; word2vec's ``save_embedding``), with what
    #: it writes (``instance_writes.method_writes``).
    method_writes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    prints: bool = False
    collectives: bool = False
    #: The calls behind ``collectives`` that another process must join
    #: (``torch.distributed.all_reduce``), not the questions about the process
    #: (``get_rank``, ``is_initialized``): empty where it only asks.
    collective_calls: tuple[str, ...] = ()
    #: For a function: what it asks torch.distributed about the process group,
    #: itself or through the helpers it calls (``get_world_size``,
    #: ``get_rank``): DeiT's ``utils.get_world_size()``, 1 where no process
    #: group is initialised (AM046).
    group_queries: tuple[str, ...] = ()
    effects_only: bool = False

    @property
    def where(self) -> str:
        return f"`{self.name}` in {self.file}"

    def describe(self) -> str:
        """``get_test_dataloader in utils.py returns a DataLoader``."""
        parts = []
        if self.container:
            others = set(self.items) - {"loader"}
            loaders = (
                "DataLoaders"
                if not others
                else (
                    f"DataLoaders and {self.plain_items()}"
                    if "loader" in self.items
                    and others <= {"none", "number", "dataset"}
                    else "values"
                )
            )
            parts.append(f"returns a {self.container} of {loaders}")
        if self.returns:
            verb = "builds" if self.kind == "class" else "returns"
            what = _DESCRIBED[self.returns]
            if self.returns == "loss" and self.reduction == "none":
                what += " (per sample, reduction='none')"
            elif self.returns == "loss" and self.reduction == "unknown":
                what += (
                    " (whose reduction over the batch's samples, a mean or a sum "
                    "of them, the analysis cannot read from its return)"
                )
            elif self.returns == "loss" and self.reduction:
                what += f" ({self.reduction}-reduced)"
            parts.append(f"{verb} {what}")
        if self.writes:
            parts.append(f"writes files ({', '.join(self.writes)})")
        if self.prints:
            parts.append("prints")
        if self.collective_calls:
            names = ", ".join(c.rsplit(".", 1)[1] for c in self.collective_calls)
            parts.append(f"calls collectives ({names})")
        elif self.collectives:
            parts.append("asks torch.distributed which process it runs on")
        return f"{self.where} " + (", ".join(parts) or "has no known effect")

    def plain_items(self, joiner: str = "or") -> str:
        """``None or numbers``: the items beside the loaders that are surely no
        loader, as a finding names them."""
        names = {"none": "None", "number": "numbers", "dataset": "datasets"}
        found = [names[k] for k in ("none", "number", "dataset") if k in self.items]
        return f" {joiner} ".join(found)

    @property
    def side_effects(self) -> bool:
        return bool(self.writes or self.prints)
