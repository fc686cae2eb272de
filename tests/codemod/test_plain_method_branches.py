"""AM039 and a method that runs no submodule (round t12b: minRF's DiT
LabelEmbedder, ``if (train and use_dropout) or force_drop_ids is not None:
labels = self.token_drop(labels, force_drop_ids)``). ``token_drop`` is
``torch.where`` over a draw: running it on some processes and not on others
changes no parameter's gradient, so it is not a submodule call, and the
model is migrated (AM039 left the file whole, claiming a submodule ran on a
condition of the batch). A branch that runs a submodule is still reported."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden, dropout_prob):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.num_classes = num_classes
        self.dropout_prob = dropout_prob

    def token_drop(self, labels, force_drop_ids=None):
        if force_drop_ids is None:
            drop_ids = torch.rand(labels.shape[0]) < self.dropout_prob
        else:
            drop_ids = force_drop_ids == 1
        return torch.where(drop_ids, self.num_classes, labels)

    def forward(self, labels, train, force_drop_ids=None):
        use_dropout = self.dropout_prob > 0
        if (train and use_dropout) or (force_drop_ids is not None):
            labels = {call}
        return self.embedding_table(labels)


model = LabelEmbedder(3, 4, 0.1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randint(0, 3, (8,))), batch_size=4)
for (y,) in loader:
    loss = model(y, model.training).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_method_of_tensors_only_is_not_a_submodule() -> None:
    result = migrate_source(
        SCRIPT.format(call="self.token_drop(labels, force_drop_ids)")
    )
    assert not [f for f in result.findings if f.code == "AM039"], result.findings
    assert "accel.prepare_model(" in str(result.output)


@pytest.mark.parametrize("call", ["self.proj(labels)", "self.embedding_table(labels)"])
def test_a_submodule_run_on_the_branch_is_still_reported(call: str) -> None:
    result = migrate_source(SCRIPT.format(call=call))
    assert [f for f in result.findings if f.code == "AM039"], result.findings
