"""A script that drives a batch-migrated class training models of its own
(``ProjectFacts.drives_trainer``), and the methods of a writing class that
write nothing (``method_writes``): sfujim/TD3's main.py, which calls
``policy.train(replay_buffer, batch_size)`` of TD3.py's ``TD3`` (its own
actor, critic and Adam optimizers) and has no backward of its own."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

POLICY = """\
import copy

import torch
import torch.nn.functional as F


class Policy(object):
    def __init__(self, dim):
        self.actor = torch.nn.Linear(dim, 1)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-3)

    def select_action(self, state):
        return self.actor(state).detach()

    def train(self, batch):
        loss = F.mse_loss(self.actor(batch), self.actor_target(batch))
        self.actor_optimizer.zero_grad()
        loss.backward()
        self.actor_optimizer.step()

    def save(self, filename):
        torch.save(self.actor.state_dict(), filename + "_actor")

    def checkpoint(self, filename):
        self.save(filename)
"""

SCRIPT = """\
import os

import torch

import policies

if not os.path.exists("./results"):
    os.makedirs("./results")
policy = policies.Policy(3)
for t in range(4):
    policy.select_action(torch.randn(1, 3))
    policy.train(torch.randn(8, 3))
    print("step", t)
policy.checkpoint("./results/policy")
"""


def _migrate(tmp_path: Path, batch: bool) -> tuple[str, list]:
    (tmp_path / "policies.py").write_text(POLICY)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    files = [str(script), str(tmp_path / "policies.py")] if batch else [str(script)]
    view = ProjectView(files)
    result = migrate_source(
        script.read_bytes(),
        str(script),
        MigrateOptions(project=view.facts_for(str(script))),
    )
    return result.output.decode(), list(result.findings)  # type: ignore[union-attr]


def test_the_driver_of_a_migrated_trainer_is_migrated(tmp_path: Path) -> None:
    """Before, main.py was skipped as "not a training entry point" while
    policies.py trained on every process: `os.makedirs` without exist_ok
    raced (FileExistsError on one process) and every process printed."""
    output, findings = _migrate(tmp_path, batch=True)
    assert 'os.makedirs("./results", exist_ok=True)' in output
    assert 'accel.print("step", t)' in output
    assert not [f for f in findings if f.status == "needs-review"]
    facts = ProjectView(
        [str(tmp_path / "main.py"), str(tmp_path / "policies.py")]
    ).facts_for(str(tmp_path / "main.py"))
    fact = dict(facts.helpers)["policies.Policy"]
    assert fact.migrated_trainer.startswith("`train` calls backward (line 19)")
    assert facts.drives_trainer


def test_only_the_writing_methods_are_followed_by_a_barrier(tmp_path: Path) -> None:
    """`checkpoint` writes through `self.save`; `select_action` and `train`
    (which calls the `self.actor` model) write nothing and get no barrier
    (before: one after every call of every method, also in evaluation loops)."""
    output, findings = _migrate(tmp_path, batch=True)
    assert 'policy.checkpoint("./results/policy")\naccel.barrier()\n' in output
    assert output.count("accel.barrier()") == 1
    barriers = [f for f in findings if f.code == "AM017" and "barrier" in f.message]
    assert [f.line for f in barriers] == [14]


def test_the_quiet_methods_of_a_writing_class(tmp_path: Path) -> None:
    (tmp_path / "policies.py").write_text(POLICY)
    (tmp_path / "main.py").write_text(SCRIPT)
    view = ProjectView([str(tmp_path / "main.py"), str(tmp_path / "policies.py")])
    fact = dict(view.facts_for(str(tmp_path / "main.py")).helpers)["policies.Policy"]
    assert fact.writes == ("torch.save",)
    assert fact.quiet_methods == ("__init__", "select_action", "train")


def test_a_single_file_run_leaves_the_driver_whole(tmp_path: Path) -> None:
    """With main.py alone, policies.py is read, not written: it is left whole,
    and so is main.py (AM004 names the class), as before."""
    output, findings = _migrate(tmp_path, batch=False)
    assert output == SCRIPT
    assert [f.code for f in findings if f.status == "needs-review"] == ["AM004"]
