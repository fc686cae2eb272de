"""The runtime that migrated scripts import: ``import accel_migrate.runtime as accel``.

Light by design: it imports torch and nothing of the codemod or the CLI.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # the codemod and CLI install without torch; this cannot
    raise ImportError(
        "accel_migrate.runtime needs PyTorch: pip install torch "
        "(or pip install 'accel-migrate[torch]')"
    ) from exc

from ._state import LossSiteError
from .amp import autocast, grad_scaler
from .api import (
    backward,
    barrier,
    clip_grad_norm_,
    clip_grad_value_,
    device,
    gather,
    global_loss,
    is_local_main_process,
    is_main_process,
    load,
    load_state,
    load_state_dict,
    local_rank,
    no_sync,
    prepare_dataloader,
    prepare_dataloaders,
    prepare_model,
    prepare_optimizer,
    print,
    rank,
    reduce,
    save,
    save_state,
    state_dict,
    unwrap,
    world_size,
)
from .batch_draws import batch_draw, batch_draw_like
from .class_weights import class_weight_count
from .config import ConfigError, RuntimeConfig
from .main_only import MainProcessOnly, on_main_process
from .module import LateRegistrationError
from .ordered import GatherOrderError, gather_in_order
from .swa import update_bn

__all__ = [
    "ConfigError",
    "GatherOrderError",
    "LateRegistrationError",
    "LossSiteError",
    "MainProcessOnly",
    "RuntimeConfig",
    "autocast",
    "backward",
    "barrier",
    "batch_draw",
    "batch_draw_like",
    "class_weight_count",
    "clip_grad_norm_",
    "clip_grad_value_",
    "device",
    "gather",
    "gather_in_order",
    "global_loss",
    "grad_scaler",
    "is_local_main_process",
    "is_main_process",
    "load",
    "load_state",
    "load_state_dict",
    "local_rank",
    "no_sync",
    "on_main_process",
    "prepare_dataloader",
    "prepare_dataloaders",
    "prepare_model",
    "prepare_optimizer",
    "print",
    "rank",
    "reduce",
    "save",
    "save_state",
    "state_dict",
    "unwrap",
    "update_bn",
    "world_size",
]
