"""The soundness corpus (``fixtures/soundness/``): runs and their class.

The cases and their header directives are in ``cases.py``; how a case is migrated
(file mode or batch mode) in ``migrated.py``.

Classes, in the order they are decided:

- HANG: the migrated run produced no result within ``TIMEOUT`` seconds, hit the
  per-process memory limit (``MEMORY_LIMIT``: a run that grows without bound), or
  failed with the runtime's ``CollectiveTimeoutError`` (ranks waiting on each other);
- LOUD: the migrated run exited non-zero and the first failure is a clear error of
  accel-migrate's own runtime: an exception of a class defined in
  ``accel_migrate.runtime``, or one raised by a ``raise`` statement in
  ``accel_migrate/runtime/`` (the innermost traceback frame is there and its line is
  that ``raise``), or the launcher refused the job before starting (exit 2, ``error:``);
- MATCH: it ran, and every per-step loss, every compared line and every final
  parameter equals the original's within the tolerance (or, for ``unchanged``
  cases, the codemod left the file byte-identical);
- FLAGGED: it differs, crashes with an error that is not LOUD, or was left
  unmigrated, and a needs-review finding (one of ``cause`` where given) exists;
  or it differs, an info finding names stochastic layers (AM027, dropout), and
  the two runs are equal with them off (verify's ``--deterministic`` runner);
- SILENT: the same without such a finding.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.parity.harness import Run, RunFailed, _read, _run, run_launched, run_original

from .cases import CORPUS, FP32_TOLERANCE, Case, discover, parse_case, whole_corpus
from .migrated import Migrated, migrate_case

if TYPE_CHECKING:
    import torch

__all__ = ["CORPUS", "FP32_TOLERANCE", "Case", "discover", "parse_case", "whole_corpus"]

#: Seconds one run may take (a world-2 job is three processes on a busy 2-core machine).
TIMEOUT = 150
#: Seconds a collective may wait before the runtime fails the job (``--timeout``).
COLLECTIVE_TIMEOUT = 60
#: Address space per process of the migrated run (a run that materialises an
#: unbounded sampler would otherwise take the machine down).
MEMORY_LIMIT = 3 << 30
WORLD = 2
#: Info findings that name stochastic layers as a difference's cause: the case is
#: FLAGGED when the runs are equal with those layers off (verify --deterministic).
STOCHASTIC_CODES = {"AM027"}
CLASSES = ("MATCH", "FLAGGED", "LOUD", "SILENT", "HANG")
#: An original that does not run is a defect of the corpus, not of the tool.
BROKEN = "BROKEN"


@dataclass(frozen=True)
class Outcome:
    name: str
    shape: str
    klass: str
    detail: str


@dataclass(frozen=True)
class Failure:
    """The first failure in a job's stderr: exception type, message, where raised."""

    kind: str
    message: str
    file: str = ""
    code: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind

    @property
    def loud(self) -> bool:
        if self.kind == "launcher":
            return True
        if self.kind.endswith(("CollectiveTimeoutError", "PeerFailedError")):
            return False
        if self.kind.startswith("accel_migrate.runtime."):
            return True
        in_runtime = "/accel_migrate/runtime/" in self.file.replace("\\", "/")
        return in_runtime and self.code.startswith("raise ")

    @property
    def hang(self) -> bool:
        return (
            self.kind.endswith("CollectiveTimeoutError") or self.kind == "MemoryError"
        )


_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+')
_CHAINED = ("During handling of the above exception", "The above exception was")


_RANK_PREFIX = re.compile(r"^\[(?:default)?rank(\d+)\]:\s?")


def first_failure(stderr: str, returncode: int) -> Failure:
    """The failure that ended the job: each rank's first traceback's final exception
    (torchrun prefixes worker lines with ``[rankN]:``), a rank's own error before
    one that was only stopped by a peer, the lowest rank first."""
    ranks: dict[int, list[str]] = {}
    plain: list[str] = []
    for line in stderr.splitlines():
        prefix = _RANK_PREFIX.match(line)
        if prefix:
            ranks.setdefault(int(prefix.group(1)), []).append(line[prefix.end() :])
        else:
            plain.append(line)
    found = [f for _, lines in sorted(ranks.items()) if (f := _traceback(lines))]
    own = [f for f in found if not f.kind.endswith("PeerFailedError")]
    if own or found:
        return (own or found)[0]
    last = _traceback(plain)
    if last is not None:
        return last
    if returncode == 2 and plain and plain[-1].startswith("error:"):
        return Failure("launcher", plain[-1].removeprefix("error:").strip())
    tail = plain[-1] if plain else ""
    return Failure("exit", f"code {returncode}, no traceback; last line: {tail}")


