"""AM042 follows a backpropagated loss back to a layer-running model method
through the ways real steps combine its output (LightGCN-PyTorch's
``BPRLoss.stageOne``: ``loss, reg_loss = self.model.bpr_loss(users, pos, neg)``,
``loss = loss + reg_loss``, ``loss.backward()``); before, only a loss that was
the method's value itself (or its ``.mean()``) was followed, and the batch run
stopped at the runtime's "received gradients but was never called" instead.
Round t16b added a negation and tensor-method scalings (``.mul(-1)``), which
left beta-tcvae's ``vae.elbo(x, n)`` step migrated (LOUD at world 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source

MODEL = """\
import torch
from torch import nn


class Rec(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def bpr_loss(self, users, pos, neg):
        u, p, n = self.emb(users), self.emb(pos), self.emb(neg)
        reg = u.norm(2).pow(2) / float(len(users))
        loss = torch.nn.functional.softplus((u * n).sum(1) - (u * p).sum(1)).mean()
        return loss, reg

    def forward(self, users, items):
        return (self.emb(users) * self.emb(items)).sum(1)
"""

MAIN = """\
import torch

from rec import Rec

model = Rec()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
users, pos, neg = torch.arange(4), torch.arange(4), torch.arange(4, 8)
for step in range(3):
{step}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

STEPS = {
    "unpacked and summed": (
        "    loss, reg_loss = model.bpr_loss(users, pos, neg)\n"
        "    reg_loss = reg_loss * 1e-4\n"
        "    loss = loss + reg_loss"
    ),
    "subscripted": "    loss = model.bpr_loss(users, pos, neg)[0]",
    "a weighted term": (
        "    out = model.bpr_loss(users, pos, neg)\n"
        "    loss = out[0] + 1e-4 * out[1]"
    ),
    # rtqichen/beta-tcvae's `obj.mean().mul(-1).backward()` (round t16b)
    "scaled by a tensor method": (
        "    obj, reg = model.bpr_loss(users, pos, neg)\n"
        "    loss = obj.mean().mul(-1).add(reg.div(10))"
    ),
    # ikostrikov/pytorch-flows' `loss = -model.log_probs(data).mean()`
    "negated": "    loss = -model.bpr_loss(users, pos, neg)[0].mean(0)",
}


@pytest.mark.parametrize("shape", sorted(STEPS))
def test_a_combined_method_loss_is_blocked(tmp_path: Path, shape: str) -> None:
    (tmp_path / "rec.py").write_text(MODEL)
    source = MAIN.format(step=STEPS[shape])
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert result.output == source  # left whole
    found = [f for f in result.findings if f.code == "AM042"]
    assert len(found) == 1 and found[0].status == "needs-review", found
    assert "`bpr_loss` of `Rec` in rec.py runs the model's layers" in found[0].message


def test_a_loss_from_the_models_call_is_not_blocked(tmp_path: Path) -> None:
    (tmp_path / "rec.py").write_text(MODEL)
    source = MAIN.format(
        step="    loss = -model(users, pos).mean() + 1e-4 * model.emb.weight.norm()"
    )
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert not [f for f in result.findings if f.code == "AM042"]
    assert result.output != source


def test_the_finding_quotes_the_call_that_runs_the_layers(tmp_path: Path) -> None:
    """The message names the method's real layer call (``self.emb(users)``),
    not a generic ``self(...)`` the method never makes."""
    (tmp_path / "rec.py").write_text(MODEL)
    source = MAIN.format(step=STEPS["subscripted"])
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    (found,) = [f for f in result.findings if f.code == "AM042"]
    assert "runs the model's layers inside the method (`self.emb(users)`)" in (
        found.message
    )
    assert "self(...)" not in found.message


ACTOR_CRITIC = """\
import torch
import torch.nn.functional as F
from torch import nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 1)

    def Q1(self, state, action):
        return self.l1(torch.cat([state, action], 1))

    def forward(self, state, action):
        return self.l1(torch.cat([state, action], 1))


actor = nn.Linear(4, 2)
critic = Critic()
actor_optimizer = torch.optim.Adam({params}, lr=3e-4)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)
for step in range(3):
    state, target = torch.randn(8, 4), torch.randn(8, 1)
    critic_loss = F.mse_loss(critic(state, actor(state).detach()), target)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    actor_loss = -critic.Q1(state, actor(state)).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
"""


def test_a_method_whose_gradients_no_following_step_takes_is_not_reported() -> None:
    """TD3's actor step: ``-critic.Q1(state, actor(state)).mean()`` backpropagated,
    then ``actor_optimizer.step()`` over the actor's parameters only: the
    critic's gradients from it are never stepped (the critic's own
    ``zero_grad`` clears them), so AM042 does not leave the file whole
    (td3_replay_soft_update_t7c_project_batch, MATCH before round t16b's
    negation made AM042 reach it); an actor optimizer that also holds the
    critic's parameters still gets the finding."""
    found = migrate_source(
        ACTOR_CRITIC.format(params="actor.parameters()"), "td3.py"
    ).findings
    assert not [f for f in found if f.code == "AM042"], found
    shared = "list(actor.parameters()) + list(critic.parameters())"
    found = migrate_source(ACTOR_CRITIC.format(params=shared), "td3.py").findings
    assert [f.status for f in found if f.code == "AM042"] == ["needs-review"]


BPR_TRAINER = """\
import torch
from torch import nn, optim


class Rec(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def bpr_loss(self, users):
        return self.emb(users).pow(2).mean()

    def forward(self, users):
        return self.emb(users)


class BPRLoss:
    def __init__(self, recmodel):
        self.model = recmodel
        self.opt = optim.Adam({params}, lr=1e-3)

    def stage_one(self, users):
        loss = self.model.bpr_loss(users)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


model = Rec()
bpr = BPRLoss(model)
for step in range(3):
    bpr.stage_one(torch.randint(0, 10, (8,)))
"""


def test_an_optimizer_over_the_same_model_by_another_name_keeps_the_finding() -> None:
    """LightGCN's ``BPRLoss``: ``self.model = recmodel`` and ``optim.Adam(
    recmodel.parameters())``, then ``self.model.bpr_loss(...)`` backpropagated
    and ``self.opt.step()``: the stepped optimizer holds the method's model under
    another name, so the step is still reported (lightgcn_bpr_t13c_project_batch
    trained LOUD, not FLAGGED, while the receivers were compared as written)."""
    for params in ("recmodel.parameters()", "self.model.parameters()"):
        found = migrate_source(BPR_TRAINER.format(params=params), "bpr.py").findings
        assert [f.status for f in found if f.code == "AM042"] == [
            "needs-review"
        ], params


def test_a_second_step_in_the_block_that_takes_the_methods_gradients_keeps_it() -> None:
    """rev18a: only the first ``.step()`` after the backward was looked at; the
    critic's own step after the actor's takes ``critic.Q1``'s gradients."""
    source = ACTOR_CRITIC.format(params="actor.parameters()").replace(
        "    actor_optimizer.step()\n",
        "    actor_optimizer.step()\n    critic_optimizer.step()\n",
    )
    found = migrate_source(source, "td3.py").findings
    assert [f.status for f in found if f.code == "AM042"] == ["needs-review"]
