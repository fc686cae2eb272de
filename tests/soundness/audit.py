"""The corpus's static audit: each case migrated with the current code (no user code
runs, nothing is launched) and compared with its directives and its row in
docs/soundness.md.

A row was measured by a world-2 run at some commit; the codemod has changed since.
What the run would find cannot be known without running it, but some of what the
row says can be checked statically, and this script checks it:

- ``whole``: the row was measured on a migrated script, and the codemod now leaves
  the file whole (or the reverse, ``migrated``: the row says "left unmigrated" and
  the codemod now migrates it). A file left whole is classified without a run:
  FLAGGED when a needs-review finding names the cause (the ``cause`` directive's
  codes, where given), SILENT otherwise; the predicted class and detail are shown;
- ``uncaused``: the row is FLAGGED, and no needs-review finding of the case's
  ``cause`` exists now: a run that still differs would be SILENT;
- ``codes``: the finding codes the row names differ from the static findings now
  (a FLAGGED row names the codes of the cause, a MATCH row every needs-review code,
  a SILENT row's "(needs-review ... only)" every code); ``listing`` where the
  findings are the same and the row names them all, the cause's and others (a
  row written before its ``cause`` directive);
- ``output`` (with ``--against``): the migrated output differs from the one a
  reference run recorded (``--save`` of a run with older code), so the row's
  measurement is of another script.

It lives with the harness (tests/soundness/) because it reads the cases with
``cases.py``, migrates them as ``migrated.py`` does (file mode: ``migrate_source``
of the script; batch mode: the CLI's ``run_migrate`` on a copy of the folder, in
this process with ``--jobs 1``) and classifies a file left whole as ``corpus.py``
does; it is not a benchmark. It is one process, one case after another:

    PYTHONPATH=$PWD python -m tests.soundness.audit            # every case
    PYTHONPATH=$PWD python -m tests.soundness.audit -k mnist   # names containing it
    ... --save now.json        # record each case's static result and output hash
    ... --against old.json     # report the cases whose output hash differs
    ... --all                  # print every case, not only the mismatches
    ... --run CASE [CASE...]   # classify these at world 2, one at a time

A reference run with older code: extract its package (``git archive REF
accel_migrate | tar -x -C OLD``) and run from another folder (``python -m`` puts
the working folder first on the path) with ``PYTHONPATH=OLD:$PWD ... --save
old.json``; then ``--against old.json`` here. A full pass takes about 0.7 s of
CPU per case (twenty minutes of wall time at a load of 10 on two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.conftest import ROOT

from .cases import CORPUS, Case, discover
from .corpus import STOCHASTIC_CODES

DOC = ROOT / "docs" / "soundness.md"
_ROW = re.compile(r"^\| `([^`]+)` \| .* \| \*\*(\w+)\*\* \| (.*) \|$")
_CODES = re.compile(r"needs-review ((?:AM\d+)(?:, AM\d+)*)")


@dataclass(frozen=True)
class Row:
    klass: str
    detail: str

    @property
    def codes(self) -> tuple[str, ...]:
        """The finding codes the row's detail names (its last needs-review list)."""
        found = _CODES.findall(self.detail)
        return tuple(sorted(found[-1].split(", "))) if found else ()

    @property
    def whole(self) -> bool:
        return self.detail.startswith(("left unmigrated", "left unchanged"))


@dataclass(frozen=True)
class Static:
    """A case's migration now: changed, its needs-review codes, its output's hash."""

    changed: bool
    codes: tuple[str, ...]
    named: tuple[str, ...]
    digest: str
    failures: tuple[str, ...] = ()
    seconds: float = 0.0
    #: The info findings' codes (AM027 names stochastic layers as a cause).
    info: tuple[str, ...] = ()


def read_rows(doc: Path = DOC) -> dict[str, Row]:
    rows = {}
    for line in doc.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            rows[match.group(1)] = Row(match.group(2), match.group(3))
    return rows


def migrate_static(case: Case) -> Static:
    """The case migrated as the harness migrates it, without running anything."""
    start = time.perf_counter()
    if case.mode == "batch":
        changed, codes, digest, failures, info = _batch(case)
    else:
        from accel_migrate.codemod.engine import migrate_source

        result = migrate_source(case.script.read_bytes(), str(case.script))
        output = result.output
        data = output if isinstance(output, bytes) else output.encode()
        changed, failures = result.changed, ()
        codes = tuple(sorted({f.code for f in result.needs_review}))
        info = tuple(sorted({f.code for f in result.findings if f.status == "info"}))
        digest = hashlib.sha256(data if changed else b"").hexdigest()[:16]
    named = tuple(c for c in codes if not case.causes or c in case.causes)
    seconds = time.perf_counter() - start
    return Static(changed, codes, named, digest, failures, seconds, info)


