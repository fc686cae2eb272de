"""Batches taken once off a sharded loader are one fact of the module
(``fixed_batches.py``), asked by AM006 and AM041: one finding a batch, whether
the batch is held by a name, by a ``self.`` attribute of a solver class, or by
what a method returns."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.fixed_batches import fixed_batches

GRID = """
import torch
from torch.utils.data import DataLoader
from torch.utils.tensorboard import SummaryWriter
from torchvision.utils import save_image

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
test_loader = DataLoader(test_set, batch_size=8)
writer = SummaryWriter("runs")
fixed_x, _ = next(iter(test_loader))
for epoch in range(3):
    for x, _ in train_loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    save_image(model(fixed_x), f"recon_{epoch}.png")
    writer.add_images("recon", model(fixed_x), epoch)
    torch.save(fixed_x, "fixed.pt")
    writer.add_images("again", fixed_x, epoch)
"""


def _review(source: str) -> list[tuple[str, int, str]]:
    result = migrate_source(source, "train.py")
    return [
        (f.code, f.line, f.message)
        for f in result.findings
        if f.status == "needs-review"
    ]


def test_the_fact_is_computed_once_a_module_and_holds_the_writes() -> None:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(GRID)), "accel")
    fact = fixed_batches(index)
    assert fixed_batches(index) is fact
    [batch] = fact.batches.values()
    assert batch.into == "`fixed_x, _`"
    assert cst.Module([]).code_for_node(batch.loader) == "test_loader"
    assert [cst.Module([]).code_for_node(w.call.func) for w in fact.written(batch)] == [
        "save_image",
        "writer.add_images",
        "torch.save",
        "writer.add_images",
    ]


def test_one_finding_for_one_batch_written_four_times() -> None:
    [(code, line, message)] = _review(GRID)
    assert (code, line) == ("AM041", 12)  # at the take, where the fix goes
    assert message.startswith(
        "`fixed_x, _` is taken once with `next(iter(test_loader))` from "
        "`test_loader`, a loader that is sharded, and written to a file: "
        '`save_image(...)` writes `fixed_x` into `f"recon_{epoch}.png"` (line 18); '
        "`writer.add_images(...)` writes `fixed_x` (line 19); `torch.save(...)` "
        'writes `fixed_x` into `"fixed.pt"` (line 20); and 1 more. On the main '
        "process"
    )
    assert "the files show those rows" in message


PROBE = """
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(train_set, batch_size=8, shuffle=True)
probe, _ = next(iter(loader))
for epoch in range(3):
    for x, _ in loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    print("probe", model(probe).mean().item())
"""


def test_a_batch_nothing_writes_is_am006s() -> None:
    [(code, line, message)] = _review(PROBE)
    assert (code, line) == ("AM006", 8)
    assert message.startswith("`probe, _` is taken once with `next(iter(loader))`")


SOLVER = """
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class Solver:
    def __init__(self, loader, sample_dir):
        self.loader = loader
        self.sample_dir = sample_dir
        self.build_model()

    def build_model(self):
        self.data_loader = self.loader
        data_iter = iter(self.data_loader)
        self.x_fixed, self.c_fixed = next(data_iter)
        self.x_fixed = self.x_fixed[:4].to("cpu")
        self.G = nn.Linear(8, 8)
        self.optimizer = torch.optim.Adam(self.G.parameters())

    def sample(self, i):
        with torch.no_grad():
            x_list = [self.x_fixed, self.G(self.x_fixed) * self.c_fixed[:4]]
            x_concat = torch.cat(x_list, dim=1)
        torch.save(x_concat.cpu(), os.path.join(self.sample_dir, f"{i}.pt"))

    def train(self):
        data_iter = iter(self.data_loader)
        for i in range(8):
            try:
                x, c = next(data_iter)
            except StopIteration:
                data_iter = iter(self.data_loader)
                x, c = next(data_iter)
            loss = (self.G(x) * c - x).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if (i + 1) % 4 == 0:
                self.sample(i)


