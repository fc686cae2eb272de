"""PR review: ``--output-format json|github|sarif`` and the plain ``--diff``.

The SARIF log is validated against tests/data/sarif-2.1.0-subset.schema.json: a
subset of the OASIS SARIF 2.1.0 JSON schema written for these tests (the official
schema cannot be downloaded here), covering every object accel-migrate writes with
that schema's types, enums, minimums, required properties and
``additionalProperties: false``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jsonschema
import pytest

from accel_migrate.cli.app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from tests.conftest import ROOT

from .test_cli import TRAIN, put, run

SCHEMA = ROOT / "tests" / "data" / "sarif-2.1.0-subset.schema.json"
REVIEW = TRAIN.replace(
    'model = torch.nn.Linear(2, 2).to("cuda")\n',
    'model = torch.nn.Linear(2, 2).to("cuda")\ndevice = torch.device("mps")\n',
)


pytestmark = pytest.mark.in_tmp


def batch() -> None:
    put("pkg/a_train.py")
    put("pkg/b_review.py", REVIEW)
    put("pkg/c_util.py", "x = 1\n")
    put("pkg/d_ddp.py", "from torch.nn.parallel import DistributedDataParallel\n")
    put("pkg/e_bad.py", "import torch\nx = (1,\n")


# --- JSON ----------------------------------------------------------------------------


def test_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    batch()
    code, out, err = run(capsys, "--check", "--output-format", "json", "pkg")
    assert code == EXIT_FAILED
    assert err == ""
    document = json.loads(out)
    assert document["mode"] == "check" and document["exit_code"] == EXIT_FAILED
    assert [f["path"] for f in document["files"]] == [
        "pkg/a_train.py",
        "pkg/b_review.py",
        "pkg/c_util.py",
        "pkg/d_ddp.py",
        "pkg/e_bad.py",
    ]
    statuses = [f["status"] for f in document["files"]]
    assert statuses == ["changed", "changed", "skipped", "skipped", "failed"]
    assert document["files"][2]["skip_reason"] == "not a training entry point"
    assert document["files"][3]["findings"][0]["code"] == "AM100"
    assert document["files"][4]["error"] == {
        "line": 2,
        "column": 5,
        "message": "cannot parse: '(' was never closed",
    }
    finding = document["files"][0]["findings"][0]
    assert set(finding) == {"line", "column", "code", "rule", "status", "message"}
    review = [
        f for f in document["files"][1]["findings"] if f["status"] == "needs-review"
    ]
    assert review and review[0]["line"] == 4
    summary = document["summary"]
    assert summary["scanned"] == 5 and summary["changed"] == 2
    assert summary["skipped_by_reason"] == {
        "already distributed": 1,
        "not a training entry point": 1,
    }
    assert summary["failed"] == 1 and summary["needs_review"] == len(review)
    assert summary["rewrites_by_rule"]["AM007"] == 2
    assert "diff" not in document["files"][0]


def test_json_with_diff_carries_the_diffs(capsys: pytest.CaptureFixture[str]) -> None:
    put("train.py")
    code, out, _ = run(
        capsys, "--check", "--diff", "--output-format", "json", "train.py"
    )
    assert code == EXIT_WOULD_CHANGE
    [entry] = json.loads(out)["files"]
    assert entry["diff"].startswith("--- a/train.py\n+++ b/train.py\n")


def test_json_of_a_clean_run(capsys: pytest.CaptureFixture[str]) -> None:
    put("util.py", "x = 1\n")
    code, out, _ = run(capsys, "--output-format", "json", "util.py")
    assert code == EXIT_OK
    assert json.loads(out)["summary"]["changed"] == 0


# --- GitHub --------------------------------------------------------------------------

ANNOTATION = re.compile(
    r"^::(notice|warning|error) file=([^,]+),line=(\d+),col=(\d+),title=([^:]*)::(.+)$"
)


def test_github_annotations(capsys: pytest.CaptureFixture[str]) -> None:
    batch()
    code, out, err = run(capsys, "--check", "--output-format", "github", "pkg")
    assert code == EXIT_FAILED
    lines = out.splitlines()
    assert lines and all(ANNOTATION.match(line) for line in lines), out
    parsed = [ANNOTATION.match(line).groups() for line in lines]  # type: ignore[union-attr]
    assert ("warning", "pkg/b_review.py", "4") == parsed_review(parsed)[:3]
    errors = [p for p in parsed if p[0] == "error"]
    assert errors == [
        (
            "error",
            "pkg/e_bad.py",
            "2",
            "5",
            "accel-migrate%3A file not processed",
            "cannot parse: '(' was never closed",
        )
    ]
    assert any(p[0] == "notice" and "AM007" in p[4] for p in parsed)
    assert err.strip().endswith("1 failed.")


def parsed_review(parsed: list[tuple[str, ...]]) -> tuple[str, ...]:
    return next(p for p in parsed if p[0] == "warning")


def test_github_escapes_data_and_properties(capsys: pytest.CaptureFixture[str]) -> None:
    put("we,ird:name.py", "import torch\nx = (1,\n")
    code, out, _ = run(capsys, "--output-format", "github", "we,ird:name.py")
    assert code == EXIT_FAILED
    assert out.startswith("::error file=we%2Cird%3Aname.py,line=2,col=5,")


def test_github_with_diff_prints_the_diff_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("train.py")
    code, out, _ = run(
        capsys, "--check", "--diff", "--output-format", "github", "train.py"
    )
    assert code == EXIT_WOULD_CHANGE
    assert out.startswith("--- a/train.py\n")
    assert "\n::notice file=train.py," in out


# --- SARIF ---------------------------------------------------------------------------


def sarif(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code, out, err = run(capsys, "--output-format", "sarif", *argv)
    assert err == ""
    return code, json.loads(out)


def test_sarif_is_valid_sarif_2_1_0(capsys: pytest.CaptureFixture[str]) -> None:
    batch()
    code, log = sarif(capsys, "--check", "pkg")
    assert code == EXIT_FAILED
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    validator = jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert log["version"] == "2.1.0"
    [sarif_run] = log["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    assert ids == sorted(ids) and "AM007" in ids and "AM100" in ids
    for result in sarif_run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not location["artifactLocation"]["uri"].startswith("/")
    levels = {
        r["ruleId"]: r["level"] for r in sarif_run["results"] if r["level"] == "warning"
    }
    assert "AM001" in levels  # the needs-review finding
    [invocation] = sarif_run["invocations"]
    assert invocation["executionSuccessful"] is False
    [failure] = invocation["toolExecutionNotifications"]
    assert failure["level"] == "error"
    assert failure["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 2,
        "startColumn": 5,
    }


def test_the_schema_rejects_what_sarif_2_1_0_rejects() -> None:
    """The subset is strict where the standard is."""
    schema = json.loads(SCHEMA.read_text())
    good = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "x"}},
                "results": [
                    {
                        "message": {"text": "m"},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": "a.py"},
                                    "region": {"startLine": 1},
                                }
                            }
                        ],
                    }
                ],
            }
        ],
    }
    jsonschema.validate(good, schema)
    bad_cases = [
        {**good, "version": "2.0.0"},
        {"runs": []},
        {**good, "extra": 1},
        {"version": "2.1.0", "runs": [{"results": []}]},  # no tool
        {"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]},  # no name
    ]
    for bad in bad_cases:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    region_zero = json.loads(json.dumps(good))
    region_zero["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"][
        "startLine"
    ] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(region_zero, schema)


def test_sarif_of_a_file_outside_the_working_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = put(tmp_path / "outside" / "train.py")
    os.mkdir("inside")
    os.chdir("inside")
    code, log = sarif(capsys, "--check", str(outside))
    assert code == EXIT_WOULD_CHANGE
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
        "artifactLocation"
    ]["uri"]
    assert uri.startswith("file:///") and uri.endswith("/outside/train.py")


def test_stdin_takes_the_text_format_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-", "--output-format", "json")
    assert code == EXIT_USAGE and "stdin" in err
