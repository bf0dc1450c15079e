"""docengine.partition: the groups that pairwise joins make, as tables.py groups touching rules and figures.py
groups ink boxes standing near each other."""

from __future__ import annotations

from modelhost.docengine.partition import Partition


def test_joins_chain_into_one_group_and_others_stay_alone() -> None:
    partition = Partition(6)
    partition.join(4, 1)
    partition.join(1, 3)  # 4-1-3 by a chain: 4 and 3 never joined directly
    partition.join(5, 2)
    assert partition.groups() == [[0], [1, 3, 4], [2, 5]]
    assert partition.find(4) == partition.find(3) != partition.find(5)


def test_a_long_chain_stays_one_group() -> None:
    partition = Partition(10_000)
    for i in range(1, 10_000):
        partition.join(i, i - 1)
    assert partition.groups() == [list(range(10_000))]
    assert Partition(0).groups() == []
