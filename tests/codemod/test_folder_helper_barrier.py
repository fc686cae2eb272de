"""A helper that only makes a folder (torchdiffeq's ``makedirs(args.save)``)
is moved to the main process, and a barrier follows it where every process
reaches the call: the others write into that folder next (``get_logger``
opening a logging.FileHandler in it on every process), and without the
barrier rank 1 raced the main process and died with FileNotFoundError."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

UTILS = """\
import os


def makedirs(dirname):
    if not os.path.exists(dirname):
        os.makedirs(dirname)
"""

SCRIPT = """\
import logging
import os

import torch

from utils import makedirs

makedirs("experiment1")
handler = logging.FileHandler(os.path.join("experiment1", "logs"))
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
{tail}
"""


def _migrate(tmp_path: Path, tail: str = "") -> tuple[str, str]:
    (tmp_path / "utils.py").write_text(UTILS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(tail=tail))
    result = migrate_source(script.read_text(), str(script))
    findings = [f for f in result.findings if f.code == "AM017"]
    return result.output, findings[0].message


def test_a_barrier_follows_the_folder_made_on_the_main_process(tmp_path: Path) -> None:
    output, message = _migrate(tmp_path)
    assert 'accel.on_main_process(makedirs, "experiment1")\naccel.barrier()\n' in output
    assert message.endswith(
        "-> accel.on_main_process(...), then accel.barrier(), so that no process "
        "writes into the folder before the main process has made it"
    )


def test_no_barrier_where_not_every_process_reaches_the_call(tmp_path: Path) -> None:
    output, _ = _migrate(tmp_path, 'if loss.item() > 0.5:\n    makedirs("plots")')
    assert output.count("accel.barrier()") == 1, output  # the first call's only
    assert 'accel.on_main_process(makedirs, "plots")' in output
