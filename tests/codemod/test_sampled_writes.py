"""AM044 sampled-writes: a file the main process writes from the loop's batch."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

_TRAINER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, every):
        self.every = every
{wrapper}
    def train(self, model, tr_loader):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = 0
        for data, label in tr_loader:
            out = model(data)
            loss = torch.nn.functional.cross_entropy(out, label)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % self.every == 0:
                torch.save(data[:4], f"images_{{step}}.pt")
            step += 1


model = torch.nn.Linear(4, 4)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 4, (16,))), batch_size=8)
Trainer(2).train(model, loader)
"""

_WRAPPER = """
    def standard_train(self, model, tr_loader):
        self.train(model, tr_loader)
"""


def _am044(source: str) -> list[tuple[str, int, str]]:
    result = migrate_source(source, "train.py")
    return [(f.status, f.line, f.message) for f in result.findings if f.code == "AM044"]


def test_a_loop_over_a_loader_parameter_that_an_uncalled_wrapper_hands_on_is_reported() -> (
    None
):
    """ylsung/pytorch-adversarial-training's Trainer: ``standard_train`` hands
    its own ``tr_loader`` to ``train``, and nothing in the file calls it, so the
    loop's loader cannot be traced to the prepared DataLoader; the images saved
    from the batch every n steps hold the main process's share. It was silent."""
    found = _am044(_TRAINER.format(wrapper=_WRAPPER))
    assert [(status, line) for status, line, _ in found] == [("needs-review", 22)]
    message = found[0][2]
    assert "the loop over `tr_loader` (line 15)" in message
    assert "the main process's share of the batch" in message


def test_the_same_loop_without_the_wrapper_is_gathered() -> None:
    result = migrate_source(_TRAINER.format(wrapper=""), "train.py")
    assert [(f.status, f.code) for f in result.findings if f.code == "AM044"] == [
        ("fixed", "AM044")
    ]
    assert 'accel.save(accel.gather(data)[:4], f"images_{step}.pt")' in result.output
