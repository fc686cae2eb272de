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
from .closures import ClosureLossError
from .config import ConfigError, RuntimeConfig
from .data import ShardingError
from .drift import ParametersDivergedError
from .env import LaunchEnvironmentError
from .faults import CollectiveError, CollectiveTimeoutError, PeerFailedError
from .guards import UnpreparedParametersError, UnsyncedGradientsError
from .main_only import MainProcessOnly, on_main_process
from .module import (
    EmptyShareForwardError,
    LateRegistrationError,
    UnreachedParametersError,
)
from .ordered import GatherOrderError, gather_in_order
from .precision.base import PrecisionUnavailableError
from .small_batches import BatchSmallerThanWorldError
from .strategies.base import LateParameterError
from .strategies.ddp import RepeatedGradientError
from .strategies.fsdp_units import ActivationCheckpointingError
from .swa import update_bn
from .sync_batchnorm import GradientPenaltyBatchNormError, UnsyncedBatchNormError

__all__ = [
    # errors: docs/runtime.md, "Errors"
    "ActivationCheckpointingError",
    "BatchSmallerThanWorldError",
    "ClosureLossError",
    "CollectiveError",
    "CollectiveTimeoutError",
    "ConfigError",
    "EmptyShareForwardError",
    "GatherOrderError",
    "GradientPenaltyBatchNormError",
    "LateParameterError",
    "LateRegistrationError",
    "LaunchEnvironmentError",
    "LossSiteError",
    "MainProcessOnly",
    "ParametersDivergedError",
    "PeerFailedError",
    "PrecisionUnavailableError",
    "RepeatedGradientError",
    "RuntimeConfig",
    "ShardingError",
    "UnpreparedParametersError",
    "UnreachedParametersError",
    "UnsyncedBatchNormError",
    "UnsyncedGradientsError",
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
