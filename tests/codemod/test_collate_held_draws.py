"""Draws a ``collate_fn`` makes through what a helper module holds (round t13b,
AssemblyAI's speech-recognition tutorial): the loader's ``collate_fn`` is
``lambda x: data_processing(x, "train")`` with ``data_processing`` imported
from utils.py, which calls the module-level ``train_audio_transforms =
nn.Sequential(MelSpectrogram(...), FrequencyMasking(...))`` whose masking
module draws with ``torch.rand`` in its ``forward``. Before, AM020 followed
neither the lambda to the imported function nor the function to the
module-level object, and the draws went unnamed (the runtime stopped the run
only because the collate also padded to the batch's longest: with a fixed
length the losses differed with no finding naming the draws)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_draws import module_held_draws
from accel_migrate.codemod.project_view import ProjectView, read_project

AUDIO = """\
import torch
import torch.nn as nn


class FrequencyMasking(nn.Module):
    def __init__(self, param):
        super().__init__()
        self.param = param

    def forward(self, spec):
        width = int(torch.rand(1) * self.param)
        return spec.clone().index_fill_(0, torch.arange(width), 0.0)


class Scale(nn.Module):
    def forward(self, spec):
        return spec * 2.0
"""

UTILS = """\
import torch
import torch.nn as nn

import audio

train_transforms = nn.Sequential(audio.Scale(), audio.FrequencyMasking(2))
valid_transforms = audio.Scale()


def data_processing(data, data_type="train"):
    specs, labels = [], []
    for x, y in data:
        if data_type == "train":
            specs.append(train_transforms(x))
        else:
            specs.append(valid_transforms(x))
        labels.append(y)
    return torch.stack(specs), torch.stack(labels)


def plain_processing(data):
    return torch.stack([valid_transforms(x) for x, _ in data]), torch.stack(
        [y for _, y in data]
    )
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader

from utils import data_processing, plain_processing

data = [(torch.randn(4), torch.tensor(i % 2)) for i in range(16)]
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=4, collate_fn=lambda x: {call})
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _findings(tmp_path: Path, call: str, batch: bool) -> list:
    files = {"audio.py": AUDIO, "utils.py": UTILS, "main.py": MAIN.format(call=call)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    script = tmp_path / "main.py"
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(tmp_path / name) for name in files])
        options = MigrateOptions(project=view.facts_for(str(script)))
    return migrate_source(script.read_text(), str(script), options).findings


def test_a_function_calling_a_module_level_drawing_object_draws(
    tmp_path: Path,
) -> None:
    for name, text in {"audio.py": AUDIO, "utils.py": UTILS}.items():
        (tmp_path / name).write_text(text)
    probe = tmp_path / "probe.py"
    probe.write_text("import utils\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["utils.data_processing"].draws == (
        (
            "",
            "`torch.rand` (in `FrequencyMasking`), called as `train_transforms(...)`",
        ),
    )
    # a module-level object whose call draws nothing
    assert table["utils.plain_processing"].draws == ()


def test_module_held_draws_reads_containers_and_single_objects() -> None:
    tree = ast.parse(
        "a = nn.Sequential(Plain(), Masking())\nb = Masking()\nc = Plain()\n"
        "d = nn.Sequential(Plain())\ne = Masking()\ne = Plain()\n"
    )
    assigned: dict[str, list[ast.expr]] = {}
    for statement in tree.body:
        assert isinstance(statement, ast.Assign)
        target = statement.targets[0]
        assert isinstance(target, ast.Name)
        assigned.setdefault(target.id, []).append(statement.value)

    def dotted(expr: ast.expr) -> str:
        return "torch.nn.Sequential" if ast.unparse(expr) == "nn.Sequential" else ""

    def call_draw(call: ast.Call) -> str:
        return "`torch.rand`" if ast.unparse(call.func) == "Masking" else ""

    # `e` is bound twice: which object it holds is not known
    assert module_held_draws(assigned, dotted, call_draw) == {
        "a": "`torch.rand`, called as `a(...)`",
        "b": "`torch.rand`, called as `b(...)`",
    }


@pytest.mark.parametrize("batch", [False, True])
def test_a_lambda_collate_calling_an_imported_drawing_function_is_named(
    tmp_path: Path, batch: bool
) -> None:
    findings = _findings(tmp_path, 'data_processing(x, "train")', batch)
    found = [f for f in findings if f.code == "AM020"]
    assert len(found) == 1 and found[0].status == "needs-review", found
    assert (
        "the `collate_fn` (a lambda that calls `data_processing` in utils.py) "
        "(`torch.rand` (in `FrequencyMasking`), called as `train_transforms(...)`)"
        in found[0].message
    )


def test_a_lambda_collate_whose_function_draws_nothing_is_not_named(
    tmp_path: Path,
) -> None:
    findings = _findings(tmp_path, "plain_processing(x)", False)
    assert not [f for f in findings if f.code == "AM020"]
