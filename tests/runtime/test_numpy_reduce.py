"""accel.reduce combines numpy scalars and arrays (the count torchdiffeq's
odenet_mnist accuracy() sums with ``np.sum``), keeping their type, where it
raised ``TypeError: accel.reduce cannot combine a int64``. Two processes
under the launcher (gloo)."""

from __future__ import annotations

import subprocess

import pytest

from tests import warm_python

from .test_distributed import SCRIPTS

pytestmark = pytest.mark.multiprocess


def test_numpy_values_are_combined_with_their_type() -> None:
    done = subprocess.run(
        [*warm_python.launcher(), "--nproc", "2", str(SCRIPTS / "numpy_reduce.py")],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    # rank 0 counts 1 match of 3, rank 1 counts 2: 3 in all
    assert "count int64 3" in out, out
    assert "total float32 2.0" in out, out
    assert "array int64 [1, 2, 4]" in out, out
    assert "mean 3.0" in out, out
    assert "refused accel.reduce cannot combine a bool" in out, out
    # a float32 mean stays float32; a uint8 array (no unsigned type in gloo but
    # uint8) is summed as int64 and handed back as uint8 (200 + 200 wraps as
    # numpy's own sum does); an int32 sum past 2**31 comes back as an int64
    assert "half float32 [1.0, 2.5]" in out, out
    assert "small uint8 [144, 1]" in out, out
    assert "scalar_mean float32 2.0" in out, out
    assert f"wide int64 {2 * (2**31 - 1)}" in out, out
