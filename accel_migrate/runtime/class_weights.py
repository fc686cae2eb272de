"""The count a class-weighted mean loss divides by, for ``accel.backward(count=)``.

``nn.CrossEntropyLoss(weight=w)`` (and ``NLLLoss``) with class-index targets
averages as ``sum(w[y_i] * l_i) / sum(w[y_i])`` over the targets that are not
``ignore_index``: a mean whose denominator is each process's own sum of target
weights. Weighting each process's loss by that sum makes the averaged gradient
the global batch's. With class-probability targets (a float tensor) the mean is
over the samples (every position but the class dimension), which the count
says too.
"""

from __future__ import annotations

import torch


def class_weight_count(
    weight: torch.Tensor, target: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """``weight[target].sum()`` over the targets that are not ``ignore_index``."""
    if target.is_floating_point():
        samples = target.numel() // target.shape[1] if target.dim() > 1 else 1
        return torch.tensor(float(samples), device=target.device)
    kept = target[target != ignore_index]
    return weight.to(device=kept.device)[kept].sum()
