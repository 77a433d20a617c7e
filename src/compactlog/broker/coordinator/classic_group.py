"""One classic consumer group: its members, its state and its protocol (Kafka's ``ClassicGroup``,
``ClassicGroupMember`` and ``ClassicGroupState``).

States and the only transitions allowed (checked by :meth:`ClassicGroup.transition_to`)::

    Empty               -> PreparingRebalance (a member joins), Dead (deleted)
    PreparingRebalance  -> CompletingRebalance (the join phase completes with members),
                           Empty (it completes with none), Dead
    CompletingRebalance -> Stable (the leader's assignment is stored),
                           PreparingRebalance (a member joins, changes, leaves or expires), Dead
    Stable              -> PreparingRebalance (as above, or the leader rejoins), Dead
    Dead                -> Dead (a group removed from the coordinator)

The group itself only keeps the books: who is a member, who has sent its JoinGroup of this round
(a member with a parked :class:`Pending` response), who still owes a SyncGroup, which protocols
all members support. The decisions (when to rebalance, what to answer) are in
:mod:`compactlog.broker.coordinator.membership`.

Members keep their joining order (Kafka's ``HashMap`` has none): the first member is the first
leader, and a new leader is the first remaining member, or the first to rejoin.
"""

from __future__ import annotations

import collections
import enum
import uuid
from collections.abc import Sequence

from compactlog.broker.coordinator.api import (
    NO_MEMBER_ID,
    JoinGroupMember,
    JoinGroupResult,
    SyncGroupResult,
)
from compactlog.broker.coordinator.delayed import Pending
from compactlog.broker.coordinator.offsets_topic import consumer_subscription_topics
from compactlog.errors import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

#: The protocol type of Kafka's consumers; only its subscriptions are parsed (for offset expiry).
CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class ClassicGroupMember:
    """A member: identity, timeouts, protocols in order of preference, assignment, and the
    responses it is waiting for."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join: Pending[JoinGroupResult] | None = None
        self.awaiting_sync: Pending[SyncGroupResult] | None = None
        #: Joined in the current round and not yet through a completed join phase.
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        """Protocol names in order of preference, each once."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting in a rebalance needs no heartbeats, except a new one, which the
        join timeout may drop."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None

    def matches(self, protocols: Protocols) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class ClassicGroup:
    """The members and state of one classic group."""

    def __init__(
        self,
        group_id: str,
        state: GroupState,
        current_state_timestamp: int | None,
        *,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        #: When the group entered its state (None: unknown, from a record older than v2).
        self.current_state_timestamp = current_state_timestamp
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: collections.Counter[str] = collections.Counter()
        #: A member joined during the initial rebalance delay: wait a little longer.
        self.new_member_added = False

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state.value}, generation "
            f"{self.generation_id}, {len(self.members)} member(s))"
        )

    # --- state --------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise AssertionError(
                f"group {self.group_id} cannot go from {self.state.value} to {state.value}"
            )
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now

    # --- members ----------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        """``<client id or instance id>-<random UUID>``, as Kafka makes them."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: ClassicGroupMember, future: Pending[JoinGroupResult] | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} is already in")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type or not self.supports_protocols(
            member.protocol_type, member.protocol_names
        ):
            raise AssertionError("the member's protocols were not checked before adding it")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join = future
        if future is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.get(member_id)
        if removed is not None:
            # Kafka's callers answer a parked JoinGroup before removing a member; a parked
            # SyncGroup of a removed member would wait for ever, so it is answered here too.
            self.complete_join(removed, JoinGroupResult(UNKNOWN_MEMBER_ID))
            self.complete_sync(removed, SyncGroupResult(UNKNOWN_MEMBER_ID))
            del self.members[member_id]
            self.supported_protocols.subtract(removed.protocol_names)
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        future: Pending[JoinGroupResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif future is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = future

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """Give a static member a new member id; the old id's parked responses are fenced."""
        old = self.members.pop(old_member_id)
        self.complete_join(old, JoinGroupResult(FENCED_INSTANCE_ID, member_id=old_member_id))
        self.complete_sync(old, SyncGroupResult(FENCED_INSTANCE_ID))
        new = ClassicGroupMember(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote the first member that did; False when
        there is no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """NONE, or why ``member_id`` (with its instance id) is not a member."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return UNKNOWN_MEMBER_ID
            if existing != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    # --- responses ----------------------------------------------------------------------------
    def complete_join(self, member: ClassicGroupMember, result: JoinGroupResult) -> bool:
        if member.awaiting_join is None:
            return False
        future, member.awaiting_join = member.awaiting_join, None
        self.num_awaiting_join -= 1
        future.complete(result)
        return True

    def complete_sync(self, member: ClassicGroupMember, result: SyncGroupResult) -> bool:
        if member.awaiting_sync is None:
            return False
        future, member.awaiting_sync = member.awaiting_sync, None
        future.complete(result)
        return True

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """All members with their metadata for the chosen protocol (the leader's response)."""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def join_result(
        self,
        member_id: str,
        *,
        members: bool,
        leader: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        """A successful JoinGroup response for the current generation."""
        return JoinGroupResult(
            NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=(self.leader_id or NO_MEMBER_ID) if leader is None else leader,
            skip_assignment=skip_assignment,
            member_id=member_id,
            members=self.join_members() if members else (),
        )

    # --- protocols ----------------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member with these protocols may join: any type and protocols will do for
        an empty group, otherwise the type must match and one protocol be supported by all."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names
        )

    def select_protocol(self) -> str:
        """The protocol all members support that most members prefer (each member votes for
        its first choice among them). Kafka leaves ties to a hash map's order; here the
        protocol that received a vote first wins."""
        if not self.members:
            raise AssertionError("cannot select a protocol for a group without members")
        candidates = {
            name for name, count in self.supported_protocols.items() if count == len(self.members)
        }
        votes: collections.Counter[str] = collections.Counter(
            m.vote(candidates) for m in self.members.values()
        )
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now)
        self.pending_sync_members.clear()

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics the consumers subscribe to, or None when unknown (not the consumer
        protocol, no protocol chosen yet, or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = consumer_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        if topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in topics

    # --- offsets ----------------------------------------------------------------------------
    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """NONE, or why a (non-transactional) commit is refused (``validateOffsetCommit``)."""
        if self.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return NONE  # a standalone consumer or an admin tool: accepted while nobody is in
        if generation_id >= 0 or member_id != NO_MEMBER_ID or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error != NONE:
                return error
            if generation_id != self.generation_id:
                return ILLEGAL_GENERATION
        elif self.state is not GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID
        if self.state is GroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def offset_expiry_base(self) -> str | None:
        """Which timestamp an offset's retention counts from (``offsetExpirationCondition``):
        ``"state"`` (when the group became Empty, else the commit), ``"commit"``, or None when
        the group's offsets do not expire now."""
        if self.protocol_type is None:
            return "commit"  # a group of standalone consumers
        if self.state is GroupState.EMPTY:
            return "state"
        if (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.state is GroupState.STABLE
            and self.subscribed_topics() is not None
        ):
            return "commit"  # only offsets of topics no member subscribes to any more
        return None
