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


#: A loss is compared relative to itself, or to this fraction of the run's
#: largest loss where it is smaller: a loss near zero (a GAN generator's
#: -D(G(z)).mean(), a loss that cancels large terms) carries the rounding of
#: the terms it is made of, not of its own small value.
LOSS_SCALE_FLOOR = 0.1


@dataclass(frozen=True)
class Row:
    index: int
    step: int
    original: float | None
    migrated: float | None
    #: The smallest magnitude an error is relative to (``LOSS_SCALE_FLOOR``).
    floor: float = 1e-12

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
        return abs(self.migrated - self.original) / max(
            abs(self.original), self.floor, 1e-12
        )


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
    #: Where parameters differ only in elements whose gradients were rounding
    #: alone in the original (``parameter_error`` leaves those out): (how many
    #: parameters, their elements of rounding, the error of the whole parameters).
    rounding_apart: tuple[int, int, float] | None = None

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
    def note(self) -> str | None:
        """What a passing comparison left out of ``parameter_error``."""
        if self.rounding_apart is None:
            return None
        count, elements, whole = self.rounding_apart
        return (
            f"{count} parameter{'s differ' if count != 1 else ' differs'} only in "
            f"{elements} element{'s' if elements != 1 else ''} whose gradients were "
            f"rounding alone in the original (whole-parameter error {whole:.1e}): "
            "nothing the loss reads depends on them (a key bias, which softmax "
            "ignores; a bias just before a normalization layer), and an optimizer "
            "that divides each gradient by its own size (Adam) turns that rounding "
            "into full-size steps, which another summation order changes"
        )

    @property
    def worst_error(self) -> float:
        return max((row.error for row in self.rows), default=0.0)


def _traced_error(
    original: list[dict[str, Any]],
    migrated: list[dict[str, Any]],
    moves: list[float] | None = None,
) -> float:
    """``_parameter_error`` over the elements the loss reads, where both runs
    checksummed them apart (``traced``), else over whole parameters."""
    if len(original) != len(migrated):
        return _parameter_error(original, migrated, moves)
    pairs = [
        (a["traced"], b["traced"]) if "traced" in a and "traced" in b else (a, b)
        for a, b in zip(original, migrated, strict=True)
    ]
    return _parameter_error([a for a, _ in pairs], [b for _, b in pairs], moves)


def _rounding_apart(
    original: list[dict[str, Any]],
    migrated: list[dict[str, Any]],
    tolerance: float,
    moves: list[float] | None = None,
) -> tuple[int, int, float] | None:
    """Parameters apart as wholes that agree on the elements the loss reads."""
    if len(original) != len(migrated):
        return None
    if moves is None or len(moves) != len(original):
        moves = [0.0] * len(original)
    apart = [
        (a, b, move)
        for a, b, move in zip(original, migrated, moves, strict=True)
        if "traced" in a
        and "traced" in b
        and _parameter_error([a], [b], [move]) > tolerance
        and _parameter_error([a["traced"]], [b["traced"]], [move]) <= tolerance
    ]
    if not apart:
        return None
    elements = sum(a["numel"] - a["traced"]["numel"] for a, _, _ in apart)
    whole = _parameter_error(*(list(column) for column in zip(*apart, strict=True)))
    return len(apart), elements, whole


def _parameter_error(
    original: list[dict[str, Any]],
    migrated: list[dict[str, Any]],
    moves: list[float] | None = None,
) -> float:
    """The largest relative difference of a parameter's sum and sum of squares;
    relative to its norm, or where ``moves`` tells (per parameter, how far its
    optimizer moves an element in the run at most) to the norm of that movement
    where larger (``MOVEMENT_FLOOR``)."""
    if len(original) != len(migrated) or not original:
        return math.inf if original or migrated else 0.0
    if moves is None or len(moves) != len(original):
        moves = [0.0] * len(original)
    worst = 0.0
    for a, b, move in zip(original, migrated, moves, strict=True):
        if a["numel"] != b["numel"]:
            return math.inf
        norm = max(math.sqrt(a["sumsq"]), move * math.sqrt(a["numel"]), 1e-12)
        worst = max(
            worst,
            abs(a["sum"] - b["sum"]) / norm,
            abs(a["sumsq"] - b["sumsq"]) / max(norm * norm, 1e-12),
        )
    return worst


