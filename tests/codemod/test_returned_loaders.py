"""A DataLoader returned by a method that its own file never calls
(Deep-SVDD-PyTorch's base/torchvision_dataset.py ``TorchvisionDataset.loaders``):
its callers are elsewhere, through an instance, so it is not sharded where it
is built and the file is left whole (``returned_loaders``, AM006). Before, its
loaders were prepared while the trainers that take them out were left
unchanged by AM004: each process trained its own copy on its share."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

FACTORY = """\
import torch
from torch.utils.data import DataLoader


class TorchvisionDataset:
    def __init__(self, train_set, test_set):
        self.train_set = train_set
        self.test_set = test_set

    def loaders(self, batch_size, shuffle_train=True):
        train_loader = DataLoader(self.train_set, batch_size=batch_size, shuffle=shuffle_train)
        test_loader = DataLoader(self.test_set, batch_size=batch_size)
        return train_loader, test_loader
"""

CALLED_HERE = FACTORY + """

model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TorchvisionDataset(torch.randn(8, 3), torch.randn(8, 3))
train_loader, _ = data.loaders(4)
for x in train_loader:
    optimizer.zero_grad()
    model(x).mean().backward()
    optimizer.step()
"""


def test_loaders_returned_to_callers_elsewhere_leave_the_file_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "torchvision_dataset.py"
    path.write_text(FACTORY)
    result = migrate_source(path.read_bytes(), str(path))
    assert not result.changed
    found = [f for f in result.findings if f.code == "AM006"]
    assert [(f.line, f.status) for f in found] == [
        (11, "needs-review"),
        (12, "needs-review"),
    ]
    assert found[0].message.startswith(
        "this DataLoader is returned by `TorchvisionDataset.loaders`, which this "
        "file never calls"
    )


def test_loaders_a_file_takes_out_itself_are_prepared(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(CALLED_HERE)
    result = migrate_source(path.read_bytes(), str(path))
    assert result.changed
    output = result.output.decode()  # type: ignore[union-attr]
    assert "train_loader = accel.prepare_dataloader(DataLoader(" in output
