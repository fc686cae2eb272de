"""A state saved under HSDP resumed under plain FSDP at another world size.

    python bench/hsdp_resume.py

``tests/runtime/scripts/hsdp.py`` trains under ``--strategy hsdp`` on two
launcher "nodes" on loopback, 2 processes each (world 4, mesh (2, 2)), and saves
its state after step 2 (``accel.save_state``: DCP, each rank its own shards).
Then ``--strategy fsdp`` at world 2 and at world 1 load that state first
(``resume`` mode) and run steps 3-5; each is compared with the single-process
original, losses and final parameters. DCP reshards the 2-D mesh's shards onto
the 1-D one. A manual check (about 2 minutes on 2 cores), not a timed test:
a test would add a world-4 and a world-2 launch to CI. Exits 1 on a mismatch.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.ports import reserved_port  # noqa: E402  (after ROOT on the path)

SCRIPT = ROOT / "tests" / "runtime" / "scripts" / "hsdp.py"
LAUNCH = [sys.executable, "-m", "accel_migrate", "launch"]
LOSS = re.compile(r"^(step|again) (\d+) loss (\S+)$", re.MULTILINE)
TOLERANCE = 1e-5


def losses(text: str) -> dict[int, float]:
    return {int(step): float(value) for _, step, value in LOSS.findall(text)}


def save_under_hsdp(folder: Path) -> None:
    # a port no test of this machine takes meanwhile (tests/ports.py)
    with reserved_port() as number:
        _launch_two_nodes(folder, str(number))


def _launch_two_nodes(folder: Path, port: str) -> None:
    nodes = [
        subprocess.Popen(
            [
                *LAUNCH,
                *("--nnodes", "2", "--node-rank", str(rank), "--nproc", "2"),
                *("--master-addr", "127.0.0.1", "--master-port", port),
                *("--strategy", "hsdp", str(SCRIPT), "runtime"),
                *(str(folder / "hsdp.pt"), str(folder / "state")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=600) for node in nodes]
    if any(node.returncode for node in nodes):
        sys.exit("the HSDP job failed:\n" + "\n".join(e[-3000:] for _, e in outputs))


def main() -> int:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        start = time.monotonic()
        save_under_hsdp(folder)
        print(
            f"HSDP, 2 nodes x 2: trained and saved in {time.monotonic() - start:.0f} s"
        )
        shards = sorted((folder / "state" / "tensors").glob("*.distcp"))
        print(
            f"  {len(shards)} shard files, {sum(p.stat().st_size for p in shards)} bytes"
        )
        plain = subprocess.run(
            [sys.executable, str(SCRIPT), "plain", str(folder / "plain.pt")],
            capture_output=True,
            text=True,
            check=True,
        )
        expected = losses(plain.stdout)
        before = torch.load(folder / "plain.pt")
        failed = False
        for world in (2, 1):
            start = time.monotonic()
            out = folder / f"fsdp{world}.pt"
            run = subprocess.run(
                [
                    *(*LAUNCH, "--nproc", str(world), "--strategy", "fsdp"),
                    *(str(SCRIPT), "resume", str(out), str(folder / "state")),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode:
                print(run.stderr[-3000:])
                return 1
            got = losses(run.stdout)
            loss_error = max(
                abs(v - expected[s]) / abs(expected[s]) for s, v in got.items()
            )
            after = torch.load(out)
            param_error = max(
                ((after[k] - v).abs().max() / v.abs().max().clamp_min(1e-12)).item()
                for k, v in before.items()
            )
            ok = sorted(got) == [3, 4, 5] and max(loss_error, param_error) < TOLERANCE
            failed |= not ok
            print(
                f"FSDP world {world}, resumed at step {min(got)}: steps {sorted(got)}, "
                f"losses max rel {loss_error:.1e}, final parameters max rel "
                f"{param_error:.1e} ({time.monotonic() - start:.0f} s) "
                + ("ok" if ok else "MISMATCH")
            )
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