def movements(record: dict[str, Any]) -> list[float] | None:
    """Per parameter of ``record`` (the original's): how far its optimizer moves
    one element over the run at most, ``lr`` x steps for an optimizer of Adam's
    kind (``step_bounds``); None where not recorded."""
    bounds = record.get("step_bounds")
    if not bounds or len(bounds) != len(record["parameters"]):
        return None
    return [bound * record["steps"] for bound in bounds]


def compare(
    original: dict[str, Any],
    migrated: dict[str, Any],
    tolerance: float,
    world_size: int,
    band: tuple[int, float] | None = None,
) -> Verdict:
    a, b = original["losses"], migrated["losses"]
    steps = original["loss_steps"] + migrated["loss_steps"][len(a) :]
    scale = max((abs(x) for x in a if math.isfinite(x)), default=0.0)
    moves = movements(original)
    rows = tuple(
        Row(
            index=i,
            step=steps[i],
            original=a[i] if i < len(a) else None,
            migrated=b[i] if i < len(b) else None,
            floor=LOSS_SCALE_FLOOR * scale,
        )
        for i in range(max(len(a), len(b)))
    )
    verdict = Verdict(
        rows=rows,
        tolerance=tolerance,
        original_steps=original["steps"],
        migrated_steps=migrated["steps"],
        # elements whose gradients were rounding alone in the original left out
        parameter_error=_traced_error(
            original["parameters"], migrated["parameters"], moves
        ),
        first_divergence=None,
        causes=(),
        band=band,
        rounding_apart=_rounding_apart(
            original["parameters"],
            migrated["parameters"],
            band[1] if band is not None else tolerance,
            moves,
        ),
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


def stochastic_sources(original: dict[str, Any], migrated: dict[str, Any]) -> list[str]:
    """The stochastic layers and per-step draws the runs made, e.g. ``dropout``."""
    sources = []
    facts = [original["facts"], migrated["facts"]]
    if any(f.get("dropout_training") or f.get("dropout_calls") for f in facts):
        sources.append("dropout")
    draws: dict[str, int] = {}
    for f in facts:
        for name, count in (f.get("step_draws") or {}).items():
            draws[name] = max(draws.get(name, 0), count)
    sources += [f"torch.{name}" for name in sorted(draws)]
    return sources


def _ratio(row: Row | None) -> float | None:
    if row is None or not row.original or row.migrated is None:
        return None
    if not (math.isfinite(row.original) and math.isfinite(row.migrated)):
        return None
    return row.migrated / row.original if row.original else None


def likely_causes(
    original: dict[str, Any],
    migrated: dict[str, Any],
    verdict: Verdict,
    world_size: int,
) -> tuple[str, ...]:
    causes = []
    facts = {
        k: original["facts"].get(k) or migrated["facts"].get(k)
        for k in {*original["facts"], *migrated["facts"]}
    }
    first = verdict.first_divergence
    if verdict.original_steps != verdict.migrated_steps or len(
        original["losses"]
    ) != len(migrated["losses"]):
        causes.append(
            f"the runs took different numbers of steps ({verdict.original_steps} vs "
            f"{verdict.migrated_steps} optimizer steps, {len(original['losses'])} vs "
            f"{len(migrated['losses'])} backward calls): a loss or step the migration missed, "
            f"or data that is not split the same way"
        )
    if migrated["facts"].get("ranks_disagree"):
        causes.append(
            f"unprepared model: the processes' copies disagree after training "
            f"({migrated['facts']['ranks_disagree']} differs between ranks), so its "
            f"gradients are not averaged: a model or parameter the migration did not "
            f"prepare, trained by each process on its own share of the data"
        )
    initial = _parameter_error(
        original.get("initial_parameters") or [],
        migrated.get("initial_parameters") or [],
    )
    if initial > verdict.tolerance:
        causes.append(
            "the initial weights differ (before the first update): a random generator, "
            "seed or checkpoint the migration does not see"
        )
    seeds = migrated["facts"].get("seeds_apart")
    if seeds and world_size > 1:
        when = (
            "from the first step"
            if first is not None and first.index == 0
            else "from where they draw"
        )
        causes.append(
            f"a seed that differs between the processes: {seeds} (a seed offset by "
            f"the rank, torch.manual_seed(seed + rank)). Rank 0 draws the original's "
            f"numbers and every other rank its own, so the random numbers the script "
            f"draws itself (noise, a random tensor, an augmentation) differ {when}; "
            f"the runtime already starts every process from rank 0's weights and "
            f"data order: seed every process alike"
        )
    ratio = _ratio(first) if first is not None and first.index == 0 else None
    if (
        ratio is not None
        and world_size > 1
        and (abs(ratio * world_size - 1) < 1e-3 or abs(ratio / world_size - 1) < 1e-3)
    ):
        causes.append(
            f"reduction mismatch: the migrated loss is {ratio:.4g} times the original's "
            f'from the first step, as a sum-reduced loss (reduction="sum" or '
            f"torch.sum) weighted as a per-sample mean at world {world_size}: tell the "
            f'runtime, accel.backward(loss, reduction="sum")'
        )
    elif facts.get("ignored_targets") and first is not None and first.index == 0:
        causes.append(
            "reduction mismatch: a token-level mean (cross-entropy with ignore_index "
            "targets in the batch) weighted by samples, not by the tokens each process "
            "counts: tell the runtime the count it averages over, "
            "accel.backward(loss, count=(target != ignore_index).sum())"
        )
    if migrated["facts"].get("batchnorm_per_process") and world_size > 1:
        # (the runtime's global-batch layers, its default, are not counted)
        causes.append(
            f"BatchNorm in training mode with per-process statistics: each process "
            f"normalises over its own share of the batch (1/{world_size} of it), not "
            f"the whole batch (sync-batchnorm is off, or the layer has a forward of "
            f"its own); leave sync-batchnorm on for the original statistics"
        )
    sources = stochastic_sources(original, migrated)
    if sources and world_size > 1 and not facts.get("deterministic"):
        causes.append(
            f"stochastic layers ({', '.join(sources)}): each process draws its own "
            f"random masks and numbers for its share of the batch, so the noise differs "
            f"from the original's; verify --deterministic compares the rest exactly"
        )
    unkeyed = facts.get("unkeyed_draws") or {}
    if unkeyed and facts.get("deterministic"):
        names = ", ".join(
            f"{name} ({count}x)" for name, count in sorted(unkeyed.items())
        )
        causes.append(
            f"random draws that --deterministic cannot make identical: {names}"
        )
    if not causes and first is not None and first.index == 0:
        causes.append(
            "data order: the first loss differs although the initial weights agree, so "
            "the batches differ (a sampler or random generator the migration does not see)"
        )
    if not causes and first is not None:
        causes.append(
            f"losses drift apart from step {first.step}: numerical precision, or a "
            f"nondeterministic operation"
        )
    if not causes and verdict.parameter_error > verdict.parameter_tolerance:
        causes.append(_parameters_apart(original, migrated, verdict))
    return tuple(causes)


#: A gradient at most this fraction of the run's largest is zero but for rounding.
ROUNDING_GRADIENT = 1e-5


def _parameters_apart(
    original: dict[str, Any], migrated: dict[str, Any], verdict: Verdict
) -> str:
    """Why the final parameters differ where the losses agree: in general an
    update the loss does not show; where every parameter that differs had a
    gradient of rounding alone in the original (a bias just before a
    normalization layer, which cancels it), that rounding."""
    plain = (
        "the losses agree but the final parameters do not: an update the loss does "
        "not show"
    )
    peaks = original.get("gradient_peaks") or []
    a, b = original["parameters"], migrated["parameters"]
    moves = movements(original)
    moves = moves if moves and len(moves) == len(a) else None
    if not peaks or len(peaks) != len(a) or len(a) != len(b) or max(peaks) <= 0:
        return plain
    apart = [
        i
        for i in range(len(a))
        if _parameter_error([a[i]], [b[i]], [moves[i]] if moves else None)
        > verdict.parameter_tolerance
    ]
    top = max(peaks)
    if not apart or any(peaks[i] > ROUNDING_GRADIENT * top for i in apart):
        return plain
    worst = max(peaks[i] for i in apart) / top
    return (
        f"the losses agree, and the {len(apart)} of {len(a)} parameters that differ "
        f"had gradients of rounding alone in the original (at most {worst:.1e} of "
        "the largest gradient), as a bias just before a normalization layer "
        "(BatchNorm, InstanceNorm, LayerNorm), which cancels it: an optimizer that "
        "divides each gradient by its own size (Adam) turns that rounding into "
        "full-size steps, which another summation order (another number of "
        "processes) changes. Nothing the loss reads differs; give such layers "
        "bias=False for runs that compare exactly"
    )
