"""A script that names no device keeps every process on the CPU: the migrated
script calls ``accel.device(accelerator=False)`` after its imports, before any
other runtime call (``codemod/device_free.py``). Without it
``accel.prepare_model`` would move the model to ``cuda:LOCAL_RANK`` on a GPU
machine while the batches stay on the CPU."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.device_free import device_free, has_device_code
from accel_migrate.codemod.project_facts import ProjectFacts

CPU_ONLY = "accel.device(accelerator=False)"

SCRIPT = textwrap.dedent("""
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
""")


@pytest.mark.parametrize(
    "line",
    [
        "x = x.cuda()",
        "model.to(device)",
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
        "y = torch.zeros(3, device=args.dev)",
        "state = torch.load(path, map_location='cpu')",
        "out = out.cpu().numpy()",
        "model = nn.DataParallel(model)",
        "from torch.cuda.amp import autocast",
        "print('using gpu', n)",
    ],
)
def test_device_code_is_seen(line: str) -> None:
    assert has_device_code(ast.parse(line))
    assert not device_free(SCRIPT + line + "\n")


def test_a_script_with_no_device_code_runs_on_the_cpu() -> None:
    assert device_free(SCRIPT)
    migrated = migrate_source(SCRIPT).output
    lines = migrated.splitlines()
    imports = [
        i for i, line in enumerate(lines) if line.startswith(("import ", "from "))
    ]
    call = lines.index(f"{CPU_ONLY}  # no device code: every process on the CPU")
    assert call > max(imports), "after every import"
    first_runtime = min(
        i
        for i, line in enumerate(lines)
        if "accel." in line and not line.startswith("import")
    )
    assert call == first_runtime, "before any other runtime call"
    ast.parse(migrated)
    again = migrate_source(migrated)
    assert again.output == migrated, "a second run changes nothing"


def test_a_script_with_device_code_is_left_to_it() -> None:
    source = SCRIPT.replace("model(x)", "model(x.to(device))").replace(
        "model = nn.Linear(4, 2)",
        "device = torch.device('cuda')\nmodel = nn.Linear(4, 2).to(device)",
    )
    assert CPU_ONLY not in migrate_source(source).output


def test_a_local_module_with_device_code_counts(tmp_path: Path) -> None:
    helper = tmp_path / "models.py"
    helper.write_text(
        "import torch\n\ndef zeros(n):\n    return torch.zeros(n).cuda()\n"
    )
    project = ProjectFacts(files=(str(helper),))
    migrated = migrate_source(SCRIPT, options=MigrateOptions(project=project))
    assert CPU_ONLY not in migrated.output
    clean = tmp_path / "plain.py"
    clean.write_text("def double(n):\n    return 2 * n\n")
    project = ProjectFacts(files=(str(clean),))
    migrated = migrate_source(SCRIPT, options=MigrateOptions(project=project))
    assert CPU_ONLY in migrated.output


def test_an_unread_package_may_place_tensors(tmp_path: Path) -> None:
    """``from mylib.models import build_model`` of a package that is neither
    read nor known may move what it builds to a GPU itself: no CPU-only line."""
    source = "from mylib.models import build_model\n" + SCRIPT
    assert not device_free(source)
    assert CPU_ONLY not in migrate_source(source).output
    # the same package read as a local module with no device code: device-free
    package = tmp_path / "mylib"
    package.mkdir()
    (package / "models.py").write_text("def build_model():\n    return None\n")
    files = (str(package / "models.py"),)
    assert device_free(source, files)
    # the standard library and torch's own packages are known
    assert device_free("import os, json\nimport torchvision\n" + SCRIPT)
