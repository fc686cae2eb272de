"""torch is an extra: the codemod, the CLI and the pre-commit hooks work without it
(a hook environment should not download PyTorch); the runtime, ``launch`` and
``verify`` say clearly that they need it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import TRAIN

# Every ``import torch`` fails, as where torch is not installed, and each attempt
# is counted: migrating must not even try.
WITHOUT_TORCH = """\
import sys

attempts = []


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            attempts.append(name)
            raise ImportError(f"No module named {name!r}")
        return None


sys.meta_path.insert(0, NoTorch())
from accel_migrate.cli.app import main

code = main(sys.argv[1:])
print(f"torch imports tried: {len(attempts)}", file=sys.stderr)
sys.exit(code)
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrating_needs_no_torch(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    result = run("--check", "--diff", str(script))
    assert result.returncode == 1, result.stderr
    assert "+import accel_migrate.runtime as accel" in result.stdout
    assert "torch imports tried: 0" in result.stderr
    result = run("--write", "-q", str(script))
    assert result.returncode == 0, result.stderr
    assert "torch imports tried: 0" in result.stderr
    assert "accel.prepare_model" in script.read_text()


def test_launch_and_verify_say_they_need_torch(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    for command in ("launch", "verify"):
        result = run(command, str(script))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            f"error: accel-migrate {command} needs PyTorch in this environment: "
            "pip install torch (or pip install 'accel-migrate[torch]')",
            "torch imports tried: 1",
        ]


def test_the_runtime_says_it_needs_torch() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['torch'] = None; import accel_migrate.runtime",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: accel_migrate.runtime needs PyTorch: pip install torch "
        "(or pip install 'accel-migrate[torch]')"
    )


@pytest.mark.parametrize("command", ["launch", "verify"])
def test_help_lists_the_strategies_without_importing_torch(command: str) -> None:
    # --strategy's choices come from the runtime configuration's list, read
    # without importing the runtime (r30e read the strategy registry, which
    # imports torch: `launch --help` took 13 s); equal to the registry's names
    # (tests/cli/test_launch_options.py)
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "[auto|ddp|deepspeed|fsdp|hsdp|single]" in result.stdout
    assert "torch imports tried: 0" in result.stderr
