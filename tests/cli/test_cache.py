"""The results cache (cli/cache.py): a hit is exactly the result a fresh run
gives; other content or settings miss; a damaged entry is never trusted;
``--no-cache`` neither reads nor writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accel_migrate.cli import batch, main
from accel_migrate.cli.batch import Batch, migrate_file
from accel_migrate.cli.cache import ResultCache, default_folder
from accel_migrate.codemod import MigrateOptions
from accel_migrate.codemod.findings import Failure, MigrationResult

from .test_cli import SYNTAX_ERROR, TRAIN, put

NEEDS_REVIEW = TRAIN.replace(
    'model = torch.nn.Linear(2, 2).to("cuda")\n',
    'model = torch.nn.Linear(2, 2).to("cuda")\ndevice = torch.device("mps")\n',
)


pytestmark = pytest.mark.in_tmp(cache=True)


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def no_migration(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, migrating a file fails the test: only the cache answers."""

    def refuse(*args: object) -> None:
        raise AssertionError("migrated although the cache holds the result")

    monkeypatch.setattr(batch, "_migrate", refuse)


def test_the_folder_is_the_env_var_else_xdg_else_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert default_folder() == tmp_path / "cache"
    monkeypatch.delenv("ACCEL_MIGRATE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_folder() == tmp_path / "xdg" / "accel-migrate"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_folder() == tmp_path / "home" / ".cache" / "accel-migrate"


@pytest.mark.parametrize("content", [TRAIN, NEEDS_REVIEW, "import os\n", "x = 1\n"])
def test_a_hit_is_exactly_the_fresh_result(
    content: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put("train.py", content)
    put("copy.py", content)
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    fresh = migrate_file("train.py", "train.py", options)
    first = migrate_file("train.py", "train.py", options, cache)
    assert first == fresh and entries(tmp_path / "cache")
    no_migration(monkeypatch)
    again = migrate_file("train.py", "train.py", options, cache)
    assert isinstance(again, MigrationResult)
    assert again == fresh
    assert again.output == fresh.output and again.findings == fresh.findings
    # The path is not part of the key: the same bytes elsewhere hit, named as asked.
    elsewhere = migrate_file("copy.py", "copy.py", options, cache)
    assert elsewhere.path == "copy.py"
    assert elsewhere.findings == fresh.findings  # type: ignore[union-attr]


def test_a_file_that_does_not_parse_is_cached_as_the_same_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    put("bad.py", SYNTAX_ERROR)
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    fresh = migrate_file("bad.py", "bad.py", options, cache)
    assert isinstance(fresh, Failure) and fresh.message.startswith("cannot parse")
    no_migration(monkeypatch)
    assert migrate_file("bad.py", "bad.py", options, cache) == fresh


def test_an_internal_error_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    put("train.py")
    options = MigrateOptions()
    cache = ResultCache.for_options(options)

    def boom(*args: object) -> None:
        raise RuntimeError("a bug")

    with monkeypatch.context() as patch:
        patch.setattr(batch, "migrate_source", boom)
        failed = migrate_file("train.py", "train.py", options, cache)
    assert isinstance(failed, Failure) and "internal error" in failed.message
    again = migrate_file("train.py", "train.py", options, cache)
    assert isinstance(again, MigrationResult) and again.changed


@pytest.mark.parametrize(
    "other",
    [
        MigrateOptions(select=frozenset({"AM001"})),
        MigrateOptions(ignore=frozenset({"AM008"})),
        MigrateOptions(alias="rt"),
        MigrateOptions(prescreen=False),
    ],
)
def test_other_settings_miss(
    other: MigrateOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put("train.py")
    options = MigrateOptions()
    migrate_file("train.py", "train.py", options, ResultCache.for_options(options))
    assert ResultCache.for_options(other).settings != (
        ResultCache.for_options(options).settings
    )
    source = Path("train.py").read_bytes()
    assert ResultCache.for_options(other).get("train.py", source) is None
    result = migrate_file("train.py", "train.py", other, ResultCache.for_options(other))
    assert result == migrate_file("train.py", "train.py", other)


def test_changed_content_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    put("train.py")
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    migrate_file("train.py", "train.py", options, cache)
    put("train.py", NEEDS_REVIEW)
    assert cache.get("train.py", Path("train.py").read_bytes()) is None
    result = migrate_file("train.py", "train.py", options, cache)
    assert result == migrate_file("train.py", "train.py", options)
    assert result.needs_review  # type: ignore[union-attr]


def test_the_same_bytes_under_a_test_name_miss() -> None:
    """test_train.py that defines a test is a test module (skipped); the same
    bytes as train.py are a training script: a test name is part of the key."""
    both = TRAIN + "\n\ndef test_loss_falls():\n    assert True\n"
    put("train.py", both)
    put("test_train.py", both)
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    trained = migrate_file("train.py", "train.py", options, cache)
    tested = migrate_file("test_train.py", "test_train.py", options, cache)
    assert tested == migrate_file("test_train.py", "test_train.py", options)
    assert tested != trained
    assert migrate_file("train.py", "train.py", options, cache) == trained


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: b"",  # empty
        lambda data: data[:-3] + bytes([data[-3] ^ 1]) + data[-2:],  # one bit
        lambda data: data.replace(b"AM001", b"AM002"),  # changed, checksum kept
        lambda data: b"garbage\n" * 10,
    ],
)
def test_a_damaged_entry_is_ignored_and_rewritten(
    damage: object, tmp_path: Path
) -> None:
    put("train.py")
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    fresh = migrate_file("train.py", "train.py", options, cache)
    [entry] = entries(tmp_path / "cache")
    good = entry.read_bytes()
    entry.write_bytes(damage(good))  # type: ignore[operator]
    assert cache.get("train.py", Path("train.py").read_bytes()) is None
    assert migrate_file("train.py", "train.py", options, cache) == fresh
    assert entry.read_bytes() == good


def test_an_entry_for_other_bytes_is_not_trusted(tmp_path: Path) -> None:
    """A (theoretical) key collision or a copied entry: the stored hash of the
    source must match the bytes asked about."""
    put("a.py")
    put("b.py", NEEDS_REVIEW)
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    migrate_file("a.py", "a.py", options, cache)
    migrate_file("b.py", "b.py", options, cache)
    a_bytes, b_bytes = Path("a.py").read_bytes(), Path("b.py").read_bytes()
    cache._entry("a.py", a_bytes).write_bytes(
        cache._entry("b.py", b_bytes).read_bytes()
    )
    assert cache.get("a.py", a_bytes) is None


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path: Path) -> None:
    for n in range(5):
        put(f"t{n}.py", TRAIN + f"# {n}\n")
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    for n in range(5):
        migrate_file(f"t{n}.py", f"t{n}.py", options, cache)
    names = [p.name for p in entries(tmp_path / "cache")]
    assert len(names) == 5 and not [n for n in names if n.startswith(".tmp-")]


