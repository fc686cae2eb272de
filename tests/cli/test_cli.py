"""The CLI contract (DESIGN.md, "CLI contract"), through ``main(argv)`` and a process.

Every test works on copies in ``tmp_path``, which is also the working folder, so
the paths in diffs and reports are short and relative.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE

TRAIN = """\
import torch

model = torch.nn.Linear(2, 2).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 2)).mean()
    loss.backward()
    opt.step()
    print(loss.item())
"""

#: The lines of TRAIN that some rule rewrites (1-based).
TRAIN_REWRITTEN = {3, 4, 8, 10}

SYNTAX_ERROR = "import torch\nx = (1,\ny = 2\n"


pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_",))


def put(path: Path | str, content: str | bytes = TRAIN) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def run_stdin(
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
    data: bytes,
    *argv: str,
) -> tuple[int, bytes, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code = main(["-", *argv])
    out, err = capsysbinary.readouterr()
    return code, out, err.decode()


# --- preview (the default) -------------------------------------------------------


def test_preview_prints_diff_and_findings_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = put("train.py")
    before = listing(tmp_path)
    code, out, err = run(capsys, "train.py")
    assert code == EXIT_OK
    assert out.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert "-    loss.backward()\n" in out
    assert "+    accel.backward(loss)\n" in out
    assert "\x1b[" not in out  # not a terminal: no colour
    # the findings table, on stderr only: location (path:line:col), rule, status
    assert re.search(r"train\.py:8:5\s.*AM007\s.*fixed", err)
    assert re.search(r"train\.py:4:\d+\s.*AM005\s.*fixed", err)
    assert "AM007" not in out
    assert err.rstrip().endswith("1 file would be migrated.")
    assert script.read_text() == TRAIN
    assert listing(tmp_path) == before


def test_preview_of_an_unchanged_file_prints_no_diff(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("util.py", "def add(a, b):\n    return a + b\n")
    code, out, err = run(capsys, "util.py")
    assert code == EXIT_OK
    assert out == ""
    assert "0 files would be migrated" in err


def test_quiet_leaves_out_the_findings_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, out, err = run(capsys, "-q", "train.py")
    assert code == EXIT_OK
    assert "+++ b/train.py" in out
    assert "AM007" not in err
    assert err.strip() == "1 file would be migrated."


def test_color_always_colours_the_preview_and_the_diff_never_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    for argv in (["--color", "always"], ["--color", "always", "--diff"]):
        code, out, _ = run(capsys, *argv, "train.py")
        assert code == EXIT_OK
        assert "\x1b[32m+    accel.backward(loss)" in out
    for argv in (["--color", "never"], ["--no-color"], []):  # [] : not a terminal
        code, out, _ = run(capsys, *argv, "--diff", "train.py")
        assert code == EXIT_OK
        assert "\x1b[" not in out
        assert out.startswith("--- a/train.py\n")


def test_select_and_ignore_choose_the_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, out, err = run(capsys, "--select", "am007", "train.py")
    assert code == EXIT_OK
    assert "+    accel.backward(loss)\n" in out
    assert "prepare_model" not in out
    assert "AM007" in err and "AM004" not in err
    code, out, err = run(capsys, "--ignore", "AM007,AM008", "train.py")
    assert code == EXIT_OK
    assert "accel.backward" not in out and "accel.print" not in out
    assert "prepare_model" in out
    assert "AM007" not in err


# --- --diff: a patch git accepts ---------------------------------------------------

DIFF_CASES = {
    "lf": TRAIN.encode(),
    "crlf": TRAIN.replace("\n", "\r\n").encode(),
    "no-final-newline": TRAIN.rstrip("\n").encode(),
    # str.splitlines() would split at the form feed; git does not.
    "form-feed": TRAIN.replace("for step", "# section\x0cbreak\nfor step").encode(),
}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("case", sorted(DIFF_CASES))
def test_plain_diff_is_a_patch_git_apply_accepts(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = DIFF_CASES[case]
    script = put("src/train.py", original)
    git = ["git", "-c", "core.autocrlf=false"]
    subprocess.run([*git, "init", "-q", "."], check=True)
    code, patch, _ = run(capsys, "--diff", "src/train.py")
    assert code == EXIT_OK
    assert patch.startswith("--- a/src/train.py\n+++ b/src/train.py\n")
    assert script.read_bytes() == original  # --diff alone writes nothing
    Path("change.patch").write_bytes(patch.encode())
    check = subprocess.run(
        [*git, "apply", "--check", "change.patch"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    # Applying the patch gives exactly what --write writes.
    subprocess.run([*git, "apply", "change.patch"], check=True)
    patched = script.read_bytes()
    assert patched != original
    script.write_bytes(original)
    assert main(["--write", "src/train.py"]) == EXIT_OK
    assert script.read_bytes() == patched


def test_diff_with_check_prints_the_diff_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = put("train.py")
    code, out, err = run(capsys, "--check", "--diff", "train.py")
    assert code == EXIT_WOULD_CHANGE
    assert out.startswith("--- a/train.py\n")
    assert "1 file would be migrated" in err
    assert script.read_text() == TRAIN


# --- --write -------------------------------------------------------------------


def test_write_rewrites_in_place_and_a_second_run_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = put("train.py")
    before = listing(tmp_path)
    code, out, err = run(capsys, "--write", "train.py")
    assert code == EXIT_OK
    assert out == ""  # --write shows no diff
    assert re.search(r"train\.py:8:5\s.*AM007", err)
    assert "1 file migrated." in err
    migrated = script.read_bytes()
    assert b"accel.backward(loss)" in migrated
    assert b"loss.backward()" not in migrated
    ast.parse(migrated)
    code, out, err = run(capsys, "--write", "train.py")
    assert code == EXIT_OK
    assert "0 files migrated, 1 unchanged" in err
    assert script.read_bytes() == migrated
    assert listing(tmp_path) == before  # no temporary file left behind


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600])
def test_write_keeps_the_file_mode(
    mode: int, capsys: pytest.CaptureFixture[str]
) -> None:
    script = put("train.py")
    script.chmod(mode)
    code, _, _ = run(capsys, "--write", "train.py")
    assert code == EXIT_OK
    assert b"accel.backward" in script.read_bytes()
    assert stat.S_IMODE(script.stat().st_mode) == mode


def test_write_keeps_crlf_line_endings(capsys: pytest.CaptureFixture[str]) -> None:
    script = put("train.py", TRAIN.replace("\n", "\r\n"))
    code, _, _ = run(capsys, "--write", "train.py")
    assert code == EXIT_OK
    after = script.read_bytes()
    assert b"accel.backward(loss)\r\n" in after
    assert after.count(b"\n") == after.count(b"\r\n")
    assert after.count(b"\r") == after.count(b"\r\n")


def test_write_keeps_an_encoding_cookie_file_byte_exact_outside_the_rewrites(
    capsys: pytest.CaptureFixture[str],
) -> None:
    header = b"# -*- coding: latin-1 -*-\n# entra\xeenement du mod\xe8le\n"
    original = header + TRAIN.encode() + b"# fin: caf\xe9\n"
    script = put("train.py", original)
    code, out, err = run(capsys, "--write", "train.py")
    assert code == EXIT_OK, err
    assert out == ""
    after = script.read_bytes()
    assert after.startswith(header)
    assert after.endswith(b"# fin: caf\xe9\n")
    assert b"\xc3" not in after  # not re-encoded as UTF-8
    assert after.decode("latin-1").count("accel.") >= 4
    # Every original line that no rule rewrites is still there, byte for byte, in order.
    offset = header.count(b"\n")
    kept = [
        line
        for number, line in enumerate(original.splitlines(keepends=True), 1)
        if number - offset not in TRAIN_REWRITTEN
    ]
    rest = iter(after.splitlines(keepends=True))
    assert all(any(line == other for other in rest) for line in kept)


def test_write_a_folder_writes_every_file_and_leaves_no_temporary_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("pkg/a.py", "pkg/b.py", "pkg/sub/c.py"):
        put(name)
    put("pkg/notes.py", "x = 1\n")
    before = listing(tmp_path)
    code, _, err = run(capsys, "--write", "pkg")
    assert code == EXIT_OK
    assert "3 files migrated, 1 skipped (not a training entry point)." in err
    for name in ("pkg/a.py", "pkg/b.py", "pkg/sub/c.py"):
        assert b"accel.backward" in Path(name).read_bytes()
    assert listing(tmp_path) == before


# --- --check ---------------------------------------------------------------------


def test_check_exits_1_when_a_file_would_change_and_leaves_it_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = put("train.py")
    mtime = script.stat().st_mtime_ns
    code, out, err = run(capsys, "--check", "train.py")
    assert code == EXIT_WOULD_CHANGE
    assert out == ""
    assert "1 file would be migrated" in err
    assert script.read_text() == TRAIN
    assert script.stat().st_mtime_ns == mtime


def test_check_exits_0_on_an_already_migrated_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = put("train.py")
    assert main(["--write", "train.py"]) == EXIT_OK
    migrated = script.read_bytes()
    capsys.readouterr()
    code, out, err = run(capsys, "--check", "train.py")
    assert code == EXIT_OK
    assert out == ""
    assert "0 files would be migrated, 1 unchanged" in err
    assert script.read_bytes() == migrated


def test_write_and_check_together_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = put("train.py")
    code, out, err = run(capsys, "--write", "--check", "train.py")
    assert code == EXIT_USAGE
    assert "--write and --check" in err
    assert out == ""
    assert script.read_text() == TRAIN


# --- stdin -----------------------------------------------------------------------


def test_stdin_writes_the_migrated_code_to_stdout_and_findings_to_stderr(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_stdin(capsysbinary, monkeypatch, TRAIN.encode())
    assert code == EXIT_OK
    assert b"accel.backward(loss)" in out
    assert b"AM007" not in out
    ast.parse(out)
    assert "<stdin>:8:5: AM007 [fixed]" in err
    # the same as migrating a file
    put("train.py")
    assert main(["--write", "train.py"]) == EXIT_OK
    assert Path("train.py").read_bytes() == out


def test_stdin_check_exits_1_and_writes_nothing(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_stdin(capsysbinary, monkeypatch, TRAIN.encode(), "--check")
    assert code == EXIT_WOULD_CHANGE
    assert out == b""


def test_stdin_check_exits_0_on_migrated_code(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, migrated, _ = run_stdin(capsysbinary, monkeypatch, TRAIN.encode())
    code, out, _ = run_stdin(capsysbinary, monkeypatch, migrated, "--check")
    assert code == EXIT_OK
    assert out == b""


def test_stdin_with_diff_prints_a_diff(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_stdin(capsysbinary, monkeypatch, TRAIN.encode(), "--diff")
    assert code == EXIT_OK
    assert out.startswith(b"--- a/<stdin>\n+++ b/<stdin>\n")
    assert b"+    accel.backward(loss)\n" in out


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (SYNTAX_ERROR.encode(), "cannot parse"),
        (b"import torch\n# caf\xe9\n", "cannot decode"),
        (b"# caf\xe9\nimport torch\n", "cannot decode"),  # where a cookie could be
        (b"# -*- coding: nope -*-\nimport torch\n", "cannot decode"),
    ],
    ids=["syntax-error", "latin1-line-2", "latin1-line-1", "unknown-cookie"],
)
def test_stdin_that_cannot_be_migrated_is_echoed_and_exits_123(
    data: bytes,
    message: str,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run_stdin(capsysbinary, monkeypatch, data)
    assert code == EXIT_FAILED
    assert out == data  # a filter never swallows its input
    assert re.search(rf"^error: <stdin>:\d+:\d+: {message}", err, re.M)
    assert "Traceback" not in err


def test_stdin_cannot_be_combined_with_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, _, err = run(capsys, "-", "train.py")
    assert code == EXIT_USAGE
    assert "stdin" in err


def test_stdin_through_a_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "accel_migrate", "-"],
        input=TRAIN.encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    assert b"accel.backward(loss)" in proc.stdout
    assert b"<stdin>:8:5: AM007" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "accel_migrate", "-", "--check"],
        input=TRAIN.encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == EXIT_WOULD_CHANGE
    assert proc.stdout == b""


# --- exit codes and bad files ----------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["--bogus", "train.py"], ["train.py", "--bogus"], [], ["--write"]]
)
def test_usage_errors_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    script = put("train.py")
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert "Usage:" in err or "Error:" in err
    assert script.read_text() == TRAIN


def test_a_syntax_error_fails_that_file_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a long name and libcst's long message: the error must still be one line
    bad = put(f"{'very_' * 12}broken.py", SYNTAX_ERROR)
    good = put("train.py")
    code, out, err = run(capsys, "--write", bad.name, "train.py")
    assert code == EXIT_FAILED
    assert out == ""
    lines = err.splitlines()
    assert lines[-1] == "1 file migrated, 1 failed."
    assert re.fullmatch(
        rf"error: {re.escape(bad.name)}:\d+:\d+: cannot parse: .*\S", lines[-2]
    )
    assert bad.read_text() == SYNTAX_ERROR
    assert b"accel.backward" in good.read_bytes()
    assert listing(tmp_path) == sorted([bad.name, "train.py"])


def test_preview_goes_on_after_a_bad_file(capsys: pytest.CaptureFixture[str]) -> None:
    put("a_bad.py", SYNTAX_ERROR)
    put("b_train.py")
    code, out, err = run(capsys, "a_bad.py", "b_train.py")
    assert code == EXIT_FAILED
    assert "+++ b/b_train.py" in out
    assert "a_bad.py:" in err and "cannot parse" in err


def test_a_missing_path_is_named_and_exits_123(
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = put("train.py")
    code, out, err = run(capsys, "--write", "nothere.py", "train.py")
    assert code == EXIT_FAILED
    assert out == ""
    assert re.search(r"^error: nothere\.py:1:1: no such file$", err, re.M)
    assert "1 file migrated, 1 failed." in err
    assert b"accel.backward" in good.read_bytes()


@pytest.mark.parametrize(
    ("content", "place"),
    [
        (b"# caf\xe9\n" + TRAIN.encode(), "1:6"),  # before where a cookie could be
        (TRAIN.encode() + b"# caf\xe9\n", "11:6"),
    ],
    ids=["first-line", "last-line"],
)
def test_non_utf8_without_a_coding_cookie_exits_123_with_a_clear_message(
    content: bytes, place: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = put("latin.py", content)
    good = put("train.py")
    code, _, err = run(capsys, "--write", "latin.py", "train.py")
    assert code == EXIT_FAILED
    assert re.search(
        rf"^error: latin\.py:{place}: cannot decode: byte 0xe9 is not valid utf-8.*coding",
        err,
        re.M,
    )
    assert "internal error" not in err
    assert bad.read_bytes() == content
    assert b"accel.backward" in good.read_bytes()


def test_a_read_only_file_is_not_written_and_the_others_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = put("locked.py")
    locked.chmod(0o444)
    good = put("train.py")
    code, _, err = run(capsys, "--write", "locked.py", "train.py")
    assert code == EXIT_FAILED
    assert re.search(r"^error: locked\.py:1:1: cannot write: .*read-only", err, re.M)
    assert locked.read_text() == TRAIN
    assert stat.S_IMODE(locked.stat().st_mode) == 0o444
    assert b"accel.backward" in good.read_bytes()
    assert listing(tmp_path) == ["locked.py", "train.py"]


# --- folders ---------------------------------------------------------------------


def test_folders_are_walked_in_sorted_order_skipping_venvs_and_hidden_folders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in (
        "pkg/z.py",
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/sub/deeper/c.py",
        "pkg/.venv/lib/v.py",
        "pkg/venv/v.py",
        "pkg/.hidden/h.py",
        "pkg/__pycache__/p.py",
    ):
        put(name)
    put("pkg/train.txt")  # not a Python file
    expected = ["pkg/a.py", "pkg/sub/b.py", "pkg/sub/deeper/c.py", "pkg/z.py"]
    code, out, err = run(capsys, "pkg")
    assert code == EXIT_OK
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == expected
    assert "4 files would be migrated" in err
    # the findings table follows the same order
    located = re.findall(r"(pkg/\S+\.py):\d+:\d+", err)
    assert list(dict.fromkeys(located)) == expected
    # a file named twice (directly and through its folder) is migrated once
    code, out, _ = run(capsys, "pkg/a.py", "pkg", "./pkg/z.py")
    assert code == EXIT_OK
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == expected


def test_a_file_in_a_skipped_folder_named_directly_is_migrated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put(".venv/train.py")
    code, out, _ = run(capsys, ".venv/train.py")
    assert code == EXIT_OK
    assert "+++ b/.venv/train.py" in out


# --- rules -----------------------------------------------------------------------


def test_rules_lists_every_rule_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    from accel_migrate.codemod.rule import registered_rules

    # in code order, not the order they run in (AM036 runs before AM010)
    codes = sorted(rule.code for rule in registered_rules())
    assert codes[:2] == ["AM001", "AM002"]
    code, out, _ = run(capsys, "rules")
    assert code == EXIT_OK
    # The rules, then the codes of findings that come from no rule.
    assert re.findall(r"\bAM\d{3}\b", out) == [
        *codes,
        "AM100",
        "AM101",
        "AM102",
        "AM103",
    ]


@pytest.mark.parametrize("name", ["AM004", "am004", "prepare-model"])
def test_rules_code_prints_that_rules_doc(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "rules", name)
    assert code == EXIT_OK
    assert "AM004" in out and "prepare_model" in out
    assert "AM005" not in out


def test_rules_unknown_code_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "rules", "NOPE")
    assert code == EXIT_USAGE
    assert "NOPE" in err
    assert out == ""


# --- help, version, import cost ---------------------------------------------------


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == EXIT_OK
    assert "--write" in out and "launch" in out and "rules" in out
    code, out, _ = run(capsys, "--version")
    assert code == EXIT_OK
    assert re.search(r"accel-migrate, version \d+\.\d+", out)


def test_help_through_a_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "accel_migrate", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "Usage: accel-migrate" in proc.stdout
    assert "launch" in proc.stdout


def test_the_cli_module_and_help_import_neither_libcst_rich_nor_torch(
    tmp_path: Path,
) -> None:
    code = (
        "import sys\n"
        "import accel_migrate.cli.app\n"
        "heavy = ('libcst', 'rich', 'torch')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from accel_migrate.cli import main\n"
        "assert main(['--help']) == 0\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "[]"
    assert proc.stdout.splitlines()[-1] == "[]"


# --- launch: argument errors, nothing started -------------------------------------


@pytest.fixture
def no_torchrun(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Stands in for torchrun: records calls instead of starting processes."""
    calls: list[list[str]] = []
    fake = types.ModuleType("torch.distributed.run")
    fake.main = calls.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed.run", fake)
    return calls


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["launch"], "Missing argument 'SCRIPT'"),
        (["launch", "nothere.py"], "nothere.py: no such script"),
        (["launch", "--strategy", "single", "--nproc", "2", "job.py"], "single"),
        (["launch", "--nproc", "0", "job.py"], "must be at least 1"),
        (["launch", "--nproc", "two", "job.py"], "not a number"),
        (["launch", "--strategy", "ddpp", "job.py"], "'ddpp' is not one of"),
        # The reason, as from pyproject.toml (was click's list of choices alone).
        (["launch", "--strategy", "tpu", "job.py"], "TPU/XLA is not supported"),
        (["verify", "--strategy", "XLA", "job.py"], "TPU/XLA is not supported"),
        (["launch", "--nnodes", "2", "job.py"], "--rdzv-endpoint"),
    ],
)
def test_launch_argument_errors_exit_2_without_starting_anything(
    argv: list[str],
    message: str,
    no_torchrun: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("job.py", "print('started')\n")
    environment = dict(os.environ)
    code, out, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert message in err
    assert "started" not in out
    assert "Traceback" not in err
    assert no_torchrun == []
    assert dict(os.environ) == environment


def test_launch_strategy_single_with_two_processes_names_the_conflict(
    no_torchrun: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    put("job.py", "print('started')\n")
    code, _, err = run(
        capsys, "launch", "--strategy", "single", "--nproc", "2", "job.py"
    )
    assert code == EXIT_USAGE
    assert err.startswith("error: strategy 'single' (from --strategy)")
    assert "--nproc 2" in err
    assert no_torchrun == []
