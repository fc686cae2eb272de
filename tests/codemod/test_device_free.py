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
from accel_migrate.codemod.project_view import ProjectView

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
        "state = torch.load(path, map_location=args.map)",
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


def test_cpu_reads_are_not_device_code() -> None:
    """``.cpu()`` and ``map_location="cpu"`` keep tensors on the CPU: such a
    script ran on the CPU and gets the CPU-only line (nway_trial_argmax)."""
    for line in ("out = out.cpu().numpy()", "s = torch.load(p, map_location='cpu')"):
        assert not has_device_code(ast.parse(line))
        assert CPU_ONLY in migrate_source(SCRIPT + line + "\n").output


def _project(tmp_path: Path, modules: dict[str, str], imports: str) -> Path:
    for name, text in modules.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    main = tmp_path / "main.py"
    main.write_text(imports + SCRIPT)
    return main


def _migrated(main: Path, folder: Path) -> str:
    """``main`` migrated in batch mode with ``folder`` as the working folder
    (the local modules are read by their real paths, whatever it is)."""
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        view = ProjectView([str(main)])
        options = MigrateOptions(project=view.facts_for(str(main)))
        return migrate_source(main.read_text(), str(main), options).output
    finally:
        os.chdir(here)


@pytest.mark.parametrize("where", ["project", "elsewhere"])
def test_a_local_module_with_device_code_counts(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "p"
    cuda = _project(
        folder,
        {
            "models.py": "import torch\n\ndef zeros(n):\n    return torch.zeros(n).cuda()\n"
        },
        "from models import zeros\n",
    )
    cwd = folder if where == "project" else tmp_path
    assert CPU_ONLY not in _migrated(cuda, cwd)
    plain = _project(
        tmp_path / "q",
        {"models.py": "def double(n):\n    return 2 * n\n"},
        "from models import double\n",
    )
    assert CPU_ONLY in _migrated(plain, folder if where == "project" else tmp_path)


def test_device_code_two_local_modules_away_counts(tmp_path: Path) -> None:
    main = _project(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/build.py": "from utils.place import put\n\ndef build():\n    return put(1)\n",
            "utils/place.py": "def put(x):\n    return x.to('cuda')\n",
        },
        "from utils.build import build\n",
    )
    facts = ProjectView([str(main)]).facts_for(str(main))
    assert facts.local_imports == ("utils",)
    assert facts.device_imports == ("utils",)
    assert CPU_ONLY not in _migrated(main, tmp_path)


def test_device_code_in_a_package_init_counts(tmp_path: Path) -> None:
    """``from pkg.models import build`` runs pkg/__init__.py first."""
    main = _project(
        tmp_path,
        {
            "pkg/__init__.py": "import torch\ntorch.set_default_device('cuda')\n",
            "pkg/models.py": "def build():\n    return None\n",
        },
        "from pkg.models import build\n",
    )
    assert CPU_ONLY not in _migrated(main, tmp_path)


def test_an_unread_package_may_place_tensors(tmp_path: Path) -> None:
    """``from mylib.models import build_model`` of a package that is neither
    read nor known may move what it builds to a GPU itself: no CPU-only line."""
    source = "from mylib.models import build_model\n" + SCRIPT
    assert not device_free(source)
    assert CPU_ONLY not in migrate_source(source).output
    # the same package found as a local module with no device code: device-free
    main = _project(
        tmp_path,
        {
            "mylib/__init__.py": "",
            "mylib/models.py": "def build_model():\n    return None\n",
        },
        "from mylib.models import build_model\n",
    )
    assert CPU_ONLY in _migrated(main, tmp_path)
    # the standard library and torch's own packages are known
    assert device_free("import os, json\nimport torchvision\n" + SCRIPT)
