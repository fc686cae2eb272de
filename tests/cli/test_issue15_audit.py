"""What the issue-15 audit checked with real runs: migrated scripts that import
local modules stay clean under ruff's isort rule (I001) in each shape of import
block; ``rules CODE`` piped gets its lines without rich's padding."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accel_migrate.cli.app import EXIT_OK

from .test_cli import put, run

pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_",), cache=True)


MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x


def get_loader():
    return []
"""

BODY = """

def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in get_loader():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

#: Import blocks that ruff's I001 passes (its default settings; ``models.py``
#: lies next to the script, so ruff counts it first-party) with a local import.
SHAPES = {
    "stdlib_torch_local": "import argparse\n\nimport torch\nimport torch.nn.functional"
    " as F\n\nfrom models import Net, get_loader\n",
    "torch_local": "import torch\nimport torch.nn.functional as F\n\n"
    "from models import Net, get_loader\n",
    "from_torch_only": "import torch\nfrom torch.nn import functional as F\n\n"
    "from models import Net, get_loader\n",
    "numpy_before": "import numpy as np\nimport torch\nimport torch.nn.functional as F"
    "\n\nfrom models import Net, get_loader\n\nnp.pi\n",
    "docstring_future": '"""Doc."""\n\nfrom __future__ import annotations\n\nimport os'
    "\nimport sys\n\nimport torch\nimport torch.nn.functional as F\n\nfrom models "
    "import Net, get_loader\n\nos, sys\n",
    "relative": "import torch\nimport torch.nn.functional as F\n\nfrom . import models"
    "\nfrom .models import Net, get_loader\n\nmodels\n",
}


def ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    path = str(found) if found.exists() else shutil.which("ruff")
    if path is None:
        pytest.skip("ruff is not installed")
    return path


def ruff_isort(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ruff(), "check", "--isolated", "--select", "I", "train.py"],
        capture_output=True,
        text=True,
        cwd=folder,
    )


def test_local_imports_stay_isort_clean_in_every_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, imports in SHAPES.items():
        put(f"{name}/models.py", MODELS)
        put(f"{name}/train.py", imports + BODY)
        assert ruff_isort(Path(name)).returncode == 0, f"{name}: fixture not clean"
    assert run(capsys, "--write", "-q", *SHAPES)[0] == EXIT_OK
    for name in SHAPES:
        text = Path(name, "train.py").read_text()
        assert "import accel_migrate.runtime as accel\n" in text, name
        result = ruff_isort(Path(name))
        assert result.returncode == 0, f"{name}:\n{text}\n{result.stdout}"


def test_a_local_module_that_ruff_counts_third_party_shares_the_section(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ruff looks for first-party modules at the project root: a script in a
    subfolder has its neighbour ``models`` in one section with torch."""
    put("scripts/models.py", MODELS)
    put(
        "scripts/train.py",
        "import torch\nimport torch.nn.functional as F\nfrom models import Net, "
        "get_loader\n" + BODY,
    )
    check = [ruff(), "check", "--isolated", "--select", "I", "scripts/train.py"]
    assert subprocess.run(check, capture_output=True).returncode == 0
    assert run(capsys, "--write", "-q", "scripts/train.py")[0] == EXIT_OK
    assert (
        Path("scripts/train.py")
        .read_text()
        .startswith("import accel_migrate.runtime as accel\nimport torch\n")
    )
    assert subprocess.run(check, capture_output=True).returncode == 0


def test_a_rule_page_piped_has_no_padding(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["rules", "AM004"], ["rules", "AM100"], ["rules"]):
        code, out, _ = run(capsys, *argv)
        assert code == EXIT_OK and argv[-1].replace("rules", "AM004") in out
        padded = [line for line in out.splitlines() if line != line.rstrip()]
        assert padded == [], argv


def test_config_yes_keeps_the_settings_it_is_not_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--yes`` takes the defaults a terminal offers, which are the table's
    values: replacing the precision with ``--force`` left strategy reset to auto."""
    put(
        "pyproject.toml", '[tool.accel-migrate]\nstrategy = "ddp"\nprecision = "bf16"\n'
    )
    code, out, _ = run(capsys, "config", "--precision", "fp16", "--yes", "--force")
    assert code == EXIT_OK
    text = Path("pyproject.toml").read_text()
    assert 'strategy = "ddp"' in text and 'precision = "fp16"' in text
    assert 'strategy = "auto"' not in text + out
