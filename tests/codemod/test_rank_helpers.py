"""The dist-aware helpers a single-GPU fork keeps (``rank_helpers``):
``if is_main_process(): torch.save(...)`` over ``get_rank()`` guarded by
``dist.is_initialized()`` is the main-process test, so AM047 gives the branch
the runtime's test and AM028 sees the main process's save, not a branch on a
value that differs between processes; anything else stays AM028's."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

HELPERS = """\
import torch
import torch.distributed as dist


def dist_ready():
    \"\"\"Whether a process group runs.\"\"\"
    if not dist.is_available():
        return False
    if not dist.is_initialized():
        return False
    return True


def current_rank():
    if not {guard}:
        return 0
    return {query}


def on_master():
    return {test}


def save_master(*args, **kwargs):
    if on_master():
        torch.save(*args, **kwargs)


def train():
    group = None
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        save_master({{"model": model.state_dict(), "epoch": epoch}}, "ck.pt")


if __name__ == "__main__":
    train()
"""


def _migrate(
    guard: str = "dist_ready()",
    query: str = "dist.get_rank()",
    test: str = "current_rank() == 0",
    extra: str = "",
):
    source = HELPERS.format(guard=guard, query=query, test=test) + extra
    return migrate_source(source, "train.py")


@pytest.mark.parametrize(
    ("guard", "test"),
    [
        ("dist_ready()", "current_rank() == 0"),
        ("dist.is_initialized()", "current_rank() == 0"),
        ("(dist.is_available() and dist.is_initialized())", "not current_rank()"),
    ],
)
def test_the_helpers_main_process_save_is_the_runtimes(guard: str, test: str) -> None:
    result = _migrate(guard=guard, test=test)
    codes = [f.code for f in result.findings]
    assert "AM028" not in codes
    assert codes.count("AM047") == 1
    assert "    if accel.is_main_process():\n        accel.save(*args, **kwargs)\n" in (
        result.output
    )
    (found,) = [f for f in result.findings if f.code == "AM047"]
    assert found.message.startswith("`on_master()` -> accel.is_main_process()")
    assert "`on_master()` is the file's own helper over `dist.get_rank()`" in (
        found.message
    )


@pytest.mark.parametrize(
    ("guard", "query", "test", "extra"),
    [
        # another group's rank
        ("dist_ready()", "dist.get_rank(group)", "current_rank() == 0", ""),
        # the other processes save: a divergence still
        ("dist_ready()", "dist.get_rank()", "current_rank() != 0", ""),
        ("dist_ready()", "dist.get_rank()", "current_rank() == 1", ""),
        # a guard that is not "a group is started": every process can get 0
        ("torch.cuda.is_available()", "dist.get_rank()", "current_rank() == 0", ""),
        ("dist.is_available()", "dist.get_rank()", "current_rank() == 0", ""),
        # `not A and B` is `(not A) and B`: true where no group is available
        (
            "dist.is_available() and dist.is_initialized()",
            "dist.get_rank()",
            "current_rank() == 0",
            "",
        ),
    ],
)
def test_other_helpers_are_left_to_am028(
    guard: str, query: str, test: str, extra: str
) -> None:
    result = _migrate(guard, query, test, extra)
    codes = {f.code for f in result.findings}
    assert "AM047" not in codes
    assert "AM028" in codes
    assert result.output == HELPERS.format(guard=guard, query=query, test=test) + extra


def test_a_helper_with_an_argument_is_not_read_through() -> None:
    """``on_master(rank)``: the helper's value depends on what it is handed."""
    source = HELPERS.format(
        guard="dist_ready()", query="dist.get_rank()", test="current_rank() == 0"
    ).replace("def on_master():", "def on_master(rank=0):")
    codes = {f.code for f in migrate_source(source, "train.py").findings}
    assert "AM047" not in codes
    assert "AM028" in codes


def test_a_file_that_starts_its_own_group_is_left() -> None:
    """Its group's rank is the file's choice (``rank=0``), not necessarily
    torchrun's ``RANK``: the file is left as it is."""
    source = HELPERS.format(
        guard="dist_ready()", query="dist.get_rank()", test="current_rank() == 0"
    ).replace(
        "    group = None\n",
        '    dist.init_process_group("gloo", rank=0, world_size=1)\n',
    )
    result = migrate_source(source, "train.py")
    assert "AM047" not in {f.code for f in result.findings}
    assert result.output == source