def _traceback(lines: list[str]) -> Failure | None:
    """The first traceback's final exception (after any chained ones), if any."""
    i = 0
    last: Failure | None = None
    while i < len(lines):
        if not lines[i].rstrip().endswith("Traceback (most recent call last):"):
            i += 1
            continue
        file = code = ""
        j = i + 1
        while j < len(lines) and lines[j][:1] in (" ", "\t"):
            frame = _FRAME.match(lines[j])
            if frame:
                file = frame.group(1)
                following = lines[j + 1] if j + 1 < len(lines) else ""
                code = following.strip() if not _FRAME.match(following) else ""
            j += 1
        kind, _, message = (lines[j] if j < len(lines) else "").partition(":")
        last = Failure(kind.strip(), message.strip(), file, code)
        rest = [line for line in lines[j + 1 : j + 4] if line.strip()]
        if not (rest and rest[0].startswith(_CHAINED)):
            return last
        i = j + 1
    return last


def _line_error(before: str, after: str) -> float | None:
    """Worst relative error between two lines that differ only in numbers; None
    when they differ otherwise."""
    b_words, a_words = before.split(), after.split()
    if len(b_words) != len(a_words):
        return None
    worst = 0.0
    for bw, aw in zip(b_words, a_words, strict=True):
        if bw == aw:
            continue
        try:
            expected, actual = float(bw.strip("%,()[]")), float(aw.strip("%,()[]"))
        except ValueError:
            return None
        worst = max(worst, abs(actual - expected) / max(abs(expected), 1e-12))
    return worst


def differences(case: Case, original: Run, migrated: Run) -> list[str]:
    """What differs between the two runs beyond the case's tolerance."""
    found = []
    tol = case.tolerance
    if not original.losses:
        return ["the original printed no `step N loss X` line"]
    if len(original.losses) != len(migrated.losses):
        found.append(f"{len(migrated.losses)} steps, original {len(original.losses)}")
    else:
        errors = [
            abs(a - e) / max(abs(e), 1e-12)
            for e, a in zip(original.losses, migrated.losses, strict=True)
        ]
        worst = max(errors)
        if worst > tol:
            found.append(f"loss step {errors.index(worst)} rel {worst:.1e}")
    for prefix in case.compare:
        before, after = original.lines(prefix), migrated.lines(prefix)
        if len(before) != len(after):
            found.append(
                f"{len(after)} `{prefix.strip()}` lines, original {len(before)}"
            )
            continue
        for b, a in zip(before, after, strict=True):
            error = _line_error(b, a)
            if error is None or error > tol:
                what = "text" if error is None else f"rel {error:.1e}"
                found.append(f"`{prefix.strip()}` line {what}: {a!r} vs {b!r}")
                break
    found.extend(_parameter_differences(original, migrated, tol))
    return found


def written_differences(case: Case, original: Path, migrated: Path) -> list[str]:
    """The files of the case's ``compare-files`` globs that differ between the
    original's working folder and the migrated run's (loaded with ``torch.load``)."""
    import torch

    found = []
    for pattern in case.written:
        paths = sorted(original.glob(pattern))
        if not paths:
            found.append(f"the original wrote no `{pattern}`")
        for path in paths:
            name = str(path.relative_to(original))
            other = migrated / name
            if not other.exists():
                found.append(f"file {name} not written")
                continue
            before = _flatten(torch.load(path, map_location="cpu"))
            after = _flatten(torch.load(other, map_location="cpu"))
            worst = _worst_tensor_error(before, after)
            if worst is None:
                found.append(f"file {name}: other keys or shapes")
            elif worst > case.tolerance:
                found.append(f"file {name} rel {worst:.1e}")
    return found


def _worst_tensor_error(
    before: dict[str, object], after: dict[str, object]
) -> float | None:
    """The largest relative error over the tensors of two flattened objects;
    None when their keys or a tensor's shape differ."""
    import torch

    if before.keys() != after.keys():
        return None
    worst = 0.0
    for key, tensor in before.items():
        other = after[key]
        if not isinstance(tensor, torch.Tensor):
            continue
        if not isinstance(other, torch.Tensor) or other.shape != tensor.shape:
            return None
        if tensor.is_floating_point() and tensor.numel():
            scale = tensor.abs().max().clamp_min(1e-12)
            error = float((other.to(tensor.dtype) - tensor).abs().max() / scale)
            worst = max(worst, error)
        elif not torch.equal(other, tensor):
            return float("inf")
    return worst


def _flatten(state: object, prefix: str = "") -> dict[str, object]:
    if isinstance(state, dict):
        flat: dict[str, object] = {}
        for key, value in state.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): state}


