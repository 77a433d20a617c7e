"""Waiting for a consumer group's members to settle, shared by the group tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any


def wait_for_exact_cover(
    members: Sequence[Any],
    partitions: int,
    timeout: float = 30.0,
    name: Callable[[Any], str] = lambda m: str(m.name),
) -> dict[str, frozenset[int]]:
    """Wait until every member holds at least one partition, the holdings are disjoint and cover
    every partition, and they stay so for a second (during a rebalance a member may hold its old
    partitions a moment longer). Members expose ``assignment`` (a set of partitions, or None
    before their first) and ``error`` (what stopped their thread); the answer maps each
    member's name to its partitions. A member's error, or no such moment before ``timeout``,
    fails the test with what each member held last."""
    deadline = time.monotonic() + timeout
    stable_since: float | None = None
    while True:
        for m in members:
            if m.error is not None:
                raise AssertionError(f"{name(m)} failed: {m.error!r}") from m.error
        last: dict[str, frozenset[int] | None] = {name(m): m.assignment for m in members}
        held = [a for a in last.values() if a]
        exact = (
            len(held) == len(members)
            and sum(len(a) for a in held) == partitions
            and frozenset().union(*held) == frozenset(range(partitions))
        )
        now = time.monotonic()
        if exact:
            stable_since = stable_since or now
            if now - stable_since >= 1.0:
                return {k: v for k, v in last.items() if v}
        else:
            stable_since = None
        if now > deadline:
            raise AssertionError(f"no exact assignment of {partitions} partitions: {last}")
        time.sleep(0.05)
