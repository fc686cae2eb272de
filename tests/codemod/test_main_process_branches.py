"""AM047: a test of the launcher's rank variable that picks the main process
becomes the runtime's, where the branch only writes output; anything else is
left to AM028. And AM010's barrier after an ``if`` that tests the file system."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", 0))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if {test}:
{body}
"""


def _migrate(test: str, body: str = '    print("done")'):
    source = SCRIPT.format(test=test, body=body)
    return migrate_source(source, "train.py")


@pytest.mark.parametrize(
    ("test", "call"),
    [
        ('int(os.environ.get("RANK", 0)) == 0', "is_main_process"),
        ('os.environ.get("RANK", "0") == "0"', "is_main_process"),
        ('int(os.environ["RANK"]) == 0', "is_main_process"),
        ("rank == 0", "is_main_process"),
        ("0 == rank", "is_main_process"),
        ("not rank", "is_main_process"),
        ("rank < 1", "is_main_process"),
        ('int(os.environ.get("LOCAL_RANK", -1)) in (-1, 0)', "is_local_main_process"),
        ('os.getenv("LOCAL_RANK", "0") == "0"', "is_local_main_process"),
        # the process group's rank: the runtime starts it with torchrun's RANK
        ("dist.get_rank() == 0", "is_main_process"),
        ("torch.distributed.get_rank() == 0", "is_main_process"),
        ("not dist.get_rank()", "is_main_process"),
    ],
)
def test_a_main_process_test_becomes_the_runtimes(test: str, call: str) -> None:
    result = _migrate(test)
    assert f"if accel.{call}():\n" in result.output
    assert [f.code for f in result.findings if f.code == "AM047"] == ["AM047"]


@pytest.mark.parametrize(
    "test",
    [
        'os.environ.get("RANK") == "0"',  # false run as one process
        'int(os.environ.get("LOCAL_RANK", -1)) == 0',  # likewise
        "rank != 0",  # the other processes
        "rank == 1",
        'os.environ.get("SLURM_PROCID", "0") == "0"',  # not what torchrun sets
        'not os.environ.get("RANK", "0")',  # "0" is a true string
        'rank == 0 and os.path.exists("x")',
    ],
)
def test_other_tests_are_not_rewritten(test: str) -> None:
    assert "AM047" not in {f.code for f in _migrate(test).findings}


@pytest.mark.parametrize(
    "body",
    [
        '    torch.save(model.state_dict(), "m.pt")',  # a collective under FSDP
        "    opt.zero_grad()",  # training state
        '    print(open("m.txt").read())',  # a read of the file system
        "    model.eval()",  # training state
        "    print(torch.rand(1))",  # a draw on one process only
    ],
)
def test_a_branch_that_does_more_than_output_is_left(body: str) -> None:
    result = _migrate("rank == 0", body)
    assert "AM047" not in {f.code for f in result.findings}


def test_a_name_assigned_under_the_branch_and_read_after_it_is_left() -> None:
    source = SCRIPT.format(test="rank == 0", body='    path = "a.pt"') + "print(path)\n"
    assert "AM047" not in {f.code for f in migrate_source(source, "t.py").findings}


@pytest.mark.parametrize(
    "test",
    [
        "dist.get_rank(group) == 0",  # another group's rank
        "dist.get_rank() == 1",
        "dist.get_rank() != 0",
    ],
)
def test_other_process_group_tests_are_not_rewritten(test: str) -> None:
    source = SCRIPT.format(test=test, body='    print("done")')
    source = source.replace("rank = ", "group = None\nrank = ")
    found = {f.code for f in migrate_source(source, "train.py").findings}
    assert "AM047" not in found


def test_a_process_group_test_in_a_file_that_never_reads_rank() -> None:
    source = SCRIPT.format(test="dist.get_rank() == 0", body='    print("done")')
    source = source.replace('rank = int(os.environ.get("RANK", 0))\n', "")
    result = migrate_source(source, "train.py")
    assert "if accel.is_main_process():\n" in result.output
    (found,) = [f for f in result.findings if f.code == "AM047"]
    assert "starts the process group with the launcher's RANK" in found.message


def test_a_file_that_starts_its_own_group_is_left() -> None:
    """Its group's rank is the file's choice (``rank=args.rank``), not
    necessarily torchrun's ``RANK``."""
    source = SCRIPT.format(test="dist.get_rank() == 0", body='    print("done")')
    source = source.replace(
        "rank = ", 'dist.init_process_group("gloo", rank=0, world_size=1)\nrank = '
    )
    found = {f.code for f in migrate_source(source, "train.py").findings}
    assert "AM047" not in found


def test_a_file_that_sets_the_variable_is_left() -> None:
    source = 'import os\nos.environ["RANK"] = "0"\n' + SCRIPT.format(
        test="rank == 0", body='    print("x")'
    )
    assert "AM047" not in {f.code for f in migrate_source(source, "t.py").findings}


def test_a_second_run_keeps_a_loss_under_the_main_process_branch_local() -> None:
    """Under ``accel.is_main_process()`` a loss read is not turned into
    ``accel.global_loss`` (a collective the other processes never join)."""
    first = _migrate("rank == 0", '    print("loss", loss.item())')
    again = migrate_source(first.output, "train.py")
    assert "global_loss" not in again.output.split("is_main_process()")[-1]