#: The smallest scale a saved tensor's difference is measured against. PyTorch
#: initialises a layer's weights and biases uniformly within 1/sqrt(fan_in)
#: (above 3e-3 for every layer of the corpus), so a trained tensor whose every
#: entry stays under 1e-3 is one the training holds at zero: a bias right
#: before a normalization layer, whose gradient is zero up to rounding (SGD
#: leaves it at 1e-9, where any other summation order changes it by its own
#: size: "rel 2.2e+00" with every loss equal). Against the floor, a difference
#: still counts once it is over ``tol`` * 1e-3 (1e-8 at fp32's tolerance); a
#: tensor of ordinary size is measured against its own largest entry, as before.
PARAMETER_FLOOR = 1e-3


def _parameter_differences(original: Run, migrated: Run, tol: float) -> list[str]:
    import torch

    before, after = _flatten(original.state), _flatten(migrated.state)
    if not before:
        return ["the original saved no state with --out"]
    if before.keys() != after.keys():
        extra = sorted(set(after) - set(before))[:2]
        lost = sorted(set(before) - set(after))[:2]
        return [f"saved keys differ (new {extra}, missing {lost})"]
    worst, where = 0.0, ""
    for key, tensor in before.items():
        other = after[key]
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            continue
        error = parameter_error(tensor, other)  # type: ignore[arg-type]
        if error > worst:
            worst, where = error, key
    return [f"param {where} rel {worst:.1e}"] if worst > tol else []


def parameter_error(before: torch.Tensor, after: torch.Tensor) -> float:
    """The largest difference of two saved tensors, over the larger of the
    original's largest entry and ``PARAMETER_FLOOR``."""
    scale = before.abs().max().clamp_min(PARAMETER_FLOOR)
    return float((after.to(before.dtype) - before).abs().max() / scale)


def _review(case: Case, result: Migrated) -> tuple[list[str], list[str]]:
    """(codes that name the cause, every needs-review code)."""
    codes = list(result.needs_review)
    named = [c for c in codes if not case.causes or c in case.causes]
    return named, codes


def _unsound(
    case: Case, named: list[str], codes: list[str], what: str
) -> tuple[str, str]:
    if named:
        return "FLAGGED", f"{what}; needs-review {', '.join(named)}"
    others = f" (needs-review {', '.join(codes)} only)" if codes else ""
    return "SILENT", f"{what}; nothing names it{others}"


@dataclass
class _Shared:
    """The original's runs of a ``batch both`` folder, for its two cases."""

    folder: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: tuple[Run, Run | None] | Exception | None = None
    users: int = 0


_SHARED: dict[tuple[Path, Path, tuple[str, ...], tuple[str, ...] | None], _Shared] = {}
_SHARED_LOCK = threading.Lock()


def original_runs(case: Case, folder: Path) -> tuple[Path, Run, Run | None]:
    """The original's run (and its second run) in ``folder``; raises as
    ``run_original`` does. A ``batch both`` folder's two cases run the same script
    with the same arguments: the first to ask runs it, in its own folder, and the
    other is given those runs and that folder (whose files ``compare-files``
    reads), under the same root (one pytest session or audit run)."""
    if not case.both:
        return folder, *_run_original(case, folder)
    key = (folder.parent.parent, case.script, case.args, case.second_run)
    with _SHARED_LOCK:
        shared = _SHARED.setdefault(key, _Shared(folder))
        shared.users += 1
        if shared.users == 2:  # (each mode asks once: the entry is done with)
            del _SHARED[key]
    with shared.lock:
        if shared.runs is None:
            try:
                shared.runs = _run_original(case, shared.folder)
            except (RunFailed, subprocess.TimeoutExpired) as exc:
                shared.runs = exc
    if isinstance(shared.runs, Exception):
        raise shared.runs
    return shared.folder, *shared.runs


def _run_original(case: Case, folder: Path) -> tuple[Run, Run | None]:
    original = run_original(case.script, folder, *case.args, timeout=TIMEOUT)
    second = (
        run_original(case.script, folder, *case.second_run, timeout=TIMEOUT)
        if case.second_run
        else None
    )
    return original, second


def classify(case: Case, root: Path) -> Outcome:
    klass, detail = _classify(case, root / case.name)
    return Outcome(case.name, case.shape, klass, detail)


