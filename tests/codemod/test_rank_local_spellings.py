"""The spellings of a rank-local option or rank that r31a follows (issue 12):
a namespace handed as ``*[args]``, by a lambda, inside a dict, as a dict with
an extra key; a call in an ``if``/``while``/``for``/``with`` header handing a
rank on; ``torch.distributed.get_rank()`` as a default or an assignment;
hand-ons longer than the old three rounds; ``set_defaults`` before or after
the argument (the later one wins); a namespace another file hands a function
that hands it on again. Each makes the save's branch rank-dependent and the
provenance names the source; its plain counterpart stays uniform."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

from . import test_parsed_namespaces as ns
from . import test_project_namespaces as project

HEAD = ns.HEAD.replace(
    "import torch\n", "import torch\nimport torch.distributed as dist\n"
)
PARSE = "def main():\n{parser}    args = parser.parse_args()\n"


def _script(params: str, test: str, tail: str, default: str = ns.RANK) -> str:
    parser = "    parser = argparse.ArgumentParser()\n" + ns.OPTION.format(
        default=default
    )
    return HEAD + ns.TRAIN.format(params=params, test=test) + tail.format(parser=parser)


def _hops(count: int, handed: str) -> str:
    """``def f1(a): train(a)`` ... ``def fN(a): f(N-1)(a)``, ``main`` calling
    ``fN(handed)``: each defined above its caller, one hop a round."""
    text, previous = "", "train"
    for number in range(1, count + 1):
        text += f"def f{number}(a):\n    {previous}(a)\n\n\n"
        previous = f"f{number}"
    return text + PARSE + f"    {previous}({handed})\n"


# (train's parameters, the save's test, the rest, what the provenance goes through)
SHAPES = {
    "star list": (
        "args",
        "args.local_rank in (-1, 0)",
        PARSE + "    train(*[args])\n",
        ("args.local_rank", "--local_rank"),
    ),
    "lambda": (
        "args",
        "args.local_rank in (-1, 0)",
        PARSE + "    get = lambda: args\n    train(get())\n",
        ("args.local_rank", "--local_rank"),
    ),
    "dict holder": (
        "cfg",
        'cfg["args"].local_rank in (-1, 0)',
        PARSE + '    cfg = {{"args": args, "lr": 0.1}}\n    train(cfg)\n',
        ('cfg["args"].local_rank', "--local_rank"),
    ),
    "dict with an extra key": (
        "opt",
        'opt["local_rank"] in (-1, 0)',
        PARSE + "    train(dict(vars(args), extra=1))\n",
        ('opt["local_rank"]', "--local_rank"),
    ),
    "dict spread": (
        "opt",
        'opt.get("local_rank", -1) in (-1, 0)',
        PARSE + '    train({{**vars(args), "extra": 1}})\n',
        ('opt.get("local_rank", -1)', "--local_rank"),
    ),
    "partial on an object": (
        "args",
        "args.local_rank in (-1, 0)",
        "class Runner:\n    def __init__(self, args):\n"
        "        self.run = functools.partial(train, args)\n\n"
        "    def go(self):\n        self.run()\n\n\n"
        + PARSE
        + "    Runner(args).go()\n",
        ("args.local_rank", "--local_rank"),
    ),
    "ten hops of the namespace": (
        "args",
        "args.local_rank in (-1, 0)",
        _hops(10, "args"),
        ("args.local_rank", "--local_rank"),
    ),
    "ten hops of the rank": (
        "rank",
        "rank in (-1, 0)",
        _hops(10, "args.local_rank"),
        None,
    ),
    "if test": (
        "rank",
        "rank in (-1, 0)",
        PARSE + "    if train(args.local_rank):\n        print('done')\n",
        ("rank", "args.local_rank", "--local_rank"),
    ),
    "while test": (
        "rank",
        "rank in (-1, 0)",
        PARSE + "    while train(args.local_rank):\n        break\n",
        ("rank", "args.local_rank", "--local_rank"),
    ),
    "for iterable": (
        "rank",
        "rank in (-1, 0)",
        PARSE + "    for _ in [train(args.local_rank)]:\n        pass\n",
        ("rank", "args.local_rank", "--local_rank"),
    ),
    "with item": (
        "rank",
        "rank in (-1, 0)",
        PARSE + "    with open(train(args.local_rank) or 'log.txt'):\n        pass\n",
        ("rank", "args.local_rank", "--local_rank"),
    ),
}
#: ``torch.distributed.get_rank()`` handed to the parameter.
QUERIES = {
    "default": ("rank=dist.get_rank()", "def main():\n    train()\n"),
    "argument": ("rank", "def main():\n    train(torch.distributed.get_rank())\n"),
    "assignment": ("rank", "def main():\n    r = dist.get_rank()\n    train(r)\n"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_spelling_keeps_the_rank(shape: str) -> None:
    params, test, tail, through = SHAPES[shape]
    index = ns._index(_script(params, test, tail))
    branch = ns._save_test(index)
    assert branch.body in index.divergence.divergent
    first = index.rank_local_sources.first(branch.test)
    assert first is not None and first.kind == "environment"
    assert index.module.code_for_node(first.node) == 'os.environ.get("LOCAL_RANK", -1)'
    if through is not None:
        assert first.through == through


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_spelling_of_a_plain_default_stays_uniform(shape: str) -> None:
    params, test, tail, _ = SHAPES[shape]
    index = ns._index(_script(params, test, tail, default="-1"))
    assert ns._save_test(index).body not in index.divergence.divergent


@pytest.mark.parametrize("shape", sorted(QUERIES))
def test_a_process_group_rank_handed_on(shape: str) -> None:
    params, tail = QUERIES[shape]
    source = _script(params, "rank == 0", tail)
    index = ns._index(source)
    branch = ns._save_test(index)
    assert branch.body in index.divergence.divergent
    first = index.rank_local_sources.first(branch.test)
    assert first is not None and first.kind == "environment"
    assert index.module.code_for_node(first.node).endswith("get_rank()")
    result = migrate_source(source.encode(), "t.py")
    assert result.output == source.encode()
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "this process's rank in the process group" in finding.message


def test_a_plain_rank_handed_on_stays_uniform() -> None:
    index = ns._index(_script("rank", "rank == 0", "def main():\n    train(0)\n"))
    assert ns._save_test(index).body not in index.divergence.divergent


SET_DEFAULTS = "    parser.set_defaults(local_rank={value})\n"
ARGUMENT = '    parser.add_argument("--local_rank", type=int, default={value})\n'


@pytest.mark.parametrize(
    "first, second, local",
    [
        # set_defaults after the argument replaces its default
        (ARGUMENT.format(value=ns.RANK), SET_DEFAULTS.format(value="-1"), False),
        (ARGUMENT.format(value="-1"), SET_DEFAULTS.format(value=ns.RANK), True),
        # an argument's own default after set_defaults is kept
        (SET_DEFAULTS.format(value="-1"), ARGUMENT.format(value=ns.RANK), True),
        (SET_DEFAULTS.format(value=ns.RANK), ARGUMENT.format(value="-1"), False),
    ],
)
def test_the_later_default_wins(first: str, second: str, local: bool) -> None:
    tail = (
        "def main():\n    parser = argparse.ArgumentParser()\n"
        + first
        + second
        + "    train(parser.parse_args())\n"
    )
    index = ns._index(_script("args", "args.local_rank in (-1, 0)", tail))
    assert (ns._save_test(index).body in index.divergence.divergent) is local
    assert bool(index.rank_local_options.options) is local


def test_an_override_under_a_condition_keeps_the_read() -> None:
    tail = (
        "def main():\n    parser = argparse.ArgumentParser()\n"
        + ARGUMENT.format(value=ns.RANK)
        + "    if os.environ.get('SINGLE'):\n"
        + "    "
        + SET_DEFAULTS.format(value="-1")
        + "    train(parser.parse_args())\n"
    )
    index = ns._index(_script("args", "args.local_rank in (-1, 0)", tail))
    assert ns._save_test(index).body in index.divergence.divergent


HANDED_ON = project.TRAINER.replace("def train(args,", "def fit(opt,").replace(
    "args.local_rank", "opt.local_rank"
) + (
    "\n\ndef train(args, model, optimizer, loader):\n"
    "    fit(args, model, optimizer, loader)\n"
)


@pytest.mark.parametrize("default", [project.RANK, "-1"])
def test_a_namespace_another_file_hands_is_handed_on(
    tmp_path: Path, default: str
) -> None:
    main, trainer = project._project(tmp_path, "function", default)
    trainer.write_text(HANDED_ON)
    facts = ProjectView([str(main), str(trainer)]).facts_for(str(trainer))
    result = migrate_source(
        trainer.read_bytes(), str(trainer), MigrateOptions(project=facts)
    )
    found = [f for f in result.findings if f.code == "AM028"]
    if default == "-1":
        assert not found and b"accel.save" in result.output
        return
    assert not result.changed
    (finding,) = found
    assert "`opt.local_rank` is computed" in finding.message
    assert "the default of `--local_rank`" in finding.message
    assert "in main.py at line" in finding.message


@pytest.mark.parametrize("text", [project.TRAINER, HANDED_ON])
def test_a_file_alone_assumes_the_launcher_s_local_rank(
    tmp_path: Path, text: str
) -> None:
    """File mode: trainer.py's importer (which parses `--local_rank`) is not
    read; `args.local_rank` of a function nothing read calls is taken for
    `LOCAL_RANK`, and the finding says it is assumed."""
    _, trainer = project._project(tmp_path, "function")
    trainer.write_text(text)
    facts = ProjectView([str(trainer)]).facts_for(str(trainer))
    result = migrate_source(
        trainer.read_bytes(), str(trainer), MigrateOptions(project=facts)
    )
    assert not result.changed
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "(assumed: `train` is called from a file not migrated" in finding.message


def test_a_file_calling_its_own_trainer_assumes_nothing() -> None:
    """`train(cfg)` called in the file with a namespace built there: its
    `local_rank` is what the file gives it, the same on every process."""
    source = (
        project.TRAINER
        + "\n\ndef main(model, optimizer, loader):\n"
        + "    cfg = type('Cfg', (), {'local_rank': -1})\n"
        + "    train(cfg, model, optimizer, loader)\n"
    )
    result = migrate_source(source.encode(), "trainer.py")
    assert not [f for f in result.findings if f.code == "AM028"]
    assert b"accel.save" in result.output


#: ``torch.distributed.get_rank()`` asked in the save's test itself (fixe): the
#: branch is rank-dependent as a test of the launcher's variable is, and under
#: FSDP the state dict under it gathers by a collective the others never join.
DIRECT_QUERIES = {
    "compared": "dist.get_rank() == 0",
    "guarded": "dist.is_initialized() and dist.get_rank() == 0",
    "qualified in": "torch.distributed.get_rank() in (-1, 0)",
    "imported name": "get_rank() == 0",
}


@pytest.mark.parametrize("shape", sorted(DIRECT_QUERIES))
def test_a_process_group_rank_asked_in_the_test(shape: str) -> None:
    head = HEAD.replace(
        "import torch.distributed as dist\n",
        "import torch.distributed as dist\nfrom torch.distributed import get_rank\n",
    )
    source = (
        head
        + ns.TRAIN.format(params="", test=DIRECT_QUERIES[shape])
        + "def main():\n    train()\n"
    )
    index = ns._index(source)
    branch = ns._save_test(index)
    assert branch.body in index.divergence.divergent
    first = index.rank_local_sources.first(branch.test)
    assert first is not None and first.kind == "environment"
    assert index.module.code_for_node(first.node).endswith("get_rank()")
    result = migrate_source(source.encode(), "t.py")
    assert result.output == source.encode()
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "this process's rank in the process group" in finding.message
    assert "a collective under it (the state dict gathered under FSDP" in (
        finding.message
    )


def test_a_process_group_rank_kept_in_a_variable() -> None:
    train = ns.TRAIN.format(params="", test="rank == 0").replace(
        "    data = ", "    rank = dist.get_rank()\n    data = ", 1
    )
    source = HEAD + train + "def main():\n    train()\n"
    index = ns._index(source)
    branch = ns._save_test(index)
    assert branch.body in index.divergence.divergent
    first = index.rank_local_sources.first(branch.test)
    assert first is not None and first.through == ("rank",)
    assert migrate_source(source.encode(), "t.py").output == source.encode()


def test_the_world_size_in_the_test_stays_uniform() -> None:
    source = (
        HEAD
        + ns.TRAIN.format(params="", test="dist.get_world_size() > 1")
        + "def main():\n    train()\n"
    )
    index = ns._index(source)
    assert ns._save_test(index).body not in index.divergence.divergent
