"""DDP and models whose backward leaves parameters without gradients (multi-head
models, ``validity, _ = D(x)``): trained at world 2 as the original trains, see
``runtime/strategies/ddp.py``. The InfoGAN-shaped end-to-end case (migrated by the
codemod) is ``fixtures/parity/infogan_heads.py`` in ``tests/parity``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from tests import warm_python
from tests.parity.harness import max_parameter_error

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "unused_outputs.py"
# Rank 0 alone prints these (accel.print): no other process's line runs into
# them. Still read by their fixed formats to the end (a number of ten decimals,
# a word of three), not up to a line's end.
LOSS = re.compile(r"^(\w+) step (\d+) loss (-?\d\.\d{10}e[+-]\d{2}|nan|inf)", re.M)
FIND_UNUSED = re.compile(r"^(\w+) find_unused (True|False|None)", re.MULTILINE)


def _run(command: list[str]) -> str:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict]]:
    folder = tmp_path_factory.mktemp("unused")
    out = {}
    for name, prefix in (
        ("original", [warm_python.executable()]),
        (
            "world2",
            [*warm_python.launcher(), "--nproc", "2"],
        ),
    ):
        path = folder / f"{name}.pt"
        stdout = _run([*prefix, str(SCRIPT), str(path)])
        out[name] = (stdout, torch.load(path))
    return out


def test_losses_match_the_original_at_world_2(runs) -> None:
    expected = LOSS.findall(runs["original"][0])
    got = LOSS.findall(runs["world2"][0])
    assert [row[:2] for row in got] == [row[:2] for row in expected]
    assert {row[0] for row in expected} == {
        "retain",
        "retain_unused",
        "aux_first",
        "dcgan",
        "accumulate",
        "lazy_r1",
        "all_used",
        "unfreeze",
    }
    for (mode, step, e), (_, _, g) in zip(expected, got, strict=True):
        assert abs(float(g) - float(e)) <= 1e-5 * abs(float(e)), f"{mode} step {step}"


def test_parameters_match_the_original_at_world_2(runs) -> None:
    assert max_parameter_error(runs["original"][1], runs["world2"][1]) < 1e-5


def test_only_models_with_unused_parameters_find_them(runs) -> None:
    # Plain python: no wrapper at all.
    assert set(dict(FIND_UNUSED.findall(runs["original"][0])).values()) == {"None"}
    assert dict(FIND_UNUSED.findall(runs["world2"][0])) == {
        "retain": "False",  # every parameter used by the first backward
        # rebuilt, then averaged by the strategy: two backward passes per forward
        "retain_unused": "True",
        "aux_first": "True",
        "dcgan_g": "False",  # only forwarded before D's backward: left as built
        "dcgan_d": "True",
        "accumulate": "True",
        # rebuilt after the first penalty, then averaged by the strategy after
        # the second (the rebuilt wrapper waits for the last bias too)
        "lazy_r1": "True",
        "all_used": "False",
        # rebuilt once the trunk is unfrozen, as built: every trainable
        # parameter gets a gradient
        "unfreeze": "False",
    }


def test_two_backwards_per_forward_stop_syncing_and_are_averaged_by_hand(
    runs,
) -> None:
    """The models whose first backward leaves parameters without a gradient and
    that take a second backward through the same forward (refused before round
    23b; ``aux_first`` crashed inside DDP's reducer at its second step) train as
    the original: their wrappers stopped syncing, and every step ran."""
    got = LOSS.findall(runs["world2"][0])
    for mode in ("retain_unused", "aux_first"):
        assert [int(step) for name, step, _ in got if name == mode] == [0, 1, 2]
    # StyleGAN2's lazy R1 (LOUD before: DDP's "Expected to have finished
    # reduction" at the forward after the second penalty): four rows a step.
    assert [int(step) for name, step, _ in got if name == "lazy_r1"] == [
        s for s in (0, 1, 2) for _ in range(4)
    ]


def test_a_model_averaged_by_hand_still_gets_rank_0s_buffers() -> None:
    # scripts/manual_buffers.py: a second backward through one forward makes the
    # strategy average the model by hand; each process's BatchNorm statistics
    # (per-device batches) are still made rank 0's before each forward, as DDP
    # does. Before r31d that wrapper stopped broadcasting them: rank 1's eval
    # used its own running mean (-1.29 against rank 0's -0.36).
    stdout = _run(
        [
            *warm_python.launcher(),
            *("--nproc", "2", "--batch-mode", "per-device"),
            str(Path(__file__).parent / "scripts" / "manual_buffers.py"),
        ]
    )
    # two processes print to one pipe: a line may run into another's, so the
    # numbers are read by their fixed six decimals, not up to the line's end
    means = dict(re.findall(r"rank (\d) eval running_mean (-?\d+\.\d{6})", stdout))
    assert set(means) == {"0", "1"}, stdout
    assert means["0"] == means["1"]
    steps = re.findall(r"rank 1 step (\d) running_mean (-?\d+\.\d{6})", stdout)
    rank0 = dict(re.findall(r"rank 0 step (\d) running_mean (-?\d+\.\d{6})", stdout))
    # rank 1's statistics moved from rank 0's, not from its own (its shift of +3)
    assert len(steps) == 4 and abs(float(steps[-1][1])) < 1.0, (steps, rank0)
