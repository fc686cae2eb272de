"""Codemod profile: where a full pass spends its time, per phase and per rule.

    python bench/codemod_profile.py [--jobs 2] [--skip-cli] [--repeat 3]
    python bench/codemod_profile.py --visits [--repeat 2]
    python bench/codemod_profile.py --transforms [--repeat 2]
    python bench/codemod_profile.py --reuse [--repeat 3]
    python bench/codemod_profile.py --hashes [--repeat 3]
    python bench/codemod_profile.py --checks [--repeat 3]
    python bench/codemod_profile.py --worklist [--repeat 3]
    python bench/codemod_profile.py --collector [--repeat 3]
    python bench/codemod_profile.py --release [--repeat 3]
    python bench/codemod_profile.py --codes [--repeat 3]
    python bench/codemod_profile.py --scopes [--repeat 3]
    python bench/codemod_profile.py --collects [--repeat 3]
    python bench/codemod_profile.py --nested [--repeat 3]
    python bench/codemod_profile.py --predicates [--repeat 3]

The tree is made of 30 real-shaped training scripts: every ``fixtures/realworld``
script (95-140 lines), and a "long" GAN-style part: each pair of neighbouring
``fixtures/realworld`` scripts joined into one file (200-260 lines, two models,
two loops, as a research repository's ``train_gan.py`` with its helpers often
is), and one of 300+ lines. ``--goldens`` adds every golden input
(``fixtures/*/*.in.py``) and ``examples/`` (100 files).

Three tables:
- **phases**: self time of each phase (read, pre-screen, parse, screen, metadata
  (scopes, positions, parents), module index, line map, each rule's own visit,
  import insertion, black's formatting check, output check) summed over the tree, in this process with the
  engine's functions wrapped by a timer. A phase's time does not include the
  phases it calls (a rule that asks for positions pays "metadata", not itself).
- **the 300-line script**: one full pass of the longest file, unwrapped (best of
  ``--repeat``), with the target of 0.3 s.
- **command line**: ``accel-migrate --check -q --jobs N TREE`` timed from outside
  (no cache, then a second run over the unchanged tree with the cache, and the
  same over a 60-file tree: the scripts and 30 helper modules), against
  libcst's ``parse_module`` of the same files in this process, with the targets
  (``-j 1`` within 5x the parse time; a re-run under 1 s).

``--visits`` prints only a fourth table: the full pass of a benchmark set (8
scripts) with libcst's own ``CSTNode.visit`` against the engine's read-only visit
(``codemod/fastvisit.py``), alternating in one process, so that a loaded machine
slows both alike.
``--transforms`` prints the same table for the rules' passes: libcst's
transformer visit against the engine's changed-path walk
(``codemod/fasttransform.py``); it stops if the two results differ.
``--reuse`` prints the full pass over the whole tree with the divergence
analysis walking every statement against its walks reused across trees
(``codemod/divergence_memo.py``), alternating the same way.
``--hashes`` does the same for libcst's nodes (and the engine's scopes) hashed
and compared by identity in Python, as libcst defines them, against
``object``'s own in C (``codemod/identity_hash.py``), with libcst's parse of the
tree for the ratio.
``--checks`` does the same for ``isinstance`` against libcst's node classes
through ``ABCMeta``'s Python ``__instancecheck__`` against ``type``'s in C
(``codemod/class_checks.py``), ``--worklist`` for the module index's
``tagged`` fixpoint in rounds over every entry against a worklist
(``index_tagging.WORKLIST``), ``--collector`` for the garbage collector at
CPython's pace against held back during a migration (``collector``), with the
collector's own CPU time (``gc.callbacks``) of each side; ``--release`` for a
pass's positions left to the collector against emptied at the pass's end
(``collector.RELEASE``, ``positions.Chunks.release``); ``--codes`` for the
code a pass asks of each tree (``ModuleIndex.code``, the parsed tree's) by a
whole ``Module.code`` against from the generation that gives its positions
(``positions.SHARED_CODE``); ``--scopes`` for a pass's scopes left to the
collector against emptied at its end (``collector.RELEASE_SCOPES``), as
``--release``; ``--collects`` for the module index's lists collected by a
visit of each tree against from the tree's preorder
(``index_collect.FROM_PREORDER``); ``--nested`` for the divergence analysis
reusing only top-level statements' walks against nested statements' too
(``divergence_memo.NESTED``); ``--predicates`` for ``subtrees.findall``'s
candidates checked by libcst's ``_matches`` against by the predicates read
once from each matcher (``matcher_predicates.COMPILED``), with the CPU seconds
inside ``findall`` (its callers' references to it timed) of each side.

A benchmark that prints numbers, not a timed test. Exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import machine, table  # noqa: E402

TARGET_SCRIPT_S = 0.3
TARGET_PARSE_RATIO = 5.0
TARGET_RERUN_S = 1.0


# -- the tree ---------------------------------------------------------------------------


def make_tree(root: Path, goldens: bool = False) -> list[Path]:
    realworld = sorted((ROOT / "fixtures" / "realworld").glob("*.py"))
    sources = list(realworld)
    if goldens:
        sources += sorted((ROOT / "fixtures").glob("*/*.in.py"))
        sources += sorted((ROOT / "examples").glob("*.py"))
    written = []
    for n, path in enumerate(sources):
        target = root / "scripts" / f"{n:03d}_{path.name.replace('.in.py', '.py')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        written.append(target)
    for first, second in itertools.pairwise(realworld):
        target = root / "long" / f"train_{first.stem}_{second.stem}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(first.read_bytes() + b"\n\n" + second.read_bytes())
        written.append(target)
    # One script of 300+ lines (the target's size): scripts joined until it is.
    joined = b""
    for path in sorted(realworld, key=lambda p: -lines_of(p)):
        joined += path.read_bytes() + b"\n\n"
        if joined.count(b"\n") >= 300:
            break
    target = root / "long" / "train_300_lines.py"
    target.write_bytes(joined)
    written.append(target)
    return written


def add_helper_modules(root: Path, count: int = 30) -> list[Path]:
    """``count`` helper modules (no loop of their own: models, datasets, utils,
    loggers) beside the tree's scripts, as a repository has them: the local
    modules of the soundness corpus's project folders, under names of their own."""
    sources = sorted(
        p
        for p in (ROOT / "fixtures" / "soundness").glob("*/*.py")
        if p.name != "main.py"
    )[:count]
    written = []
    for path in sources:
        target = root / "lib" / f"{path.parent.name}_{path.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        written.append(target)
    return written


