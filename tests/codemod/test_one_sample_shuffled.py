"""AM006 on a shuffled loader of one sample a batch (CycleGAN's default
``batch_size=1``, ``shuffle=True``): it stays wrapped (left whole, each process
could draw its own order), and the finding says that at N processes the global
batch of 1 cannot be split, which launcher flag runs it, and what that changes."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SOURCE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
loader = DataLoader(data, batch_size=1, shuffle=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.l1_loss(model(x), y).backward()
        optimizer.step()
"""


def test_the_finding_names_the_launch_flag_and_what_it_changes() -> None:
    result = migrate_source(SOURCE, "train.py")
    assert "accel.prepare_dataloader(DataLoader(data, batch_size=1" in result.output
    (finding,) = [f for f in result.findings if f.code == "AM006"]
    assert (finding.line, finding.status) == (5, "needs-review")
    message = finding.message
    assert "at N processes its global batch of 1 cannot be split" in message
    assert "BatchSmallerThanWorldError" in message
    assert "`accel-migrate launch --batch-mode per-device`" in message
    assert "a global batch of N samples where the original trained on 1" in message
    assert "differ from the original's" in message


def test_the_flag_named_is_one_the_launcher_takes() -> None:
    from accel_migrate.cli.launch_options import KNOWN_OPTIONS
    from accel_migrate.runtime.config import BATCH_MODES

    assert "--batch-mode" in KNOWN_OPTIONS
    assert "per-device" in BATCH_MODES


def test_a_fixed_order_loader_of_one_sample_is_left_whole() -> None:
    source = SOURCE.replace("batch_size=1, shuffle=True", "batch_size=1")
    result = migrate_source(source, "train.py")
    assert "accel.prepare_dataloader" not in result.output


OPTION = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=1, help="size of the batches")
opt = parser.parse_args()
data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
dataloader = DataLoader(data, batch_size=opt.batch_size, shuffle=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
for epoch in range(2):
    for x, y in dataloader:
        optimizer.zero_grad()
        torch.nn.functional.l1_loss(model(x), y).backward()
        optimizer.step()
"""


def test_a_batch_size_option_of_default_one_is_reported_for_its_default() -> None:
    """PyTorch-GAN's cyclegan.py: ``--batch_size`` of ``default=1``."""
    result = migrate_source(OPTION, "cyclegan.py")
    assert (
        "dataloader = accel.prepare_dataloader(\n    DataLoader(data, batch_size=opt"
        in (result.output)
    )
    (finding,) = [f for f in result.findings if f.code == "AM006"]
    assert (finding.line, finding.status) == (10, "needs-review")
    assert finding.message.startswith(
        "`DataLoader(data, batch_size=opt.batch_size, shuffle=True)` gives one "
        "sample a batch by default (`--batch_size` defaults to 1) in an order it "
        "may shuffle"
    )
    assert "--batch-mode per-device" in finding.message


def test_a_short_flag_beside_the_long_one_is_read_as_argparse_does() -> None:
    source = OPTION.replace('"--batch_size",', '"-b", "--batch-size",')
    (finding,) = [
        f for f in migrate_source(source, "cyclegan.py").findings if f.code == "AM006"
    ]
    assert "(`--batch-size` defaults to 1)" in finding.message


def test_a_batch_size_option_of_another_default_is_not_reported() -> None:
    source = OPTION.replace("default=1,", "default=4,")
    result = migrate_source(source, "cyclegan.py")
    assert [f.status for f in result.findings if f.code == "AM006"] == ["fixed"]


EVALUATED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

train = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
single = DataLoader(TensorDataset(torch.randn(8, 4)), shuffle=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
for x, y in train:
    optimizer.zero_grad()
    torch.nn.functional.l1_loss(model(x), y).backward()
    optimizer.step()
close = 0
with torch.no_grad():
    for (x,) in single:
        close += (model(x) > 0).sum().item()
print("close", close)
"""


def test_an_evaluation_loader_is_told_as_one() -> None:
    """Only evaluation loops step through it: the finding speaks of evaluating
    (no gradients, no trained model), and of shuffle=False as a way out."""
    result = migrate_source(EVALUATED, "eval.py")
    (finding,) = [f for f in result.findings if f.code == "AM006" and f.line == 5]
    assert finding.status == "needs-review"
    assert "the loops over it evaluate (no backward)" in finding.message
    assert "give this evaluation loader shuffle=False" in finding.message
    assert "gradients" not in finding.message
    assert "trained" not in finding.message
