"""The launcher names the rank whose own error failed the job, not a rank that was
stopped because of it (torchrun orders failures by whole seconds only)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

from torch.distributed.elastic.multiprocessing.errors import (
    ChildFailedError,
    ProcessFailure,
)

from accel_migrate.cli.launch_command import failure_summary, root_failure
from accel_migrate.runtime import faults


def _recorded(
    tmp_path: Path, rank: int, error: BaseException, stopped: bool = False
) -> str:
    path = tmp_path / f"error{rank}.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
        faults.record_error(error, stopped=stopped)
    return str(path)


def _failure(rank: int, error_file: str, exitcode: int = 1) -> ProcessFailure:
    return ProcessFailure(
        local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=error_file
    )


def _stopped(tmp_path: Path, rank: int) -> ProcessFailure:
    error = faults.PeerFailedError(f"rank {rank}: all_reduce could not complete")
    return _failure(rank, _recorded(tmp_path, rank, error, stopped=True))


def _raised(tmp_path: Path, rank: int) -> ProcessFailure:
    return _failure(rank, _recorded(tmp_path, rank, ValueError("bad batch")))


def _aborted(tmp_path: Path, rank: int) -> ProcessFailure:
    """Died of a signal, so without a record."""
    return _failure(rank, str(tmp_path / f"none{rank}.json"), exitcode=-6)


def _closed(tmp_path: Path, rank: int) -> ProcessFailure:
    """Sent SIGTERM by torchrun once another rank had failed; torchrun counts it
    as a failure too."""
    return _failure(rank, str(tmp_path / f"none{rank}.json"), exitcode=-15)


@pytest.mark.parametrize(
    ("cause", "consequence"),
    [(_raised, _stopped), (_aborted, _stopped), (_aborted, _closed)],
    ids=["raised-vs-stopped", "aborted-vs-stopped", "aborted-vs-closed"],
)
def test_the_cause_wins_over_a_lower_rank_it_ended(
    cause: Callable[[Path, int], ProcessFailure],
    consequence: Callable[[Path, int], ProcessFailure],
    tmp_path: Path,
) -> None:
    """Rank 1 failed and ended rank 0, both in the same whole second, as torchrun
    stamps them; torchrun's own choice is then rank 0."""
    ended, failed = consequence(tmp_path, 0), cause(tmp_path, 1)
    ended.timestamp = failed.timestamp
    failure = ChildFailedError("train.py", {0: ended, 1: failed})
    assert failure.get_first_failure()[0] == 0
    assert root_failure(failure)[0] == 1


def test_only_stopped_ranks_leave_torchruns_choice(tmp_path: Path) -> None:
    failure = ChildFailedError(
        "train.py", {0: _stopped(tmp_path, 0), 1: _stopped(tmp_path, 1)}
    )
    assert root_failure(failure) == failure.get_first_failure()


def test_two_recorded_errors_are_ordered_within_the_second(tmp_path: Path) -> None:
    later_rank0 = _recorded(tmp_path, 0, ValueError("second"))
    earlier_rank1 = _recorded(tmp_path, 1, ValueError("first"))
    data = json.loads(Path(earlier_rank1).read_text())
    extra = data["message"]["extraInfo"]
    extra[faults.RECORDED_AT] = repr(float(extra[faults.RECORDED_AT]) - 0.5)
    Path(earlier_rank1).write_text(json.dumps(data))
    failure = ChildFailedError(
        "train.py", {0: _failure(0, later_rank0), 1: _failure(1, earlier_rank1)}
    )
    rank, process = root_failure(failure)
    assert rank == 1
    assert "first" in str(process.message)


def test_without_recorded_errors_torchruns_choice_stands(tmp_path: Path) -> None:
    killed = [_failure(r, str(tmp_path / f"none{r}.json")) for r in (0, 1)]
    killed[0].timestamp = int(time.time()) + 5
    failure = ChildFailedError("train.py", {0: killed[0], 1: killed[1]})
    assert root_failure(failure)[0] == 1


def test_the_summary_says_how_the_rank_ended(tmp_path: Path) -> None:
    raised = _failure(1, _recorded(tmp_path, 1, ValueError("bad batch")))
    assert failure_summary(1, raised) == (
        "rank 1 (pid 1001) exited with code 1 first; its traceback is above"
    )
    aborted = _failure(0, str(tmp_path / "none.json"), exitcode=-6)
    assert failure_summary(0, aborted) == "rank 0 (pid 1000) was ended by SIGABRT first"
