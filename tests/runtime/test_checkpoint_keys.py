"""Checkpoints across nn.DataParallel: the migrated script reads the original's
``module.``-prefixed keys, and can write them again (``prefix="module."``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime.checkpoint_keys import add_prefix, without_wrapper_prefix


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)


def _same(a: nn.Module, b: nn.Module) -> bool:
    one, two = a.state_dict(), b.state_dict()
    return one.keys() == two.keys() and all(torch.equal(one[k], two[k]) for k in one)


def test_a_data_parallel_checkpoint_loads_into_the_plain_model() -> None:
    torch.manual_seed(0)
    original = nn.DataParallel(Net())
    saved = original.state_dict()
    assert next(iter(saved)).startswith("module.")
    model = Net()
    accel.load_state_dict(model, saved)  # strict: every key matched
    assert _same(model, original.module)


def test_prefix_writes_keys_the_original_code_loads() -> None:
    torch.manual_seed(1)
    model = Net()
    state = accel.state_dict(model, prefix="module.")
    assert all(key.startswith("module.") for key in state)
    wrapped = nn.DataParallel(Net())
    wrapped.load_state_dict(state)  # strict, as the original script does
    assert _same(wrapped.module, model)
    # The metadata (BatchNorm's version) follows the keys.
    assert state._metadata["module.bn"] == model.state_dict()._metadata["bn"]


def test_plain_keys_and_a_submodule_called_module_are_left_alone() -> None:
    plain = Net().state_dict()
    assert without_wrapper_prefix(Net(), plain) is plain

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = nn.Linear(2, 2)

    own = Holder().state_dict()
    assert without_wrapper_prefix(Holder(), own) is own
    mixed = {"module.conv1.weight": 1, "head.weight": 2}
    assert without_wrapper_prefix(Net(), mixed) is mixed


def test_round_trip() -> None:
    state = Net().state_dict()
    back = without_wrapper_prefix(Net(), add_prefix(state, "module."))
    assert list(back) == list(state)
    assert back._metadata == {k: v for k, v in state._metadata.items()}


def test_strict_load_still_reports_missing_keys() -> None:
    state = {f"module.{k}": v for k, v in Net().state_dict().items() if "bn" not in k}
    with pytest.raises(RuntimeError, match="Missing key"):
        accel.load_state_dict(Net(), state)
