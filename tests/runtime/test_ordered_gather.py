"""``accel.gather_in_order`` at world 2 (gloo): outputs collected over sharded
loaders come back in the single-process order, on every rank, in both batch modes;
values that match no share fail on every rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_distributed import launch, plain

pytestmark = pytest.mark.multiprocess

SCRIPT = "ordered_gather.py"


def _lines(folder: Path, rank: int) -> list[str]:
    return (folder / f"rank{rank}.txt").read_text().splitlines()


@pytest.mark.parametrize("batch_mode", ["global", "per-device"])
def test_outputs_come_back_in_the_original_order(
    batch_mode: str, tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "launched").mkdir()
    plain(SCRIPT, str(tmp_path / "plain"))
    *reference, gathered = _lines(tmp_path / "plain", 0)
    assert len(reference) == 12  # 2 loaders x 2 epochs x 3 collections
    assert gathered == "mismatch gathered 6"  # one process: nothing to check
    launch(SCRIPT, str(tmp_path / "launched"), options=("--batch-mode", batch_mode))
    for rank in (0, 1):
        *lines, mismatch = _lines(tmp_path / "launched", rank)
        assert lines == reference
        assert mismatch.startswith("mismatch error gather_in_order: on rank 0, ")
        assert "values were collected over" in mismatch