def lines_of(path: Path) -> int:
    return path.read_bytes().count(b"\n")


# -- a self-time profiler over the engine's functions ----------------------------------


class Profile:
    """Self time per phase: the time inside a wrapped call, less the wrapped calls
    it makes."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        frame = [time.process_time(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            elapsed = time.process_time() - frame[0]
            self._stack.pop()
            self.totals[name] += elapsed - frame[1]
            self.calls[name] += 1
            if self._stack:
                self._stack[-1][1] += elapsed

    def wrap(self, owner: Any, attribute: str, name: str | Callable[..., str]) -> None:
        original = owner.__dict__[attribute]
        is_classmethod = isinstance(original, classmethod)
        function = original.__func__ if is_classmethod else original
        profile = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            label = name(*args) if callable(name) else name
            with profile.phase(label):
                return function(*args, **kwargs)

        setattr(owner, attribute, classmethod(timed) if is_classmethod else timed)


def instrument(profile: Profile) -> None:
    import ast

    from libcst.metadata import MetadataWrapper

    from accel_migrate.cli import batch, files
    from accel_migrate.codemod import (
        analysis,
        divergence,
        engine,
        fasttransform,
        linemap,
        positions,
        rule,
        rule_context,
        screen,
        subtrees,
    )

    profile.wrap(files, "read_source", "read")
    batch.read_source = files.read_source  # batch imported it by name
    profile.wrap(engine, "_parse_ast", "pre-screen")
    profile.wrap(engine, "prescreen", "pre-screen")
    profile.wrap(engine, "parse", "parse (libcst)")
    profile.wrap(screen.FullScreen, "of", "screen")
    profile.wrap(MetadataWrapper, "resolve", lambda _, key: f"metadata {key.__name__}")
    profile.wrap(
        MetadataWrapper,
        "resolve_many",
        lambda _, keys: "metadata "
        + ("+".join(sorted(k.__name__ for k in keys)) or "(none asked)"),
    )
    profile.wrap(analysis.ModuleIndex, "__init__", "module index")
    profile.wrap(divergence.Divergence, "__init__", "divergence analysis")
    # Positions and code come from one generation (the engine's, not libcst's
    # provider: they are not a "metadata" row); engine and rule call it by module.
    profile.wrap(positions, "compute", "positions + code")
    profile.wrap(fasttransform, "unique_nodes", "unique nodes")
    profile.wrap(subtrees.Preorder, "__init__", "preorders")
    profile.wrap(linemap.LineMap, "__init__", "line map")
    profile.wrap(rule_context, "suppressed_statements", "suppressions")
    profile.wrap(engine, "black_like_input", "black (formatting check)")
    profile.wrap(engine, "_add_runtime_import", "import insertion")
    profile.wrap(engine, "_free_alias", "import insertion")
    profile.wrap(rule.Rule, "run", lambda cls, *_: f"rule {cls.code}")

    class _TimedAst:
        def __getattr__(self, name: str) -> Any:
            return getattr(ast, name)

        def parse(self, *args: Any, **kwargs: Any) -> Any:
            with profile.phase("output check"):
                return ast.parse(*args, **kwargs)

    # The engine's ast.parse of the migrated code is the output check (the
    # pre-screen's parse goes through _parse_ast, timed above).
    engine.ast = _TimedAst()  # type: ignore[assignment]


def profile_tree(paths: list[Path]) -> tuple[Profile, float]:
    """The self-time profile of migrating ``paths`` (CPU seconds)."""
    from accel_migrate.cli.batch import migrate_file
    from accel_migrate.codemod import MigrateOptions

    profile = Profile()
    instrument(profile)
    options = MigrateOptions()
    start = time.process_time()
    for path in paths:
        with profile.phase("other"):
            migrate_file(str(path), str(path), options)
    return profile, time.process_time() - start


def phase_rows(profile: Profile, wall: float) -> list[list[str]]:
    order = [
        "read",
        "pre-screen",
        "parse (libcst)",
        "screen",
        *sorted(k for k in profile.totals if k.startswith("metadata")),
        "positions + code",
        "module index",
        "divergence analysis",
        "preorders",
        "unique nodes",
        "line map",
        "suppressions",
    ]
    rules = sorted(k for k in profile.totals if k.startswith("rule "))
    order += [*rules, "import insertion", "output check", "other"]
    rows = []
    for name in order:
        if name not in profile.totals:
            continue
        seconds = profile.totals[name]
        rows.append(
            [
                name,
                profile.calls[name],
                f"{seconds * 1e3:.0f}",
                f"{100 * seconds / wall:.1f}",
            ]
        )
    rows.append(["**total**", "", f"{wall * 1e3:.0f}", "100.0"])
    return rows


# -- one long script, unwrapped ---------------------------------------------------------


def time_script(path: Path, repeat: int) -> float:
    """CPU seconds (this process), best of ``repeat``."""
    from accel_migrate.codemod import MigrateOptions, migrate_source

    source = path.read_bytes()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        migrate_source(source, str(path), MigrateOptions())
        best = min(best, time.process_time() - start)
    return best


def time_libcst_parse(paths: list[Path]) -> float:
    """CPU seconds (this process)."""
    import libcst as cst

    start = time.process_time()
    for path in paths:
        cst.parse_module(path.read_bytes())
    return time.process_time() - start


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_cli(tree: Path, jobs: int, cache: Path | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its workers)."""
    command = [sys.executable, "-m", "accel_migrate", "--check", "-q"]
    command += ["--jobs", str(jobs), "--output-format", "json"]
    command += ["--no-respect-gitignore", str(tree)]
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    if cache is None:
        if supports_cache():
            command.insert(4, "--no-cache")
    else:
        environment["ACCEL_MIGRATE_CACHE_DIR"] = str(cache)
    cpu = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=environment)
    elapsed = time.perf_counter() - start
    try:
        json.loads(proc.stdout)["summary"]
    except (json.JSONDecodeError, KeyError):
        sys.stderr.write(proc.stderr[-2000:])
    return elapsed, children_cpu() - cpu


