"""The runtime's check that one mean loss reads batches of one share decides
for every process at once (``loss_share.check_one_share``): a process whose own
shares agree must raise too where another's differ, or it would go on into the
backward's all-reduce and wait for processes that stopped."""

from __future__ import annotations

import pytest

from accel_migrate.runtime.data import ShardingError
from accel_migrate.runtime.loss_share import check_one_share


def test_every_process_raises_where_any_process_shares_differ() -> None:
    # 4 processes: a batch of 6 splits 2, 2, 1, 1 and one of 3 splits 1, 1, 1, 0
    for rank, shares in enumerate(
        [[(2, 6), (1, 3)]] * 2 + [[(1, 6), (1, 3)], [(1, 6), (0, 3)]]
    ):
        with pytest.raises(ShardingError, match="different shares") as caught:
            check_one_share(shares, world=4, rank=rank)
        if rank < 2:
            assert "another process's differ" in str(caught.value)


def test_shares_that_agree_on_every_process_pass() -> None:
    # 2 processes: 4 rows split 2/2 and 6 rows split 3/3
    for rank in range(2):
        check_one_share([(2, 4), (3, 6)], world=2, rank=rank)
    # one process, or one loader: nothing to compare
    check_one_share([(3, 6)], world=2, rank=0)
    check_one_share([(4, 4), (6, 6)])


def test_shares_off_the_plan_are_judged_by_this_process_alone() -> None:
    # not chunk_bounds' split (a sampler of its own): this rank's fractions decide
    check_one_share([(1, 4), (1, 4)], world=2, rank=0)
    with pytest.raises(ShardingError):
        check_one_share([(1, 4), (1, 3)], world=2, rank=0)
