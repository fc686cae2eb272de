"""A rank-local option's namespace handed from another file of the batch
(``project_namespaces``, issue 12, r30f): ``main.py`` parses ``--local_rank``
defaulting to ``LOCAL_RANK`` and calls ``train(args, ...)`` of ``trainer.py``,
which saves under ``if args.local_rank in (-1, 0):``. The call site carries
the option; trainer.py's branch is rank-dependent and AM028 names the option
and the file. A plain default is the same on every process: nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

TRAINER = """\
import torch
from torch import nn


def train(args, model, optimizer, loader):
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        if args.local_rank in (-1, 0):
            torch.save(model.state_dict(), "m.pt")
"""

BUILD = """\
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=4)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""
HEAD = """\
import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainer import train
"""
RANK = 'int(os.environ.get("LOCAL_RANK", -1))'
OPTION = '    parser.add_argument("--local_rank", type=int, default={default})\n'

MAINS = {
    # a variable bound to a local function returning parse_args()
    "function": (
        "\n\ndef get_args():\n    parser = argparse.ArgumentParser()\n{option}"
        "    return parser.parse_args()\n\n\ndef main():\n    args = get_args()\n"
        "{build}    train(args, model, optimizer, loader)\n\n\nmain()\n"
    ),
    # the namespace handed to main(args), which hands it on
    "parameter": (
        "\n\ndef main(args):\n{build}    train(args, model, optimizer, loader)\n\n\n"
        "parser = argparse.ArgumentParser()\n{top_option}"
        "main(parser.parse_args())\n"
    ),
    # parse_args() as the argument itself, the default through a name
    "direct": (
        "\nLOCAL = {default}\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--local_rank", type=int, default=LOCAL)\n'
        "{build}    train(parser.parse_args(), model, optimizer, loader)\n\n\nmain()\n"
    ),
}


def _project(tmp_path: Path, shape: str, default: str = RANK) -> tuple[Path, Path]:
    text = MAINS[shape].format(
        option=OPTION.format(default=default),
        top_option=OPTION.format(default=default).lstrip(),
        build=BUILD,
        default=default,
    )
    (tmp_path / "main.py").write_text(HEAD + text)
    (tmp_path / "trainer.py").write_text(TRAINER)
    return tmp_path / "main.py", tmp_path / "trainer.py"


def _trainer(tmp_path: Path, shape: str, default: str = RANK):  # type: ignore[no-untyped-def]
    main, trainer = _project(tmp_path, shape, default)
    view = ProjectView([str(main), str(trainer)])
    facts = view.facts_for(str(trainer))
    result = migrate_source(
        trainer.read_bytes(), str(trainer), MigrateOptions(project=facts)
    )
    return facts, result


@pytest.mark.parametrize("shape", sorted(MAINS))
def test_the_handed_option_makes_the_branch_rank_dependent(
    tmp_path: Path, shape: str
) -> None:
    facts, result = _trainer(tmp_path, shape)
    (site,) = facts.callers_of("train")
    ((parameter, (option,)),) = site.namespaces
    assert parameter == "args"
    assert (option.dest, option.flag, option.file) == (
        "local_rank",
        "--local_rank",
        "main.py",
    )
    assert option.read == "os.environ.get('LOCAL_RANK', -1)"
    assert not result.changed
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert finding.status == "needs-review"
    assert finding.line == 11
    assert "the default of `--local_rank`" in finding.message
    assert f"in main.py at line {option.line}" in finding.message
    assert "a hang" in finding.message


@pytest.mark.parametrize("shape", sorted(MAINS))
def test_a_plain_default_is_the_same_on_every_process(
    tmp_path: Path, shape: str
) -> None:
    facts, result = _trainer(tmp_path, shape, default="-1")
    (site,) = facts.callers_of("train")
    assert site.namespaces == ()
    assert not [f for f in result.findings if f.code == "AM028"]
    assert b"accel.save" in result.output


def test_the_option_is_part_of_the_cache_key(tmp_path: Path) -> None:
    rank = (
        _trainer(tmp_path / "a", "function")
        if (tmp_path / "a").mkdir() is None
        else None
    )
    plain = (
        _trainer(tmp_path / "b", "function", "-1")
        if (tmp_path / "b").mkdir() is None
        else None
    )
    assert rank is not None and plain is not None
    assert rank[0].digest() != plain[0].digest()


def test_a_file_alone_has_no_callers(tmp_path: Path) -> None:
    """File mode: trainer.py's importers are not read (its `args.local_rank`
    is assumed to be the launcher's: test_rank_local_spellings)."""
    _, trainer = _project(tmp_path, "function")
    facts = ProjectView([str(trainer)]).facts_for(str(trainer))
    assert facts.callers_of("train") == ()
