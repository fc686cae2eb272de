"""``accel.update_bn`` (runtime/swa.py): torch's ``swa_utils.update_bn`` where
the loader is not the runtime's (one process, a plain script). At two processes
over a sharded loader, the soundness case ``swa_update_bn_r16`` checks the
averaged model's statistics against the original's."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, update_bn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel


def test_a_plain_script_gets_torchs_statistics() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
    loader = DataLoader(TensorDataset(torch.randn(40, 4) * 3 + 1), batch_size=8)
    ours = AveragedModel(net)
    theirs = copy.deepcopy(ours)
    accel.update_bn(loader, ours)
    update_bn(loader, theirs)
    bn_ours, bn_theirs = ours.module[1], theirs.module[1]
    assert type(bn_ours) is nn.BatchNorm1d  # not converted: nothing is sharded
    assert torch.equal(bn_ours.running_mean, bn_theirs.running_mean)
    assert torch.equal(bn_ours.running_var, bn_theirs.running_var)
    assert not torch.equal(bn_ours.running_mean, torch.zeros(6))
