"""fp16 under ``--strategy deepspeed``: DeepSpeed's own fp16 mode, on a GPU only.

DeepSpeed keeps fp16 parameters with fp32 master weights and scales the loss
itself (its config's ``fp16`` section, which ``strategies/deepspeed_zero.py``
writes), so this plugin adds no autocast and no loss scaling of its own. On the
CPU DeepSpeed's fp16 optimizer does not run: refused here, before any engine.
"""

from __future__ import annotations

import torch

from ..comm import Collectives
from .base import Precision, PrecisionUnavailableError


class DeepSpeedFP16Precision(Precision):
    name = "fp16"
    strategies = ("deepspeed",)

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        super().__init__(device, comm)
        if device.type != "cuda":
            raise PrecisionUnavailableError(fp16_refusal(device.type))


def fp16_refusal(device_type: str) -> str:
    return (
        f"precision 'fp16' under --strategy deepspeed needs a CUDA GPU: DeepSpeed's "
        f"fp16 mode does not run on {device_type}; use --precision bf16 or fp32"
    )
