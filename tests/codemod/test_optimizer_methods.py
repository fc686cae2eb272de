"""A model class's method that hands back an optimizer over the model's own
parameters (minGPT's ``configure_optimizers``, groups built from parameter
NAMES: ``param_dict[pn] for pn in sorted(decay)``) trains the instance it is
called on, in the files that call it: its own file is not asked to prepare an
instance (AM004). Anything short of that proof keeps AM004's finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.codemod.test_golden_projects import migrate_tree
from tests.conftest import FIXTURES

PROJECT = FIXTURES / "projects" / "mingpt_named_groups" / "in"
TRAINED_HERE = "`GPT` is trained but no instance is built in this file"
NOT_SHOWN = "so accel-migrate cannot show that it trains only the `GPT` it is called on"


def _migrate(tmp_path: Path, old: str = "", new: str = "") -> dict[str, list[str]]:
    root = tmp_path / "in"
    shutil.copytree(PROJECT, root)
    model = root / "mylib" / "model.py"
    if old:
        source = model.read_text()
        assert old in source
        model.write_text(source.replace(old, new))
    return {
        rel.as_posix(): [f"{f.code} {f.status} {f.message}" for f in r.findings]
        for rel, r in migrate_tree(root).items()
    }


def test_name_grouped_parameters_are_the_models_own(tmp_path: Path) -> None:
    findings = _migrate(tmp_path)
    assert not any(TRAINED_HERE in f for f in findings["mylib/model.py"])
    assert any(
        f.startswith("AM005 fixed `GPT.configure_optimizers`")
        for f in findings["mylib/trainer.py"]
    )
    assert not any("AM103" in f for fs in findings.values() for f in fs)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(
            "    def forward(self, idx, targets=None):\n",
            "    def fit(self, cfg):\n"
            "        self.optimizer = self.configure_optimizers(cfg)\n\n"
            "    def forward(self, idx, targets=None):\n",
            id="called-in-its-own-file",
        ),
        pytest.param(
            "        return optimizer\n",
            "        return optimizer, param_dict\n",
            id="hands-back-more-than-the-optimizer",
        ),
        pytest.param(
            "        optimizer = torch.optim.AdamW(optim_groups,",
            "        optimizer = torch.optim.AdamW(optim_groups,",
            id="unchanged-control",
        ),
        pytest.param(
            "        param_dict = {pn: p for pn, p in self.named_parameters()}\n",
            "        param_dict = {pn: p for pn, p in self.named_parameters()}\n"
            "        param_dict.update(dict(train_config.head.named_parameters()))\n",
            id="a-dict-with-another-models-parameters",
        ),
        pytest.param(
            "        optim_groups = [\n",
            '        param_dict["head"] = train_config.head.weight\n'
            "        optim_groups = [\n",
            id="a-dict-item-set-to-another-parameter",
        ),
        pytest.param(
            "        optim_groups = [\n",
            "        train_config.fill(decay)\n        optim_groups = [\n",
            id="a-name-set-handed-to-a-function",
        ),
    ],
)
def test_short_of_the_proof_the_finding_stays(
    tmp_path: Path, old: str, new: str
) -> None:
    findings = _migrate(tmp_path, old, new)
    model = findings["mylib/model.py"]
    reported = any(TRAINED_HERE in f or NOT_SHOWN in f for f in model)
    assert reported == (old != new)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "        optim_groups = [\n",
            "        param_dict.update(train_config.extra)\n        optim_groups = [\n",
            "`param_dict.update(train_config.extra)` (line 37) changes what it is "
            "built from in a way accel-migrate does not follow",
        ),
        (
            "[param_dict[pn] for pn in sorted(list(decay))]",
            "[param_dict[pn] for pn in sorted(list(decay))] + list(train_config.head.parameters())",
            "`train_config.head.parameters()` (line 38) is not a part of `self`",
        ),
    ],
)
def test_the_finding_names_what_the_proof_cannot_follow(
    tmp_path: Path, old: str, new: str, why: str
) -> None:
    """A method that hands the optimizer back gets a finding naming the statement
    that stops the proof, not the advice to build an instance in its file."""
    model = _migrate(tmp_path, old, new)["mylib/model.py"]
    assert not any(TRAINED_HERE in f for f in model)
    assert any(
        f.startswith("AM004 needs-review `GPT.configure_optimizers` hands back")
        and f"but {why}, {NOT_SHOWN}" in f
        for f in model
    ), model


def test_a_chain_of_files_left_whole_names_its_root_cause(tmp_path: Path) -> None:
    """model.py is left unchanged by AM004; utils.py (which it imports) by AM103
    naming model.py; trainer.py and chargpt.py by AM103 naming utils.py and
    trainer.py, which say nothing of their own: those name model.py's AM004."""
    findings = _migrate(
        tmp_path,
        "        optim_groups = [\n",
        "        param_dict.update(train_config.extra)\n        optim_groups = [\n",
    )
    (root,) = [f for f in findings["mylib/model.py"] if NOT_SHOWN in f]
    assert root.startswith("AM004 needs-review")
    for chained in ("chargpt.py", "mylib/trainer.py"):
        (kept,) = findings[chained]
        assert kept.startswith("AM103 needs-review")
        assert "(the root cause is mylib/model.py:36, AM004: `GPT." in kept, kept
    # utils.py names model.py itself, whose findings are the cause: no more
    (utils,) = findings["mylib/utils.py"]
    assert "is imported by mylib/model.py" in utils
    assert "root cause" not in utils
