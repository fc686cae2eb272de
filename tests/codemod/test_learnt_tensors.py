"""AM031: a tensor trained outside any nn.Module blocks the file (all or nothing);
fixtures/learnt_tensors holds the golden pairs."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

PLAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 3), torch.randn(64, 1)), batch_size=8)
w = torch.zeros(3, 1, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    ((x @ w - y) ** 2).mean().backward()
    optimizer.step()
"""


def test_a_plain_tensor_an_optimizer_steps_leaves_the_file_unchanged() -> None:
    result = migrate_source(PLAIN, "train.py")
    assert result.output == PLAIN
    (finding,) = result.findings
    assert (finding.line, finding.code, finding.status) == (5, "AM031", "needs-review")
    assert "stepped by the optimizer `torch.optim.SGD([w], lr=0.1)`, line 6" in (
        finding.message
    )
    assert "the gradient of `w` would stay each process's own" in finding.message
    assert "Nothing in this file was migrated" in finding.message


def test_a_bare_parameter_and_a_later_requires_grad_are_learnt_tensors_too() -> None:
    for made in (
        "w = torch.nn.Parameter(torch.zeros(3, 1))\n",
        "w = torch.zeros(3, 1)\nw.requires_grad_()\n",
    ):
        source = PLAIN.replace("w = torch.zeros(3, 1, requires_grad=True)\n", made)
        result = migrate_source(source, "train.py")
        assert result.output == source, made
        assert [f.code for f in result.findings] == ["AM031"], made


def test_a_hand_update_by_grad_is_training() -> None:
    source = PLAIN.replace("optimizer = torch.optim.SGD([w], lr=0.1)\n", "").replace(
        "    optimizer.zero_grad()\n", ""
    )
    source = source.replace(
        "    optimizer.step()\n",
        "    with torch.no_grad():\n        w -= 0.1 * w.grad\n        w.grad.zero_()\n",
    )
    result = migrate_source(source, "train.py")
    assert result.output == source
    (finding,) = result.findings
    assert "updated by hand at line 9: `w -= 0.1 * w.grad`" in finding.message


def test_a_skip_comment_lifts_the_block() -> None:
    source = PLAIN.replace(
        "requires_grad=True)\n", "requires_grad=True)  # accel-migrate: skip[AM031]\n"
    )
    result = migrate_source(source, "train.py")
    assert "accel.prepare_dataloader(" in result.output
    assert "AM031" not in {f.code for f in result.findings}


def test_the_same_weights_in_a_module_are_migrated() -> None:
    source = (
        PLAIN.replace(
            "w = torch.zeros(3, 1, requires_grad=True)\n", "w = torch.nn.Linear(3, 1)\n"
        )
        .replace("[w]", "w.parameters()")
        .replace("x @ w", "w(x)")
    )
    result = migrate_source(source, "train.py")
    assert "accel.prepare_model(torch.nn.Linear(3, 1))" in result.output
    assert not result.needs_review


def test_without_a_data_loader_the_stepped_tensor_still_blocks() -> None:
    # Nothing is sharded (the runtime splits loaders only): every process
    # computes the same gradient, but the prepared optimizer would step a
    # tensor of no prepared model, which the runtime refuses at the first step
    # (UnpreparedParametersError; it was migrated so before t10a). Nothing is
    # divided: the file is left whole, and the finding says why.
    source = PLAIN.replace(
        "loader = DataLoader(TensorDataset(torch.randn(64, 3), torch.randn(64, 1)), "
        "batch_size=8)\n",
        "loader = [(torch.randn(8, 3), torch.randn(8, 1))]\n",
    )
    result = migrate_source(source, "train.py")
    assert result.output == source
    (finding,) = [f for f in result.findings if f.code == "AM031"]
    assert "no data loader feeds the training" in finding.message
    assert "nothing to divide" in finding.message
