"""The migrate command's ruff-like conventions (issue 15): rule codes that are
checked, ``--extend-select``, ``per-file-ignores``, ``--exit-zero``, per-rule
suppression with AM101, ``--stdin-filename``, the concise format, ``--color``,
one spelling of each path, command-like words, rule pages, SARIF help, and
messages that say what is true."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accel_migrate.cli.app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from tests.conftest import ROOT

from .test_cli import SYNTAX_ERROR, TRAIN, put, run, run_stdin

pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_", "NO_COLOR"))


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --- rule codes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, bad, near",
    [
        ("--select", "AM999", "AM009"),
        ("--ignore", "AM07", "AM007"),
        ("--extend-select", "AM0077", "AM007"),
    ],
)
def test_an_unknown_code_on_the_command_line_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, bad: str, near: str
) -> None:
    put("train.py")
    code, out, err = run(capsys, option, f"AM001,{bad.lower()}", "--check", "train.py")
    assert code == EXIT_USAGE
    assert out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: {option}: {bad} is not a rule code")
    assert f"(did you mean {near}?)" in line


def test_prefixes_and_the_non_rule_codes_are_known(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, _, err = run(
        capsys, "--select", "AM00", "--ignore", "AM100,AM101", "train.py"
    )
    assert code == EXIT_OK, err


@pytest.mark.parametrize(
    "table, where",
    [
        ('select = ["AM001", "AM0077"]', "select in"),
        ('ignore = ["AM999"]', "ignore in"),
        ('extend-select = ["XY1"]', "extend-select in"),
        (
            '[tool.accel-migrate.per-file-ignores]\n"a.py" = ["AM999"]',
            "per-file-ignores",
        ),
    ],
)
def test_an_unknown_code_in_the_configuration_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], table: str, where: str
) -> None:
    put("train.py")
    put("pyproject.toml", f"[tool.accel-migrate]\n{table}\n")
    code, _, err = run(capsys, "--check", "train.py")
    assert code == EXIT_USAGE
    line = one_error_line(err)
    assert where in line and "pyproject.toml" in line and "is not a rule code" in line


def test_extend_select_adds_to_the_configured_select(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    put("pyproject.toml", '[tool.accel-migrate]\nselect = ["AM001"]\n')
    _, out, _ = run(capsys, "--diff", "train.py")
    assert "accel.device()" in out and "accel.backward(loss)" not in out
    _, out, _ = run(capsys, "--diff", "--extend-select", "AM007", "train.py")
    assert "accel.device()" in out and "accel.backward(loss)" in out
    put(
        "pyproject.toml",
        '[tool.accel-migrate]\nselect = ["AM001"]\nextend-select = ["AM007"]\n',
    )
    _, out, _ = run(capsys, "--diff", "train.py")
    assert "accel.device()" in out and "accel.backward(loss)" in out


def test_per_file_ignores_leave_those_rules_out_for_matching_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("scripts/a.py")
    put("scripts/deep/b.py")
    put("train.py")
    put(
        "pyproject.toml",
        "[tool.accel-migrate.per-file-ignores]\n"
        '"scripts/*.py" = ["AM007"]\n'
        '"b.py" = ["AM008"]\n',
    )
    code, _, _ = run(capsys, "--write", "--no-cache", ".")
    assert code == EXIT_OK
    a = Path("scripts/a.py").read_text()
    b = Path("scripts/deep/b.py").read_text()
    train = Path("train.py").read_text()
    # "scripts/*.py" is anchored (it has a slash): b.py is not under it directly.
    assert "    loss.backward()\n" in a and "accel.print(" in a
    assert "accel.backward(loss)" in b and "accel.print(" not in b  # "b.py": any folder
    assert "accel.backward(loss)" in train and "accel.print(" in train


def test_per_file_ignores_with_the_cache_give_each_file_its_own_result(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCEL_MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    put("scripts/a.py")
    put("train.py")  # the same bytes
    put(
        "pyproject.toml",
        '[tool.accel-migrate.per-file-ignores]\n"scripts/" = ["AM007"]\n',
    )
    for _ in range(2):  # the second run reads the cache
        code, out, _ = run(capsys, "--diff", "train.py", "scripts/a.py")
        assert code == EXIT_OK
        a_diff = out[out.index("a/scripts/a.py") :]
        train_diff = out[: out.index("a/scripts/a.py")]
        assert "+    accel.backward(loss)" in train_diff
        assert "accel.backward" not in a_diff


def test_exit_zero_keeps_check_green_but_not_failures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, _, err = run(capsys, "--check", "--exit-zero", "train.py")
    assert code == EXIT_OK
    assert "1 file would be migrated" in err
    code, _, _ = run(capsys, "--check", "train.py")
    assert code == EXIT_WOULD_CHANGE
    put("bad.py", SYNTAX_ERROR)
    code, _, _ = run(capsys, "--check", "--exit-zero", "train.py", "bad.py")
    assert code == EXIT_FAILED


# --- suppression -----------------------------------------------------------------------


def test_skip_with_codes_skips_only_those_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put(
        "train.py",
        TRAIN.replace(
            "    print(loss.item())\n",
            "    print(loss.item())  # accel-migrate: skip[AM008]\n",
        ).replace(
            "    loss.backward()\n", "    loss.backward()  # accel-migrate: skip\n"
        ),
    )
    code, out, err = run(capsys, "--diff", "train.py")
    assert code == EXIT_OK
    assert "accel.print" not in out and "global_loss" not in out  # AM008 skipped
    assert "accel.backward" not in out  # bare skip: every rule
    assert "accel.device()" in out  # the rest is migrated
    # Text output lists where suppressions are, and for which rules.
    assert re.search(r"suppressed statements.*train\.py:8\s.*every rule", err, re.S)
    assert re.search(r"train\.py:10\s.*AM008", err, re.S)
    assert "AM101" not in err  # both suppress something


def test_unused_and_unknown_suppressions_are_reported_as_am101(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put(
        "train.py",
        TRAIN.replace(
            "import torch\n", "import torch\nimport os  # accel-migrate: skip\n"
        )
        .replace("    opt.step()\n", "    opt.step()  # accel-migrate: skip[AM07]\n")
        .replace(
            "    opt.zero_grad()\n",
            "    opt.zero_grad()\n    # accel-migrate: skip\n",
        )
        .replace(
            "    print(loss.item())\n",
            "    print(loss.item())  # accel-migrate: skip[AM007]\n",
        ),
    )
    code, _, err = run(capsys, "--output-format", "concise", "train.py")
    assert code == EXIT_OK
    am101 = [line for line in err.splitlines() if " AM101 " in line]
    assert any(
        line.startswith("train.py:2:14: AM101 [info] unused suppression: no rule")
        for line in am101
    ), am101
    assert any(
        line.startswith("train.py:8:") and "marks no statement" in line
        for line in am101
    ), am101
    assert any(
        "AM07 in `accel-migrate: skip[AM07]` is not a rule code (did you mean AM007?)"
        in line
        and "[needs-review]" in line
        for line in am101
    ), am101
    # AM008 rewrites that print; AM007 has nothing to do there.
    assert any(
        line.startswith("train.py:12:")
        and "AM007 would neither rewrite nor report" in line
        for line in am101
    ), am101
    assert len(am101) == 4, am101
    # AM101 is a code like the others: ignored, it is not looked for.
    code, _, err = run(
        capsys, "--output-format", "concise", "--ignore", "AM101", "train.py"
    )
    assert code == EXIT_OK and " AM101 " not in err


def test_a_suppression_of_a_rule_that_does_not_run_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put(
        "train.py",
        TRAIN.replace(
            "    loss.backward()\n",
            "    loss.backward()  # accel-migrate: skip[AM007]\n",
        ),
    )
    _, _, err = run(capsys, "--output-format", "concise", "train.py")
    assert " AM101 " not in err  # it suppresses AM007's rewrite
    _, _, err = run(
        capsys, "--output-format", "concise", "--ignore", "AM007", "train.py"
    )
    assert "train.py:8:" in err and "AM007 does not run on this file" in err


# --- stdin -----------------------------------------------------------------------------


def test_stdin_filename_names_the_findings_and_errors(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_stdin(
        capsysbinary, monkeypatch, TRAIN.encode(), "--stdin-filename", "./src/train.py"
    )
    assert code == EXIT_OK
    assert "src/train.py:8:5: AM007 [fixed]" in err and "<stdin>" not in err
    assert "./src" not in err
    code, out, err = run_stdin(
        capsysbinary, monkeypatch, SYNTAX_ERROR.encode(), "--stdin-filename", "bad.py"
    )
    assert code == EXIT_FAILED
    assert out == SYNTAX_ERROR.encode()
    assert err.startswith("error: bad.py:2:5: cannot parse")


def test_stdin_filename_chooses_the_config_and_per_file_ignores(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    put(
        "proj/pyproject.toml",
        '[tool.accel-migrate]\nalias = "rt"\n'
        '[tool.accel-migrate.per-file-ignores]\n"legacy/*.py" = ["AM007"]\n',
    )
    code, out, _ = run_stdin(
        capsysbinary,
        monkeypatch,
        TRAIN.encode(),
        "--stdin-filename",
        "proj/legacy/train.py",
    )
    assert code == EXIT_OK
    assert b"import accel_migrate.runtime as rt\n" in out  # proj's config
    assert b"    loss.backward()\n" in out  # its per-file-ignores
    _, out, _ = run_stdin(
        capsysbinary, monkeypatch, TRAIN.encode(), "--stdin-filename", "proj/train.py"
    )
    assert b"rt.backward(loss)" in out
    _, out, _ = run_stdin(capsysbinary, monkeypatch, TRAIN.encode())
    assert b"accel.backward(loss)" in out  # no name: the working folder's config


def test_quiet_silences_findings_in_stdin_mode(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_stdin(capsysbinary, monkeypatch, TRAIN.encode(), "-q")
    assert code == EXIT_OK
    assert b"accel.backward(loss)" in out
    assert err == ""
    code, _, err = run_stdin(
        capsysbinary, monkeypatch, SYNTAX_ERROR.encode(), "-q", "--check"
    )
    assert code == EXIT_FAILED and "cannot parse" in err  # errors still show


def test_stdin_filename_without_stdin_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, _, err = run(capsys, "--stdin-filename", "x.py", "train.py")
    assert code == EXIT_USAGE and "--stdin-filename" in err


# --- output ----------------------------------------------------------------------------


def test_concise_prints_one_line_per_finding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pkg/train.py")
    put("pkg/bad.py", SYNTAX_ERROR)
    code, out, err = run(capsys, "--output-format", "concise", "--check", "pkg")
    assert code == EXIT_FAILED
    assert out == ""
    lines = err.splitlines()
    pattern = re.compile(
        r"^pkg/train\.py:\d+:\d+: AM\d{3} \[(fixed|needs-review|info)\] \S"
    )
    findings = [line for line in lines if pattern.match(line)]
    assert len(findings) >= 6
    assert "pkg/train.py:8:5: AM007 [fixed] x.backward() -> accel.backward(x)" in lines
    assert "error: pkg/bad.py:2:5: cannot parse: '(' was never closed" in lines
    assert lines[-1].startswith("1 file would be migrated")
    assert not any("┃" in line or "│" in line for line in lines)  # no tables
    code, _, err = run(capsys, "--output-format", "concise", "-q", "--check", "pkg")
    assert [line for line in err.splitlines() if pattern.match(line)] == []


def test_diff_is_coloured_on_a_terminal(tmp_path: Path) -> None:
    """``--diff`` on a terminal is coloured (as ``git diff``); piped, it is plain."""
    put("train.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    leader, follower = pty.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "accel_migrate", "--diff", "-q", "train.py"],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env=env,
            timeout=120,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    assert process.returncode == EXIT_OK
    shown = b"".join(chunks).decode()
    assert "\x1b[32m+    accel.backward(loss)" in shown
    piped = subprocess.run(
        [sys.executable, "-m", "accel_migrate", "--diff", "-q", "train.py"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "\x1b[" not in piped.stdout and "+    accel.backward(loss)" in piped.stdout


def test_no_color_in_the_environment_turns_auto_colour_off(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    put("train.py")
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = run(capsys, "--color", "auto", "train.py")
    assert "\x1b[" not in out
    _, out, _ = run(capsys, "--color", "always", "train.py")
    assert "\x1b[" in out


def test_every_report_names_a_file_the_same_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pkg/train.py")
    put("pkg/bad.py", SYNTAX_ERROR)
    for given in ("./pkg", "pkg", "pkg/../pkg/"):
        code, out, err = run(capsys, given)
        assert code == EXIT_FAILED
        assert "--- a/pkg/train.py\n+++ b/pkg/train.py\n" in out
        assert "error: pkg/bad.py:2:5: cannot parse" in err
        assert re.search(r"│ pkg/train\.py:8:5\s", err)
        assert not re.search(r"(^|[\s/])\.\.?/", out + err, re.M)
        code, out, _ = run(capsys, "--output-format", "json", given)
        paths = [entry["path"] for entry in json.loads(out)["files"]]
        assert paths == ["pkg/bad.py", "pkg/train.py"]


# --- command-like words ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, near",
    [
        (["rule", "AM001"], "rules"),
        (["verfy", "train.py"], "verify"),
        (["envv"], "env"),
    ],
)
def test_a_command_like_word_that_is_no_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], near: str | None
) -> None:
    code, _out, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    line = one_error_line(err)
    assert line.startswith(f"error: no such command or file: {argv[0]!r}")
    if near:
        assert f"(did you mean `accel-migrate {near}`?)" in line
    assert "commands: " in line and "rules" in line


def test_a_folder_named_like_a_word_is_still_migrated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("rule/train.py")
    code, out, _ = run(capsys, "rule")
    assert code == EXIT_OK and "+++ b/rule/train.py" in out
    code, _, err = run(capsys, "missing.py")  # a file name: a file that failed
    assert code == EXIT_FAILED and "missing.py:1:1: no such file" in err


def test_rules_suggests_the_nearest_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "rules", "AM11")
    assert code == EXIT_USAGE and "(did you mean AM011?)" in err
    for other in ("AM100", "AM101", "unused-suppression"):
        code, out, _ = run(capsys, "rules", other)
        assert code == EXIT_OK and "## " not in out and "What" in out


# --- rule pages and SARIF --------------------------------------------------------------


def test_every_code_a_finding_can_carry_has_a_page() -> None:
    from accel_migrate.cli.codes import known_codes
    from accel_migrate.docgen import DOCS

    assert {"AM100", "AM101"} <= known_codes()
    missing = sorted(c for c in known_codes() if not (DOCS / f"{c}.md").is_file())
    assert missing == []


def test_sarif_rules_carry_help_and_failures_are_results(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pkg/train.py")
    put("pkg/bad.py", SYNTAX_ERROR)
    code, out, _ = run(capsys, "--output-format", "sarif", "--check", "pkg")
    assert code == EXIT_FAILED
    [sarif_run] = json.loads(out)["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    for rule in rules:
        assert rule["fullDescription"]["text"], rule["id"]
        assert rule["help"]["text"] and rule["help"]["markdown"], rule["id"]
        page = rule["helpUri"].split("/blob/main/", 1)[1]
        assert (ROOT / page).is_file(), rule["helpUri"]
    am007 = next(r for r in rules if r["id"] == "AM007")
    assert am007["help"]["markdown"].startswith("# AM007 tensor-backward")
    assert "backward" in am007["fullDescription"]["text"]
    failed = [r for r in sarif_run["results"] if r["level"] == "error"]
    assert len(failed) == 1
    assert rules[failed[0]["ruleIndex"]]["id"] == failed[0]["ruleId"] == "not-processed"
    location = failed[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "pkg/bad.py"
    assert location["region"] == {"startLine": 2, "startColumn": 5}


# --- truthful messages -----------------------------------------------------------------


def test_messages_name_the_alias_the_import_uses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py", TRAIN.replace("for step in", "accel = 0.5\nfor step in"))
    code, out, err = run(capsys, "--output-format", "concise", "train.py")
    assert code == EXIT_OK
    assert "import accel_migrate.runtime as accel_rt\n" in out
    assert "AM007 [fixed] x.backward() -> accel_rt.backward(x)" in err
    assert " accel." not in err and "(accel." not in err


def test_the_summary_line_agrees_in_number(capsys: pytest.CaptureFixture[str]) -> None:
    put("train.py", TRAIN.replace("for step", 'dev = torch.device("mps")\nfor step'))
    _, _, err = run(capsys, "train.py")
    assert err.rstrip().splitlines()[-1].endswith(", 1 finding needs review.")
    put("two.py", TRAIN.replace("for step", 'dev = torch.device("mps")\nfor step'))
    _, _, err = run(capsys, "train.py", "two.py")
    assert err.rstrip().splitlines()[-1].endswith(", 2 findings need review.")
