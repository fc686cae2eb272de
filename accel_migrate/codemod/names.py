"""Qualified-name tables and name tests shared by the rules and the project view.

Light to import (no libcst): the project view reads helper modules with ``ast``
and matches the same names as the rules, and the command line builds it before
it knows whether any file needs the engine.
"""

from __future__ import annotations

DATALOADER_CALLS = frozenset(
    {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
)
DATA_PARALLEL_CALLS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
MODULE_BASES = ("torch.nn.Module", "torch.nn.modules.module.Module")
#: Calls that build a model, besides classes of the module deriving from nn.Module.
MODEL_FACTORY_PREFIXES = (
    "torchvision.models.",
    "timm.create_model",
    "transformers.",
)
OPTIMIZER_BASES = ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer")
OPTIMIZER_PREFIXES = (
    "torch.optim.",
    "apex.optimizers.",
    "bitsandbytes.optim.",
    "timm.optim.",
    "transformers.AdamW",
    "transformers.Adafactor",
    "transformers.optimization.",
)
_NOT_OPTIMIZERS = (
    "torch.optim.lr_scheduler.",
    "torch.optim.swa_utils.",
    "torch.optim.Optimizer",
)

#: Usage of any of these means the script is already distributed: process groups and
#: launchers, wrappers, samplers, RPC and distributed autograd, DTensor and device
#: meshes, plain collectives, torch.multiprocessing workers, MPI, and the frameworks.
DISTRIBUTED_PREFIXES = (
    "torch.distributed.init_process_group",
    "torch.distributed.launch",
    "torch.distributed.run",
    "torch.distributed.fsdp",
    "torch.distributed.elastic",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler",
    "torch.distributed.rpc",
    "torch.distributed.autograd",
    "torch.distributed.tensor",
    "torch.distributed._tensor",
    "torch.distributed.device_mesh",
    "torch.distributed.DeviceMesh",
    "torch.distributed.init_device_mesh",
    "torch.distributed.nn",
    "torch.distributed.optim",
    "torch.distributed.algorithms",
    "torch.distributed.pipelining",
    "torch.distributed._functional_collectives",
    *(
        f"{module}.{name}"
        for module in ("torch.distributed", "torch.distributed.distributed_c10d")
        for name in (
            "all_gather",
            "all_gather_coalesced",
            "all_gather_into_tensor",
            "all_gather_object",
            "all_reduce",
            "all_reduce_coalesced",
            "all_to_all",
            "all_to_all_single",
            "barrier",
            "batch_isend_irecv",
            "broadcast",
            "broadcast_object_list",
            "gather",
            "gather_object",
            "irecv",
            "isend",
            "monitored_barrier",
            "new_group",
            "new_subgroups",
            "recv",
            "recv_object_list",
            "reduce",
            "reduce_scatter",
            "reduce_scatter_tensor",
            "scatter",
            "scatter_object_list",
            "send",
            "send_object_list",
        )
    ),
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    # Hogwild: workers started on one shared model; stdlib multiprocessing's Process
    # is often a helper (a logger, a data writer), torch's is the training pattern.
    "torch.multiprocessing.Process",
    "mpi4py",
    "accelerate",
    "lightning",
    "lightning_fabric",
    "pytorch_lightning",
    "deepspeed",
    "horovod",
    "ray.train",
)


#: Module methods that return the module itself.
SAME_OBJECT = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "apply",
    }
)


def is_nn_module_constructor(qualname: str) -> bool:
    """``torch.nn.Linear`` yes; ``torch.nn.functional.relu``, ``torch.nn.MSELoss`` no."""
    if not qualname.startswith("torch.nn."):
        return False
    parts = qualname.split(".")
    last = parts[-1]
    return (
        len(parts) == 3
        and last[:1].isupper()
        and not last.endswith("Loss")
        and last not in {"Parameter", "DataParallel", "Module"}
    )


def is_optimizer_class(qualname: str) -> bool:
    if qualname.startswith(_NOT_OPTIMIZERS):
        return False
    if not qualname.startswith(OPTIMIZER_PREFIXES):
        return False
    return qualname.rsplit(".", 1)[-1][:1].isupper()


def is_optimizer_base(qualname: str) -> bool:
    """A base class that makes a subclass an optimizer: ``torch.optim.Optimizer``
    or a library optimizer class (``torch.optim.SGD``)."""
    return qualname.startswith(OPTIMIZER_BASES) or is_optimizer_class(qualname)


TQDM_CALLS = frozenset(
    f"{module}.{name}"
    for module in ("tqdm", "tqdm.auto", "tqdm.notebook", "tqdm.std", "tqdm.rich")
    for name in ("tqdm", "trange")
)