def supports_cache() -> bool:
    """Does this tree's ``migrate`` take ``--no-cache``? (The benchmark also runs
    on a tree from before the cache existed.) The command is looked up through
    the command group, which every tree has: since the CLI split, ``cli.app``
    keeps only ``main`` and the command lives in ``cli.migrate_cli``."""
    from accel_migrate.cli import app

    migrate = app.cli.commands["migrate"]
    return any("--no-cache" in getattr(p, "opts", ()) for p in migrate.params)


VISIT_SET = (
    "realworld/batchify.py",
    "realworld/gan.py",
    "realworld/trainer_class.py",
    "realworld/checkpoints.py",
    "soundness/wgan_gp.py",
    "soundness/mnist_cnn.py",
    "soundness/cifar_bn_resnet.py",
)


def compare_visits(longest: Path, repeat: int) -> list[list[str]]:
    """Per script: CPU seconds of a full pass with libcst's visit and with the
    engine's (the best of ``repeat`` rounds each, the two alternating)."""
    from accel_migrate.codemod import fastvisit

    def use(fast: bool) -> None:
        (fastvisit.install if fast else fastvisit.uninstall)()

    return _compare(longest, repeat, use, lambda: fastvisit.install())


def compare_transforms(longest: Path, repeat: int) -> list[list[str]]:
    """Per script: CPU seconds of a full pass with the rules' passes on libcst's
    transformer visit and on the engine's changed-path walk (``fasttransform``),
    alternating as ``compare_visits``."""
    from accel_migrate.codemod import fasttransform

    def use(fast: bool) -> None:
        fasttransform.ENABLED = fast

    return _compare(longest, repeat, use, lambda: use(True))


