"""Items joined into groups pair by pair (a disjoint-set forest): the connected groups of touching rules
(tables.py), of ink boxes standing near each other (figures.py)."""

from __future__ import annotations

__all__ = ["Partition"]


class Partition:
    """`count` items numbered from 0, each a group of its own until `join` puts two in one group."""

    def __init__(self, count: int) -> None:
        self._parent = list(range(count))

    def find(self, item: int) -> int:
        """The item that stands for `item`'s group. Each step halves the path walked, so a page's thousands of
        joins (ink boxes by the grid cell) never walk a long chain twice."""
        parent = self._parent
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    def join(self, a: int, b: int) -> None:
        """Put `a`'s group and `b`'s in one."""
        self._parent[self.find(a)] = self.find(b)

    def groups(self) -> list[list[int]]:
        """Every group's items in increasing order, the groups in the order of their first items."""
        out: dict[int, list[int]] = {}
        for item in range(len(self._parent)):
            out.setdefault(self.find(item), []).append(item)
        return list(out.values())
