"""``accel.update_bn``: torch's ``swa_utils.update_bn`` with the BatchNorm
statistics of the global batch.

``update_bn(loader, swa_model)`` recomputes the running statistics of an
averaged model's BatchNorm layers: it resets them, sets ``momentum=None`` (a
cumulative average) and runs the model in train mode over the loader. The
averaged model is a copy (``AveragedModel(model)``), made before the prepared
model's first forward converted its layers, so its BatchNorm is torch's own;
over a sharded loader each process would average its own share's statistics.
Here, at more than one process in global-batch mode over a loader the runtime
shards, the copy's layers are converted first (as a prepared model's are,
``sync_batchnorm``): every batch is normalised, and its statistics counted, as
the original's whole batch was. Anywhere else (one process, a loader that is not
sharded, where every process reads every batch, per-device batches,
``--no-sync-batchnorm``) it is torch's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.swa_utils import update_bn as _torch_update_bn

from . import sync_batchnorm
from ._state import get_runtime


def update_bn(
    loader: Iterable[Any], model: nn.Module, device: torch.device | None = None
) -> None:
    runtime = get_runtime()
    config = runtime.config
    if (
        runtime.env.distributed
        and dist.is_initialized()
        and getattr(loader, "_accel_sharded", False)
        and config.batch_mode == "global"
        and config.sync_batchnorm
    ):
        sync_batchnorm.convert(model)
        left = sorted({type(m).__name__ for m in sync_batchnorm.unconverted(model)})
        if left:
            raise sync_batchnorm.UnsyncedBatchNormError(
                f"update_bn: BatchNorm layer {', '.join(left)} has a forward of "
                "its own, so its statistics cannot be the global batch's; launch "
                "with --no-sync-batchnorm to accept per-process statistics"
            )
    _torch_update_bn(loader, model, device)
