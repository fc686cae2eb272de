"""Compare two recordings (original, migrated) into a verdict. Data only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Default relative tolerance per precision (docs/runtime.md#precision-and-tolerances).
TOLERANCES = {"fp32": 1e-5, "bf16": 5e-2, "fp16": 1e-2}
#: Per strategy (docs/runtime.md#deepspeed-zero): (strategy, precision) -> (the
#: first steps held to the precision's tolerance, the band allowed after them).
BANDS: dict[tuple[str, str], tuple[int, float]] = {("deepspeed", "fp32"): (2, 1e-2)}


@dataclass(frozen=True)
class Row:
    index: int
    step: int
    original: float | None
    migrated: float | None

    @property
    def error(self) -> float:
        if self.original is None or self.migrated is None:
            return math.inf
        if math.isnan(self.original) or math.isnan(self.migrated):
            return (
                0.0
                if math.isnan(self.original) and math.isnan(self.migrated)
                else math.inf
            )
        return abs(self.migrated - self.original) / max(abs(self.original), 1e-12)


@dataclass(frozen=True)
class Verdict:
    rows: tuple[Row, ...]
    tolerance: float
    original_steps: int
    migrated_steps: int
    parameter_error: float
    first_divergence: Row | None
    causes: tuple[str, ...]
    #: (steps held to ``tolerance``, the tolerance after them and for parameters).
    band: tuple[int, float] | None = None

    def limit(self, row: Row) -> float:
        if self.band is None or row.index < self.band[0]:
            return self.tolerance
        return self.band[1]

    @property
    def parameter_tolerance(self) -> float:
        return self.tolerance if self.band is None else self.band[1]

    @property
    def tolerance_text(self) -> str:
        if self.band is None:
            return f"{self.tolerance:g}"
        return f"{self.tolerance:g} for {self.band[0]} steps, then {self.band[1]:g}"

    @property
    def agrees(self) -> bool:
        return (
            self.first_divergence is None
            and self.original_steps == self.migrated_steps
            and self.parameter_error <= self.parameter_tolerance
            and bool(self.rows)
        )

    @property
    def worst_error(self) -> float:
        return max((row.error for row in self.rows), default=0.0)


def _parameter_error(
    original: list[dict[str, Any]], migrated: list[dict[str, Any]]
) -> float:
    if len(original) != len(migrated) or not original:
        return math.inf if original or migrated else 0.0
    worst = 0.0
    for a, b in zip(original, migrated, strict=True):
        if a["numel"] != b["numel"]:
            return math.inf
        norm = math.sqrt(a["sumsq"])
        worst = max(
            worst,
            abs(a["sum"] - b["sum"]) / max(norm, 1e-12),
            abs(a["sumsq"] - b["sumsq"]) / max(a["sumsq"], 1e-12),
        )
    return worst


def compare(
    original: dict[str, Any],
    migrated: dict[str, Any],
    tolerance: float,
    world_size: int,
    band: tuple[int, float] | None = None,
) -> Verdict:
    a, b = original["losses"], migrated["losses"]
    steps = original["loss_steps"] + migrated["loss_steps"][len(a) :]
    rows = tuple(
        Row(
            index=i,
            step=steps[i],
            original=a[i] if i < len(a) else None,
            migrated=b[i] if i < len(b) else None,
        )
        for i in range(max(len(a), len(b)))
    )
    verdict = Verdict(
        rows=rows,
        tolerance=tolerance,
        original_steps=original["steps"],
        migrated_steps=migrated["steps"],
        parameter_error=_parameter_error(
            original["parameters"], migrated["parameters"]
        ),
        first_divergence=None,
        causes=(),
        band=band,
    )
    first = next((row for row in rows if row.error > verdict.limit(row)), None)
    verdict = Verdict(**{**verdict.__dict__, "first_divergence": first})
    if verdict.agrees:
        return verdict
    return Verdict(
        **{
            **verdict.__dict__,
            "causes": likely_causes(original, migrated, verdict, world_size),
        }
    )


def likely_causes(
    original: dict[str, Any],
    migrated: dict[str, Any],
    verdict: Verdict,
    world_size: int,
) -> tuple[str, ...]:
    causes = []
    facts = {
        k: original["facts"].get(k) or migrated["facts"].get(k)
        for k in original["facts"]
    }
    if verdict.original_steps != verdict.migrated_steps or len(
        original["losses"]
    ) != len(migrated["losses"]):
        causes.append(
            f"the runs took different numbers of steps ({verdict.original_steps} vs "
            f"{verdict.migrated_steps} optimizer steps, {len(original['losses'])} vs "
            f"{len(migrated['losses'])} backward calls): a loss or step the migration missed, "
            f"or data that is not split the same way"
        )
    if facts.get("batchnorm_training") and world_size > 1:
        causes.append(
            f"BatchNorm in training mode: each process normalises over its own share of the "
            f"batch (1/{world_size} of it), not the whole batch; use "
            f"torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) for the original statistics"
        )
    if facts.get("dropout_training") and world_size > 1:
        causes.append(
            "dropout: each process draws its own random masks, so the noise differs from the original's"
        )
    first = verdict.first_divergence
    if not causes and first is not None and first.index == 0:
        causes.append(
            "the first loss already differs: the data order or the initial weights differ "
            "(a sampler or random generator the migration does not see)"
        )
    if not causes and first is not None:
        causes.append(
            f"losses drift apart from step {first.step}: numerical precision, or a "
            f"nondeterministic operation"
        )
    if not causes and verdict.parameter_error > verdict.parameter_tolerance:
        causes.append(
            "the losses agree but the final parameters do not: an update the loss does not show"
        )
    return tuple(causes)
