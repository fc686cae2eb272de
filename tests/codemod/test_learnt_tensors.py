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


NO_LOADER = PLAIN.replace(
    "loader = DataLoader(TensorDataset(torch.randn(64, 3), torch.randn(64, 1)), "
    "batch_size=8)\n",
    "loader = [(torch.randn(8, 3), torch.randn(8, 1))]\n",
)


def test_without_a_data_loader_an_optimizer_over_it_is_still_reported() -> None:
    # Nothing is sharded, so every process computes the same gradient; but the
    # migrated optimizer is prepared, and the runtime refuses a tensor of no
    # prepared model at its first step (UnpreparedParametersError): reported
    # here instead, with that reason, and the file is left whole.
    result = migrate_source(NO_LOADER, "train.py")
    assert result.output == NO_LOADER
    (finding,) = [f for f in result.findings if f.code == "AM031"]
    assert (finding.line, finding.status) == (5, "needs-review")
    assert "No data loader this file shards feeds it" in finding.message
    assert "UnpreparedParametersError" in finding.message
    assert "nothing to divide between processes" in finding.message
    assert "`model.w = nn.Parameter(...)`" in finding.message


def test_without_a_data_loader_a_hand_update_is_not_reported() -> None:
    # Updated by hand, the tensor meets no prepared optimizer, and every process
    # computes the same gradient: nothing to report.
    source = NO_LOADER.replace("optimizer = torch.optim.SGD([w], lr=0.1)\n", "")
    source = source.replace("    optimizer.zero_grad()\n", "").replace(
        "    optimizer.step()\n",
        "    with torch.no_grad():\n        w -= 0.1 * w.grad\n        w.grad.zero_()\n",
    )
    result = migrate_source(source, "train.py")
    assert "AM031" not in {f.code for f in result.findings}


AGENT = """\
import torch
import torch.nn as nn


class Agent(object):
    def __init__(self, lr):
        self.policy = nn.Linear(3, 1)
        self.policy_optim = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_optim = torch.optim.Adam([self.log_alpha], lr=lr)

    def update(self, states):
        log_pi = self.policy(states)
        policy_loss = (self.log_alpha.exp().detach() * log_pi).mean()
        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()
        alpha_loss = -(self.log_alpha * (log_pi + 1.0).detach()).mean()
        self.alpha_optim.zero_grad()
        alpha_loss.backward()
        self.alpha_optim.step()


agent = Agent(3e-4)
for step in range(4):
    agent.update(torch.randn(8, 3))
"""


def test_an_attribute_of_a_plain_class_an_optimizer_steps_is_reported() -> None:
    # SAC's temperature: `self.log_alpha = torch.zeros(1, requires_grad=True)` in
    # the agent's __init__, stepped by `Adam([self.log_alpha])`.
    result = migrate_source(AGENT, "train.py")
    assert result.output == AGENT
    (finding,) = [f for f in result.findings if f.code == "AM031"]
    assert (finding.line, finding.status) == (9, "needs-review")
    assert "`self.log_alpha` is a tensor this script trains" in finding.message
    assert "Adam([self.log_alpha], lr=lr)`, line 10" in finding.message
    assert "`model.log_alpha = nn.Parameter(...)`" in finding.message


def test_a_module_attribute_or_one_no_optimizer_steps_is_not_this_rule() -> None:
    # A module's own tensor attribute is AM045's; a plain class's tensor that
    # only feeds autograd (a PINN's collocation points) is data.
    as_module = AGENT.replace("class Agent(object):", "class Agent(nn.Module):")
    as_module = as_module.replace(
        "    def __init__(self, lr):\n",
        "    def __init__(self, lr):\n        super().__init__()\n",
    )
    assert "AM031" not in {f.code for f in migrate_source(as_module, "a.py").findings}
    data_only = AGENT.replace("[self.log_alpha]", "self.policy.parameters()")
    assert "AM031" not in {f.code for f in migrate_source(data_only, "a.py").findings}
