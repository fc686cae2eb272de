"""The corpus's cases (``fixtures/soundness/``): their header directives and discovery.

A case is a single script, or a project folder whose ``main.py`` imports local
helper modules. Its header comments configure it, one ``# soundness: KEY VALUE``
line each:

- ``shape TEXT``: the real-world shape it stands for (the table's second column);
- ``cause CODE [CODE...]``: the finding codes that must name the cause for the case
  to count as FLAGGED (without it, any needs-review finding does);
- ``unchanged``: the codemod must leave it alone (already distributed);
- ``args ...`` / ``launch ...``: extra script arguments (both runs) / launcher flags;
- ``tolerance X REASON``: relative tolerance instead of 1e-5 (float16 scripts);
- ``compare PREFIX [PREFIX...]``: printed lines compared besides ``eval `` lines;
- ``compare-files GLOB [GLOB...]``: files the script writes (``torch.save`` of
  tensors, relative to its working folder) compared too, each within the
  tolerance; a file the original wrote and the migrated run did not differs;
- ``second-run ARGS``: a second run in the same folders (resuming), compared too;
- ``requires MODULE``: skipped, with the reason, where MODULE is not installed;
- ``batch [both]`` (project folders only): migrate the whole folder in batch mode
  (``accel-migrate FOLDER --write`` on a copy of it, every file may be rewritten)
  and run its ``main.py``; with ``both``, the folder is also a file-mode case
  (``main.py`` migrated alone, its helpers copied unchanged) and the batch case is
  named ``NAME_batch`` (the two cases run the same original: it runs once, for
  both). Without the directive a folder is a file-mode case only;
- ``extended REASON``: a shape another case already exercises (REASON names it):
  run only in the whole-corpus run (``ACCEL_MIGRATE_SOUNDNESS_ALL=1``, implied by
  ``ACCEL_MIGRATE_SOUNDNESS_DOC=1``, which publishes the table), skipped with the
  reason in CI, whose 30-minute budget has no room for repeats.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from tests.conftest import FIXTURES

CORPUS = FIXTURES / "soundness"
FP32_TOLERANCE = 1e-5

_DIRECTIVE = re.compile(r"^# soundness: ([\w-]+)[ \t]*(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    name: str
    script: Path
    shape: str
    causes: tuple[str, ...] = ()
    unchanged: bool = False
    args: tuple[str, ...] = ()
    launch: tuple[str, ...] = ()
    tolerance: float = FP32_TOLERANCE
    compare: tuple[str, ...] = ("eval ",)
    #: Globs of files written by the script (``torch.save``), compared too.
    written: tuple[str, ...] = ()
    second_run: tuple[str, ...] | None = None
    requires: tuple[str, ...] = ()
    #: Why the case only runs in the whole-corpus run ("" : it always runs).
    extended: str = ""
    #: "file": the script alone is migrated (a folder's helpers are copied
    #: unchanged); "batch": the whole project folder is migrated by the CLI.
    mode: str = "file"
    #: A ``batch both`` folder's case: its other mode runs the same original,
    #: which the harness runs once for the two (``corpus.original_runs``).
    both: bool = False

    @property
    def project(self) -> bool:
        return self.script.name == "main.py"

    @property
    def helpers(self) -> list[Path]:
        """The local modules of a project folder (everything but its main script),
        its packages' modules included (``models/resnet.py``)."""
        if not self.project:
            return []
        return sorted(p for p in self.script.parent.rglob("*.py") if p != self.script)

    def missing(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]


def parse_case(name: str, script: Path) -> list[Case]:
    """The case(s) a script's directives describe: two for ``batch both``."""
    values: dict[str, object] = {}
    modes = ("file",)
    for key, value in _DIRECTIVE.findall(script.read_text()):
        words = tuple(value.split())
        if key == "shape":
            values["shape"] = value.strip()
        elif key == "cause":
            values["causes"] = words
        elif key == "unchanged":
            values["unchanged"] = True
        elif key in ("args", "launch", "requires"):
            values[key] = words
        elif key == "tolerance":
            values["tolerance"] = float(words[0])
        elif key == "compare":
            values["compare"] = tuple(
                dict.fromkeys(("eval ", *(f"{w} " for w in words)))
            )
        elif key == "compare-files":
            values["written"] = words
        elif key == "extended":
            values["extended"] = value.strip() or "repeats another case's shape"
        elif key == "second-run":
            values["second_run"] = words
        elif key == "batch":
            if words not in ((), ("both",)):
                raise ValueError(f"{script}: `# soundness: batch` takes only `both`")
            modes = ("file", "batch") if words else ("batch",)
        else:
            raise ValueError(f"{script}: unknown directive `# soundness: {key}`")
    if "shape" not in values:
        raise ValueError(f"{script}: no `# soundness: shape ...` line")
    case = Case(name, script, **values)  # type: ignore[arg-type]
    if "batch" in modes and not case.project:
        raise ValueError(f"{script}: `# soundness: batch` needs a project folder")
    if modes == ("batch",):
        return [replace(case, mode="batch")]
    if len(modes) == 2:
        case = replace(case, both=True)
        return [case, replace(case, name=f"{name}_batch", mode="batch")]
    return [case]


def whole_corpus() -> bool:
    """Is this the whole-corpus run (extended cases included)?"""
    return "1" in (
        os.environ.get("ACCEL_MIGRATE_SOUNDNESS_ALL"),
        os.environ.get("ACCEL_MIGRATE_SOUNDNESS_DOC"),
    )


def discover(root: Path = CORPUS) -> list[Case]:
    singles = [(p.stem, p) for p in root.glob("*.py")]
    projects = [(p.parent.name, p) for p in root.glob("*/main.py")]
    cases = [c for name, path in singles + projects for c in parse_case(name, path)]
    return sorted(cases, key=lambda c: c.name)