def test_an_unwritable_cache_only_costs_the_speed_up(tmp_path: Path) -> None:
    put("train.py")
    (tmp_path / "cache").write_text("a file where the folder should be")
    options = MigrateOptions()
    result = migrate_file(
        "train.py", "train.py", options, ResultCache.for_options(options)
    )
    assert result == migrate_file("train.py", "train.py", options)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["--check", "-q", "--output-format", "json", *argv])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_cli_rerun_gives_the_same_report_from_the_cache(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put("pkg/train.py")
    put("pkg/review.py", NEEDS_REVIEW)
    put("pkg/bad.py", SYNTAX_ERROR)
    put("pkg/lib.py", "import os\n")
    first = _json(capsys, "-j", "1", "pkg")
    assert len(entries(tmp_path / "cache")) == 4
    no_migration(monkeypatch)
    assert _json(capsys, "-j", "1", "pkg") == first
    # With -j, every file found in the cache: no worker is started at all.
    assert _json(capsys, "-j", "2", "pkg") == first


def test_cli_no_cache_neither_reads_nor_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put("train.py")
    _json(capsys, "--no-cache", "train.py")
    assert not (tmp_path / "cache").exists()
    first = _json(capsys, "train.py")
    assert entries(tmp_path / "cache")
    calls = []
    real = batch._migrate

    def counted(*args: object) -> object:
        calls.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(batch, "_migrate", counted)
    assert _json(capsys, "--no-cache", "train.py") == first
    assert len(calls) == 1


def test_batch_starts_no_workers_when_every_file_is_cached() -> None:
    for n in range(3):
        put(f"t{n}.py", TRAIN + f"# {n}\n")
    paths = [f"t{n}.py" for n in range(3)]
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    expected = [migrate_file(p, p, options, cache) for p in paths]
    run = Batch(paths, options, jobs=2, cache=cache)
    run.start()
    assert run._pool is None and not run.parallel
    assert [outcome for _, outcome in run.results()] == expected


def test_a_task_of_its_own_is_never_answered_from_the_cache() -> None:
    put("train.py")
    options = MigrateOptions()
    cache = ResultCache.for_options(options)
    migrate_file("train.py", "train.py", options, cache)

    def own(path: str, location: str, options: MigrateOptions) -> Failure:
        return Failure(path, 1, 1, "own task")

    run = Batch(["train.py"], options, jobs=1, task=own, cache=cache)
    assert [o for _, o in run.results()] == [Failure("train.py", 1, 1, "own task")]
    assert os.path.exists("train.py")


HELPER_MODULE = """def evaluate(model, loader):
    total = 0.0
    for x, y in loader:
        total += float((model(x) - y).pow(2).sum())
    return total
"""


def test_a_rerun_from_the_cache_imports_neither_libcst_nor_the_rules(
    tmp_path: Path,
) -> None:
    """A re-run over unchanged files costs about as much as reading them: the
    engine (libcst, every rule) is imported at the first file that misses, so a
    run that the cache answers whole never pays for it."""
    import subprocess
    import sys

    put("proj/train.py", "from helpers import evaluate\n" + TRAIN)
    put("proj/helpers.py", HELPER_MODULE)
    put("proj/bad.py", SYNTAX_ERROR)
    probe = (
        "import sys\n"
        "from accel_migrate.cli import main\n"
        "code = main(['--check', '-q', '-j', '1', 'proj'])\n"
        "heavy = sorted(m for m in ('libcst', 'torch', 'accel_migrate.codemod.engine',"
        " 'accel_migrate.codemod.rules') if m in sys.modules)\n"
        "print(code, ','.join(heavy) or '-')\n"
    )

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
        )
        return done.stdout.split()

    first = run()
    assert first[1] != "-", "the first run migrates: the engine is imported"
    again = run()
    assert again == [first[0], "-"], again
