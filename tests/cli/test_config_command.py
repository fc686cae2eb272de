"""``accel-migrate config``: [tool.accel-migrate] written from flags or from answers,
checked by the runtime's own validation, and nothing else of pyproject.toml touched."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from accel_migrate.runtime.config import load_config

PYPROJECT = """\
[project]
name = "demo"  # a comment that must stay
version = "1.0"

# black's settings
[tool.black]
line-length = 100
"""


pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_",))


class TerminalInput(io.StringIO):
    """Answers typed on a terminal."""

    def isatty(self) -> bool:
        return True


def test_flags_add_the_table_and_keep_the_rest_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    argv = ["config", "--strategy", "fsdp", "--precision", "bf16", "--timeout", "600"]
    assert (
        main([*argv, "--no-sync-batchnorm", "--fsdp-block-classes", "Block,Layer"]) == 0
    )
    text = path.read_text()
    assert text.startswith(PYPROJECT + "\n[tool.accel-migrate]\n")
    assert 'strategy = "fsdp"\nprecision = "bf16"\ntimeout = 600.0\n' in text
    assert 'fsdp-block-classes = ["Block", "Layer"]' in text
    config = load_config(environ={}, cwd=tmp_path)
    assert (config.strategy, config.precision, config.timeout) == (
        "fsdp",
        "bf16",
        600.0,
    )
    assert config.sync_batchnorm is False
    assert config.fsdp_block_classes == ("Block", "Layer")
    assert config.source_of("precision").endswith("pyproject.toml [tool.accel-migrate]")
    assert "wrote to pyproject.toml [tool.accel-migrate]:" in capsys.readouterr().out


def test_an_existing_table_gets_new_keys_and_refuses_to_replace_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pyproject.toml"
    original = (
        "[tool.accel-migrate]  # the migrate command's settings too\r\n"
        'select = ["AM0"]\r\n'
        'precision = "fp16"  # ours\r\n'
        "\r\n"
        "[tool.accel-migrate.per-file-ignores]\r\n"
        '"old/*.py" = ["AM010"]\r\n'
    )
    path.write_bytes(original.encode())
    assert main(["config", "--precision", "bf16"]) == EXIT_USAGE
    assert "already sets precision; --force replaces it" in capsys.readouterr().err
    assert path.read_bytes() == original.encode()

    assert main(["config", "--strategy", "ddp"]) == EXIT_OK
    added = path.read_bytes().decode()
    assert added == original.replace("select", 'strategy = "ddp"\r\nselect', 1)

    assert main(["config", "--precision", "bf16", "--force"]) == EXIT_OK
    replaced = path.read_bytes().decode()
    assert replaced == added.replace('precision = "fp16"  # ours', 'precision = "bf16"')
    assert load_config(environ={}, cwd=tmp_path).precision == "bf16"


def test_invalid_values_are_refused_with_the_runtimes_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    for flag, value, message in [
        ("--precision", "fp8", "precision='fp8' from --precision is not one of"),
        ("--timeout", "-1", "timeout='-1' from --timeout must be positive"),
        ("--strategy", "tpu", "TPU/XLA is not supported"),
    ]:
        assert main(["config", flag, value]) == EXIT_USAGE
        assert message in capsys.readouterr().err
    assert path.read_text() == PYPROJECT
    assert main(["config"]) == EXIT_USAGE  # no terminal, no flags, no --yes
    assert "nothing to write" in capsys.readouterr().err


def test_yes_writes_the_defaults_into_a_new_file(tmp_path: Path) -> None:
    assert main(["config", "--yes", "--precision", "bf16"]) == EXIT_OK
    assert (tmp_path / "pyproject.toml").read_text() == (
        '[tool.accel-migrate]\nstrategy = "auto"\nprecision = "bf16"\n'
        'batch-mode = "global"\n'
    )


def test_tables_it_cannot_edit_as_text_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pyproject.toml"
    dotted = '[tool]\naccel-migrate.strategy = "ddp"\n'
    path.write_text(dotted)
    assert main(["config", "--precision", "bf16"]) == EXIT_USAGE
    assert "dotted keys or an inline table" in capsys.readouterr().err
    several_lines = '[tool.accel-migrate]\nfsdp-block-classes = [\n  "Block",\n]\n'
    path.write_text(several_lines)
    assert main(["config", "--fsdp-block-classes", "Layer", "--force"]) == EXIT_USAGE
    assert "cannot edit [tool.accel-migrate] safely" in capsys.readouterr().err
    assert path.read_text() == several_lines


def test_on_a_terminal_it_asks_with_defaults_and_asks_again_after_a_bad_answer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    # strategy: fsdp; precision: the default (Enter); batch mode: a typo, then per-device
    monkeypatch.setattr("sys.stdin", TerminalInput("fsdp\n\nper-dev\nper-device\ny\n"))
    assert main(["config", "--timeout", "60"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "strategy (auto, single, ddp, fsdp, deepspeed, hsdp) [auto]: " in out
    assert "precision (fp32, bf16, fp16) [fp32]: " in out
    assert (
        "batch-mode='per-dev' from your answer is not one of: global, per-device" in out
    )
    assert "Write these to pyproject.toml? [Y/n]: " in out
    assert path.read_text() == PYPROJECT + (
        '\n[tool.accel-migrate]\nstrategy = "fsdp"\nprecision = "fp32"\n'
        'batch-mode = "per-device"\ntimeout = 60.0\n'
    )


def test_answering_no_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", TerminalInput("ddp\nbf16\nglobal\nn\n"))
    assert main(["config"]) == EXIT_WOULD_CHANGE
    assert not (tmp_path / "pyproject.toml").exists()
