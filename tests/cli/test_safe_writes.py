"""Safe writes: atomic (temporary file in the same folder, then a rename), keeping
the mode, the encoding cookie, a BOM and CRLF line endings; and a batch that is
interrupted or killed leaves every file either original or fully migrated."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accel_migrate.cli import files, main
from accel_migrate.cli.app import EXIT_OK
from accel_migrate.codemod import migrate_source

from .test_cli import TRAIN, listing, put

pytestmark = pytest.mark.in_tmp


def test_write_goes_through_a_temporary_file_in_the_same_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = put("deep/folder/train.py")
    renames: list[tuple[str, str]] = []
    real = os.replace

    def recording(src: str, dst: str) -> None:
        renames.append((src, dst))
        real(src, dst)

    monkeypatch.setattr(files.os, "replace", recording)
    # --no-cache: the results cache writes its entries through os.replace too
    assert main(["--write", "-q", "--no-cache", "deep/folder/train.py"]) == EXIT_OK
    [(src, dst)] = renames
    assert os.path.dirname(src) == os.path.dirname(dst) == str(script.parent.resolve())
    assert dst == str(script.resolve())
    assert b"accel.backward" in script.read_bytes()


def test_write_keeps_bom_crlf_cookie_and_mode_together() -> None:
    bom = b"\xef\xbb\xbf"
    source = bom + b"# -*- coding: utf-8 -*-\r\n" + TRAIN.replace("\n", "\r\n").encode()
    script = put("train.py", source)
    script.chmod(0o751)
    assert main(["--write", "-q", "train.py"]) == EXIT_OK
    after = script.read_bytes()
    assert after.startswith(bom + b"# -*- coding: utf-8 -*-\r\n")
    assert after.count(bom) == 1
    assert after.count(b"\n") == after.count(b"\r\n")
    assert b"accel.backward(loss)\r\n" in after
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert after == migrate_source(source, "train.py").output


def test_write_keeps_a_bom(capsys: pytest.CaptureFixture[str]) -> None:
    source = b"\xef\xbb\xbf" + TRAIN.encode()
    script = put("train.py", source)
    assert main(["--write", "-q", "train.py"]) == EXIT_OK
    after = script.read_bytes()
    # (the runtime import goes first, where isort puts it: before `import torch`)
    assert after.startswith(b"\xef\xbb\xbfimport accel_migrate.runtime as accel\n")
    assert after.count(b"\xef\xbb\xbf") == 1
    assert b"accel.backward(loss)" in after
    # and a second run changes nothing
    assert main(["--check", "-q", "train.py"]) == EXIT_OK


# --- interrupting and killing a batch --------------------------------------------------

FILES = 40


def _start_batch(tmp_path: Path) -> tuple[subprocess.Popen[bytes], bytes]:
    for n in range(FILES):
        put(f"pkg/m{n:03d}/train.py")
    expected = migrate_source(TRAIN.encode(), "train.py").output
    assert isinstance(expected, bytes) and expected != TRAIN.encode()
    proc = subprocess.Popen(
        # --no-cache: the 40 files are identical, and from the cache every file
        # after the first is done before the signal can land.
        [
            sys.executable,
            "-m",
            "accel_migrate",
            "--write",
            "-q",
            "--no-cache",
            "-j",
            "2",
            "pkg",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A shell without job control starts background jobs with SIGINT ignored,
        # and children inherit that (CI run as `.ci/run &` did): Ctrl-C must be
        # able to reach this batch, as it does from a terminal.
        preexec_fn=_default_sigint,
    )
    return proc, expected


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _states(expected: bytes) -> dict[str, int]:
    states = {"original": 0, "migrated": 0}
    for path in Path("pkg").rglob("*.py"):
        data = path.read_bytes()
        if data == TRAIN.encode():
            states["original"] += 1
        elif data == expected:
            states["migrated"] += 1
        else:  # pragma: no cover - the failure this test is here to catch
            raise AssertionError(f"{path} is neither original nor migrated")
    return states


def _wait_for_writes(proc: subprocess.Popen[bytes], expected: bytes) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if _states(expected)["migrated"] >= 3:
            return
        time.sleep(0.05)
    pytest.fail("the batch wrote nothing in time, or ended before it could be stopped")


@pytest.mark.parametrize(
    ("signum", "exit_code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -signal.SIGKILL)],
    ids=["SIGINT", "SIGTERM", "SIGKILL"],
)
def test_a_stopped_batch_leaves_every_file_original_or_fully_migrated(
    signum: int, exit_code: int, tmp_path: Path
) -> None:
    proc, expected = _start_batch(tmp_path)
    try:
        _wait_for_writes(proc, expected)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exit_code, err.decode()
    states = _states(expected)
    assert states["migrated"] >= 3
    assert states["original"] >= 1, "the batch ended before the signal"
    assert sum(states.values()) == FILES
    leftovers = [p.name for p in Path("pkg").rglob("*") if p.suffix == ".tmp"]
    if signum != signal.SIGKILL:  # nothing can clean up after SIGKILL
        assert leftovers == []
        assert b"interrupted; every file is either unchanged or fully migrated" in err
        assert b"Traceback" not in err
    # the next run finishes the job
    code = subprocess.run(
        [sys.executable, "-m", "accel_migrate", "--write", "-q", "-j", "2", "pkg"],
        cwd=tmp_path,
        capture_output=True,
        timeout=600,
    ).returncode
    assert code == EXIT_OK
    assert _states(expected) == {"original": 0, "migrated": FILES}
    for leftover in Path("pkg").rglob("*.tmp"):
        leftover.unlink()
    assert all(
        name == "train.py" for name in {p.name for p in Path("pkg").rglob("*.py")}
    )
    assert len(listing(Path("pkg"))) == 2 * FILES
