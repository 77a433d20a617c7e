"""Kafka's classic consumer-group coordinator, sans-I/O, with its state in ``__consumer_offsets``.

Theory of operation
===================

:class:`GroupCoordinator` answers the group requests (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) as
Kafka's ``GroupCoordinatorService`` does for classic groups. It opens no socket, starts no
thread and needs no event loop: time comes from an injected clock in epoch milliseconds, and
everything happens inside a method call. Call it from one thread (the broker's event loop).

**Delayed responses.** JoinGroup and SyncGroup return a :class:`~.delayed.Pending`
response. It is done at once when Kafka answers at once (an error, a follower rejoining a Stable
group, MEMBER_ID_REQUIRED), otherwise it is parked and completed later by another call: the last
member's JoinGroup, the leader's SyncGroup, a LeaveGroup, or :meth:`GroupCoordinator.tick` when a
deadline passes (the initial rebalance delay, a rebalance timeout, a session expiry). The broker
awaits it (``pending.add_done_callback(future.set_result)``) and calls :meth:`tick` at
:meth:`next_deadline` (a timer task that sleeps until then, re-armed after each request).
Every method first runs the deadlines that have passed, in deadline order and each at its own
time, so a late tick changes nothing but latency: a discrete-event simulation of Kafka's timer.

**The state machine of a group** (:mod:`~.classic_group`)::

    from                  on                                           to
    --------------------  -------------------------------------------  ----------------------
    Empty                 JoinGroup of a first member                  PreparingRebalance
    PreparingRebalance    every member has rejoined (not for a new     CompletingRebalance,
                          group), or the join deadline has passed      or Empty if none left
    CompletingRebalance   the leader's SyncGroup is stored             Stable
    CompletingRebalance,  a member joins, changes its protocols,       PreparingRebalance
    Stable                leaves or expires; the leader rejoins;
                          the SyncGroup deadline passes
    Empty                 DeleteGroups; offset expiry leaves it        Dead (forgotten)
                          without offsets

* JoinGroup, new member: with ``require_known_member_id`` (JoinGroup v4+) and no instance id,
  the member gets MEMBER_ID_REQUIRED and an id ``<client id>-<uuid>`` and is *pending* until it
  rejoins with it. Otherwise it is added with its join parked, and the group goes to
  PreparingRebalance (a new group waits ``group.initial.rebalance.delay.ms``, 3 s, extended by
  each newcomer up to the rebalance timeout; an existing group waits until every member has
  rejoined or the longest rebalance timeout passed).
* JoinGroup, known member: in PreparingRebalance it is parked; in CompletingRebalance a retry
  with the same protocols is answered with the current generation; in Stable the leader, or a
  member with new protocols, starts a rebalance and a follower with the same protocols is
  answered at once.
* End of the join phase: dynamic members that did not rejoin are removed, the generation goes
  up, the protocol all members support that most prefer is chosen, and each parked join is
  answered: the leader (the first member, or the first to rejoin) gets every member's metadata,
  followers an empty list. Each member then owes a SyncGroup within the rebalance timeout.
* SyncGroup: a follower's is parked until the leader's arrives; the leader's assignment is
  written to ``__consumer_offsets`` (GroupMetadataValue) and then every parked SyncGroup gets its
  member's assignment and the group is Stable. During PreparingRebalance: REBALANCE_IN_PROGRESS.
* Heartbeat: 0 when Stable or CompletingRebalance, REBALANCE_IN_PROGRESS while preparing a
  rebalance (members then rejoin), UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION for a stale member.
  A member silent for its session timeout is removed and the group rebalances.
* LeaveGroup: the member is removed at once and the group rebalances.
* OffsetCommit: accepted from a member of the current generation (REBALANCE_IN_PROGRESS during
  CompletingRebalance; the previous generation may still commit while preparing, as consumers do
  when they revoke partitions), and with generation -1 while the group has no members
  (standalone consumers, admin tools). OffsetFetch answers -1 for partitions without a commit.

**Persistence.** What Kafka persists is appended to the group's partition of
``__consumer_offsets`` (created by :meth:`GroupCoordinator.load` with Kafka's topic configs)
through :meth:`Store.append`, synchronously, within the request: the group's metadata when it is
created, when the leader's assignment is stored and when it becomes Empty; every commit;
tombstones for expired offsets and deleted groups. Commits and assignments take effect, and are
answered, only once written; a failed write is answered with Kafka's error for it
(NOT_COORDINATOR for a storage error). :meth:`GroupCoordinator.load` replays the topic: the
latest record per key wins and tombstones delete, which is exactly what compaction keeps. Loaded
members must heartbeat within their session timeout or are removed.

Static membership (``group.instance.id``) follows Kafka too: a static member that rejoins
without its member id replaces its old id (whose parked requests get FENCED_INSTANCE_ID) and,
in a Stable group whose protocol does not change, no rebalance happens.

OffsetDelete (:meth:`GroupCoordinator.delete_offsets`) writes tombstones for the offsets of
partitions no member consumes, as Kafka's does for a classic group.

**KIP-848 consumer groups** live beside the classic ones, in :mod:`.consumer_groups`
(ConsumerGroupHeartbeat, ConsumerGroupDescribe); this class routes the shared APIs by the
group's type, as Kafka does:

* OffsetCommit to a consumer group checks the member and its member epoch
  (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; epoch -1 only while the group has no members).
  Kafka insists on OffsetCommit v9+ for such members; compactlog speaks OffsetCommit up to v3,
  whose generation field then carries the member epoch (librdkafka sends it there).
* ListGroups lists them with type and protocol type "consumer"; DescribeGroups, a classic API,
  answers them as Kafka does a group that is not classic: "Dead" (GROUP_ID_NOT_FOUND from v6);
  DeleteGroups deletes an Empty one; OffsetDelete refuses the topics its members subscribe to.
* Conversions (``group.consumer.migration.policy``): a ConsumerGroupHeartbeat with epoch 0 into
  an *empty* classic group (one that only holds offsets) replaces it with a consumer group, and a
  classic JoinGroup into an *empty* consumer group replaces it with a classic group; offsets stay.
  Groups with members are converted online as Kafka 4.4 does (:mod:`.migration`): a classic
  group becomes a consumer group when a consumer-protocol member joins (policy ``upgrade`` or
  ``bidirectional``), whose classic members are then served by the consumer group (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup and OffsetCommit are routed there), and it goes back to a
  classic group when its last consumer-protocol member leaves (``downgrade`` or
  ``bidirectional``). With ``disabled`` the answers are Kafka's for that policy (checked against
  it): a heartbeat into a classic group with members gets GROUP_ID_NOT_FOUND ("Cannot upgrade
  classic group <id> ..."), a classic JoinGroup into a consumer group with members
  INCONSISTENT_GROUP_PROTOCOL.

Not here: transactional offset commits (TxnOffsetCommit), and topic existence checks for commits
and offset deletions (Kafka's request handler does those, not the coordinator).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from compactlog.broker.coordinator.api import (
    DescribedGroup,
    DescribedMember,
    GroupError,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetFetchResult,
    PartitionResult,
    SyncGroupResult,
)
from compactlog.broker.coordinator.assignors import TopicMetadata
from compactlog.broker.coordinator.classic_group import ClassicGroup, ClassicGroupMember, GroupState
from compactlog.broker.coordinator.config import GroupCoordinatorConfig
from compactlog.broker.coordinator.consumer_group import CONSUMER_GROUP_PROTOCOL_TYPE
from compactlog.broker.coordinator.consumer_groups import (
    ConsumerGroupError,
    ConsumerGroupManager,
    DescribedConsumerGroup,
    HeartbeatResult,
    OwnedPartitions,
)
from compactlog.broker.coordinator.consumer_records import CONSUMER_RECORD_TYPES, Replayer
from compactlog.broker.coordinator.delayed import Pending, Timer
from compactlog.broker.coordinator.membership import GroupMembership
from compactlog.broker.coordinator.migration import Migration
from compactlog.broker.coordinator.offsets import OffsetManager, group_tombstone
from compactlog.broker.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    offsets_topic_configs,
    partition_for,
)
from compactlog.broker.coordinator.rebalance import Rebalancer
from compactlog.broker.coordinator.runtime import Record
from compactlog.errors import (
    GROUP_ID_NOT_FOUND,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    NON_EMPTY_GROUP,
    NONE,
    CompactlogError,
    CorruptRecordError,
)
from compactlog.storage.store import Store

__all__ = ["GroupCoordinator"]

logger = logging.getLogger("compactlog.broker.groups")

#: Kafka's internal topics, which regex subscriptions never match.
_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})

#: The timer key of the periodic offset expiry.
_EXPIRY_KEY = ("expire-group-metadata",)


class GroupCoordinator:
    """The classic group coordinator of a single-node broker; create it with :meth:`load`."""

    def __init__(
        self,
        store: Store,
        config: GroupCoordinatorConfig,
        clock: Callable[[], int],
        partitions: int,
    ) -> None:
        self.store = store
        self.config = config
        self._clock = clock
        self._now = clock()
        self.partitions = partitions
        self.groups: dict[str, ClassicGroup] = {}
        self.timer = Timer()
        self.rebalancer = Rebalancer(self)
        self.membership = GroupMembership(self, self.rebalancer)
        self.offset_manager = OffsetManager(self, self.rebalancer)
        self.consumer = ConsumerGroupManager(
            self,
            self._topic_metadata,
            lambda: [t for t in self.store.topics() if t not in _INTERNAL_TOPICS],
        )
        self.migration = Migration(self)
        self.consumer.downgrade = self.migration.maybe_downgrade

    # --- start-up -----------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        store: Store,
        config: GroupCoordinatorConfig | Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> GroupCoordinator:
        """Create ``__consumer_offsets`` if missing and rebuild groups and offsets from it.

        ``config``: a :class:`GroupCoordinatorConfig` or broker properties by Kafka's names.
        ``clock``: epoch milliseconds (default: the store's clock).
        """
        if not isinstance(config, GroupCoordinatorConfig):
            config = GroupCoordinatorConfig.from_properties(config or {})
        if OFFSETS_TOPIC not in store.topics():
            store.create_topic(
                OFFSETS_TOPIC,
                config.offsets_topic_num_partitions,
                offsets_topic_configs(config.offsets_topic_segment_bytes),
            )
        coordinator = cls(store, config, clock or store.clock, store.partitions(OFFSETS_TOPIC))
        replayer = Replayer()
        for partition in range(coordinator.partitions):
            coordinator._replay_partition(partition, replayer)
        coordinator._load_consumer_groups(replayer)
        coordinator.rebalancer.on_loaded()
        coordinator._schedule_expiry()
        return coordinator

    def _load_consumer_groups(self, replayer: Replayer) -> None:
        groups = list(replayer.groups())
        live = {g.group_id for g in groups}
        for group_id in replayer.seen:
            # The offsets of a consumer group make a placeholder classic group while they are
            # replayed: not a group of its own when the consumer group is live, nor when it was
            # deleted with its offsets.
            classic = self.groups.get(group_id)
            if (
                classic is not None
                and classic.is_in(GroupState.EMPTY)
                and classic.protocol_type is None
                and (group_id in live or group_id not in self.offset_manager.offsets)
            ):
                self.remove_group(group_id)
        self.consumer.load(groups)

    def _replay_partition(self, partition: int, replayer: Replayer) -> None:
        start = self.store.log_start_offset(OFFSETS_TOPIC, partition)
        for record in self.store.read(OFFSETS_TOPIC, partition, start):
            where = f"{OFFSETS_TOPIC}-{partition} offset {record.offset}"
            if record.key is None:
                raise CorruptRecordError(f"{where}: a record without a key")
            try:
                key = decode_key(record.key)
                if isinstance(key, OffsetCommitKey):
                    value = (
                        None if record.value is None else decode_offset_commit_value(record.value)
                    )
                    self.offset_manager.replay(key, value)
                elif isinstance(key, GroupMetadataKey):
                    self._replay_group(
                        key.group,
                        None if record.value is None else decode_group_metadata_value(record.value),
                    )
                elif key.version in CONSUMER_RECORD_TYPES:
                    replayer.replay(record.key, record.value)
                else:
                    logger.debug("%s: skipping a record of type %d", where, key.version)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{where}: {exc}") from exc

    def _replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        if value is None:
            self.remove_group(group_id)
            return
        protocol = value.protocol
        if value.members and protocol is None:
            raise CorruptRecordError(f"group {group_id} has members but no protocol")
        group = ClassicGroup(
            group_id,
            GroupState.STABLE if value.members else GroupState.EMPTY,
            None if value.current_state_timestamp == -1 else value.current_state_timestamp,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        for m in value.members:
            group.add(
                ClassicGroupMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                    m.session_timeout,
                    value.protocol_type,
                    (() if protocol is None else ((protocol, m.subscription),)),
                    m.assignment,
                ),
                None,
            )
        self.remove_group(group_id)
        self.groups[group_id] = group

    def _schedule_expiry(self) -> None:
        def run() -> None:
            self.offset_manager.expire()
            self._expire_consumer_groups()
            self._schedule_expiry()

        interval = max(self.config.offsets_retention_check_interval_ms, 1)
        self.timer.schedule(_EXPIRY_KEY, self._now + interval, run)

    def _expire_consumer_groups(self) -> None:
        """Kafka's expiry for consumer groups: offsets of topics no member subscribes to expire
        ``offsets.retention.minutes`` after their commit; an empty group left without offsets is
        deleted."""
        for group_id in list(self.consumer.groups):
            subscribed = self.consumer.subscribed_topics(group_id)
            _, none_left = self.offset_manager.expire_unless(group_id, subscribed.__contains__)
            if none_left and self.consumer.is_empty(group_id):
                self.consumer.delete(group_id)

    def shutdown(self) -> None:
        """Answer every parked JoinGroup and SyncGroup with NOT_COORDINATOR and forget the
        groups (Kafka's ``onUnloaded``); the store stays open and is the caller's to close."""
        self.rebalancer.on_unloaded()
        for group in self.groups.values():
            group.state = GroupState.DEAD
        self.groups.clear()
        self.consumer.groups.clear()
        self.timer = Timer()

    def _topic_metadata(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        """The topics among ``names`` that exist, with their ids and partition counts."""
        existing = set(self.store.topics())
        out = {}
        for name in sorted(set(names) & existing):
            topic_id = self.store.topic_info(name).topic_id
            raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
            out[name] = TopicMetadata(uuid.UUID(bytes=raw), name, self.store.partitions(name))
        return out

    # --- time ---------------------------------------------------------------------------------
    @property
    def now(self) -> int:
        """The coordinator's current time (epoch ms): the clock, or a timer's deadline while
        that timer runs."""
        return self._now

    def _advance(self, now: int | None = None) -> None:
        target = max(self._clock() if now is None else now, self._now)
        while (due := self.timer.pop_due(target)) is not None:
            deadline, callback = due
            self._now = max(deadline, self._now)
            callback()
        self._now = target

    def tick(self, now: int | None = None) -> int | None:
        """Run every deadline up to ``now`` (default: the clock): delayed joins complete, silent
        members expire, offsets expire. Returns :meth:`next_deadline`."""
        self._advance(now)
        return self.next_deadline()

    def next_deadline(self) -> int | None:
        """When :meth:`tick` next has something to do (epoch ms), or None."""
        return self.timer.next_deadline()

    # --- the runtime the managers use ----------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def append(self, group_id: str, records: Sequence[Record]) -> int:
        """Write ``records`` to the group's partition as one batch; NONE or the error code."""
        try:
            self.store.append(
                OFFSETS_TOPIC,
                self.partition_for(group_id),
                [(r.key, r.value) for r in records],
                timestamp=self._now,
            )
        except CompactlogError as exc:
            logger.warning("writing to %s for group %s failed: %s", OFFSETS_TOPIC, group_id, exc)
            return exc.error_code
        return NONE

    def get_or_create_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, GroupState.EMPTY, self._now)
        return group

    def remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.state = GroupState.DEAD
        self.timer.cancel_if(lambda key: isinstance(key, tuple) and key[1:2] == (group_id,))

    # --- requests -----------------------------------------------------------------------------
    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        *,
        supports_skip_assignment: bool = False,
    ) -> Pending[JoinGroupResult]:
        """JoinGroup. ``require_known_member_id``: JoinGroup v4+ (an empty member id gets
        MEMBER_ID_REQUIRED first). ``rebalance_timeout_ms`` -1 (JoinGroup v0 has none) means the
        session timeout. ``supports_skip_assignment``: JoinGroup v9+."""
        self._advance()
        if not group_id:
            return Pending.completed(JoinGroupResult(INVALID_GROUP_ID, member_id=member_id))
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return Pending.completed(JoinGroupResult(INVALID_SESSION_TIMEOUT, member_id=member_id))
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        if group_id in self.consumer.groups:
            if not self.consumer.is_empty(group_id):
                if self.config.group_consumer_migration_policy == "disabled":
                    return Pending.completed(
                        JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
                    )
                return self.migration.join(
                    group_id,
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    protocol_type,
                    tuple((str(name), bytes(metadata)) for name, metadata in protocols),
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    require_known_member_id,
                )
            # An empty consumer group becomes a classic one.
            error = self.consumer.delete(group_id)
            if error != NONE:
                return Pending.completed(JoinGroupResult(error, member_id=member_id))
        return self.membership.join(
            group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            protocol_type,
            tuple((str(name), bytes(metadata)) for name, metadata in protocols),
            session_timeout_ms,
            rebalance_timeout_ms,
            require_known_member_id,
            supports_skip_assignment,
        )

    def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        assignments: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = (),
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Pending[SyncGroupResult]:
        """SyncGroup. ``assignments`` (member id -> assignment) count only from the leader;
        ``protocol_type``/``protocol_name`` are checked when given (SyncGroup v5+)."""
        self._advance()
        if not group_id:
            return Pending.completed(SyncGroupResult(INVALID_GROUP_ID))
        if self.migration.has_classic_members(group_id):
            return self.migration.sync(
                group_id, generation, member_id, group_instance_id, protocol_type, protocol_name
            )
        return self.membership.sync(
            group_id,
            generation,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )

    def heartbeat(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> int:
        """Heartbeat; returns the error code."""
        self._advance()
        if not group_id:
            return INVALID_GROUP_ID
        if self.migration.has_classic_members(group_id):
            return self.migration.heartbeat(group_id, generation, member_id, group_instance_id)
        return self.membership.heartbeat(group_id, generation, member_id, group_instance_id)

    def leave_group(
        self, group_id: str, members: Sequence[MemberIdentity | tuple[str, str | None]]
    ) -> LeaveGroupResult:
        """LeaveGroup for one member (v0-v2: ``[(member_id, None)]``) or several (v3+; an empty
        member id with an instance id removes that static member)."""
        self._advance()
        if not group_id:
            return LeaveGroupResult(INVALID_GROUP_ID)
        if self.migration.has_classic_members(group_id):
            return self.migration.leave(group_id, [MemberIdentity(*m) for m in members])
        return self.membership.leave(group_id, [MemberIdentity(*m) for m in members])

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        retention_ms: int,
        offsets: Sequence[OffsetCommitPartition | tuple[Any, ...]],
        *,
        group_instance_id: str | None = None,
    ) -> list[PartitionResult]:
        """OffsetCommit; one result per requested partition, in request order.

        ``retention_ms`` -1 is the broker's ``offsets.retention.minutes``; any other value (v2-v4)
        gives the offsets an explicit expire timestamp. Generation -1 with an empty member id
        commits for a group without members.
        """
        self._advance()
        partitions = [OffsetCommitPartition(*p) for p in offsets]
        if not group_id:
            return [PartitionResult(p.topic, p.partition, INVALID_GROUP_ID) for p in partitions]
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            error = self.migration.validate_offset_commit(consumer_group, member_id, generation)
            if error != NONE:
                return [PartitionResult(p.topic, p.partition, error) for p in partitions]
            return self.offset_manager.commit(
                group_id, generation, member_id, None, retention_ms, partitions, validated=True
            )
        return self.offset_manager.commit(
            group_id, generation, member_id, group_instance_id, retention_ms, partitions
        )

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None = None
    ) -> OffsetFetchResult:
        """OffsetFetch; ``partitions`` None fetches every committed offset of the group."""
        self._advance()
        return self.offset_manager.fetch(
            group_id, partitions, exists=group_id in self.consumer.groups
        )

    def list_groups(self, states: Iterable[str] | None = None) -> list[ListedGroup]:
        """ListGroups, optionally only groups in ``states`` (Kafka's names, any case), in the
        order of their ``__consumer_offsets`` partitions, as Kafka 4.4 lists them (one
        coordinator shard after the other); within a partition in the order they were made
        (Kafka's follows its hash table)."""
        self._advance()
        wanted = None if states is None else {s.lower() for s in states}
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
        ] + [
            ListedGroup(g.group_id, CONSUMER_GROUP_PROTOCOL_TYPE, g.state.value, "consumer")
            for g in self.consumer.groups.values()
        ]
        listed.sort(key=lambda g: self.partition_for(g.group_id))
        return [g for g in listed if wanted is None or not wanted or g.state.lower() in wanted]

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        """DescribeGroups; an unknown group is described as Dead, as Kafka does, and so is a
        consumer group (DescribeGroups describes classic groups only)."""
        self._advance()
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group_id in self.consumer.groups:
                message = f"Group {group_id} is not a classic group."
                dead = GroupState.DEAD.value
                out.append(DescribedGroup(NONE, group_id, dead, not_found_message=message))
                continue
            if group is None:
                out.append(DescribedGroup(NONE, group_id, GroupState.DEAD.value))
                continue
            stable = group.is_in(GroupState.STABLE)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment,
                )
                for m in group.members.values()
            )
            out.append(
                DescribedGroup(
                    NONE,
                    group_id,
                    group.state.value,
                    group.protocol_type or "",
                    (group.protocol_name or "") if stable else "",
                    members,
                )
            )
        return out

    def delete_groups(self, group_ids: Sequence[str]) -> list[GroupError]:
        """DeleteGroups: Empty groups only (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for
        unknown ones); writes tombstones for the group and all its offsets."""
        self._advance()
        out = []
        for group_id in group_ids:
            if group_id not in self.consumer.groups:
                out.extend(self.offset_manager.delete_groups([group_id]))
            elif not self.consumer.is_empty(group_id):
                out.append(GroupError(group_id, NON_EMPTY_GROUP))
            else:
                error = self.offset_manager.delete_all_offsets(group_id)
                if error == NONE:
                    error = self.consumer.delete(group_id)
                out.append(GroupError(group_id, error))
        return out

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[int, list[PartitionResult]]:
        """OffsetDelete: (the group's error, one result per partition); writes tombstones for
        the deleted offsets. INVALID_GROUP_ID for an empty group id, GROUP_ID_NOT_FOUND for an
        unknown group, NON_EMPTY_GROUP for a live group that is not a consumer group,
        GROUP_SUBSCRIBED_TO_TOPIC for the partitions of a topic its members subscribe to."""
        self._advance()
        if not group_id:
            return INVALID_GROUP_ID, []
        if group_id in self.consumer.groups:
            subscribed = self.consumer.subscribed_topics(group_id)
            return self.offset_manager.delete_offsets_unless(
                group_id, partitions, subscribed.__contains__
            )
        return self.offset_manager.delete_offsets(group_id, partitions)

    # --- KIP-848 consumer groups ---------------------------------------------------------------
    def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Sequence[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned: OwnedPartitions | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (see :mod:`.consumer_groups`). ``owned``: the request's
        ``TopicPartitions`` as (topic id, partitions), None when the request leaves it null."""
        self._advance()
        classic = self.groups.get(group_id) if group_id else None
        if (
            classic is not None
            and group_id not in self.consumer.groups
            and (member_epoch != 0 or not classic.is_in(GroupState.EMPTY))
        ):
            # Kafka checks the request before it looks at the group: a bad request neither
            # converts a classic group nor learns what it is.
            try:
                self.consumer._validate(
                    group_id,
                    member_id,
                    member_epoch,
                    instance_id,
                    rack_id,
                    rebalance_timeout_ms,
                    subscribed_topic_names,
                    subscribed_topic_regex,
                    server_assignor,
                    owned,
                )
            except ConsumerGroupError as exc:
                return HeartbeatResult(exc.code, exc.message, member_epoch=member_epoch)
            if member_epoch != 0:
                return HeartbeatResult(
                    GROUP_ID_NOT_FOUND,
                    f"Group {group_id} is not a consumer group.",
                    member_epoch=member_epoch,
                )
            refusal = self.migration.upgrade_refusal(classic)
            if refusal is not None:
                return HeartbeatResult(GROUP_ID_NOT_FOUND, refusal, member_epoch=member_epoch)
            error, message = self.migration.upgrade(classic)
            if error != NONE:
                return HeartbeatResult(error, message, member_epoch=member_epoch)
            classic = None
        result = self.consumer.heartbeat(
            group_id,
            member_id,
            member_epoch,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=subscribed_topic_names,
            subscribed_topic_regex=subscribed_topic_regex,
            server_assignor=server_assignor,
            owned=owned,
            client_id=client_id,
            client_host=client_host,
        )
        if classic is not None and group_id in self.consumer.groups:
            # An empty classic group (offsets only) became a consumer group: its metadata goes.
            self.append(group_id, [group_tombstone(group_id)])
            self.remove_group(group_id)
        return result

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for an unknown group and for a classic one."""
        self._advance()
        out = []
        for group_id, described in zip(group_ids, self.consumer.describe(group_ids), strict=True):
            if described.error_code == GROUP_ID_NOT_FOUND and group_id in self.groups:
                described = DescribedConsumerGroup(
                    GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", group_id
                )
            out.append(described)
        return out

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Every topic's name by its id (assignments name topics by id)."""
        return {m.topic_id: name for name, m in self._topic_metadata(self.store.topics()).items()}
