"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range`` (Kafka's
``UniformAssignor`` and ``RangeAssignor``), pure functions from the members' subscriptions and
the topics to a target assignment.

Both name topics by topic id and return, for every member, ``{topic id: partitions}`` (members
that get nothing map to ``{}``). Neither looks at the clock or at the previous group epoch: the
same input gives the same output, so a test can hold each against its promise.

* ``uniform`` (the default): every partition of a subscribed topic goes to exactly one member
  that subscribes to it; the members' partition counts differ by at most one among members with
  the same subscription (in a group where all subscribe to the same topics, overall); and
  partitions stay where they are (sticky) as long as that keeps the balance. Heterogeneous
  subscriptions are balanced greedily: a partition moves from the most loaded member that
  could give one to the least loaded member that subscribes to its topic, until no such move
  narrows the gap. Kafka's uniform assignor has the same goals; its exact choices may differ.
* ``range``: per topic, the members subscribed to it in member id order each get one
  contiguous range of partitions, the first ``partitions % members`` one more than the rest,
  as the classic client-side range assignor does; co-partitioned topics line up.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import NamedTuple

#: A member's partitions: topic id -> partition numbers.
Partitions = Mapping[uuid.UUID, frozenset[int]]


class TopicMetadata(NamedTuple):
    topic_id: uuid.UUID
    name: str
    partitions: int


class MemberSpec(NamedTuple):
    """What an assignor knows of a member: its subscribed topic names and what it owns in the
    current target assignment (for stickiness)."""

    subscribed: frozenset[str]
    current: Partitions


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[str, TopicMetadata]], dict[str, Partitions]]


def _freeze(assignment: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Partitions]:
    return {
        member: {t: frozenset(ps) for t, ps in sorted(topics.items()) if ps}
        for member, topics in assignment.items()
    }


def uniform_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[str, TopicMetadata]
) -> dict[str, Partitions]:
    """The ``uniform`` assignor: balanced, then sticky (see the module docstring)."""
    order = sorted(members)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for name in sorted({t for m in members.values() for t in m.subscribed}):
        meta = topics.get(name)
        if meta is None:
            continue
        subscribers = [m for m in order if name in members[m].subscribed]
        for p in range(meta.partitions):
            eligible[(meta.topic_id, p)] = subscribers
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in order}
    # 1. Keep every partition its current owner may still have.
    for m in order:
        for topic_id, partitions in members[m].current.items():
            for p in partitions:
                tp = (topic_id, p)
                if m in eligible.get(tp, ()) and tp not in owner:
                    owner[tp] = m
                    load[m].add(tp)
    # 2. Give each unowned partition to its least loaded subscriber.
    for tp, subscribers in eligible.items():
        if tp not in owner and subscribers:
            m = min(subscribers, key=lambda s: (len(load[s]), s))
            owner[tp] = m
            load[m].add(tp)
    # 3. Move partitions from the most to the least loaded member while that narrows the gap.
    moved = True
    while moved:
        moved = False
        for giver in sorted(order, key=lambda s: (-len(load[s]), s)):
            best: tuple[int, str, tuple[uuid.UUID, int]] | None = None
            for tp in sorted(load[giver]):
                for taker in eligible[tp]:
                    if len(load[taker]) + 1 < len(load[giver]):
                        candidate = (len(load[taker]), taker, tp)
                        if best is None or candidate < best:
                            best = candidate
            if best is not None:
                _, taker, tp = best
                load[giver].discard(tp)
                load[taker].add(tp)
                owner[tp] = taker
                moved = True
                break
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in order}
    for (topic_id, p), m in owner.items():
        out[m].setdefault(topic_id, set()).add(p)
    return _freeze(out)


def range_assign(
    members: Mapping[str, MemberSpec], topics: Mapping[str, TopicMetadata]
) -> dict[str, Partitions]:
    """The ``range`` assignor: per topic, contiguous ranges in member id order."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in sorted(members)}
    for name in sorted({t for m in members.values() for t in m.subscribed}):
        meta = topics.get(name)
        if meta is None:
            continue
        subscribers = sorted(m for m, spec in members.items() if name in spec.subscribed)
        quota, extra = divmod(meta.partitions, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            count = quota + (1 if i < extra else 0)
            if count:
                out[m][meta.topic_id] = set(range(start, start + count))
            start += count
    return _freeze(out)


#: The assignors by the name ``group.consumer.assignors`` and clients use.
ASSIGNORS: Mapping[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
