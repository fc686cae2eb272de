"""A trainer class reached through a package's re-export (ikostrikov's PPO:
``from a2c_ppo_acktr import algo`` then ``algo.PPO(actor_critic, ...)``, with
``from .ppo import PPO`` in ``algo/__init__.py``): the project view, the
batch's callers and AM103's pairing of a trainer with its importer follow the
re-export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.codemod import migrate_source

PPO = """\
import torch


class PPO:
    def __init__(self, actor_critic, lr):
        self.actor_critic = actor_critic
        self.optimizer = torch.optim.Adam(actor_critic.parameters(), lr=lr)

    def update(self, obs, ret):
        value = self.actor_critic(obs)
        loss = (value.squeeze(1) - ret).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""

MODEL = """\
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = nn.Linear(4, 1)

    def forward(self, obs):
        return self.v(obs)
"""

MAIN = """\
import torch

from pkg import algo
from pkg.model import Policy

actor_critic = Policy()
agent = algo.PPO(actor_critic, 1e-3)
for j in range(3):
    print(agent.update(torch.randn(8, 4), torch.randn(8)))
torch.save(actor_critic.state_dict(), "policy.pt")
"""


def _project(root: Path, model: str = MODEL, ppo: str = PPO) -> None:
    (root / "pkg" / "algo").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "algo" / "__init__.py").write_text("from .ppo import PPO  # noqa\n")
    (root / "pkg" / "algo" / "ppo.py").write_text(ppo)
    (root / "pkg" / "model.py").write_text(model)
    (root / "main.py").write_text(MAIN)


def _batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, list[str]]:
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    return {
        f["path"]: [x["code"] for x in f["findings"] if x["status"] != "fixed"]
        for f in report["files"]
        if f["status"] != "skipped"
    } | {f["path"]: ["changed"] for f in report["files"] if f["status"] == "changed"}


def test_a_script_handing_its_model_to_a_re_exported_trainer(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _project(root)
    script = root / "main.py"
    result = migrate_source(script.read_bytes(), str(script))
    # before: "not a training entry point", no finding, while each process
    # trained a full copy in pkg/algo/ppo.py
    assert not result.changed and result.skip_reason is None
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert finding.line == 7 and "`PPO` in pkg/algo/ppo.py" in finding.message


def test_the_batch_migrates_both_through_the_re_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(tmp_path / "proj")
    files = _batch(tmp_path, monkeypatch, capsys)
    assert files["proj/main.py"] == ["changed"]
    assert files["proj/pkg/algo/ppo.py"] == ["changed"]


def test_a_trainer_whose_importer_is_left_whole_through_the_re_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = MODEL.replace("return self.v(obs)", "raise NotImplementedError").replace(
        "class Policy(nn.Module):",
        "class Policy(nn.Module):\n    def value(self, obs):\n        return self.v(obs)\n",
    )
    ppo = PPO.replace("self.actor_critic(obs)", "self.actor_critic.value(obs)").replace(
        "        self.optimizer.step()",
        "        torch.nn.utils.clip_grad_norm_(self.actor_critic.parameters(), 0.5)\n"
        "        self.optimizer.step()",
    )
    _project(tmp_path / "proj", model, ppo)
    files = _batch(tmp_path, monkeypatch, capsys)
    # main.py is left whole (AM042: the policy is never called); ppo.py, reached
    # through algo/__init__.py's re-export, is left whole with it (AM103)
    # instead of calling accel.backward on a model nobody prepared
    assert files["proj/main.py"] == ["AM042"]
    assert files["proj/pkg/algo/ppo.py"] == ["AM103"]