#: Calls that join their first argument's tensors along a ``dim`` argument, the
#: first by default.
TORCH_CONCATENATIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
#: The same, of tensors or numpy arrays (``axis``).
CONCATENATIONS = TORCH_CONCATENATIONS | {"numpy.concatenate"}
#: Calls that join their first argument's pieces along the first dimension
#: (pieces of two dimensions or more), where no argument names another.
ROW_JOINS = CONCATENATIONS | {"torch.vstack", "numpy.vstack", "numpy.append"}
#: Calls that make one tensor (array) of several, along any dimension or a new one.
JOINS = CONCATENATIONS | {
    "torch.stack",
    "torch.hstack",
    "torch.vstack",
    "numpy.stack",
    "numpy.hstack",
    "numpy.vstack",
}

#: Methods whose result counts this process's samples (``x.size(0)``, ``mask.sum()``).
COUNT_METHODS = frozenset({"size", "numel", "sum", "count_nonzero"})

#: ``torch.nn.functional`` losses (by their last name).
FUNCTIONAL_LOSSES = frozenset(
    {
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "cosine_embedding_loss",
        "cross_entropy",
        "ctc_loss",
        "gaussian_nll_loss",
        "hinge_embedding_loss",
        "huber_loss",
        "kl_div",
        "l1_loss",
        "margin_ranking_loss",
        "mse_loss",
        "multi_margin_loss",
        "multilabel_margin_loss",
        "multilabel_soft_margin_loss",
        "nll_loss",
        "poisson_nll_loss",
        "smooth_l1_loss",
        "soft_margin_loss",
        "triplet_margin_loss",
    }
)
#: Losses whose ``reduction="none"`` value has the shape of their inputs
#: (broadcast): of a 2-D input, a 2-D loss. The others (``cross_entropy``,
#: ``nll_loss``, ...) drop the class dimension.
ELEMENTWISE_LOSSES = frozenset(
    {
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "kl_div",
        "poisson_nll_loss",
        "soft_margin_loss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "MSELoss",
        "L1Loss",
        "SmoothL1Loss",
        "HuberLoss",
        "KLDivLoss",
        "PoissonNLLLoss",
        "SoftMarginLoss",
    }
)
#: Losses whose mean skips the targets equal to ``ignore_index``.
IGNORING_LOSSES = frozenset(
    {"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"}
)

#: Calls whose ``dim`` (a literal >= 1) needs an input of two dimensions or
#: more, and whose value has the input's shape (``F.log_softmax(x, dim=1)``):
#: what proves a per-element loss 2-D (``project_ranks``, ``loss_inputs``).
ALONG_DIM_CALLS = frozenset({"softmax", "log_softmax", "normalize", "cumsum"})

#: Functions that change files by their paths, with where the path they make is
#: given (position, keyword); None for those that only remove.
FILE_CHANGERS: dict[str, tuple[int, str] | None] = {
    "shutil.copyfile": (1, "dst"),
    "shutil.copy": (1, "dst"),
    "shutil.copy2": (1, "dst"),
    "shutil.copytree": (1, "dst"),
    "shutil.move": (1, "dst"),
    "shutil.rmtree": None,
    "os.remove": None,
    "os.unlink": None,
    "os.rmdir": None,
    "os.removedirs": None,
    "os.rename": (1, "dst"),
    "os.renames": (1, "new"),
    "os.replace": (1, "dst"),
}
SAVES = frozenset({"torch.save", "torch.serialization.save"})

#: ``torch.autograd.grad`` (also reached as ``torch.autograd.grad.grad``).
AUTOGRAD_GRAD = frozenset({"torch.autograd.grad", "torch.autograd.grad.grad"})
#: Calls that differentiate the graph of the tensors they are given (a forward
#: whose result one of them takes needs its graph: not under ``torch.no_grad()``).
DIFFERENTIATING = AUTOGRAD_GRAD | frozenset(
    {
        "torch.autograd.backward",
        "torch.autograd.functional.jacobian",
        "torch.autograd.functional.hessian",
        "torch.autograd.functional.vjp",
        "torch.autograd.functional.jvp",
        "torch.autograd.functional.vhp",
        "torch.autograd.functional.hvp",
    }
)

#: Methods that grow a container in place (``hard.append(1.0)``, ``d.setdefault(k,
#: v)``): made where only some processes go, its length differs between them
#: (the divergence analysis and the rank-local sources read the same list).
CONTAINER_GROWERS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "appendleft",
        "extendleft",
    }
)
#: Methods that shrink a container in place (``queue.pop()``, ``d.popitem()``,
#: ``s.discard(v)``): made where only some processes go, or with an argument
#: that differs between them, its length differs between them too (fx38a).
CONTAINER_SHRINKERS = frozenset(
    {"pop", "popleft", "popitem", "remove", "discard", "clear"}
)


def writes_in_place(method: str) -> bool:
    """Is ``method`` a torch in-place write by its name (``zero_``, ``fill_``,
    ``copy_``, ``add_``, ``clamp_``...): one trailing underscore, not a
    dunder or a private name?"""
    return (
        len(method) > 1
        and method.endswith("_")
        and not method.endswith("__")
        and not method.startswith("_")
    )


#: Methods that move a module to a device and return it (``nn.MSELoss().cuda()``).
MODULE_MOVES = frozenset({"to", "cuda", "cpu"})
