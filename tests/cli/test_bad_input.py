"""Bad input: each bad file gets one clear line (``error: path:line:col: ...``), the
run exits 123, the file is not written, and the rest of the batch is still done.

Valid Python that is merely unusual (an empty file, a 5 MB file) is not an error:
it is migrated or skipped like any other file, as black would format it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from accel_migrate.cli import files
from accel_migrate.cli.app import EXIT_FAILED, EXIT_OK, EXIT_WOULD_CHANGE

from .test_cli import TRAIN, listing, put, run

pytestmark = pytest.mark.in_tmp


def deep(depth: int) -> str:
    """A training script with an expression nested ``depth`` deep."""
    return TRAIN + "x = " + "-" * depth + "1\n"


BAD = {
    "syntax_error.py": (
        b"import torch\nx = (1,\ny = 2\n",
        r"2:5: cannot parse: '\(' was never closed$",
    ),
    "python2.py": (
        b"import torch\nprint 'loss', 1\n",
        r"2:1: cannot parse: Missing parentheses in call to 'print'.*Python 2",
    ),
    "python2_except.py": (
        b"import torch\ntry:\n    pass\nexcept ValueError, e:\n    pass\n",
        r"4:8: cannot parse: multiple exception types must be parenthesized.*Python 2",
    ),
    "latin1.py": (
        TRAIN.encode() + b"# caf\xe9\n",
        r"11:6: cannot decode: byte 0xe9 is not valid utf-8",
    ),
    "binary.py": (
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00" + bytes(range(256)),
        r"1:8: cannot parse: a binary file \(it contains NUL bytes\)$",
    ),
    "nul_bytes.py": (
        b"import torch\nx = 1\x00\n",
        r"2:6: cannot parse: a binary file \(it contains NUL bytes\)$",
    ),
    "nested_parens.py": (
        ("import torch\nx = " + "(" * 1000 + "1" + ")" * 1000 + "\n").encode(),
        r"2:\d+: cannot parse: too many nested parentheses",
    ),
    "nested_deep.py": (
        deep(1000).encode(),
        r"1:1: cannot (parse|migrate): the code is nested too deeply",
    ),
}


def assert_one_line_error(err: str, name: str, pattern: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith(f"error: {name}:")]
    assert len(lines) == 1, err
    assert re.match(rf"error: {re.escape(name)}:{pattern}", lines[0]), lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_bad_file_is_one_line_and_the_batch_goes_on(
    name: str, jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    content, pattern = BAD[name]
    bad = put(f"pkg/{name}", content)
    good = put("pkg/train.py")
    code, _out, err = run(capsys, "--write", "--jobs", jobs, "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(err, f"pkg/{name}", pattern)
    assert bad.read_bytes() == content
    assert b"accel.backward" in good.read_bytes()
    assert err.rstrip().endswith("1 file migrated, 1 failed.")
    assert listing(Path("pkg")) == sorted([name, "train.py"])


def test_an_empty_file_is_skipped_not_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    empty = put("pkg/empty.py", b"")
    put("pkg/train.py")
    code, _, err = run(capsys, "--write", "pkg")
    assert code == EXIT_OK
    assert "1 file migrated, 1 skipped (not a training entry point)." in err
    assert empty.read_bytes() == b""


def test_a_5_mb_file_is_handled_like_any_other(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = "".join(f"    ({i}, {i * 0.5}, 'row {i}'),\n" for i in range(160_000))
    table = f"TABLE = [\n{rows}]\n".encode()
    assert len(table) > 5_000_000
    big = put("pkg/big_table.py", table)
    put("pkg/train.py")
    code, _, err = run(capsys, "--write", "pkg")
    assert code == EXIT_OK
    assert "1 file migrated, 1 skipped (not a training entry point)." in err
    assert big.read_bytes() == table


def test_a_valid_but_deep_expression_in_a_library_file_is_skipped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not a training entry point: decided without libcst, so its depth is no problem."""
    put("pkg/constants.py", "x = " + "-" * 1000 + "1\n")
    code, _, err = run(capsys, "--check", "pkg")
    assert code == EXIT_OK
    assert "skipped (not a training entry point)" in err


def test_a_file_deleted_before_it_is_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = put("pkg/a_gone.py")
    good = put("pkg/b_train.py")
    real = files.read_source

    def deleting(path: str) -> bytes:
        if path.endswith("a_gone.py"):
            os.unlink(path)
        return real(path)

    monkeypatch.setattr("accel_migrate.cli.batch.read_source", deleting)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(err, "pkg/a_gone.py", r"1:1: no such file$")
    assert not gone.exists()
    assert b"accel.backward" in good.read_bytes()