def _classify(case: Case, work: Path) -> tuple[str, str]:
    original_dir, migrated_dir = work / "original", work / f"world{WORLD}"
    original_dir.mkdir(parents=True)
    migrated_dir.mkdir(parents=True)
    result = migrate_case(case, migrated_dir)
    named, codes = _review(case, result)
    try:
        original_dir, original, second = original_runs(case, original_dir)
    except (RunFailed, subprocess.TimeoutExpired) as exc:
        return BROKEN, f"the original does not run: {str(exc)[-400:]}"
    if not result.changed:
        if case.unchanged:
            return "MATCH", f"left unchanged ({result.skip_reason or 'no change'})"
        return _unsound(case, named, codes, "left unmigrated")
    if result.failures:
        return _unsound(case, named, codes, f"the CLI failed on {result.failures}")
    migrated = result.script
    launch = ("--timeout", str(COLLECTIVE_TIMEOUT), *case.launch)
    try:
        run = _launch(migrated, migrated_dir, case.args, launch)
        second_run = (
            _launch(migrated, migrated_dir, case.second_run, launch)
            if case.second_run
            else None
        )
    except subprocess.TimeoutExpired:
        return "HANG", f"no result within {TIMEOUT} s"
    except RunFailed as failed:
        error = first_failure(failed.stderr, failed.returncode)
        if error.hang:
            return "HANG", _short(str(error))
        if error.loud:
            return "LOUD", _short(str(error))
        return _unsound(case, named, codes, f"crashes: {_short(str(error))}")
    found = differences(case, original, run)
    found += written_differences(case, original_dir, migrated_dir)
    if second is not None and second_run is not None:
        found += [f"second run: {d}" for d in differences(case, second, second_run)]
    prefix = "rewrote an already-distributed script; " if case.unchanged else ""
    stochastic = sorted(result.info & STOCHASTIC_CODES)
    if found and not named and stochastic and not (case.unchanged or case.second_run):
        # The info finding says the difference is the noise of stochastic layers:
        # checked, as verify --deterministic does, with that noise taken out.
        again = _deterministic_differences(case, migrated, work)
        if not again:
            return "FLAGGED", (
                f"{'; '.join(found[:2])}; info {', '.join(stochastic)}: stochastic "
                f"layers only (equal with them off, verify --deterministic)"
            )
        found = [f"with stochastic layers off: {d}" for d in again]
    if not found and not case.unchanged:
        steps = f"{len(original.losses)} steps"
        return "MATCH", steps + (f"; needs-review {', '.join(codes)}" if codes else "")
    return _unsound(case, named, codes, prefix + "; ".join(found[:2]) or "differs")


def _launch(
    script: Path, folder: Path, args: tuple[str, ...], launch: tuple[str, ...]
) -> Run:
    return run_launched(
        script,
        folder,
        WORLD,
        *args,
        launch=launch,
        timeout=TIMEOUT,
        memory_limit=MEMORY_LIMIT,
    )


def _deterministic_differences(case: Case, migrated: Path, work: Path) -> list[str]:
    """Both runs again under verify's runner with dropout off and the step's draws
    keyed (``--deterministic``); the differences that remain."""
    from accel_migrate.cli.verify_command import RUNNER

    runner = ["--steps", str(10**9), "--deterministic"]
    folders = work / "deterministic-original", work / f"deterministic-world{WORLD}"
    for folder in folders:
        folder.mkdir()
    outs = [folder / f"{case.script.stem}.pt" for folder in folders]
    original = _read(
        _run(
            [
                *[sys.executable, str(RUNNER), *runner, "--mode", "original"],
                *["--record", str(folders[0] / "record.json"), str(case.script)],
                *["--", "--out", str(outs[0]), *case.args],
            ],
            folders[0],
            TIMEOUT,
        ),
        outs[0],
    )
    launched = _read(
        _run(
            [
                *[
                    sys.executable,
                    "-m",
                    "accel_migrate",
                    "launch",
                    "--nproc",
                    str(WORLD),
                ],
                *["--timeout", str(COLLECTIVE_TIMEOUT), *case.launch, str(RUNNER)],
                *[
                    *runner,
                    "--mode",
                    "migrated",
                    "--record",
                    str(folders[1] / "r.json"),
                ],
                *[str(migrated), "--", "--out", str(outs[1]), *case.args],
            ],
            folders[1],
            TIMEOUT,
            MEMORY_LIMIT,
        ),
        outs[1],
    )
    return differences(case, original, launched)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_table(outcomes: list[Outcome]) -> str:
    """A Markdown table, one row per case, then the totals per class."""
    rows = ["| script | shape | class | detail |", "|---|---|---|---|"]
    for o in outcomes:
        detail = o.detail.replace("|", "\\|")
        rows.append(
            f"| `{o.name}` | {o.shape.replace('|', '/')} | **{o.klass}** | {detail} |"
        )
    totals = {k: sum(o.klass == k for o in outcomes) for k in (*CLASSES, BROKEN)}
    summary = ", ".join(f"{k} {n}" for k, n in totals.items() if n or k in CLASSES)
    return "\n".join(rows) + f"\n\nTotal {len(outcomes)}: {summary}.\n"