def compare_reuse(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with every
    statement walked by each divergence analysis and with the walks of earlier
    trees and rounds reused (``divergence_memo``), alternating as
    ``compare_visits``."""
    from accel_migrate.codemod import divergence_memo

    def use(reuse: bool) -> None:
        divergence_memo.REUSE = reuse

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def compare_nested(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: a full pass with the divergence analysis
    reusing top-level statements' walks only, against nested statements' too
    (``divergence_memo.NESTED``), alternating as ``compare_visits``."""
    from accel_migrate.codemod import divergence_memo

    def use(nested: bool) -> None:
        divergence_memo.NESTED = nested

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def compare_predicates(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: a full pass with ``findall``'s candidates
    checked by libcst's ``_matches`` against by predicates
    (``matcher_predicates.COMPILED``), alternating as ``compare_visits``; the
    CPU seconds inside ``findall`` (every module's reference to it timed) of
    each side's best pass are printed after the table."""
    from accel_migrate.codemod import matcher_predicates, subtrees

    original = subtrees.findall
    inside = [0.0]

    def timed(tree: Any, matcher: Any) -> Any:
        start = time.process_time()
        try:
            return original(tree, matcher)
        finally:
            inside[0] += time.process_time() - start

    holders = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("accel_migrate")
        and getattr(module, "findall", None) is original
    ]
    per_side: dict[bool, list[float]] = defaultdict(list)
    calls = [0]

    def use(compiled: bool) -> None:
        # What was timed since the last call is the side then in use (the
        # first call's: _compare's warm-up, not counted).
        if calls[0]:
            per_side[matcher_predicates.COMPILED].append(inside[0])
        calls[0] += 1
        inside[0] = 0.0
        matcher_predicates.COMPILED = compiled

    for module in holders:
        module.findall = timed  # type: ignore[attr-defined]
    try:
        rows = _compare(paths[-1], repeat, use, lambda: use(True), paths)
    finally:
        for module in holders:
            module.findall = original  # type: ignore[attr-defined]
    print(
        "CPU s inside findall per whole-tree pass (libcst / predicates): "
        + " / ".join(
            ", ".join(f"{t:.3f}" for t in per_side[side]) for side in (False, True)
        )
    )
    return rows


def compare_hashes(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with nodes and
    scopes hashed in Python (libcst's ``__hash__``/``__eq__``; the scopes' as
    they were) and in C (``identity_hash``), alternating as ``compare_visits``."""
    from accel_migrate.codemod import identity_hash
    from accel_migrate.codemod.scopes import Scope

    def python_hash(self: object) -> int:
        return id(self)

    def python_eq(self: object, other: object) -> bool:
        return self is other

    def use(fast: bool) -> None:
        if fast:
            identity_hash.install()
            Scope.__hash__ = object.__hash__  # type: ignore[assignment]
            Scope.__eq__ = object.__eq__  # type: ignore[assignment,method-assign]
        else:
            identity_hash.uninstall()
            Scope.__hash__ = python_hash  # type: ignore[assignment]
            Scope.__eq__ = python_eq  # type: ignore[assignment,method-assign]

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def compare_checks(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with node classes
    checked by ``ABCMeta`` (Python) and by their MRO in C (``class_checks``),
    alternating as ``compare_visits``."""
    from accel_migrate.codemod import class_checks

    def use(fast: bool) -> None:
        (class_checks.install if fast else class_checks.uninstall)()

    return _compare(paths[-1], repeat, use, class_checks.install, paths)


def compare_worklist(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with ``tagged``'s
    fixpoint in rounds and by a worklist, alternating as ``compare_visits``."""
    from accel_migrate.codemod import index_tagging

    def use(worklist: bool) -> None:
        index_tagging.WORKLIST = worklist

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def compare_collector(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with the
    garbage collector at CPython's thresholds and held back (``collector``),
    alternating as ``compare_visits``; the collector's CPU seconds of each side
    (its last run over the tree) are printed."""
    return _compare_collector(paths, repeat, "ENABLED", ("CPython's pace", "held back"))


def compare_release(paths: list[Path], repeat: int) -> list[list[str]]:
    """The same for a pass's positions left to the collector and emptied at
    its end (``collector.RELEASE``). The collection that frees what a pass
    left runs after it, at the caller's pace (outside the timed pass): the
    collector's CPU seconds of each side are the measurement."""
    return _compare_collector(paths, repeat, "RELEASE", ("left", "released"))


def compare_scopes(paths: list[Path], repeat: int) -> list[list[str]]:
    """The same as ``compare_release`` for a pass's scopes left to the
    collector and emptied at its end (``collector.RELEASE_SCOPES``)."""
    return _compare_collector(paths, repeat, "RELEASE_SCOPES", ("left", "released"))


def compare_codes(paths: list[Path], repeat: int) -> list[list[str]]:
    """Per script of the whole tree: CPU seconds of a full pass with each
    tree's code generated whole (``Module.code``) and from its positions'
    generation (``positions.SHARED_CODE``), alternating as ``compare_visits``."""
    from accel_migrate.codemod import positions

    def use(shared: bool) -> None:
        positions.SHARED_CODE = shared

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def compare_collects(paths: list[Path], repeat: int) -> list[list[str]]:
    """The same as ``compare_codes`` for the module index's lists collected by a
    visit of each tree and from its preorder (``index_collect.FROM_PREORDER``)."""
    from accel_migrate.codemod import index_collect

    def use(preorder: bool) -> None:
        index_collect.FROM_PREORDER = preorder

    return _compare(paths[-1], repeat, use, lambda: use(True), paths)


def _compare_collector(
    paths: list[Path], repeat: int, switch: str, names: tuple[str, str]
) -> list[list[str]]:
    import gc

    from accel_migrate.codemod import collector

    spent = {False: 0.0, True: 0.0}
    counts = {False: 0, True: 0}
    started = [0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.process_time()
        else:
            side = getattr(collector, switch)
            spent[side] += time.process_time() - started[0]
            counts[side] += 1

    def use(on: bool) -> None:
        setattr(collector, switch, on)
        spent[on] = 0.0
        counts[on] = 0

    gc.callbacks.append(timer)
    try:
        rows = _compare(paths[-1], repeat, use, lambda: use(True), paths)
    finally:
        gc.callbacks.remove(timer)
    print(
        "the collector, last run over the tree: "
        f"{names[0]} {counts[False]} collections, {spent[False]:.2f} s; "
        f"{names[1]} {counts[True]} collections, {spent[True]:.2f} s"
    )
    return rows


def _compare(
    longest: Path,
    repeat: int,
    use: Callable[[bool], None],
    restore: Callable[[], None],
    paths: list[Path] | None = None,
) -> list[list[str]]:
    from accel_migrate.codemod import MigrateOptions, migrate_source

    if paths is None:
        paths = [ROOT / "fixtures" / name for name in VISIT_SET] + [longest]
    best: dict[tuple[Path, bool], float] = defaultdict(lambda: float("inf"))
    outputs: dict[tuple[Path, bool], Any] = {}
    migrate_source(paths[0].read_bytes(), str(paths[0]))  # imports, warm caches
    try:
        for _ in range(repeat):
            for fast in (False, True):
                use(fast)
                for path in paths:
                    source = path.read_bytes()
                    start = time.process_time()
                    result = migrate_source(source, str(path), MigrateOptions())
                    elapsed = time.process_time() - start
                    best[path, fast] = min(best[path, fast], elapsed)
                    outputs[path, fast] = (result.output, result.findings)
    finally:
        restore()
    for path in paths:
        if outputs[path, False] != outputs[path, True]:
            raise SystemExit(f"{path.name}: the two engines' results differ")
    rows = []
    for path in [*paths, None]:
        chosen = paths if path is None else [path]
        before = sum(best[p, False] for p in chosen)
        after = sum(best[p, True] for p in chosen)
        rows.append(
            [
                "**all**" if path is None else path.name,
                sum(lines_of(p) for p in chosen),
                f"{before:.2f}",
                f"{after:.2f}",
                f"{before / after:.2f}x",
            ]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--skip-profile", action="store_true")
    parser.add_argument(
        "--goldens",
        action="store_true",
        help="add every golden input and examples/ to the tree (100 files)",
    )
    parser.add_argument(
        "--visits",
        action="store_true",
        help="only compare libcst's visit with the engine's on 8 scripts",
    )
    parser.add_argument(
        "--transforms",
        action="store_true",
        help="only compare libcst's transformer visit with the engine's "
        "changed-path walk on 8 scripts",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="only compare the divergence analysis walking every statement with "
        "its walks reused across trees, over the whole tree",
    )
    parser.add_argument(
        "--hashes",
        action="store_true",
        help="only compare nodes hashed in Python (libcst's) with nodes hashed "
        "in C (identity_hash), over the whole tree",
    )
    parser.add_argument(
        "--checks",
        action="store_true",
        help="only compare isinstance through ABCMeta (Python) with the MRO "
        "check in C (class_checks), over the whole tree",
    )
    parser.add_argument(
        "--worklist",
        action="store_true",
        help="only compare the tagging fixpoint in rounds with the worklist, "
        "over the whole tree",
    )
    parser.add_argument(
        "--collector",
        action="store_true",
        help="only compare the garbage collector at CPython's pace with held "
        "back during a migration, over the whole tree",
    )
    parser.add_argument(
        "--release",
        action="store_true",
        help="only compare a pass's positions left to the collector with "
        "emptied at its end, over the whole tree",
    )
    parser.add_argument(
        "--codes",
        action="store_true",
        help="only compare each tree's code generated whole with generated "
        "with its positions, over the whole tree",
    )
    parser.add_argument(
        "--scopes",
        action="store_true",
        help="only compare a pass's scopes left to the collector with emptied "
        "at its end, over the whole tree",
    )
    parser.add_argument(
        "--nested",
        action="store_true",
        help="only compare the divergence analysis reusing top-level statements' "
        "walks with nested statements' too, over the whole tree",
    )
    parser.add_argument(
        "--predicates",
        action="store_true",
        help="only compare findall's candidates checked by libcst's _matches "
        "with by predicates read once per matcher, over the whole tree",
    )
    parser.add_argument(
        "--collects",
        action="store_true",
        help="only compare the module index's lists collected by a visit with "
        "from each tree's preorder, over the whole tree",
    )
    options = parser.parse_args()
    print(f"Machine: {machine()}\n")
    with tempfile.TemporaryDirectory(prefix="am-profile-") as folder:
        root = Path(folder) / "tree"
        paths = make_tree(root, options.goldens)
        lines = sum(lines_of(p) for p in paths)
        longest = root / "long" / "train_300_lines.py"
        if options.visits:
            print(
                table(
                    "Full pass, libcst's visit against the engine's read-only "
                    f"visit (CPU s, best of {options.repeat})",
                    ["script", "lines", "libcst visit", "fastvisit", "speed-up"],
                    compare_visits(longest, options.repeat),
                )
            )
            return 0
        if options.transforms:
            print(
                table(
                    "Full pass, the rules' passes on libcst's transformer visit "
                    "against the engine's changed-path walk (CPU s, best of "
                    f"{options.repeat})",
                    ["script", "lines", "libcst", "fasttransform", "speed-up"],
                    compare_transforms(longest, options.repeat),
                )
            )
            return 0
        if options.reuse:
            rows = compare_reuse(paths, options.repeat)
            print(
                table(
                    "Full pass, the divergence analysis walking every statement "
                    "against its walks reused (CPU s, best of "
                    f"{options.repeat})",
                    ["script", "lines", "every walk", "reused", "speed-up"],
                    [rows[-2], rows[-1]],
                )
            )
            return 0
        comparisons = {
            "hashes": (compare_hashes, "nodes hashed in Python against in C"),
            "checks": (
                compare_checks,
                "node classes checked by ABCMeta against by the MRO in C",
            ),
            "worklist": (compare_worklist, "tagging in rounds against by a worklist"),
            "collector": (
                compare_collector,
                "the garbage collector at CPython's pace against held back",
            ),
            "release": (
                compare_release,
                "a pass's positions left to the collector against released",
            ),
            "scopes": (
                compare_scopes,
                "a pass's scopes left to the collector against released",
            ),
            "codes": (
                compare_codes,
                "each tree's code generated whole against with its positions",
            ),
            "collects": (
                compare_collects,
                "the index's lists by a visit against from the preorder",
            ),
            "predicates": (
                compare_predicates,
                "findall's candidates checked by libcst's _matches against by predicates",
            ),
            "nested": (
                compare_nested,
                "divergence walks reused for top-level statements against nested too",
            ),
        }
        sides = {
            "worklist": ("rounds", "worklist"),
            "collector": ("CPython's", "held back"),
            "release": ("left", "released"),
            "scopes": ("left", "released"),
            "codes": ("Module.code", "with positions"),
            "collects": ("visit", "preorder"),
            "nested": ("top-level", "nested"),
            "predicates": ("_matches", "predicates"),
        }
        chosen = [name for name in comparisons if getattr(options, name)]
        if chosen:
            compare, what = comparisons[chosen[0]]
            print(f"load average at the start: {os.getloadavg()}")
            rows = compare(paths, options.repeat)
            parse_s = min(time_libcst_parse(paths) for _ in range(3))
            rows[-1].append(
                f"{float(rows[-1][2]) / parse_s:.1f}x / "
                f"{float(rows[-1][3]) / parse_s:.1f}x"
            )
            print(
                table(
                    f"Full pass, {what} (CPU s, best "
                    f"of {options.repeat}; libcst's parse of the tree "
                    f"{parse_s:.3f} s, best of 3)",
                    [
                        "script",
                        "lines",
                        *sides.get(chosen[0], ("Python", "C")),
                        "speed-up",
                        "/ parse",
                    ],
                    [[*rows[-2], ""], rows[-1]],
                )
            )
            print(f"\nload average at the end: {os.getloadavg()}")
            return 0
        print(f"Tree: {len(paths)} training scripts, {lines} lines\n")

        script_s = time_script(longest, options.repeat)
        parse_s = min(time_libcst_parse(paths) for _ in range(2))
        cli_rows = []
        if not options.skip_cli:
            cache_ok = supports_cache()
            for jobs in sorted({1, options.jobs}):
                seconds, cpu = time_cli(root, jobs, None)
                ratio = (cpu if jobs == 1 else seconds) / parse_s
                cli_rows.append(
                    [
                        f"--check -j {jobs}" + (" --no-cache" if cache_ok else ""),
                        f"{seconds:.2f}",
                        # The workers are the forkserver's children, which
                        # RUSAGE_CHILDREN does not reach: with -j N only the
                        # parent's CPU is counted.
                        f"{cpu:.2f}" if jobs == 1 else f"{cpu:.2f} (parent only)",
                        f"{ratio:.1f}x",
                        f"{TARGET_PARSE_RATIO:.0f}x (CPU)" if jobs == 1 else "",
                        (
                            ("yes" if ratio <= TARGET_PARSE_RATIO else "no")
                            if jobs == 1
                            else ""
                        ),
                    ]
                )
            if cache_ok:
                cache = Path(folder) / "cache"
                time_cli(root, 1, cache)  # fills the cache
                seconds, cpu = time_cli(root, 1, cache)
                cli_rows.append(
                    [
                        f"--check -j 1, re-run (cache), {len(paths)} files",
                        f"{seconds:.2f}",
                        f"{cpu:.2f}",
                        f"{cpu / parse_s:.1f}x",
                        "",
                        "",
                    ]
                )
                # The target's tree: the scripts and as many helper modules.
                wide = Path(folder) / "tree60"
                count = len(make_tree(wide, options.goldens))
                count += len(add_helper_modules(wide, 30))
                time_cli(wide, 1, cache)  # fills the cache
                seconds, cpu = time_cli(wide, 1, cache)
                cli_rows.append(
                    [
                        f"--check -j 1, re-run (cache), {count} files "
                        "(+ helper modules)",
                        f"{seconds:.2f}",
                        f"{cpu:.2f}",
                        "",
                        f"< {TARGET_RERUN_S:.0f} s",
                        "yes" if seconds < TARGET_RERUN_S else "no",
                    ]
                )

        if not options.skip_profile:
            # Last: the profiler wraps the engine's functions for good.
            profile, wall = profile_tree(paths)
            print(
                table(
                    "Full pass over the tree, self time per phase (CPU ms)",
                    ["phase", "calls", "ms", "%"],
                    phase_rows(profile, wall),
                )
            )
            print()
        print(
            table(
                "One long training script, full pass (CPU s, best of "
                f"{options.repeat})",
                ["script", "lines", "seconds", "target", "met"],
                [
                    [
                        longest.name,
                        lines_of(longest),
                        f"{script_s:.3f}",
                        f"< {TARGET_SCRIPT_S}",
                        "yes" if script_s < TARGET_SCRIPT_S else "no",
                    ]
                ],
            )
        )
        print()
        if cli_rows:
            cli_rows.insert(
                0,
                [
                    "libcst parse_module, in process",
                    "",
                    f"{parse_s:.2f}",
                    "1.0x",
                    "",
                    "",
                ],
            )
            print(
                table(
                    "Command line over the tree (seconds; ratio: CPU, wall for -j N)",
                    ["run", "wall", "CPU", "x libcst parse", "target", "met"],
                    cli_rows,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
