"""``accel.class_weight_count``: weighting each share's class-weighted mean by it
gives the whole batch's mean, with ignored targets and probability targets."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from accel_migrate.runtime import class_weight_count


def _recombined(logits: torch.Tensor, target: torch.Tensor, **kwargs: object) -> float:
    """Two unequal shares' losses, each weighted by its count, then averaged."""
    weight = kwargs["weight"]
    ignore = kwargs.get("ignore_index", -100)
    shares = [(logits[:5], target[:5]), (logits[5:], target[5:])]
    losses = [F.cross_entropy(x, y, **kwargs) for x, y in shares]  # type: ignore[arg-type]
    counts = [class_weight_count(weight, y, ignore) for _, y in shares]  # type: ignore[arg-type]
    total = sum(counts)
    return float(
        sum(loss * count for loss, count in zip(losses, counts, strict=True)) / total
    )


def test_class_index_targets_recombine_exactly() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(9, 4, generator=g)
    target = torch.tensor([0, 0, 0, 1, 0, 3, 3, 2, 3])
    weight = torch.tensor([0.2, 1.0, 3.0, 0.7])
    whole = F.cross_entropy(logits, target, weight=weight)
    plain = (
        F.cross_entropy(logits[:5], target[:5], weight=weight)
        + F.cross_entropy(logits[5:], target[5:], weight=weight)
    ) / 2
    assert abs(float(plain) - float(whole)) > 1e-3  # the unweighted average is wrong
    assert abs(_recombined(logits, target, weight=weight) - float(whole)) < 1e-6
    masked = target.clone()
    masked[[1, 6]] = 2
    whole = F.cross_entropy(logits, masked, weight=weight, ignore_index=2)
    found = _recombined(logits, masked, weight=weight, ignore_index=2)
    assert abs(found - float(whole)) < 1e-6


def test_probability_targets_count_samples() -> None:
    g = torch.Generator().manual_seed(1)
    target = torch.softmax(torch.randn(6, 3, 2, generator=g), dim=1)
    assert float(class_weight_count(torch.ones(3), target)) == 12.0