def _batch(
    case: Case,
) -> tuple[bool, tuple[str, ...], str, tuple[str, ...], tuple[str, ...]]:
    """``accel-migrate FOLDER --write`` on a copy, in this process (``--jobs 1``)."""
    from accel_migrate.cli.migrate_command import run_migrate

    with tempfile.TemporaryDirectory(prefix="audit-") as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(
            case.script.parent, project, ignore=shutil.ignore_patterns("__pycache__")
        )
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run_migrate(
                [str(project)],
                mode="write",
                plain_diff=False,
                output_format="json",
                jobs=1,
                cache=False,
                quiet=True,
            )
        files = json.loads(out.getvalue())["files"]
        findings = [f for entry in files for f in entry.get("findings", [])]
        codes = tuple(
            sorted({f["code"] for f in findings if f["status"] == "needs-review"})
        )
        changed = any(e["status"] == "changed" for e in files)
        failures = tuple(
            f"{Path(e['path']).relative_to(project)}: {e.get('error', e['status'])}"
            for e in files
            if e["status"] == "failed"
        )
        digest = hashlib.sha256()
        if changed:
            for path in sorted(project.rglob("*.py")):
                digest.update(str(path.relative_to(project)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
        info = tuple(sorted({f["code"] for f in findings if f["status"] == "info"}))
        return changed, codes, digest.hexdigest()[:16], failures, info


def mismatches(
    case: Case, row: Row | None, now: Static, before: dict | None = None
) -> list[str]:
    """What the row (or the reference run) says that the static result now does not."""
    if row is None:
        return ["norow"]
    found = []
    if row.whole and now.changed:
        found.append("migrated")
    if not row.whole and not now.changed and row.klass != "BROKEN":
        found.append("whole")
    stochastic = "stochastic layers only" in row.detail
    if row.klass == "FLAGGED" and now.changed and not now.named:
        if not (stochastic and STOCHASTIC_CODES & set(now.info)):
            found.append("uncaused")
    if _expected_codes(row, now) != row.codes:
        # the same findings, listed whole where the harness names the cause's
        same = row.codes == now.codes and row.klass == "FLAGGED"
        found.append("listing" if same else "codes")
    if before is not None and before.get("digest") != now.digest:
        found.append("output")
    return found


def _expected_codes(row: Row, now: Static) -> tuple[str, ...]:
    """The codes a row of this class would name, given the static findings now."""
    if row.klass == "LOUD" or (row.klass == "MATCH" and row.whole):
        return ()
    if row.klass == "FLAGGED" and now.named:
        return now.named
    return now.codes


def predicted(case: Case, now: Static) -> tuple[str, str]:
    """The class and detail of a case the codemod leaves whole (no run decides it)."""
    if case.unchanged:
        return "MATCH", "left unchanged (no run)"
    if now.named:
        return "FLAGGED", f"left unmigrated; needs-review {', '.join(now.named)}"
    others = f" (needs-review {', '.join(now.codes)} only)" if now.codes else ""
    return "SILENT", f"left unmigrated; nothing names it{others}"


def run_cases(names: list[str], root: Path = CORPUS) -> int:
    """Classify ``names`` as the harness does (world-2 runs), one after another."""
    from .corpus import classify, render_table

    cases = {c.name: c for c in discover(root)}
    with tempfile.TemporaryDirectory(prefix="audit-run-") as tmp:
        for name in names:
            start = time.perf_counter()
            outcome = classify(cases[name], Path(tmp))
            row = render_table([outcome]).splitlines()[2]
            print(f"{row}  <!-- {time.perf_counter() - start:.0f} s -->", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-k", nargs="*", default=[], help="only cases whose name contains one of these"
    )
    parser.add_argument("--all", action="store_true", help="print every case")
    parser.add_argument("--save", type=Path, help="write each case's result (JSON)")
    parser.add_argument("--against", type=Path, help="a --save of a reference run")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument(
        "--run",
        nargs="+",
        metavar="CASE",
        help="instead: run these cases at world 2, one at a time (corpus.classify), "
        "and print their table rows",
    )
    args = parser.parse_args(argv)
    if args.run:
        return run_cases(args.run, args.corpus)
    rows = read_rows()
    before = json.loads(args.against.read_text()) if args.against else None
    saved: dict[str, dict] = {}
    counts: dict[str, int] = {}
    print("| case | mode | row | now | mismatch | predicted / detail |")
    print("|---|---|---|---|---|---|")
    cases = [
        c
        for c in discover(args.corpus)
        if not args.k or any(k in c.name for k in args.k)
    ]
    for case in cases:
        row = rows.get(case.name)
        try:
            now = migrate_static(case)
        except Exception as exc:  # a crash is a finding of the audit
            print(f"| `{case.name}` | {case.mode} | | crash | error | {exc!r} |")
            counts["error"] = counts.get("error", 0) + 1
            continue
        saved[case.name] = asdict(now)
        found = mismatches(
            case, row, now, before.get(case.name, {}) if before is not None else None
        )
        for kind in found or ["ok"]:
            counts[kind] = counts.get(kind, 0) + 1
        if not found and not args.all:
            continue
        state = ("changed" if now.changed else "whole") + (
            f" {', '.join(now.codes)}" if now.codes else ""
        )
        note = ""
        if not now.changed:
            note = " / ".join(predicted(case, now))
        elif now.failures:
            note = f"CLI failed on {now.failures}"
        if row is not None:
            note += f" (row names {', '.join(row.codes) or 'none'}; cause "
            note += f"{', '.join(case.causes) or 'any'}; {now.seconds:.1f} s)"
        shown = f"{row.klass} {'whole' if row.whole else 'ran'}" if row else "none"
        print(
            f"| `{case.name}` | {case.mode} | {shown} | {state} | "
            f"{', '.join(found) or 'ok'} | {note.replace('|', '/')} |",
            flush=True,
        )
    print(f"\n{len(cases)} cases: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    if args.save:
        args.save.write_text(json.dumps(saved, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