Solver(DataLoader(dataset, batch_size=8, shuffle=True), "samples").train()
"""


def test_a_batch_kept_on_self_is_followed_into_another_method() -> None:
    """A StarGAN-fork solver keeps its fixed batch on the instance in
    build_model and saves its edits in sample(): one finding, at the take."""
    [(code, line, message)] = _review(SOLVER)
    assert (code, line) == ("AM041", 18)
    assert message.startswith(
        "`self.x_fixed, self.c_fixed` is taken once with `next(data_iter)` from "
        "`self.data_loader`, a loader that is sharded, and written to a file: "
        "`torch.save(...)` writes `x_concat` into "
        '`os.path.join(self.sample_dir, f"{i}.pt")` (line 27). On the main process'
    )


def test_a_batch_a_method_returns_is_followed_to_the_write() -> None:
    """Before, the write of a batch a method returned was not linked to it:
    AM006 spoke of the take, and no finding named the file."""
    source = SOLVER.replace(
        "        self.x_fixed, self.c_fixed = next(data_iter)\n",
        "        self.x_fixed, self.c_fixed = self.fetch(data_iter)\n",
    ).replace(
        "    def sample(self, i):\n",
        "    def fetch(self, it):\n        return next(it)\n\n    def sample(self, i):\n",
    )
    findings = _review(source)
    assert [(c, line) for c, line, _ in findings] == [("AM041", 24)]
    assert "`torch.save(...)` writes `x_concat`" in findings[0][2]


def test_a_gathered_batch_is_neither_rules() -> None:
    source = GRID.replace(
        "fixed_x, _ = next(iter(test_loader))\n",
        "fixed_x, _ = next(iter(test_loader))\nfixed_x = accel.gather(fixed_x)\n",
    ).replace(
        "import torch\n", "import torch\nimport accel_migrate.runtime as accel\n", 1
    )
    assert _review(source) == []


DENORM = """
import torch
from torch.utils.data import DataLoader
from torchvision.utils import save_image


def denorm(x):
    return (x + 1) / 2


model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(train_set, batch_size=8, shuffle=True)
fixed_x, _ = next(iter(loader))
for epoch in range(3):
    for x, _ in loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        out = denorm(x)
        save_image(out, "train.png")
    save_image(denorm(fixed_x), f"fixed_{epoch}.png")
"""


def test_a_function_handed_the_batch_does_not_return_it_for_every_caller() -> None:
    """`denorm(fixed_x)` is the fixed batch's; `denorm(x)` of the step is not
    (the step's own write of its share is AM044's: `denorm` is not proven to
    keep one row per sample, so it is reported, not gathered)."""
    found = _review(DENORM)
    assert [(c, n) for c, n, _ in found if c != "AM041"] == [("AM044", 21)]
    [(code, line, message)] = [f for f in found if f[0] == "AM041"]
    assert (code, line) == ("AM041", 14)
    assert "(line 22)" in message and "line 21" not in message
    assert "`save_image(...)` writes `fixed_x`" in message


PAIRED = """
import torch
from torch.utils.data import DataLoader


class PairedData:
    def __init__(self, loader_a, loader_b):
        self.loader_a = loader_a
        self.loader_b = loader_b

    def __iter__(self):
        self.iter_a = iter(self.loader_a)
        self.iter_b = iter(self.loader_b)
        return self

    def __next__(self):
        a, a_label = next(self.iter_a)
        b, b_label = next(self.iter_b)
        return {"S": a, "S_label": a_label, "T": b}


class PairedLoader:
    def initialize(self, source, target, batch_size):
        self.loader_s = DataLoader(source, batch_size=batch_size, shuffle=True)
        self.loader_t = DataLoader(target, batch_size=batch_size, shuffle=True)
        self.paired = PairedData(self.loader_s, self.loader_t)
"""


def test_a_draw_in_an_iterator_wrapper_is_not_said_to_be_taken_once() -> None:
    """MCD_DA's PairedData draws `next(self.data_loader_A_iter)` in its
    `__next__`, every step: the finding named it a batch taken once; it now
    names the wrapper and what its batches are (the trials' mcd_two_classifiers)."""
    found = [r for r in _review(PAIRED) if r[0] == "AM006"]
    assert found, _review(PAIRED)
    for _, _, message in found:
        assert "taken once" not in message
        assert "in `PairedData.__next__`, a batch iterator over loaders" in message
        assert "not followed through `PairedData`" in message
