"""One KIP-848 consumer group: its members, epochs and target assignment, and the reconciliation
of a member's assignment with its target (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and
``CurrentAssignmentBuilder``).

Theory of operation
===================

The **group epoch** goes up whenever what the assignment depends on changes: a member joins,
leaves or is fenced, a member's subscription or preferred assignor changes, or a subscribed
topic appears or gains partitions. The **target assignment** is recomputed (by the group's
assignor, :mod:`.assignors`) when the group epoch is ahead of the **assignment epoch**, and then
carries the group epoch.

Each member converges to its part of the target on its own heartbeats. Its **member epoch** is
the assignment epoch it has reached. A partition is owned (in the *partition epochs*) by the
member that has it assigned or still has to revoke it; a partition is given to its new owner only
once nobody owns it. :func:`reconcile` moves a member along::

    state                   meaning                                           member epoch
    ----------------------  ------------------------------------------------  ------------
    STABLE                  assigned == its target                            target epoch
    UNREVOKED_PARTITIONS    it must first give up partitions (the response    unchanged
                            carries only the kept ones); it stays here until
                            a heartbeat's owned partitions no longer hold them
    UNRELEASED_PARTITIONS   some target partitions are still owned by         target epoch
                            others; it gets them on a later heartbeat, once
                            they are free

A member in UNREVOKED_PARTITIONS keeps its epoch, so that its commits stay valid while it
revokes; a member that does not revoke within its rebalance timeout is fenced.

The group's state follows from the rest: Empty (no member), Assigning (the target is behind the
group epoch), Reconciling (a member is behind the target), Stable.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from compactlog.broker.coordinator.assignors import Partitions, TopicMetadata

#: The member epochs a heartbeat may carry besides a member's epoch.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ``ListGroups`` / ``DescribeGroups`` protocol type of a consumer group.
CONSUMER_GROUP_PROTOCOL_TYPE = "consumer"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


EMPTY: Partitions = {}


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol inside a consumer group joined with (the
    KIP-848 migration; Kafka's ``ClassicMemberMetadata``): its session timeout and its
    ``(protocol name, metadata)`` pairs from JoinGroup, in its order of preference."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    #: None for a member that speaks the consumer protocol (ConsumerGroupHeartbeat).
    classic: ClassicMemberMetadata | None = None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    #: The subscribed topics as they were when the group epoch last went up.
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    dead: bool = False

    # --- state --------------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed_topic_names)

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (the first configured one if none asks)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])

    def partition_owners(self, excluding: str | None = None) -> dict[tuple[uuid.UUID, int], str]:
        """Every partition some member holds (assigned or pending revocation) -> that member."""
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members.values():
            if m.member_id == excluding:
                continue
            for held in (m.assigned, m.pending_revocation):
                for topic_id, partitions in held.items():
                    for p in partitions:
                        owners[(topic_id, p)] = m.member_id
        return owners


def owns_any(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, wanted: Partitions) -> bool:
    """Whether the member's reported partitions still hold any of ``wanted`` (unknown: yes)."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        if set(partitions) & wanted.get(topic_id, frozenset()):
            return True
    return False


def is_subset(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, of: Partitions) -> bool:
    if owned is None:
        return False
    return all(set(ps) <= of.get(t, frozenset()) for t, ps in owned)


def _minus(a: Partitions, b: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _intersect(a: Partitions, b: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    owners: Mapping[tuple[uuid.UUID, int], str],
    owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None,
) -> ConsumerGroupMember:
    """The member one step closer to ``target`` (Kafka's ``CurrentAssignmentBuilder``).

    ``owners``: the partitions other members hold. ``owned``: what the member reports it owns
    in this heartbeat, or None when the heartbeat does not say.
    """
    if member.state == MemberState.UNREVOKED_PARTITIONS and member.member_epoch == target_epoch:
        # Still waiting for the revocation of the same target: done once the member says so.
        if owns_any(owned, member.pending_revocation):
            return member
    elif member.state == MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    current = {
        t: ps | member.pending_revocation.get(t, frozenset()) for t, ps in member.assigned.items()
    }
    for t, ps in member.pending_revocation.items():
        current.setdefault(t, ps)
    if member.state == MemberState.UNREVOKED_PARTITIONS and not owns_any(
        owned, member.pending_revocation
    ):
        current = _minus(current, member.pending_revocation)
    kept = _intersect(current, target)
    to_revoke = _minus(current, target)
    if to_revoke and owns_any(owned, to_revoke):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=to_revoke,
        )
    assigned = {t: set(ps) for t, ps in kept.items()}
    unreleased = False
    for topic_id, partitions in _minus(target, kept).items():
        for p in partitions:
            if (topic_id, p) in owners:
                unreleased = True
            else:
                assigned.setdefault(topic_id, set()).add(p)
    previous = member.member_epoch
    if previous == target_epoch:
        previous = member.previous_member_epoch
    return replace(
        member,
        member_epoch=target_epoch,
        previous_member_epoch=previous,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned={t: frozenset(ps) for t, ps in sorted(assigned.items())},
        pending_revocation={},
    )
