"""No ``accel.barrier()`` goes where only the processes whose test of the file
system came out one way arrive (``file_tests``): under ``if not
os.path.exists(path):`` around the write, around a call of the function that
writes (at any depth), or after an ``if os.path.exists(path): return`` above
it. A process that tests after the main process has written skips the branch
and the main process waits at the barrier forever. The finding names the test
and its line; without the test the barrier is placed as before."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

TRAIN = """\
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

SAVE_INIT = """\
import os

import torch

INIT = "init.pt"


def save_init(model):
{guard}    torch.save(model.state_dict(), INIT)


def prepare(model):
    save_init(model)


{train}{call}
model.load_state_dict(torch.load(INIT))
"""


def _migrate(tmp_path: Path, source: str) -> tuple[str, list[str]]:
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return result.output, [f"{f.code} {f.status} {f.message}" for f in result.findings]


def test_a_save_reached_through_two_calls_is_fenced(tmp_path: Path) -> None:
    output, _ = _migrate(
        tmp_path, SAVE_INIT.format(guard="", train=TRAIN, call="prepare(model)")
    )
    assert "accel.save(accel.state_dict(model), INIT)\n    accel.barrier()" in output


def test_a_test_around_a_call_two_levels_up_keeps_the_barrier_out(
    tmp_path: Path,
) -> None:
    call = "if not os.path.isfile(INIT):\n    prepare(model)"
    output, findings = _migrate(
        tmp_path, SAVE_INIT.format(guard="", train=TRAIN, call=call)
    )
    assert "accel.barrier()" not in output
    source_line = (
        SAVE_INIT.format(guard="", train=TRAIN, call=call)
        .splitlines()
        .index("if not os.path.isfile(INIT):")
        + 1
    )
    assert any(
        f.startswith("AM010 needs-review")
        and f"the test of the file system at line {source_line} "
        "(`if not os.path.isfile(INIT)`)" in f
        and "before that test" in f
        for f in findings
    ), findings


def test_an_early_return_on_a_file_test_keeps_the_barrier_out(
    tmp_path: Path,
) -> None:
    guard = "    if os.path.exists(INIT):\n        return\n"
    source = SAVE_INIT.format(guard=guard, train=TRAIN, call="prepare(model)")
    output, findings = _migrate(tmp_path, source)
    assert "accel.barrier()" not in output
    line = source.splitlines().index("    if os.path.exists(INIT):") + 1
    assert any(
        f.startswith("AM010 needs-review")
        and f"at line {line} (`if os.path.exists(INIT)`)" in f
        for f in findings
    ), findings


UTILS = """\
def write_log(path, text):
    with open(path, "w") as f:
        f.write(text)
"""

HELPER_SCRIPT = """\
import os

import torch

from utils import write_log


def report(text):
    write_log("log.txt", text)


{train}{call}
print(open("log.txt").read())
"""


def test_a_helper_write_under_a_test_at_the_call_site_is_not_fenced(
    tmp_path: Path,
) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    plain, _ = _migrate(
        tmp_path, HELPER_SCRIPT.format(train=TRAIN, call='report("done")')
    )
    assert (
        'accel.on_main_process(write_log, "log.txt", text)\n    accel.barrier()'
        in plain
    )
    call = 'if not os.path.exists("log.txt"):\n    report("done")'
    source = HELPER_SCRIPT.format(train=TRAIN, call=call)
    output, findings = _migrate(tmp_path, source)
    assert "accel.barrier()" not in output
    line = source.splitlines().index('if not os.path.exists("log.txt"):') + 1
    assert any(
        f.startswith("AM017 needs-review")
        and f"the test of the file system at line {line}" in f
        for f in findings
    ), findings
