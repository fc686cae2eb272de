"""Codemod throughput: ``accel-migrate --check`` over big trees, against ``ast.parse``.

    python bench/codemod_throughput.py [--jobs 2] [--torch PATH] [--mixed-files 1000]
                                       [--skip-torch] [--skip-mixed] [--agree]
                                       [--torchfix-torch] [--no-torchfix]

Trees:
- the installed ``torch`` package's own source (2,285 files, 1.2 M lines for torch
  2.13): a legacy-repo stand-in where almost nothing is a training entry point;
- a generated "mixed" tree (``--mixed-files``): library modules, torch models,
  training scripts (the golden fixtures and examples), already-distributed scripts,
  data tables, generated files, tests and a few Python 2 leftovers.

For each tree the yardstick is ``ast.parse`` of every file, read and parsed in this
process, one after another (what any Python tool must at least pay); the contender
is the real command line, ``accel-migrate --check -q --jobs N --output-format json
TREE``, timed from outside as a user waits for it. The table gives files/s and
lines/s, and the ratio of the two times. Target: torch checked in under 3x the
``ast.parse`` time with 2 jobs.

TorchFix (a libcst-based PyTorch linter, ``torchfix -j N TREE``) is the second
yardstick, installed on first use in its own environment (``bench/.venv-torchfix``;
skipped with a note where it cannot be installed). It runs on the mixed tree; on
the torch tree only with ``--torchfix-torch``, because it takes about 560 s there
(2 jobs), more than the whole ``make bench`` budget.

``--agree`` also checks, file by file, that the cheap pre-screen (text and ``ast``)
and the full libcst pass agree on every file the pre-screen decides (slow: it runs
libcst on every file).

Prints one table; exits 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 3.0
TORCHFIX_VENV = ROOT / "bench" / ".venv-torchfix"


def torch_source() -> Path | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


# -- the mixed tree ------------------------------------------------------------------

_LIBRARY = '''\
"""Utilities, part {n}."""

import json
import os
from collections import defaultdict


class Registry{n}:
    def __init__(self):
        self.items = defaultdict(list)

    def add(self, key, value):
        self.items[key].append(value)
        return len(self.items[key])

    def dump(self, path):
        with open(path, "w") as handle:
            json.dump(self.items, handle)

'''
_LIBRARY_FUNCTION = """
def helper_{n}_{i}(values, scale={i}):
    total = 0
    for index, value in enumerate(values):
        if index % 2:
            total += value * scale
        else:
            total -= value / (scale + 1)
    return os.path.join("out", str(total))
"""
_MODEL = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block{n}(nn.Module):
    def __init__(self, width={width}):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))

"""
_MODEL_FUNCTION = """
def build_{n}_{i}(depth={i}, width=64):
    layers = [Block{n}(width) for _ in range(depth)]
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.5)
    return model
"""
_DISTRIBUTED = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 4)).sum()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""
_TEST = """\
import pytest
import torch


@pytest.mark.parametrize("width", [2, 4, 8])
def test_gradients_{n}(width):
    layer = torch.nn.Linear(width, width)
    out = layer(torch.randn(3, width)).sum()
    out.backward()
    assert layer.weight.grad is not None
"""
_PYTHON2 = """\
import os

def main():
    print "legacy script", os.getcwd()

if __name__ == "__main__":
    main()
"""


def _findings_of(case: Path) -> str:
    findings = case.with_name(case.name.replace(".in.py", ".findings.txt"))
    return findings.read_text(encoding="utf-8") if findings.exists() else ""


def make_mixed_tree(root: Path, files: int, seed: int = 0) -> None:
    """A deterministic legacy-repo-like tree of ``files`` Python files."""
    rng = random.Random(seed)
    # Training scripts: the golden inputs the codemod migrates (those it skips,
    # already-distributed or not training, are the other kinds' business), and the
    # examples.
    training = [
        case
        for case in sorted((ROOT / "fixtures").glob("*/*.in.py"))
        if "skipped:" not in _findings_of(case)
    ] + sorted((ROOT / "examples").glob("*.py"))
    kinds = (
        ["library"] * 50
        + ["model"] * 20
        + ["training"] * 10
        + ["distributed"] * 5
        + ["data"] * 4
        + ["generated"] * 2
        + ["test"] * 8
        + ["python2"] * 1
    )
    for n in range(files):
        kind = kinds[n % len(kinds)]
        folder = root / f"pkg{n % 17}" / f"sub{n % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{kind}_{n}.py"
        if kind == "library":
            text = _LIBRARY.format(n=n) + "".join(
                _LIBRARY_FUNCTION.format(n=n, i=i) for i in range(rng.randint(5, 40))
            )
        elif kind == "model":
            text = _MODEL.format(n=n, width=rng.choice([32, 64, 128])) + "".join(
                _MODEL_FUNCTION.format(n=n, i=i) for i in range(rng.randint(3, 20))
            )
        elif kind == "training":
            text = training[n % len(training)].read_text(encoding="utf-8")
        elif kind == "distributed":
            text = _DISTRIBUTED
        elif kind in ("data", "generated"):
            header = (
                "# @generated by tools/make_tables.py\n" if kind == "generated" else ""
            )
            rows = ",\n".join(
                f"    ({i}, {rng.random():.6f}, {rng.randint(0, 10**6)}, 'row{i}')"
                for i in range(rng.randint(200, 2000))
            )
            text = f"{header}TABLE = [\n{rows},\n]\n"
        elif kind == "test":
            text = _TEST.format(n=n)
        else:
            text = _PYTHON2
        path.write_text(text, encoding="utf-8")


