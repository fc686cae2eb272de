"""A loop over a name bound just before to ``enumerate(...)`` (through ``tqdm``)
takes its first target as the step counter (``ModuleIndex._enumerated``), and
a helper that only asks the rank is not said to call collectives
(``HelperFact.collective_calls``)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.project_facts import HelperFact

HEAD = """\
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


def cycle(source):
    while True:
        for batch in source:
            yield batch


loader = DataLoader(torch.randn(8, 4), batch_size=4)
"""


def _loop(between: str) -> tuple[bool, bool]:
    source = HEAD + between + "for i, x in loader:\n    print(i, x)\n"
    index = ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")
    loops = [f for f in m.findall(index.module, m.For()) if f.iter.value == "loader"]  # type: ignore[attr-defined]
    assert len(loops) == 1
    return index.loader_loop(loops[0].iter)


def test_enumerate_bound_before_the_loop_is_its_counter() -> None:
    assert _loop("loader = tqdm(enumerate(cycle(loader)), disable=True)\n") == (
        True,
        True,
    )
    assert _loop("loader = enumerate(loader)\nprint(loader)\n") == (True, True)


def test_not_a_counter_through_zip_a_rebinding_or_without_enumerate() -> None:
    assert _loop("loader = zip(enumerate(loader), loader)\n") == (True, False)
    assert _loop("loader = tqdm(cycle(loader))\n") == (True, False)
    rebound = "loader = enumerate(loader)\nif torch.rand(1) > 0.5:\n    loader = 3\n"
    assert _loop(rebound) == (True, False)


def test_a_helper_that_only_asks_the_rank_is_described_as_asking() -> None:
    asks = HelperFact(
        "save_on_master", "utils.py", writes=("torch.save",), collectives=True
    )
    assert "asks torch.distributed which process it runs on" in asks.describe()
    assert "calls collectives" not in asks.describe()
    syncs = HelperFact(
        "reduce_across_processes",
        "utils.py",
        collectives=True,
        collective_calls=("torch.distributed.all_reduce", "torch.distributed.barrier"),
    )
    assert "calls collectives (all_reduce, barrier)" in syncs.describe()
