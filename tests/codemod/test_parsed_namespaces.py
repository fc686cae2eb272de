"""A rank-local option reached other ways than ``args = parser.parse_args()``
(``parsed_namespaces``, issue 12, r30a): the namespace handed to a local
function, ``set_defaults``, a default through a local function, the
namespace's dict, an object built from it, a store handed on. Each makes the
branch on it rank-dependent for the divergence analysis, and the provenance
names the option and the variable."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.analysis import ModuleIndex

HEAD = """import argparse
import copy
import functools
import os
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def env_rank():
    return int(os.environ.get("LOCAL_RANK", -1))


"""
TRAIN = """def train({params}):
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=4)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        if {test}:
            torch.save(model.state_dict(), "m.pt")


"""
OPTION = '    parser.add_argument("--local_rank", type=int, default={default})\n'
RANK = 'int(os.environ.get("LOCAL_RANK", -1))'


def _script(params: str, test: str, tail: str, default: str = RANK) -> str:
    parser = "    parser = argparse.ArgumentParser()\n" + OPTION.format(default=default)
    return HEAD + TRAIN.format(params=params, test=test) + tail.format(parser=parser)


SHAPES = {
    # the namespace handed as a parameter
    "parameter": (
        "args",
        "args.local_rank in (-1, 0)",
        "def main():\n{parser}    train(parser.parse_args())\n",
        ("args.local_rank", "--local_rank"),
    ),
    "two hops": (
        "args",
        "args.local_rank in (-1, 0)",
        "def main(args):\n    train(args)\n\n\n"
        "def cli():\n{parser}    args = parser.parse_args()\n    main(args)\n",
        ("args.local_rank", "--local_rank"),
    ),
    # its dict, read by the option's name
    "dict": (
        "opt",
        'opt["local_rank"] in (-1, 0)',
        "def main():\n{parser}    train(vars(parser.parse_args()))\n",
        None,
    ),
    # an object built from it, returned by a local function
    "object": (
        "cfg",
        "cfg.local_rank <= 0",
        "def config():\n{parser}"
        "    return SimpleNamespace(**vars(parser.parse_args()), out='m.pt')\n\n\n"
        "def main():\n    train(config())\n",
        ("cfg.local_rank", "--local_rank"),
    ),
    # its options spread as keywords
    "spread": (
        "epochs=2, local_rank=-1",
        "local_rank in (-1, 0)",
        "def main():\n{parser}    train(**vars(parser.parse_args()))\n",
        ("local_rank", "--local_rank"),
    ),
    # r30l: bound to two names at once, the second handed on
    "chained": (
        "opt",
        "opt.local_rank in (-1, 0)",
        "def main():\n{parser}    args = cfg = parser.parse_args()\n"
        "    print(args)\n    train(cfg)\n",
        ("opt.local_rank", "--local_rank"),
    ),
    # a copy of it is a namespace with the same attributes
    "deepcopy": (
        "opt",
        "opt.local_rank in (-1, 0)",
        "def main():\n{parser}    args = parser.parse_args()\n"
        "    train(copy.deepcopy(args))\n",
        ("opt.local_rank", "--local_rank"),
    ),
    # a copy of its dict, read by the option's name
    "dict copy": (
        "opt",
        'opt["local_rank"] in (-1, 0)',
        "def main():\n{parser}    train(dict(vars(parser.parse_args())))\n",
        None,
    ),
    "dict method copy": (
        "opt",
        'opt["local_rank"] in (-1, 0)',
        "def main():\n{parser}    cfg = vars(parser.parse_args()).copy()\n"
        "    train(cfg)\n",
        None,
    ),
    # its dict read with .get
    "dict get": (
        "opt",
        'opt.get("local_rank", -1) in (-1, 0)',
        "def main():\n{parser}    train(vars(parser.parse_args()))\n",
        None,
    ),
    # its options spread into **kw
    "kwargs": (
        "**kw",
        'kw["local_rank"] in (-1, 0)',
        "def main():\n{parser}    train(**vars(parser.parse_args()))\n",
        None,
    ),
    # handed by a keyword of functools.partial
    "partial": (
        "opt",
        "opt.local_rank in (-1, 0)",
        "def main():\n{parser}"
        "    run = functools.partial(train, opt=parser.parse_args())\n    run()\n",
        ("opt.local_rank", "--local_rank"),
    ),
}


def _index(source: str) -> ModuleIndex:
    return ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")


def _save_test(index: ModuleIndex) -> cst.If:
    found: list[cst.If] = []

    class _Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            found.append(node)

    index.module.visit(_Ifs())
    return found[0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_namespace_handed_on_keeps_its_rank_local_option(shape: str) -> None:
    params, test, tail, through = SHAPES[shape]
    index = _index(_script(params, test, tail))
    branch = _save_test(index)
    assert branch.body in index.divergence.divergent
    first = index.rank_local_sources.first(branch.test)
    assert first is not None and first.kind == "environment"
    assert index.module.code_for_node(first.node) == 'os.environ.get("LOCAL_RANK", -1)'
    if through is not None:
        assert first.through == through


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_plain_default_handed_on_stays_uniform(shape: str) -> None:
    params, test, tail, _ = SHAPES[shape]
    index = _index(_script(params, test, tail, default="-1"))
    assert index.rank_local_options.attributes == frozenset()
    assert _save_test(index).body not in index.divergence.divergent


def test_set_defaults_declares_a_rank_local_option() -> None:
    tail = (
        "def main():\n    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--local_rank", type=int)\n'
        "    parser.set_defaults(local_rank={value})\n"
        "    train(parser.parse_args())\n"
    )
    index = _index(_script("args", "args.local_rank == 0", tail.format(value=RANK)))
    options = index.rank_local_options
    assert [o.flag for o in options.options["local_rank"]] == ["--local_rank"]
    assert _save_test(index).body in index.divergence.divergent
    # a plain parser-level default overrides an argument's: not read as one
    plain = _index(_script("args", "args.local_rank == 0", tail.format(value="0")))
    assert plain.rank_local_options.stored("local_rank")
    assert _save_test(plain).body not in plain.divergence.divergent


def test_a_default_read_through_a_local_function() -> None:
    tail = "def main():\n{parser}    train(parser.parse_args())\n"
    source = _script("args", "args.local_rank in (-1, 0)", tail, "env_rank()")
    index = _index(source)
    assert index.rank_local_options.dests == frozenset({"local_rank"})
    first = index.rank_local_sources.first(_save_test(index).test)
    assert first is not None
    assert first.through == ("args.local_rank", "--local_rank", "env_rank()")


def test_a_rank_variable_stored_into_a_namespace_handed_on() -> None:
    tail = (
        "def main():\n{parser}    args = parser.parse_args()\n"
        "    args.local_rank = env_rank()\n    train(args)\n"
    )
    index = _index(_script("args", "args.local_rank in (-1, 0)", tail, "-1"))
    options = index.rank_local_options
    assert options.dests == frozenset()
    assert options.attributes == frozenset({"local_rank"})
    assert _save_test(index).body in index.divergence.divergent
    first = index.rank_local_sources.first(_save_test(index).test)
    assert first is not None and first.through == ("args.local_rank", "env_rank()")


def test_an_object_keeping_the_namespace() -> None:
    source = HEAD + (
        "class Trainer:\n"
        "    def __init__(self, args):\n        self.args = args\n\n"
        "    def save(self, model):\n"
        "        if self.args.local_rank in (-1, 0):\n"
        '            torch.save(model.state_dict(), "m.pt")\n\n\n'
        "def main():\n"
        "    parser = argparse.ArgumentParser()\n"
        + OPTION.format(default=RANK)
        + ("    Trainer(parser.parse_args()).save(nn.Linear(2, 1))\n")
    )
    index = _index(source)
    assert _save_test(index).body in index.divergence.divergent


def test_am028_flags_the_handed_namespace_and_names_the_option() -> None:
    params, test, tail, _ = SHAPES["parameter"]
    source = _script(params, test, tail)
    result = migrate_source(source.encode(), "t.py")
    assert result.output == source.encode()
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "the default of `--local_rank`" in finding.message
    assert 'os.environ.get("LOCAL_RANK", -1)' in finding.message


def test_no_parser_builds_no_namespaces() -> None:
    index = _index(HEAD + TRAIN.format(params="args", test="args.rank == 0"))
    options = index.rank_local_options
    assert options.attributes == frozenset()
    assert options._namespaces is None
    # r31a: `args.local_rank` of a function nothing read calls, in a file
    # with no parser, is assumed to be the launcher's (`unseen_namespaces`)
    index = _index(HEAD + TRAIN.format(params="args", test="args.local_rank == 0"))
    assert index.rank_local_options.attributes == frozenset({"local_rank"})
    assert _save_test(index).body in index.divergence.divergent