# -- measuring -------------------------------------------------------------------------


def python_files(tree: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from accel_migrate.cli.files import discover

    return [Path(p) for p in discover([str(tree)])]


@dataclass
class Row:
    tree: str
    files: int
    lines: int
    parse_s: float
    tool_s: float
    jobs: int
    summary: dict
    exit_code: int
    #: TorchFix's seconds, or why it did not run.
    torchfix: float | str = "not run"


def time_ast_parse(files: list[Path]) -> tuple[float, int]:
    """Read and ``ast.parse`` every file, one after another; (seconds, lines)."""
    lines = 0
    start = time.perf_counter()
    for path in files:
        data = path.read_bytes()
        lines += data.count(b"\n")
        try:
            ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    return time.perf_counter() - start, lines


def time_tool(tree: Path, jobs: int) -> tuple[float, dict, int]:
    command = [
        sys.executable,
        "-m",
        "accel_migrate",
        "--check",
        "-q",
        "--jobs",
        str(jobs),
        "--output-format",
        "json",
        "--no-respect-gitignore",
        str(tree),
    ]
    start = time.perf_counter()
    proc = subprocess.run(
        command, capture_output=True, text=True, cwd=tempfile.gettempdir()
    )
    elapsed = time.perf_counter() - start
    try:
        summary = json.loads(proc.stdout)["summary"]
    except (json.JSONDecodeError, KeyError):
        sys.stderr.write(proc.stderr[-2000:])
        summary = {}
    return elapsed, summary, proc.returncode


def torchfix_command() -> tuple[list[str] | None, str]:
    """``torchfix`` from its own environment (made once), or None and why."""
    script = TORCHFIX_VENV / "bin" / "torchfix"
    if not script.exists():
        if os.environ.get("BENCH_NO_INSTALL"):
            return None, "skipped: no bench/.venv-torchfix"
        print("(setting up bench/.venv-torchfix: torchfix; once)", file=sys.stderr)
        for step in (
            [sys.executable, "-m", "venv", str(TORCHFIX_VENV)],
            [str(TORCHFIX_VENV / "bin" / "pip"), "install", "--quiet", "torchfix"],
        ):
            try:
                done = subprocess.run(step, capture_output=True, timeout=600)
            except subprocess.TimeoutExpired:
                done = None
            if done is None or done.returncode != 0:
                shutil.rmtree(TORCHFIX_VENV, ignore_errors=True)
                return None, "skipped: torchfix could not be installed"
    return [str(script)], "torchfix"


def time_torchfix(tree: Path, jobs: int, command: list[str]) -> float | str:
    start = time.perf_counter()
    proc = subprocess.run(
        [*command, "--jobs", str(jobs), str(tree)],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    elapsed = time.perf_counter() - start
    # 0: nothing found, 1: violations found; anything else is a crash.
    return elapsed if proc.returncode in (0, 1) else f"failed ({proc.returncode})"


def measure(name: str, tree: Path, jobs: int, torchfix: list[str] | str | None) -> Row:
    files = python_files(tree)
    time_tool(tree, jobs)  # warm the file cache and the bytecode of the tool
    parse_s, lines = time_ast_parse(files)
    tool_s, summary, code = time_tool(tree, jobs)
    row = Row(name, len(files), lines, parse_s, tool_s, jobs, summary, code)
    if isinstance(torchfix, list):
        row.torchfix = time_torchfix(tree, jobs, torchfix)
    elif torchfix is not None:
        row.torchfix = torchfix
    return row


# -- agreement -------------------------------------------------------------------------


def _agree_one(path: str) -> tuple[str, str | None]:
    """(path, disagreement or None) for one file."""
    from accel_migrate.codemod import MigrateOptions, MigrationError, migrate_source
    from accel_migrate.codemod.findings import SKIP_GENERATED, SKIP_SUPPRESSED
    from accel_migrate.codemod.screen import prescreen

    data = Path(path).read_bytes()
    try:
        quick = migrate_source(data, path)
    except MigrationError:
        quick = None
    try:
        full = migrate_source(data, path, MigrateOptions(prescreen=False))
    except MigrationError:
        full = None
    if (quick is None) != (full is None):
        return path, "one pass failed, the other did not"
    if quick is None or full is None:
        return path, None
    same = (quick.output, quick.findings, quick.skip_reason) == (
        full.output,
        full.findings,
        full.skip_reason,
    )
    if not same:
        return path, f"pre-screen {quick.skip_reason!r}, full pass {full.status}"
    if full.skip_reason in (SKIP_GENERATED, SKIP_SUPPRESSED):
        return path, None  # decided from the text before any screen runs
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return path, None
    verdict = prescreen(text)
    if verdict is not None and (
        full.changed or full.skip_reason != verdict.skip_reason
    ):
        return path, "the pre-screen skipped a file the full pass treats differently"
    return path, None


def agreement(tree: Path, jobs: int) -> tuple[int, list[tuple[str, str]]]:
    files = [str(p) for p in python_files(tree)]
    with ProcessPoolExecutor(jobs) as pool:
        outcomes = list(pool.map(_agree_one, files, chunksize=8))
    return len(files), [(p, why) for p, why in outcomes if why]


# -- report ----------------------------------------------------------------------------


def print_table(rows: list[Row], agreements: dict[str, str]) -> None:
    header = [
        "tree",
        "files",
        "lines",
        "ast.parse s",
        "files/s",
        "lines/s",
        "accel-migrate --check s",
        "files/s",
        "lines/s",
        "ratio",
        "TorchFix s",
        "TorchFix / accel-migrate",
        "changed/unchanged/skipped/failed",
    ]
    body = []
    for row in rows:
        s = row.summary
        body.append(
            [
                row.tree,
                f"{row.files:,}",
                f"{row.lines:,}",
                f"{row.parse_s:.1f}",
                f"{row.files / row.parse_s:,.0f}",
                f"{row.lines / row.parse_s:,.0f}",
                f"{row.tool_s:.1f} (-j {row.jobs})",
                f"{row.files / row.tool_s:,.0f}",
                f"{row.lines / row.tool_s:,.0f}",
                f"{row.tool_s / row.parse_s:.2f}x",
                (
                    f"{row.torchfix:.1f} (-j {row.jobs})"
                    if isinstance(row.torchfix, float)
                    else row.torchfix
                ),
                (
                    f"{row.torchfix / row.tool_s:.1f}x"
                    if isinstance(row.torchfix, float)
                    else ""
                ),
                "/".join(
                    str(s.get(k, "?"))
                    for k in ("changed", "unchanged", "skipped", "failed")
                ),
            ]
        )
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = (str(c).ljust(w) for c, w in zip(cells, widths, strict=True))
        return "| " + " | ".join(padded) + " |"

    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in body:
        print(line(cells))
    print()
    print(
        f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
        f"target: ratio under {TARGET_RATIO:.0f}x on torch with 2 jobs"
    )
    for name, text in agreements.items():
        print(f"pre-screen vs full pass on {name}: {text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--torch", type=Path, default=None, help="torch source folder")
    parser.add_argument("--mixed-files", type=int, default=1000)
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--skip-mixed", action="store_true")
    parser.add_argument("--agree", action="store_true")
    parser.add_argument(
        "--torchfix-torch",
        action="store_true",
        help="also time TorchFix on the torch tree (about 560 s)",
    )
    parser.add_argument("--no-torchfix", action="store_true")
    args = parser.parse_args()
    torchfix: list[str] | str | None = None
    if not args.no_torchfix:
        torchfix, why = torchfix_command()
        if torchfix is None:
            torchfix = why

    rows: list[Row] = []
    agreements: dict[str, str] = {}
    trees: list[tuple[str, Path]] = []
    if not args.skip_torch:
        tree = args.torch or torch_source()
        if tree is None:
            print("torch is not installed: no torch tree", file=sys.stderr)
        else:
            trees.append(("torch", tree))
    scratch = Path(tempfile.mkdtemp(prefix="accel-migrate-bench-"))
    try:
        if not args.skip_mixed:
            mixed = scratch / "mixed"
            make_mixed_tree(mixed, args.mixed_files)
            trees.append(("mixed", mixed))
        for name, tree in trees:
            yardstick = torchfix
            if name == "torch" and not args.torchfix_torch and torchfix is not None:
                yardstick = "not run (about 560 s; --torchfix-torch)"
            rows.append(measure(name, tree, args.jobs, yardstick))
            if args.agree:
                total, disagreements = agreement(tree, args.jobs)
                agreements[name] = (
                    f"{total - len(disagreements)} of {total} files agree"
                    + "".join(f"\n  {p}: {why}" for p, why in disagreements[:20])
                )
        print_table(rows, agreements)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
