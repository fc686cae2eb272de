"""AM046 on a world size read before the runtime starts the process group
(``group_start``): there it is still the original's 1 (measured: a
module-level ``lr * utils.get_world_size()`` above ``device = accel.device()``
printed the original's value at world 2), so the finding says so instead of
"once migrated it is N"; a read after the runtime's first call, inside a
function, or in a script with no device code (``accel.device(accelerator=False)``
goes right after its imports) keeps the needs-review finding.
"""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

UTILS = """\
import torch.distributed as dist


def get_world_size():
    if not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size()
"""

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import utils

scaled_lr = 0.1 * utils.get_world_size()
{device}
model = torch.nn.Linear(3, 1){to}
optimizer = torch.optim.SGD(model.parameters(), lr=scaled_lr)
loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x{to}), y{to})
        loss.backward()
        optimizer.step()
    print("lr", scaled_lr * utils.get_world_size())
"""


def _am046(tmp_path: Path, source: str) -> dict[int, tuple[str, str]]:
    (tmp_path / "utils.py").write_text(UTILS)
    script = tmp_path / "train.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return {f.line: (f.status, f.message) for f in result.findings if f.code == "AM046"}


def test_a_read_above_the_runtimes_first_call_is_still_one(tmp_path: Path) -> None:
    source = SCRIPT.format(
        device='device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        to=".to(device)",
    )
    found = _am046(tmp_path, source)
    status, message = found[7]
    assert status == "info"
    assert "here it is still 1, as in the original run" in message
    assert "it is N" not in message
    # after `device = accel.device()`, in the loop: N
    status, message = found[18]
    assert status == "needs-review"
    assert "once migrated the runtime starts one, and it is N" in message


def test_a_script_with_no_device_code_starts_it_after_its_imports(
    tmp_path: Path,
) -> None:
    source = (
        SCRIPT.format(device="", to="")
        .replace("import utils\n", "import torch.distributed as dist\n")
        .replace(
            "utils.get_world_size()",
            "(dist.get_world_size() if dist.is_initialized() else 1)",
        )
    )
    found = _am046(tmp_path, source)
    assert found[7][0] == "needs-review"
    assert "and it is N" in found[7][1]
    # with `utils` imported the script is not taken for device-free (no
    # `accel.device(accelerator=False)` is written), so the group starts at
    # `accel.prepare_model` (line 9), below the read
    found = _am046(tmp_path, SCRIPT.format(device="", to=""))
    assert found[7][0] == "info"


def test_a_read_in_a_function_is_not_taken_for_before(tmp_path: Path) -> None:
    source = SCRIPT.format(
        device='device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        to=".to(device)",
    ).replace(
        "scaled_lr = 0.1 * utils.get_world_size()\n",
        "def scale():\n    return 0.1 * utils.get_world_size()\n\n\nscaled_lr = scale()\n",
    )
    found = _am046(tmp_path, source)
    assert all(status == "needs-review" for status, _ in found.values()), found
