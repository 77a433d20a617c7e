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
    subscribers: dict[uuid.UUID, list[str]] = {}
    sizes: dict[uuid.UUID, int] = {}
    for name in sorted({t for m in members.values() for t in m.subscribed}):
        meta = topics.get(name)
        if meta is not None and meta.partitions > 0:
            subscribers[meta.topic_id] = [m for m in order if name in members[m].subscribed]
            sizes[meta.topic_id] = meta.partitions
    held: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in order}
    owned: set[tuple[uuid.UUID, int]] = set()
    # 1. Keep every partition its current owner may still have.
    for m in order:
        for topic_id, partitions in members[m].current.items():
            if m not in subscribers.get(topic_id, ()):
                continue
            for p in sorted(partitions):
                if p < sizes[topic_id] and (topic_id, p) not in owned:
                    owned.add((topic_id, p))
                    held[m].setdefault(topic_id, set()).add(p)
    load = {m: sum(len(ps) for ps in held[m].values()) for m in order}
    free = [(t, p) for t in sorted(subscribers) for p in range(sizes[t]) if (t, p) not in owned]
    homogeneous = len({members[m].subscribed for m in order}) <= 1 or all(
        len(subs) == len(order) for subs in subscribers.values()
    )
    if homogeneous and order:
        _balance_homogeneous(order, held, load, free)
    else:
        _balance_general(order, subscribers, held, load, free)
    return _freeze(held)


def _balance_homogeneous(
    order: list[str],
    held: dict[str, dict[uuid.UUID, set[int]]],
    load: dict[str, int],
    free: list[tuple[uuid.UUID, int]],
) -> None:
    """Everyone may take every partition: exact quotas (the most loaded members get the extra
    ones, so that fewer partitions move), excess returned to the pool, pool handed out."""
    total = sum(load.values()) + len(free)
    quota, extra = divmod(total, len(order))
    ranked = sorted(order, key=lambda m: (-load[m], m))
    cap = {m: quota + (1 if i < extra else 0) for i, m in enumerate(ranked)}
    pool = list(free)
    for m in order:
        excess = load[m] - cap[m]
        if excess > 0:
            mine = sorted((t, p) for t, ps in held[m].items() for p in ps)
            for t, p in mine[-excess:]:
                held[m][t].discard(p)
                pool.append((t, p))
            load[m] = cap[m]
    pool.sort(reverse=True)
    for m in sorted(order, key=lambda m: (load[m], m)):
        while load[m] < cap[m]:
            t, p = pool.pop()
            held[m].setdefault(t, set()).add(p)
            load[m] += 1


def _balance_general(
    order: list[str],
    subscribers: dict[uuid.UUID, list[str]],
    held: dict[str, dict[uuid.UUID, set[int]]],
    load: dict[str, int],
    free: list[tuple[uuid.UUID, int]],
) -> None:
    """Different subscriptions: free partitions to their least loaded subscriber, then moves
    from the most to the least loaded member that may take one, while that narrows the gap."""
    for t, p in free:
        m = min(subscribers[t], key=lambda s: (load[s], s))
        held[m].setdefault(t, set()).add(p)
        load[m] += 1
    while True:
        move: tuple[int, str, uuid.UUID, str] | None = None
        for giver in sorted(order, key=lambda s: (-load[s], s)):
            for t, ps in sorted(held[giver].items()):
                if not ps:
                    continue
                taker = min(subscribers[t], key=lambda s: (load[s], s))
                if load[taker] + 1 < load[giver] and (
                    move is None or (load[taker], taker) < (move[0], move[1])
                ):
                    move = (load[taker], taker, t, giver)
            if move is not None:
                break
        if move is None:
            return
        _, taker, t, giver = move
        p = max(held[giver][t])
        held[giver][t].discard(p)
        held[taker].setdefault(t, set()).add(p)
        load[giver] -= 1
        load[taker] += 1


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