def test_a_file_deleted_before_it_is_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    put("pkg/a_gone.py")
    good = put("pkg/b_train.py")
    real = files.write_atomic

    def deleting(path: str, data: bytes, *, expected: bytes | None = None) -> None:
        if path.endswith("a_gone.py"):
            os.unlink(path)
        real(path, data, expected=expected)

    monkeypatch.setattr("accel_migrate.cli.migrate_command.write_atomic", deleting)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(
        err, "pkg/a_gone.py", r"1:1: cannot write: the file was deleted$"
    )
    assert not Path("pkg/a_gone.py").exists()
    assert b"accel.backward" in good.read_bytes()
    assert listing(Path("pkg")) == ["b_train.py"]


def test_a_file_changed_while_it_was_migrated_is_not_overwritten(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = put("pkg/a_edited.py")
    real = files.write_atomic

    def editing(path: str, data: bytes, *, expected: bytes | None = None) -> None:
        if path.endswith("a_edited.py"):
            Path(path).write_text(TRAIN + "# the user's edit\n")
        real(path, data, expected=expected)

    monkeypatch.setattr("accel_migrate.cli.migrate_command.write_atomic", editing)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(err, "pkg/a_edited.py", r"1:1: changed while it was being")
    assert edited.read_text().endswith("# the user's edit\n")


def test_an_unreadable_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = put("pkg/locked.py")
    good = put("pkg/train.py")
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads anything: make the read fail as it would
        real_open = open

        def denying(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            if str(path).endswith("locked.py"):
                raise PermissionError(13, "Permission denied")
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(files, "open", denying, raising=False)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    locked.chmod(0o644)
    assert code == EXIT_FAILED
    assert_one_line_error(err, "pkg/locked.py", r"1:1: cannot read: Permission denied$")
    assert locked.read_text() == TRAIN
    assert b"accel.backward" in good.read_bytes()


def test_a_read_only_file_with_write(capsys: pytest.CaptureFixture[str]) -> None:
    locked = put("pkg/locked.py")
    locked.chmod(0o444)
    good = put("pkg/train.py")
    code, _, err = run(capsys, "--write", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(
        err, "pkg/locked.py", r"1:1: cannot write: file is read-only$"
    )
    assert locked.read_text() == TRAIN
    assert stat.S_IMODE(locked.stat().st_mode) == 0o444
    assert b"accel.backward" in good.read_bytes()
    # --check and the preview do not write, so read-only is no error there
    code, _, _ = run(capsys, "--check", "pkg/locked.py")
    assert code == EXIT_WOULD_CHANGE


@pytest.mark.parametrize("named", [False, True], ids=["walked", "named"])
def test_a_symlink_loop(named: bool, capsys: pytest.CaptureFixture[str]) -> None:
    good = put("pkg/train.py")
    os.symlink("loop_b.py", "pkg/loop_a.py")
    os.symlink("loop_a.py", "pkg/loop_b.py")
    argv = ["pkg/loop_a.py", "pkg/train.py"] if named else ["pkg"]
    code, _, err = run(capsys, "--write", *argv)
    assert code == EXIT_FAILED
    assert_one_line_error(
        err, "pkg/loop_a.py", r"1:1: cannot read: Too many levels of symbolic links$"
    )
    assert b"accel.backward" in good.read_bytes()


def test_a_fifo_named_py_is_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo("pipe.py")  # reading it would block forever
    put("train.py")
    code, _, err = run(capsys, "--check", "pipe.py", "train.py")
    assert code == EXIT_FAILED
    assert_one_line_error(err, "pipe.py", r"1:1: not a regular file$")


def test_output_that_does_not_parse_is_never_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    import accel_migrate.cli.batch as batch

    script = put("pkg/train.py")
    real = batch.migrate_source

    def broken(source, path, options):  # type: ignore[no-untyped-def]
        result = real(source, path, options)
        return replace(result, output=result.output + b"def (:\n")

    monkeypatch.setattr(batch, "migrate_source", broken)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(
        err, "pkg/train.py", r"\d+:1: internal error: the migrated code does not parse"
    )
    assert script.read_text() == TRAIN


def test_an_internal_error_is_one_line_and_the_batch_goes_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import accel_migrate.cli.batch as batch

    put("pkg/a_bad.py")
    good = put("pkg/b_train.py")
    real = batch.migrate_source

    def buggy(source, path, options):  # type: ignore[no-untyped-def]
        if path.endswith("a_bad.py"):
            raise KeyError("line one\nline two")
        return real(source, path, options)

    monkeypatch.setattr(batch, "migrate_source", buggy)
    code, _, err = run(capsys, "--write", "-j", "1", "pkg")
    assert code == EXIT_FAILED
    assert_one_line_error(err, "pkg/a_bad.py", r"1:1: internal error: KeyError: ")
    assert b"accel.backward" in good.read_bytes()
