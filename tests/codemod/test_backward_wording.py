"""AM007's findings say the true cause: a second backward with ``inputs=``
cannot be folded into one backward of the summed losses, and a weight read off
the command line is named as a value not known to be a number, not as "losses
of different reductions" (vaegan_equilibrium_t9b_project)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SOURCE = """\
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--weight", type=float, default=0.5)
args = parser.parse_args()
weight = args.weight
enc, dec = nn.Linear(4, 4), nn.Linear(4, 4)
opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
opt_dec = torch.optim.SGD(dec.parameters(), lr=0.1)
for epoch in range(2):
    for (x,) in DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4):
        h = enc(x)
        loss_enc = torch.sum(h.pow(2))
        loss_dec = torch.sum(weight * dec(h).pow(2)) - (1.0 - weight) * loss_enc
        loss_enc.backward(retain_graph=True, inputs=list(enc.parameters()))
        opt_enc.step()
        loss_dec.backward(inputs=list(dec.parameters()))
        opt_dec.step()
    weight = 1
"""


def _am007() -> dict[int, str]:
    result = migrate_source(SOURCE, "train.py")
    return {f.line: f.message for f in result.findings if f.code == "AM007"}


def test_a_backward_limited_by_inputs_is_not_told_to_add_the_losses() -> None:
    message = _am007()[19]
    assert "retain_graph=True" in message
    assert "inputs=" in message and "cannot be added" in message
    assert "adding the losses and calling accel.backward once" not in message


def test_a_weight_read_off_the_command_line_is_not_called_a_loss() -> None:
    message = _am007()[21]
    assert "losses of different reductions" not in message
    assert "`weight` is assigned `args.weight` and `1`" in message
    assert "plain numbers" in message
