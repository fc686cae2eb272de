"""AM025 across files: the loader's batch size handed to a method of a model
class of another module that shapes a tensor with it (the Udacity
sentiment-rnn notebook's ``h = net.init_hidden(batch_size)``, whose
``init_hidden`` makes ``weight.new(n_layers, batch_size, hidden_dim).zero_()``),
also where the loaders come from a factory returning a tuple of them
(``map(accel.prepare_dataloader, make_loaders(x, y, batch_size))``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

MODEL = """\
import torch.nn as nn


class SentimentRNN(nn.Module):
    def __init__(self, n_layers, hidden_dim):
        super().__init__()
        self.n_layers, self.hidden_dim = n_layers, hidden_dim
        self.lstm = nn.LSTM(3, hidden_dim, n_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, 1)

    def forward(self, x, hidden):
        out, hidden = self.lstm(x, hidden)
        return self.fc(out[:, -1]).squeeze(1), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters()).data
        return (
            weight.new(self.n_layers, batch_size, self.hidden_dim).zero_(),
            weight.new(self.n_layers, batch_size, self.hidden_dim).zero_(),
        )

    def describe(self, width):
        width = width * 2
        return self.fc.weight.new_zeros(width)
"""

DATA = """\
from torch.utils.data import DataLoader


def make_loaders(train_data, valid_data, batch_size):
    train_loader = DataLoader(train_data, shuffle=True, batch_size=batch_size)
    valid_loader = DataLoader(valid_data, shuffle=True, batch_size=batch_size)
    return train_loader, valid_loader


def mixed_loaders(train_data, valid_data, bs):
    return DataLoader(train_data, batch_size=bs), DataLoader(valid_data, batch_size=bs * 2)
"""

SCRIPT = """\
import torch

from data_prep import make_loaders, mixed_loaders
from model import SentimentRNN

batch_size = 6
train_loader, valid_loader = make_loaders(train_data, valid_data, batch_size)
net = SentimentRNN(2, 4)
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
for e in range(2):
    h = net.init_hidden(batch_size)
    for inputs, labels in train_loader:
        h = tuple([each.data for each in h])
        net.zero_grad()
        output, h = net(inputs, h)
        loss = torch.nn.functional.mse_loss(output, labels)
        loss.backward()
        optimizer.step()
"""


def _project(tmp_path: Path, script: str = SCRIPT) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "data_prep.py").write_text(DATA)
    main = tmp_path / "main.py"
    main.write_text(script)
    return main


def test_the_facts_name_the_shaping_method_and_the_tuple_factory_size(
    tmp_path: Path,
) -> None:
    table = dict(read_project(str(_project(tmp_path))).helpers)
    assert table["model.SentimentRNN"].param_shapes == (
        (
            "init_hidden",
            "batch_size",
            0,
            "weight.new(self.n_layers, batch_size, self.hidden_dim)",
            18,
        ),
    )  # `describe` rebinds `width` first: not its parameter's shape
    assert table["data_prep.make_loaders"].loader_batch_size == ("batch_size", 2)
    # one loader of the tuple takes another size: none is known
    assert table["data_prep.mixed_loaders"].loader_batch_size == ("", -1)


def test_the_batch_size_handed_to_the_imported_init_hidden_is_reported(
    tmp_path: Path,
) -> None:
    main = _project(tmp_path)
    result = migrate_source(main.read_text(), str(main))
    assert "map(\n    accel.prepare_dataloader, make_loaders(" in result.output
    found = [f for f in result.needs_review if f.code == "AM025"]
    assert [f.line for f in found] == [11]
    assert found[0].message.startswith(
        "the loader's batch size `batch_size` is handed to `init_hidden` of "
        "`SentimentRNN` in model.py, which shapes a tensor with it "
        "(`weight.new(self.n_layers, batch_size, self.hidden_dim)`, line 18)"
    )


def test_a_size_that_is_no_loaders_is_not_reported(tmp_path: Path) -> None:
    """``init_hidden(1)`` for sampling, and a method whose parameter is not a
    shape there: nothing."""
    script = SCRIPT.replace(
        "    h = net.init_hidden(batch_size)\n",
        "    h = net.init_hidden(1)\n    net.describe(batch_size)\n",
    )
    main = _project(tmp_path, script)
    result = migrate_source(main.read_text(), str(main))
    assert "accel.prepare_dataloader, make_loaders(" in result.output
    assert not [f for f in result.needs_review if f.code == "AM025"]


def test_a_shape_in_a_loop_over_an_item_of_the_mapped_tuple_is_reported(
    tmp_path: Path,
) -> None:
    """The loop over ``train_loader`` (an item of the tuple the factory returns)
    is a loop over a prepared loader whose batch size is ``batch_size``:
    ``torch.ones(batch_size)`` in it is reported as a shape."""
    script = SCRIPT.replace(
        "        loss = torch.nn.functional.mse_loss(output, labels)\n",
        "        loss = torch.nn.functional.mse_loss(output, torch.ones(batch_size))\n",
    ).replace("    h = net.init_hidden(batch_size)\n", "    h = net.init_hidden(1)\n")
    main = _project(tmp_path, script)
    result = migrate_source(main.read_text(), str(main))
    found = [f for f in result.needs_review if f.code == "AM025"]
    assert [f.line for f in found] == [16]
    assert "is used as a shape in a step" in found[0].message


def test_the_legacy_new_constructor_is_a_shape_in_the_scripts_own_class(
    tmp_path: Path,
) -> None:
    """One file: ``weight.new(n_layers, batch_size, hidden)`` (the legacy
    constructor the notebooks use) in a method of the script's own model class is
    a shape made with the handed batch size, as ``new_zeros`` is."""
    script = tmp_path / "main.py"
    script.write_text(MODEL + """
import torch
from torch.utils.data import DataLoader

batch_size = 6
train_loader = DataLoader(train_data, shuffle=True, batch_size=batch_size)
net = SentimentRNN(2, 4)
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
h = net.init_hidden(batch_size)
for inputs, labels in train_loader:
    output, h = net(inputs, tuple([each.data for each in h]))
    loss = torch.nn.functional.mse_loss(output, labels)
    loss.backward()
    optimizer.step()
""")
    result = migrate_source(script.read_text(), str(script))
    found = [f for f in result.needs_review if f.code == "AM025"]
    assert [f.line for f in found] == [33]
    assert "`init_hidden`, which shapes a tensor with it" in found[0].message
