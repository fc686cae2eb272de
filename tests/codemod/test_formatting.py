"""Migrated code passes the project's formatter: the runtime import where isort
(ruff's I001) puts it, and black's wrapping where the input was black-clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import black
import pytest

from accel_migrate.codemod.engine import migrate_source

IMPORT = "import accel_migrate.runtime as accel\n"

#: black-clean and isort-clean; migrating makes two lines longer than 88 columns.
CLEAN = '''\
"""Train a regressor."""

import argparse
import os

import absl
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), os.path.join("out", f"{absl.__name__}.pt"))
    print(np.pi)


if __name__ == "__main__":
    main()
'''


def ruff_isort_clean(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    ruff = Path(sys.executable).with_name("ruff")
    found = str(ruff) if ruff.exists() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed")
    script = tmp_path / "train.py"
    script.write_text(code)
    return subprocess.run(
        [found, "check", "--isolated", "--select", "I", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_a_black_and_isort_clean_script_stays_clean(tmp_path: Path) -> None:
    assert black.format_str(CLEAN, mode=black.Mode()) == CLEAN
    assert ruff_isort_clean(CLEAN, tmp_path).returncode == 0
    out = migrate_source(CLEAN, "train.py").output
    assert isinstance(out, str) and out != CLEAN
    assert "import absl\n" + IMPORT + "import numpy as np\n" in out
    assert "    optimizer = accel.prepare_optimizer(\n        optim.SGD(" in out
    assert max(len(line) for line in out.splitlines()) <= 88
    assert black.format_str(out, mode=black.Mode()) == out  # black --check
    checked = ruff_isort_clean(out, tmp_path)
    assert checked.returncode == 0, checked.stdout
    assert migrate_source(out, "train.py").output == out  # a second run: no change


def test_a_script_that_was_not_black_clean_is_not_reformatted() -> None:
    source = CLEAN.replace("default=2)", "default = 2)")
    assert black.format_str(source, mode=black.Mode()) != source
    out = migrate_source(source, "train.py").output
    assert isinstance(out, str)
    assert "default = 2)" in out  # the user's style is kept
    assert "    optimizer = accel.prepare_optimizer(optim.SGD(" in out  # not wrapped
    assert "import absl\n" + IMPORT + "import numpy as np\n" in out


def test_code_before_the_torch_imports_still_runs_before_the_runtime_import(
    tmp_path: Path,
) -> None:
    # The shape of scripts that put their folder on sys.path before importing:
    # the runtime import (which imports torch) joins the torch block below it.
    source = CLEAN.replace(
        '"""Train a regressor."""\n\nimport argparse\nimport os\n\n',
        '"""Train a regressor."""\n\nimport argparse\nimport os\nimport sys\n\n'
        "sys.path.insert(0, os.path.dirname(__file__))\n\n",
    )
    assert black.format_str(source, mode=black.Mode()) == source
    out = migrate_source(source, "train.py").output
    assert isinstance(out, str)
    assert (
        "sys.path.insert(0, os.path.dirname(__file__))\n\nimport absl\n" + IMPORT
    ) in out
    assert black.format_str(out, mode=black.Mode()) == out
    checked = ruff_isort_clean(out, tmp_path)
    assert "I001" not in checked.stdout, checked.stdout


def test_without_black_the_import_is_still_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "black", None)  # import black: ImportError
    out = migrate_source(CLEAN, "train.py").output
    assert isinstance(out, str)
    assert "import absl\n" + IMPORT + "import numpy as np\n" in out
    assert "    optimizer = accel.prepare_optimizer(optim.SGD(" in out


def test_threads_that_migrate_at_once_all_see_a_whole_black() -> None:
    """The first import of black, made by several threads at once (the soundness
    corpus's pool), gave some of them the half-initialised module
    (``AttributeError: module 'black' has no attribute 'Mode'``)."""
    import subprocess
    import sys

    script = (
        "import threading\n"
        "from accel_migrate.codemod.formatting import black_like_input\n"
        "errors = []\n"
        "def go():\n"
        "    try:\n"
        "        black_like_input('x = 1\\n', 'x = 1\\n')\n"
        "    except Exception as e:\n"
        "        errors.append(repr(e))\n"
        "threads = [threading.Thread(target=go) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(len(errors), errors[:1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("0 "), done.stdout


def test_the_runtime_import_never_goes_above_code_run_before_torch() -> None:
    """``os.environ[...] = ...`` set before ``import torch`` (thread counts,
    visible devices) must still run before torch is imported: the runtime
    import, which imports torch, goes in the block of the first torch import,
    not in the first (standard-library) block above that code."""
    source = (
        "import os\n\n"
        'os.environ["OMP_NUM_THREADS"] = "4"\n'
        "import torch\n"
        "from torch.utils.data import DataLoader\n\n"
        "model = torch.nn.Linear(2, 1).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in DataLoader(data, batch_size=4):\n"
        "    loss = model(x).mean()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    lines = str(migrate_source(source, "train.py").output).splitlines()
    setting = lines.index('os.environ["OMP_NUM_THREADS"] = "4"')
    assert lines.index(IMPORT.rstrip()) == setting + 1
    assert lines[setting + 2] == "import torch"
