"""AM032 for a replay buffer a training step fills (``replay_buffers``): an
object of the file or of another module whose method appends what the step
hands it to a list another method picks items of (igebm's ``SampleBuffer``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

BUFFERS = """
import random

import torch


class SampleBuffer:
    def __init__(self, max_samples=100):
        self.max_samples = max_samples
        self.buffer = []

    def __len__(self):
        return len(self.buffer)

    def push(self, samples):
        samples = samples.detach().to("cpu")
        for sample in samples:
            self.buffer.append(sample)
            if len(self.buffer) > self.max_samples:
                self.buffer.pop(0)

    def get(self, n):
        return torch.stack(random.choices(self.buffer, k=n), 0)


class History:
    def __init__(self):
        self.values = []

    def add(self, value):
        self.values.append(value)

    def mean(self):
        return sum(self.values) / len(self.values)
"""

STEP = """
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
buffer = SampleBuffer()
history = History()
for (x,) in loader:
    neg = buffer.get(x.shape[0]) if len(buffer) else torch.rand_like(x)
    loss = model(x).mean() - model(neg).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    buffer.push(neg + 0.01 * x)
    history.add(loss.item())
    print(history.mean())
"""


def _findings(source: str, path: Path) -> list[str]:
    path.write_text(source)
    result = migrate_source(source, str(path), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM032"
    ]


def test_fact_names_the_storing_method(tmp_path: Path) -> None:
    (tmp_path / "buffers.py").write_text(BUFFERS)
    (tmp_path / "train.py").write_text("from buffers import SampleBuffer, History\n")
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert facts["buffers.SampleBuffer"].stored == (("push", "buffer"),)
    # a log of numbers, summed up, is not a buffer read back
    assert facts["buffers.History"].stored == ()


def test_an_imported_buffer_filled_in_the_step(tmp_path: Path) -> None:
    (tmp_path / "buffers.py").write_text(BUFFERS)
    head = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "from buffers import SampleBuffer, History\n"
    )
    found = _findings(head + STEP, tmp_path / "train.py")
    assert len(found) == 1, found
    assert found[0].startswith(
        "16: AM032 [needs-review] `SampleBuffer.push` in buffers.py"
    )
    assert "keeps what this training step hands it in `buffer`" in found[0]


def test_a_buffer_of_the_file_filled_in_the_step(tmp_path: Path) -> None:
    head = "from torch.utils.data import DataLoader, TensorDataset\n"
    source = BUFFERS + head + STEP
    found = _findings(source, tmp_path / "train.py")
    assert len(found) == 1, found
    assert "`SampleBuffer.push` keeps what" in found[0]


WINDOWS = """
import random

import torch


class LossWindow:
    def __init__(self, window=20):
        self.window = window
        self.values = []

    def update(self, value):
        self.values.append(value.detach())

    def recent(self):
        return torch.stack(self.values[-self.window:]).mean()

    def last(self):
        return self.values[-1]


class ChunkBuffer:
    def __init__(self):
        self.buffer = []

    def push(self, samples):
        self.buffer.extend(samples.detach())

    def get(self, n):
        start = random.randint(0, len(self.buffer) - n)
        return torch.stack(self.buffer[start:start + n])
"""


def test_a_window_of_the_last_values_is_a_log_not_a_buffer(tmp_path: Path) -> None:
    # a slice is a window, not a pick: a smoothed log of the losses; a window
    # from a random start is a pick
    (tmp_path / "windows.py").write_text(WINDOWS)
    (tmp_path / "train.py").write_text("from windows import LossWindow, ChunkBuffer\n")
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert facts["windows.LossWindow"].stored == ()
    assert facts["windows.ChunkBuffer"].stored == (("push", "buffer"),)


def test_a_window_of_the_file_filled_in_the_step_is_not_reported(
    tmp_path: Path,
) -> None:
    step = STEP.replace("SampleBuffer()", "ChunkBuffer()").replace(
        "History()", "LossWindow()"
    )
    step = step.replace("history.add(loss.item())", "history.update(loss)")
    step = step.replace("history.mean()", "history.recent().item()")
    source = WINDOWS + "from torch.utils.data import DataLoader, TensorDataset\n"
    found = _findings(source + step, tmp_path / "train.py")
    assert len(found) == 1, found
    assert "`ChunkBuffer.push` keeps what" in found[0]
    assert "LossWindow" not in "\n".join(found)


def test_a_local_class_is_read_once_per_tree(tmp_path: Path, monkeypatch) -> None:
    from accel_migrate.codemod import replay_buffers

    read: list[str] = []

    def counted(cls):  # type: ignore[no-untyped-def]
        read.append(cls.name)
        return original(cls)

    original = replay_buffers.stored
    monkeypatch.setattr(replay_buffers, "stored", counted)
    step = STEP.replace(
        "buffer.push(neg + 0.01 * x)",
        "buffer.push(neg + 0.01 * x)\n    buffer.push(x)\n    buffer.push(-x)",
    )
    source = BUFFERS + "from torch.utils.data import DataLoader, TensorDataset\n"
    found = _findings(source + step, tmp_path / "train.py")
    assert len(found) == 3, found
    assert read.count("SampleBuffer") == 1, read


NOT_PICKED = """
import torch


class WeightedHistory:
    def __init__(self):
        self.values = []

    def add(self, value):
        self.values.append(value)

    def weights(self):
        return self.sample_weights(self.values)

    def sample_weights(self, values):
        return [1.0 for _ in values]

    def cfg(self):
        return choices_cfg(self.values), downsample(self.values)
"""


def test_names_holding_choice_or_sample_are_not_draws(tmp_path: Path) -> None:
    """``self.sample_weights(self.values)``, ``choices_cfg(...)``,
    ``downsample(...)`` read the list but draw nothing: not a buffer."""
    (tmp_path / "buffers.py").write_text(NOT_PICKED)
    (tmp_path / "train.py").write_text("from buffers import WeightedHistory\n")
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert facts["buffers.WeightedHistory"].stored == ()


def test_spelled_draws() -> None:
    from accel_migrate.codemod.random_names import spelled_draw

    for name in ("random.choices", "np.random.choice", "torch.multinomial", "sample"):
        assert spelled_draw(name, picks_only=True), name
    assert spelled_draw("self.rng.choice", picks_only=True)
    assert spelled_draw("torch.randint") and not spelled_draw("torch.manual_seed")
    for name in ("self.sample_weights", "choices_cfg", "downsample", "F.downsample"):
        assert not spelled_draw(name), name
        assert not spelled_draw(name, picks_only=True), name
