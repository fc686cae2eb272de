"""``import accel_migrate.runtime`` stays light: every migrated script pays for it.

Not a timing test (bench/startup.py measures the time); these check the modules
that made it slow. ``torch.distributed.tensor`` (DTensor, pulled in by FSDP)
imports sympy and cost about 0.7 s at ``import accel_migrate.runtime``, FSDP or
not; the FSDP strategy now imports it when it shards a model. (torch 2.13 itself
imports it, through ``torch._dynamo``, when a script builds its first optimizer,
so this is about what the runtime adds, not about what a training run loads.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = (
    "torch.distributed.tensor",
    "torch.distributed.fsdp",
    "sympy",
    "libcst",
    "click",
    "rich",
    "deepspeed",  # the optional extra: imported when its strategy prepares a model
)


def _loaded_after(code: str, cwd: Path) -> list[str]:
    probe = (
        "import sys, torch\n"
        "before = set(sys.modules)\n"
        f"{code}\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules and m not in before))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout.strip().splitlines()[-1])  # a printed list of str


def test_importing_the_runtime_loads_nothing_heavy(tmp_path: Path) -> None:
    assert _loaded_after("import accel_migrate.runtime", tmp_path) == []
