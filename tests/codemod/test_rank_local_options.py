"""Command-line options whose default reads the launcher's rank variable
(``rank_local_options``): ``args.local_rank`` is rank-local for the divergence
analysis and named by AM028's provenance; a plain default is not (issue 12,
r29i)."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.analysis import ModuleIndex

SCRIPT = """import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default={default})
    args = parser.parse_args()
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=4)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        if args.local_rank in (-1, 0):
            torch.save(model.state_dict(), "m.pt")
"""
RANK_DEFAULT = 'int(os.environ.get("LOCAL_RANK", -1))'


def _index(source: str) -> ModuleIndex:
    return ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")


def _test_of_save(index: ModuleIndex) -> cst.If:
    found: list[cst.If] = []

    class _Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            found.append(node)

    index.module.visit(_Ifs())
    return found[-1]


@pytest.mark.parametrize(
    ("default", "dests"),
    [
        (RANK_DEFAULT, {"local_rank"}),
        ('os.getenv("RANK", "0")', {"local_rank"}),
        ("-1", set()),
        ('int(os.environ.get("WORLD_SIZE", 1))', set()),
    ],
)
def test_an_option_is_rank_local_when_its_default_reads_a_rank_variable(
    default: str, dests: set[str]
) -> None:
    index = _index(SCRIPT.format(default=default))
    assert set(index.rank_local_options.dests) == dests
    branch = _test_of_save(index)
    assert (branch.body in index.divergence.divergent) == bool(dests)


def test_a_default_read_through_a_local_name_and_a_dest() -> None:
    source = SCRIPT.replace(
        '    parser.add_argument("--local_rank", type=int, default={default})\n',
        '    rank = int(os.environ["LOCAL_RANK"])\n'
        '    parser.add_argument("--local-rank", dest="lr_", default=rank)\n',
    ).replace("args.local_rank", "args.lr_")
    index = _index(source)
    assert index.rank_local_options.dests == frozenset({"lr_"})
    assert _test_of_save(index).body in index.divergence.divergent
    first = index.rank_local_sources.first(_test_of_save(index).test)
    assert first is not None and first.kind == "environment"
    assert first.through == ("args.lr_", "--local-rank", "rank")


def test_a_namespace_returned_by_a_local_function() -> None:
    source = SCRIPT.replace(
        "def main():\n    parser = argparse.ArgumentParser()\n",
        "def get_args():\n    parser = argparse.ArgumentParser()\n",
    ).replace(
        "    args = parser.parse_args()\n",
        "    return parser.parse_args()\n\n\ndef main():\n    args = get_args()\n",
    )
    index = _index(source.format(default=RANK_DEFAULT))
    assert _test_of_save(index).body in index.divergence.divergent


def test_am028_names_the_option_and_the_variable() -> None:
    result = migrate_source(SCRIPT.format(default=RANK_DEFAULT).encode(), "t.py")
    assert result.output == SCRIPT.format(default=RANK_DEFAULT).encode()
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "the default of `--local_rank`" in finding.message
    assert 'os.environ.get("LOCAL_RANK", -1)' in finding.message
    assert "launcher sets differently for each process" in finding.message


def test_a_plain_default_is_migrated() -> None:
    result = migrate_source(SCRIPT.format(default="-1").encode(), "t.py")
    assert not [f for f in result.findings if f.code == "AM028"]
    assert b"accel.save(accel.state_dict(model)" in result.output


def test_am028_follows_a_store_into_the_namespace() -> None:
    source = SCRIPT.format(default="-1").replace(
        "    args = parser.parse_args()\n",
        "    args = parser.parse_args()\n"
        '    args.local_rank = int(os.environ["LOCAL_RANK"])\n',
    )
    result = migrate_source(source.encode(), "t.py")
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert (
        '`args.local_rank` is computed from `os.environ["LOCAL_RANK"]` at line 13'
        in (finding.message)
    )


OUTPUT = SCRIPT.replace(
    'torch.save(model.state_dict(), "m.pt")', 'print("epoch", epoch)'
)


def _am047(source: str) -> bool:
    result = migrate_source(source.encode(), "t.py")
    return any(f.code == "AM047" for f in result.findings)


def test_am047_asks_the_runtime_for_an_option_read_as_its_default() -> None:
    result = migrate_source(OUTPUT.format(default=RANK_DEFAULT).encode(), "t.py")
    assert b"if accel.is_local_main_process():" in result.output
    assert b"args.local_rank in" not in result.output


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # argparse converts a string default with type=: not the read's value
        (RANK_DEFAULT, 'os.environ.get("LOCAL_RANK", "0")'),
        # parsed from a list, not from the command line
        (
            "args = parser.parse_args()",
            'args = parser.parse_args(["--local_rank", "0"])',
        ),
        # set elsewhere
        (
            "args = parser.parse_args()",
            "args = parser.parse_args()\n    args.local_rank = max(args.local_rank, 0)",
        ),
        (
            "args = parser.parse_args()",
            "args = parser.parse_args()\n    print(vars(args))",
        ),
    ],
)
def test_am047_leaves_an_option_set_otherwise(old: str, new: str) -> None:
    source = OUTPUT.format(default=RANK_DEFAULT).replace(old, new)
    assert source != OUTPUT.format(default=RANK_DEFAULT)
    assert not _am047(source)
