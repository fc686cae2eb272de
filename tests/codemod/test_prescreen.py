"""The cheap pre-screen (text, then Python's ``ast``) and the full libcst pass agree.

The pre-screen may only answer for a file the full pass leaves alone, with the same
skip reason and findings; every other file goes to the full pass. Checked on every
golden fixture, on a generated legacy-like tree (the benchmark's), on a sample of
the installed torch source (all of it with ACCEL_MIGRATE_FULL_AGREEMENT=1), and on
the cases the pre-screen has to be careful about.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from accel_migrate.codemod import (
    MigrateOptions,
    MigrationError,
    MigrationResult,
    migrate_source,
)
from accel_migrate.codemod.engine import _decode, early_verdict
from accel_migrate.codemod.names import (
    DATALOADER_CALLS,
    DISTRIBUTED_PREFIXES,
    OPTIMIZER_PREFIXES,
)
from accel_migrate.codemod.project_file_facts import ProjectFacts
from accel_migrate.codemod.screen import (
    DISTRIBUTED_WORDS,
    TRAINING_WORDS,
    is_distributed_name,
    prescreen,
)
from accel_migrate.codemod.test_files import is_test_module
from tests.conftest import FIXTURES, ROOT

FULL = MigrateOptions(prescreen=False)


def agree(
    source: bytes, path: str = "case.py", project: ProjectFacts | None = None
) -> str:
    """Both ways of migrating ``source`` give the same result; and the pre-screen
    answers only for files the full pass leaves alone, with the same verdict.
    Returns what the pre-screen decided ("full pass" when it left it to libcst).
    ``project``: the facts of its local imports, read from disk when None."""
    return _agree(source, path, project)[0]


def _agree(
    source: bytes, path: str, project: ProjectFacts | None = None
) -> tuple[str, MigrationResult | None]:
    full_options = replace(FULL, project=project)
    quick_options = MigrateOptions(project=project)
    if _screen_answers(source, path, project) is None:
        # Only the full pass can tell, and it runs with or without the screen:
        # there is nothing of the screen's to check (and nothing to run twice).
        return "full pass", None
    try:
        full = migrate_source(source, path, full_options)
    except MigrationError as exc:
        with pytest.raises(MigrationError) as raised:
            migrate_source(source, path, quick_options)
        assert str(raised.value) == str(exc)
        return "error", None
    quick = migrate_source(source, path, quick_options)
    assert (quick.output, quick.findings, quick.skip_reason, quick.suppressed) == (
        full.output,
        full.findings,
        full.skip_reason,
        full.suppressed,
    )
    if full.skip_reason in ("generated", "suppressed"):
        return full.skip_reason, full  # decided before any screen
    if is_test_module(path, ast.parse(source)):
        assert full.skip_reason == "not a training entry point"
        assert not full.findings
        return "test file", full  # decided before any screen
    verdict = prescreen(source.decode("utf-8-sig", errors="replace"))
    assert verdict is not None
    assert not full.changed, "the pre-screen skipped a file the full pass changes"
    assert verdict.skip_reason == full.skip_reason
    assert verdict.findings == full.findings
    return verdict.skip_reason, full


def _screen_answers(
    source: bytes, path: str, project: ProjectFacts | None = None
) -> object | None:
    """What answers for ``source`` before the full pass (a skip comment, a
    generated header, a parse error, a test module, the pre-screen's verdict), as
    migrate_source decides it (``early_verdict``); None when the full pass decides."""
    try:
        return early_verdict(_decode(source, path), path, project=project)
    except MigrationError:
        return "a parse error"


def test_early_verdict_in_migrate_sources_order() -> None:
    """The skip comment is read before the parse, the parse before the screen, and
    only a comment (not a string) skips the file."""
    broken = "# accel-migrate: skip-file\nthis is not python(\n"
    assert early_verdict(broken, "train.py").skip_reason == "suppressed"
    with pytest.raises(MigrationError, match="cannot parse"):
        early_verdict("this is not python(\n", "train.py")
    assert early_verdict("import torch\n", "test_train.py").skip_reason == (
        "not a training entry point"
    )
    training = (
        'NOTE = "accel-migrate: skip-file"\nimport torch\n'
        "opt = torch.optim.SGD(params, lr=0.1)\nloss.backward()\nopt.step()\n"
    )
    assert early_verdict(training, "train.py") is None
    assert early_verdict("import os\n", "train.py", screen=False) is None


CASES = sorted(FIXTURES.glob("*/*.in.py"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_prescreen_agrees_with_the_full_pass_on_every_fixture(case: Path) -> None:
    """Every fixture the full pass changes reaches it (is not screened out)."""
    decided, full = _agree(case.read_bytes(), str(case))
    if full is not None and full.changed:
        assert decided == "full pass"


def test_most_fixtures_are_changed() -> None:
    """The agreement above is not vacuous: most fixtures are training scripts."""
    changed = [c for c in CASES if b".backward(" in c.read_bytes()]
    assert len(changed) > len(CASES) // 2


def _bench_module():
    spec = importlib.util.spec_from_file_location(
        "codemod_throughput", ROOT / "bench" / "codemod_throughput.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_prescreen_agrees_on_the_benchmarks_mixed_tree(tmp_path: Path) -> None:
    _bench_module().make_mixed_tree(tmp_path, files=100, seed=1)
    decided: dict[str, int] = {}
    tests: set[str] = set()
    for path in sorted(tmp_path.rglob("*.py")):
        what = agree(path.read_bytes(), str(path))
        decided[what] = decided.get(what, 0) + 1
        if path.name.startswith("test_"):
            tests.add(what)
    # the tree has every kind: decided cheaply, left to libcst, and broken
    assert decided["not a training entry point"] > 50
    assert decided["already distributed"] > 0
    assert decided["full pass"] >= 9  # the training scripts (one fixture is not)
    assert decided["generated"] > 0
    assert decided["error"] > 0
    # a test that computes gradients without an optimizer step does not train
    assert tests <= {"not a training entry point", "test file"}


def _torch_sample() -> list[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(root.rglob("*.py"))
    if os.environ.get("ACCEL_MIGRATE_FULL_AGREEMENT") == "1":
        return files
    # Every file that mentions a distributed or training word with an import of
    # torch.distributed (the hard cases), and a spread of the rest; small files only,
    # to keep the test short (the benchmark's --agree checks the whole tree).
    hard = [
        f
        for f in files
        if f.stat().st_size < 40_000
        and "import" in (text := f.read_text(encoding="utf-8", errors="replace"))
        and ("torch.distributed" in text or ".backward(" in text)
    ]
    spread = [f for f in files[::97] if f.stat().st_size < 40_000]
    return sorted(set(hard[::8] + spread))


@pytest.mark.skipif(not _torch_sample(), reason="torch is not installed")
def test_prescreen_agrees_on_the_torch_source() -> None:
    decided: dict[str, int] = {}
    for path in _torch_sample():
        # An installed library's modules are checked for the screen, not as a
        # project: following every torch module's local imports (for a library
        # trainer class, which torch has none of) would cost minutes per file.
        what = agree(path.read_bytes(), str(path), ProjectFacts())
        decided[what] = decided.get(what, 0) + 1
    assert decided.get("not a training entry point", 0) > 10
    assert decided.get("already distributed", 0) > 5


# --- the cases the pre-screen must get right -----------------------------------------

LOOP = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = 1\n", "not a training entry point"),
        ("", "not a training entry point"),
        ("import torch\nmodel = torch.nn.Linear(2, 2)\n", "not a training entry point"),
        # words in strings and comments only: decided after the ast walk
        (
            "import torch\n# loss.backward() and torch.optim.SGD\nx = 'backward'\n",
            "not a training entry point",
        ),
        ("import torch\n" + LOOP, "full pass"),
        # optimizers and loaders through aliases
        (
            "from torch import optim as o\nimport torch\no.SGD([], lr=1)\n",
            "full pass",
        ),
        (
            "import torch\nfrom torch.utils.data import DataLoader as DL\nDL([])\n",
            "full pass",
        ),
        ("import torch.utils.data as tud\ntud.DataLoader([])\n", "full pass"),
        # already migrated: the runtime import makes it a training entry point
        ("import torch\nimport accel_migrate.runtime as accel\n", "full pass"),
        # a user's own class named like a package: libcst qualifies names with it
        (
            "import torch\nclass torch_thing: pass\nclass torch:\n    optim = 1\n",
            "full pass",
        ),
        # distributed: the import the full screen names first
        (
            "import os\nfrom torch.distributed import init_process_group\n",
            "already distributed",
        ),
        # a call through a module-level import alias, bound by nothing else
        (
            "import os\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n",
            "already distributed",
        ),
        (
            "import torch.distributed as dist\nx = (dist.init_process_group('gloo'))\n",
            "already distributed",
        ),
        (
            "import torch.distributed.rpc\nimport torch\n"
            "torch.distributed.init_process_group()\n",
            "already distributed",
        ),
        # ... but when the name may be bound otherwise, only libcst's scopes can say
        (
            "import torch.distributed as dist\ndef f(dist):\n"
            "    dist.init_process_group('gloo')\n",
            "full pass",
        ),
        (
            "import torch\ndef f():\n    import torch.distributed as dist\n"
            "    dist.init_process_group()\n",
            "full pass",
        ),
        (
            "try:\n    import torch.distributed as dist\nexcept ImportError:\n"
            "    import fake as dist\ndist.init_process_group()\n",
            "full pass",
        ),
        (
            "from os import *\nimport torch.distributed as dist\n"
            "dist.init_process_group()\n",
            "full pass",
        ),
        (
            "import torch.distributed as dist\nfor dist in []:\n    pass\n"
            "dist.init_process_group()\n",
            "full pass",
        ),
        # a plain import inside a function gives the same name; an alias would not
        (
            "import torch\ndef f():\n    import torch.cuda\n"
            "    torch.distributed.init_process_group()\n",
            "already distributed",
        ),
        (
            "import torch.distributed as dist\ndef f():\n    import dist\n"
            "    dist.init_process_group()\n",
            "full pass",
        ),
        # an import only inside a function: the module's call has no qualified name
        (
            "def f():\n    import torch\ntorch.distributed.init_process_group('gloo')\n",
            "full pass",
        ),
        # chained calls start at one place: libcst names the outer call
        (
            "import torch.nn as nn\n"
            "model = nn.parallel.DistributedDataParallel(model).cuda()\n",
            "already distributed",
        ),
        # a bare name before its import: libcst gives it no qualified name
        (
            "import torch\ninit_process_group()\n"
            "from torch.distributed import init_process_group\n",
            "full pass",
        ),
        (
            "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n"
            + LOOP,
            "already distributed",
        ),
        ("from accelerate import Accelerator\n", "already distributed"),
        # a dotted call before a later import: libcst's scopes see the import
        (
            "import torch\ntorch.distributed.init_process_group('gloo')\n"
            "import torch.distributed.fsdp\n",
            "already distributed",
        ),
        # spaces inside a dotted import: libcst spells it differently
        ("from torch . distributed . fsdp import X\n", "full pass"),
        # not distributed: names that only start like a distributed package
        (
            "import torch\ndef accelerated_step(): pass\naccelerated_step()\n",
            "not a training entry point",
        ),
        # non-ASCII before the import on the same line: columns in characters
        (
            "x = 'é'; import torch.distributed.launch\n",
            "already distributed",
        ),
        # old Mac line endings
        (
            "import os\rimport torch.distributed.run\rx = 1\r",
            "already distributed",
        ),
        # -- the wider screen: MPI, RPC, DTensor, collectives, Hogwild workers --
        ("from mpi4py import MPI\nimport torch\n" + LOOP, "already distributed"),
        ("import mpi4py.MPI as MPI\n", "already distributed"),
        (
            "import torch\nimport torch.distributed.rpc as rpc\n" + LOOP,
            "already distributed",
        ),
        (
            "import torch\nimport torch.distributed.autograd as dist_autograd\n" + LOOP,
            "already distributed",
        ),
        (
            "import torch\nfrom torch.distributed.tensor.parallel import "
            "parallelize_module\n" + LOOP,
            "already distributed",
        ),
        (
            "import torch\nfrom torch.distributed.device_mesh import "
            "init_device_mesh\n" + LOOP,
            "already distributed",
        ),
        (
            "import torch\nfrom torch.distributed import init_device_mesh\n" + LOOP,
            "already distributed",
        ),
        # plain collectives, through the module alias: the call is named
        (
            "import torch\nimport torch.distributed as dist\n"
            + LOOP
            + "    dist.all_reduce(loss)\n",
            "already distributed",
        ),
        (
            "import torch\nimport torch.distributed as dist\n"
            + LOOP
            + "dist.barrier()\n",
            "already distributed",
        ),
        (
            "import torch\nfrom torch.distributed import broadcast, all_gather\n"
            + LOOP,
            "already distributed",
        ),
        # ... but not rank queries and guards: a library's "am I distributed?"
        (
            "import torch\nimport torch.distributed as dist\n"
            "if dist.is_available() and dist.is_initialized():\n    pass\n" + LOOP,
            "full pass",
        ),
        # Hogwild: torch.multiprocessing workers on a model in shared memory
        (
            "import torch\nimport torch.multiprocessing as mp\n"
            "model = torch.nn.Linear(2, 2)\nmodel.share_memory()\n"
            "p = mp.Process(target=print, args=(model,))\n",
            "already distributed",
        ),
        (
            "import torch\nimport multiprocessing\n"
            "model = torch.nn.Linear(2, 2)\nmodel.share_memory()\n"
            "p = multiprocessing.Process(target=print, args=(model,))\n",
            "already distributed",
        ),
        (
            "import torch.multiprocessing as mp\nimport torch\n"
            "def main():\n    p = mp.Process(target=main)\n",
            "already distributed",
        ),
        # a tensor shared with DataLoader workers is not a shared model
        (
            "import torch\ncache = torch.zeros(3)\ncache.share_memory_()\n" + LOOP,
            "full pass",
        ),
        # set_start_method is not a worker
        (
            "import torch\nimport torch.multiprocessing as mp\n"
            "mp.set_start_method('spawn')\n" + LOOP,
            "full pass",
        ),
    ],
)
def test_prescreen_edge_cases(source: str, expected: str) -> None:
    assert agree(source.encode()) == expected


def test_accelerated_step_is_not_taken_for_accelerate() -> None:
    """A script that calls its own ``accelerated_step()`` is migrated (it used to be
    taken for an Accelerate script because the name starts with "accelerate")."""
    source = (
        "import torch\n"
        "def accelerated_step(model, opt, x):\n"
        "    loss = model(x).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "model = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "accelerated_step(model, opt, torch.randn(4, 2))\n"
    )
    result = migrate_source(source.encode(), "train.py")
    assert result.changed
    assert result.skip_reason is None
    assert not is_distributed_name("accelerated_step")
    assert is_distributed_name("accelerate.Accelerator")
    assert is_distributed_name("torch.distributed.launcher.api.elastic_launch")


def test_keywords_are_derived_from_the_screens_tables() -> None:
    """A new pattern in patterns.py is a new keyword of the pre-screen."""
    words = {w for group in TRAINING_WORDS for w in group}
    for name in (*DATALOADER_CALLS, *OPTIMIZER_PREFIXES):
        assert {p for p in name.split(".") if p} <= words
    distributed = {w for group in DISTRIBUTED_WORDS for w in group}
    for name in DISTRIBUTED_PREFIXES:
        assert set(name.split(".")) <= distributed


# --- test files are not training entry points ----------------------------------------

TRAINING_TEST = (
    "import torch\n"
    "def test_training_reduces_the_loss():\n"
    "    model = torch.nn.Linear(2, 1)\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "    loss = model(torch.randn(4, 2)).sum()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
)


@pytest.mark.parametrize(
    "path", ["tests/test_train.py", "train_test.py", "pkg\\test_model.py"]
)
def test_a_pytest_file_that_trains_is_not_an_entry_point(path: str) -> None:
    assert migrate_source(TRAINING_TEST, "train.py").changed  # the same code
    result = migrate_source(TRAINING_TEST, path)
    assert not result.changed
    assert result.skip_reason == "not a training entry point"
    assert agree(TRAINING_TEST.encode(), path) == "test file"


def test_unittest_cases_and_conftest_are_not_entry_points() -> None:
    body = TRAINING_TEST.replace("def test_training_reduces_the_loss():", "if 1:")
    unittest_case = (
        "import unittest\nclass Check(unittest.TestCase):\n    def setUp(self): pass\n"
        + body
    )
    pytest_class = (
        "class TestTraining:\n    def test_it(self): pass\n" + body  # pytest class
    )
    for path, source in (
        ("test_unit.py", unittest_case),
        ("test_cls.py", pytest_class),
        ("conftest.py", body),
    ):
        assert migrate_source(body, "train.py").changed
        result = migrate_source(source, path)
        assert (result.changed, result.skip_reason) == (
            False,
            "not a training entry point",
        ), path


def test_a_script_named_like_a_test_without_tests_is_still_migrated() -> None:
    """``test_model.py`` that trains at module level (no test functions) is a script:
    the name alone does not decide."""
    body = TRAINING_TEST.replace("def test_training_reduces_the_loss():", "if 1:")
    assert migrate_source(body, "test_model.py").changed
    assert not is_test_module("testing.py", ast.parse(TRAINING_TEST))
    assert not is_test_module("contest.py", ast.parse(TRAINING_TEST))