SAVE_UNDER_TEST = """\
import os

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if os.path.isdir("ckpt"):
        torch.save({saved}, "ckpt/last.pt")
state = torch.load("ckpt/last.pt")
"""


def test_the_barrier_follows_an_if_that_tests_the_file_system() -> None:
    result = migrate_source(SAVE_UNDER_TEST.format(saved="{'epoch': epoch}"), "t.py")
    assert (
        '    if os.path.isdir("ckpt"):\n'
        "        accel.save({'epoch': epoch}, \"ckpt/last.pt\")\n"
        "    accel.barrier()\n"
    ) in result.output
    assert not [f for f in result.findings if f.status == "needs-review"]


def test_a_state_dict_under_the_test_is_still_reported() -> None:
    result = migrate_source(SAVE_UNDER_TEST.format(saved="model.state_dict()"), "t.py")
    assert "accel.barrier()" not in result.output
    assert any(
        f.code == "AM010" and f.status == "needs-review" and "line 13" in f.message
        for f in result.findings
    )


@pytest.mark.parametrize(
    "body",
    [
        '    print("weight", float(model.weight[0, 0]))',
        "    print(model.bias.tolist())",
        "    print(model.weight.cpu().numpy())",
        "    print(model.weight)",
        "    print(model(torch.ones(1, 4)).item())",  # a forward
        "    print(sum(p.sum().item() for p in model.parameters()))",
        '    torch.save({"w": float(model.weight[0, 0])}, "w.pt")',
    ],
)
def test_a_read_of_the_models_parameters_is_left_and_reported(body: str) -> None:
    """Under FSDP the parameters are sharded: the read gathers them by a
    collective that the other processes never join. AM047 leaves the branch
    and AM028 reports the read, whether or not the branch has an ``else``."""
    for text in (body, body + '\nelse:\n    print("other")'):
        result = _migrate("rank == 0", text)
        assert "AM047" not in {f.code for f in result.findings}
        [finding] = [f for f in result.findings if f.code == "AM028"]
        assert finding.status == "needs-review"
        assert "prepared model's parameters" in finding.message
        assert "nothing waits on it" not in finding.message
        assert "accel" not in result.output  # the file is left unchanged


@pytest.mark.parametrize(
    "body",
    [
        "    print(model)",  # a module's repr: its structure, no value
        '    print("loss", float(loss))',
        '    print("loss", loss.item())',
    ],
)
def test_output_that_reads_no_parameter_is_still_rewritten(body: str) -> None:
    result = _migrate("rank == 0", body)
    assert "if accel.is_main_process():\n" in result.output
    assert "AM028" not in {f.code for f in result.findings}


@pytest.mark.parametrize(
    "body",
    [
        '    print("params", sum(p.numel() for p in model.parameters()))',
        "    print(sum(p.numel() for p in model.parameters() if p.requires_grad))",
        "    print(sum(p.nelement() for _, p in model.named_parameters()))",
        "    print(model.weight.shape, model.bias.size(0))",
        "    n = 0\n    for p in model.parameters():\n        n += p.numel()",
    ],
)
def test_a_parameters_size_is_not_a_read(body: str) -> None:
    """A sharded parameter is a DTensor whose ``numel()`` and ``shape`` are the
    whole parameter's, from its metadata: no collective, the same on every
    process."""
    result = _migrate("rank == 0", body)
    assert "AM028" not in {f.code for f in result.findings}, [
        f.message for f in result.findings
    ]


def test_a_parameter_read_under_the_runtimes_test_is_reported() -> None:
    """A second run, or the user's own ``accel.is_main_process()``."""
    source = SCRIPT.format(
        test="rank == 0", body='    print("w", float(model.weight[0, 0]))'
    )
    source = source.replace(
        "if rank == 0:",
        "import accel_migrate.runtime as accel\nif accel.is_main_process():",
    )
    result = migrate_source(source, "train.py")
    assert any(
        f.code == "AM028" and "prepared model's parameters" in f.message
        for f in result.findings
    )


@pytest.mark.parametrize(
    "read",
    ["float(w[0, 0])", "float(w)", "w.tolist()", "head(torch.ones(1, 4)).sum()"],
)
def test_a_parameter_bound_before_the_branch_is_followed(read: str) -> None:
    """``w = model.weight`` (or a submodule) bound before the branch: reading
    it under the branch reads the model."""
    source = SCRIPT.format(test="rank == 0", body=f"    print({read})")
    source = source.replace(
        "if rank == 0:", "w = model.weight\nhead = model\nif rank == 0:"
    )
    result = migrate_source(source, "train.py")
    assert "AM047" not in {f.code for f in result.findings}
    assert any(
        f.code == "AM028" and "prepared model's parameters" in f.message
        for f in result.findings
    ), [f.message for f in result.findings]


def test_a_parameters_size_bound_before_the_branch_is_not_a_read() -> None:
    source = SCRIPT.format(test="rank == 0", body="    print(n, w.shape)")
    source = source.replace(
        "if rank == 0:",
        "n = sum(p.numel() for p in model.parameters())\nw = model.weight\n"
        "if rank == 0:",
    )
    result = migrate_source(source, "train.py")
    assert "if accel.is_main_process():\n" in result.output
    assert "AM028" not in {f.code for f in result.findings}
