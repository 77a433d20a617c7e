"""KIP-848's online migration between classic and consumer groups
(``group.consumer.migration.policy``), as Kafka 4.4's ``GroupMetadataManager`` does it.

Theory of operation
===================

**Upgrade** (policy ``upgrade`` or ``bidirectional``): a ConsumerGroupHeartbeat that joins a
classic group *with members* converts it, when the group uses the protocol type "consumer" and
has no more members than ``group.consumer.max.size`` (Kafka's ``validateOnlineUpgrade``). Each
classic member becomes a consumer-group member that still speaks the classic protocol: its
epoch and the group's epochs are the classic generation, its assigned partitions and its target
are its last classic assignment, its subscription is the one in its JoinGroup metadata, and it
keeps its session timeout and protocols (``ClassicMemberMetadata``). Parked JoinGroups and
SyncGroups are answered REBALANCE_IN_PROGRESS. The classic group's tombstone and the consumer
group's records are written as one batch; then the heartbeat joins the consumer group like any
other and bumps the group epoch.

**Classic members in a consumer group** are served by the consumer group
(``classicGroup*ToConsumerGroup``):

* JoinGroup (v4+ first gets MEMBER_ID_REQUIRED and an id) updates the member from its
  subscription (topics, rack, owned partitions), bumps the group epoch when the subscription
  changed, recomputes the target and reconciles the member exactly as a heartbeat would, and is
  answered at once: generation = the member epoch, protocol = the member's first protocol, no
  leader (every classic member is a follower: the assignment comes from the coordinator).
  A static member that joins without a member id takes the place (and the partitions) of the
  member that had its instance id, without a rebalance.
* SyncGroup answers the member's assigned partitions as a ``ConsumerProtocolAssignment`` (in
  the version of its subscription); REBALANCE_IN_PROGRESS when the group epoch is ahead of the
  member (and it is not revoking), ILLEGAL_GENERATION for another generation.
* Heartbeat re-arms its session and answers REBALANCE_IN_PROGRESS when the member must rejoin:
  the group epoch is ahead of it, it must revoke partitions, or partitions it waits for are free.
* LeaveGroup removes it and bumps the group epoch; OffsetCommit checks its generation against
  its member epoch (ILLEGAL_GENERATION).
* Its session is its own ``session.timeout.ms`` (from JoinGroup). A member told to rejoin
  (REBALANCE_IN_PROGRESS) owes a JoinGroup, and a member that joined owes a SyncGroup, each
  within its rebalance timeout; a member that misses either is fenced like a silent one.

**Downgrade** (policy ``downgrade`` or ``bidirectional``): when the last member that speaks the
consumer protocol leaves (or is fenced from) a group whose other members all speak the classic
protocol, and there are no more of them than ``group.max.size``, the consumer group's tombstones
and a classic group (Stable, generation = the group epoch, each member's target assignment as
its assignment) are written as one batch, and the classic group starts a rebalance
(``validateOnlineDowngrade``, ``convertToClassicGroup``). The same happens, without a
rebalance, when a static classic member (re)joining takes the place of the last member that
speaks the consumer protocol.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from compactlog.broker.coordinator.api import (
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    MemberResult,
    SyncGroupResult,
    append_error_to_response_error,
)
from compactlog.broker.coordinator.assignors import Partitions
from compactlog.broker.coordinator.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
)
from compactlog.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from compactlog.broker.coordinator.consumer_groups import MEMBER_TIMERS, clone
from compactlog.broker.coordinator.consumer_protocol import (
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    topic_partitions,
)
from compactlog.broker.coordinator.consumer_records import group_records
from compactlog.broker.coordinator.delayed import Pending
from compactlog.broker.coordinator.offsets import group_tombstone
from compactlog.broker.coordinator.rebalance import group_metadata_record
from compactlog.errors import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    ProtocolError,
)

if TYPE_CHECKING:
    from compactlog.broker.coordinator.service import GroupCoordinator

logger = logging.getLogger("compactlog.broker.groups")

UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})
DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})


class Migration:
    """The conversions and the classic members of consumer groups, for one coordinator."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.c = coordinator

    @property
    def policy(self) -> str:
        return self.c.config.group_consumer_migration_policy

    def has_classic_members(self, group_id: str) -> bool:
        group = self.c.consumer.groups.get(group_id)
        return group is not None and any(m.classic for m in group.members.values())

    # --- topics by name and by id ---------------------------------------------------------------
    def _ids(self, partitions: Iterable[tuple[str, Sequence[int]]]) -> Partitions:
        """Topic names -> ids; partitions of topics that do not exist are left out."""
        wanted = [(t, ps) for t, ps in partitions]
        meta = self.c._topic_metadata(t for t, _ in wanted)
        out: dict[uuid.UUID, frozenset[int]] = {}
        for topic, ps in wanted:
            if topic in meta and ps:
                topic_id = meta[topic].topic_id
                out[topic_id] = out.get(topic_id, frozenset()) | frozenset(ps)
        return out

    def _assignment_bytes(self, partitions: Partitions, metadata: bytes) -> bytes:
        names = self.c.topic_names()
        by_name = {names[t]: ps for t, ps in partitions.items() if t in names}
        try:
            version = decode_subscription(metadata).version
        except ProtocolError:
            version = 0
        return encode_assignment(Assignment(version, topic_partitions(by_name)))

    # --- upgrade --------------------------------------------------------------------------------
    def upgrade_refusal(self, classic: ClassicGroup) -> str | None:
        """Why a classic group with members cannot be converted (Kafka's reasons), or None."""
        group_id = classic.group_id
        prefix = f"Cannot upgrade classic group {group_id} to consumer group because"
        if self.policy not in UPGRADE_POLICIES:
            return f"{prefix} online upgrade is disabled."
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return f"{prefix} the group does not use the consumer embedded protocol."
        if len(classic.members) > self.c.config.group_consumer_max_size:
            return f"{prefix} the group size exceeds the consumer group maximum size."
        return None

    def upgrade(self, classic: ClassicGroup) -> tuple[int, str | None]:
        """Convert ``classic`` into a consumer group; (NONE, None) or (error, message)."""
        group_id = classic.group_id
        generation = classic.generation_id
        group = ConsumerGroup(group_id, group_epoch=generation, assignment_epoch=generation)
        try:
            for m in classic.members.values():
                # A group still in its first rebalance has no protocol yet, nor assignments.
                protocol = classic.protocol_name or m.protocols[0][0]
                subscription = decode_subscription(m.metadata(protocol))
                assigned = (
                    self._ids(decode_assignment(m.assignment).assigned_partitions)
                    if m.assignment
                    else {}
                )
                group.members[m.member_id] = ConsumerGroupMember(
                    m.member_id,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    instance_id=m.group_instance_id,
                    rack_id=subscription.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                    assigned=assigned,
                    classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
                group.target[m.member_id] = assigned
        except ProtocolError as exc:
            return GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id}: {exc}."
        group.subscription_metadata = self.c.consumer.topics(self.c.consumer.group_topics(group))
        records = [group_tombstone(group_id), *group_records(None, group)]
        error = self.c.append(group_id, records)
        if error != NONE:
            return append_error_to_response_error(error), None
        # The classic members that wait for a join or a sync are told to rejoin.
        for m in list(classic.members.values()):
            classic.complete_join(m, JoinGroupResult(REBALANCE_IN_PROGRESS, member_id=m.member_id))
            classic.complete_sync(m, SyncGroupResult(REBALANCE_IN_PROGRESS))
        self.c.remove_group(group_id)
        self.c.consumer.groups[group_id] = group
        for member_id in group.members:
            self.c.consumer._schedule_session(group_id, member_id)
        logger.info(
            "classic group %s upgraded to a consumer group (generation %d, %d member(s))",
            group_id,
            generation,
            len(group.members),
        )
        return NONE, None

    # --- classic members in a consumer group ----------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
    ) -> Pending[JoinGroupResult]:
        """JoinGroup of a classic member into a consumer group with members."""
        manager = self.c.consumer
        before = manager.groups[group_id]
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        if (
            len(before.members) >= self.c.config.group_consumer_max_size
            and member_id not in before.members
        ):
            return Pending.completed(JoinGroupResult(GROUP_MAX_SIZE_REACHED, member_id=member_id))
        if not self._supports(before, protocol_type, [name for name, _ in protocols]):
            return Pending.completed(
                JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            )
        if require_known_member_id and unknown and instance_id is None:
            return Pending.completed(JoinGroupResult(MEMBER_ID_REQUIRED, member_id=member_id))
        # A member id the group does not know (the one MEMBER_ID_REQUIRED gave) makes a new
        # member, as in Kafka; a consumer-protocol member's id is refused.
        existing = before.members.get(member_id)
        replaced: ConsumerGroupMember | None = None
        static = None if instance_id is None else before.static_member(instance_id)
        if instance_id is not None and unknown:
            # A static member (re)starting: it takes the place, and the partitions, of the
            # member that had its instance id, whichever protocol that one spoke.
            replaced = static
        elif instance_id is not None:
            if static is None:
                return Pending.completed(JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id))
            if static.member_id != member_id:
                return Pending.completed(JoinGroupResult(FENCED_INSTANCE_ID, member_id=member_id))
        if existing is not None and existing.classic is None:
            return Pending.completed(JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id))
        try:
            subscription = decode_subscription(protocols[0][1])
        except ProtocolError as exc:
            logger.info("consumer group %s: classic member %s: %s", group_id, member_id, exc)
            return Pending.completed(
                JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            )
        group = clone(before)
        member = existing or ConsumerGroupMember(member_id, instance_id=instance_id)
        if replaced is not None:
            del group.members[replaced.member_id]
            target = group.target.pop(replaced.member_id, None)
            if target is not None:
                group.target[member_id] = target
            member = replace(replaced, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            group.members[member_id] = member
        updated = replace(
            member,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex=None,
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        bump = (
            existing is None and replaced is None
        ) or updated.subscribed_topic_names != member.subscribed_topic_names
        group.members[member_id] = updated
        metadata = manager.topics(manager.group_topics(group))
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            logger.info("consumer group %s: group epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            manager._update_target(group)
        owned = self._ids(subscription.owned_partitions)
        reconciled = reconcile(
            updated,
            group.assignment_epoch,
            group.target.get(member_id, {}),
            group.partition_owners(excluding=member_id),
            list(owned.items()),
        )
        group.members[member_id] = reconciled
        if (
            replaced is not None
            and replaced.classic is None
            and all(m.classic is not None for m in group.members.values())
            and self.policy in DOWNGRADE_POLICIES
            and len(group.members) <= self.c.config.group_max_size
        ):
            # The last consumer-protocol member was replaced by a classic one: the group is
            # classic again, without a rebalance (Kafka's downgrade on static replacement).
            converted = self._to_classic(before, group, list(group.members.values()))
            if converted is None:
                return Pending.completed(JoinGroupResult(NOT_COORDINATOR, member_id=member_id))
            return Pending.completed(
                JoinGroupResult(
                    NONE,
                    generation_id=reconciled.member_epoch,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocol_name=protocols[0][0],
                    leader="",
                    member_id=member_id,
                )
            )
        error = manager._write(group_id, before, group)
        if error != NONE:
            return Pending.completed(JoinGroupResult(error, member_id=member_id))
        if replaced is not None:
            for kind in MEMBER_TIMERS:
                self.c.timer.cancel((kind, group_id, replaced.member_id))
            logger.info(
                "consumer group %s: static member %s replaces %s",
                group_id,
                member_id,
                replaced.member_id,
            )
        manager._schedule_session(group_id, member_id)
        # A classic member has no revocation deadline of its own: it revokes by rejoining, and
        # the join and sync deadlines bound that (as in Kafka).
        self.c.timer.cancel(("consumer-revocation", group_id, member_id))
        self.c.timer.cancel(("consumer-join", group_id, member_id))
        self._schedule_deadline("consumer-sync", group_id, member_id, rebalance_timeout_ms)
        return Pending.completed(
            JoinGroupResult(
                NONE,
                generation_id=reconciled.member_epoch,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=protocols[0][0],
                leader="",
                member_id=member_id,
            )
        )

    @staticmethod
    def _supports(group: ConsumerGroup, protocol_type: str, names: Sequence[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: one of the member's protocols is supported by
        every classic member of the group."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [m.classic for m in group.members.values() if m.classic is not None]
        return any(all(name in dict(c.supported_protocols) for c in classic) for name in names)

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember | None:
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None
        if instance_id is not None and member.instance_id != instance_id:
            return None
        return member

    def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> Pending[SyncGroupResult]:
        group = self.c.consumer.groups[group_id]
        member = self._classic_member(group, member_id, instance_id)
        if member is None or member.classic is None:
            return Pending.completed(SyncGroupResult(UNKNOWN_MEMBER_ID))
        if generation != member.member_epoch:
            return Pending.completed(SyncGroupResult(ILLEGAL_GENERATION))
        first_name, first_metadata = member.classic.supported_protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != first_name
        ):
            return Pending.completed(SyncGroupResult(INCONSISTENT_GROUP_PROTOCOL))
        if (
            group.group_epoch > member.member_epoch
            and member.state != MemberState.UNREVOKED_PARTITIONS
        ):
            self._owe_join(group_id, member)
            return Pending.completed(SyncGroupResult(REBALANCE_IN_PROGRESS))
        self.c.timer.cancel(("consumer-sync", group_id, member_id))
        self.c.consumer._schedule_session(group_id, member_id)
        return Pending.completed(
            SyncGroupResult(
                NONE,
                CONSUMER_PROTOCOL_TYPE,
                first_name,
                self._assignment_bytes(member.assigned, first_metadata),
            )
        )

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> int:
        group = self.c.consumer.groups[group_id]
        member = self._classic_member(group, member_id, instance_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if generation != member.member_epoch:
            return ILLEGAL_GENERATION
        self.c.consumer._schedule_session(group_id, member_id)
        if (
            member.member_epoch < group.group_epoch
            or member.state == MemberState.UNREVOKED_PARTITIONS
            or (
                member.state == MemberState.UNRELEASED_PARTITIONS
                and not self._waiting_on_unreleased(group, member)
            )
        ):
            self._owe_join(group_id, member)
            return REBALANCE_IN_PROGRESS
        return NONE

    def _owe_join(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout (Kafka's
        ``scheduleConsumerGroupJoinTimeoutIfAbsent``), or it is fenced."""
        if ("consumer-join", group_id, member.member_id) not in self.c.timer:
            self._schedule_deadline(
                "consumer-join", group_id, member.member_id, member.rebalance_timeout_ms
            )

    def _schedule_deadline(self, kind: str, group_id: str, member_id: str, timeout: int) -> None:
        what = "join" if kind == "consumer-join" else "sync"
        self.c.timer.schedule(
            (kind, group_id, member_id),
            self.c.now + max(timeout, 0),
            lambda: self.c.consumer._fence(group_id, member_id, f"no {what} in time"),
        )

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        owners = group.partition_owners(excluding=member.member_id)
        target = group.target.get(member.member_id, {})
        for topic_id, partitions in target.items():
            for p in partitions - member.assigned.get(topic_id, frozenset()):
                if (topic_id, p) in owners:
                    return True
        return False

    def leave(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        manager = self.c.consumer
        before = manager.groups[group_id]
        group = clone(before)
        results = []
        removed = []
        for identity in members:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            member: ConsumerGroupMember | None
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    member = None
            if member is None or member.classic is None:
                results.append(MemberResult(member_id, instance_id, UNKNOWN_MEMBER_ID))
                continue
            del group.members[member.member_id]
            group.target.pop(member.member_id, None)
            removed.append(member.member_id)
            results.append(MemberResult(member.member_id, instance_id, NONE))
        if removed:
            group.subscription_metadata = manager.topics(manager.group_topics(group))
            group.group_epoch += 1
            error = manager._write(group_id, before, group)
            if error != NONE:
                return LeaveGroupResult(error)
            for member_id in removed:
                for kind in MEMBER_TIMERS:
                    self.c.timer.cancel((kind, group_id, member_id))
                logger.info("consumer group %s: classic member %s left", group_id, member_id)
        return LeaveGroupResult(NONE, tuple(results))

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int) -> int:
        """A classic member's commit: its generation must be its member epoch."""
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return self.c.consumer.validate_offset_commit(group, member_id, epoch)
        return NONE if epoch == member.member_epoch else ILLEGAL_GENERATION

    # --- downgrade ------------------------------------------------------------------------------
    def maybe_downgrade(self, group_id: str, leaving_member_id: str) -> bool:
        """Called when a member leaves or is fenced: convert the group back to a classic one if
        Kafka would; True when done (the member is then gone with the consumer group)."""
        group = self.c.consumer.groups.get(group_id)
        if group is None:
            return False
        leaving = group.members.get(leaving_member_id)
        others = [m for m in group.members.values() if m.member_id != leaving_member_id]
        if leaving is None or leaving.classic is not None or not others:
            return False
        if any(m.classic is None for m in others):
            return False
        if self.policy not in DOWNGRADE_POLICIES:
            logger.info(
                "Cannot downgrade consumer group %s to classic group because the online "
                "downgrade is disabled.",
                group_id,
            )
            return False
        if len(others) > self.c.config.group_max_size:
            logger.info(
                "Cannot downgrade consumer group %s to classic group because its group size is "
                "greater than classic group max size.",
                group_id,
            )
            return False
        if self._to_classic(group, group, others) is None:
            return False
        self.c.rebalancer.prepare_rebalance(self.c.groups[group_id])
        return True

    def _to_classic(
        self,
        before: ConsumerGroup,
        group: ConsumerGroup,
        members: Sequence[ConsumerGroupMember],
    ) -> ClassicGroup | None:
        """Replace the consumer group ``before`` (as written) with a Stable classic group of
        ``members`` (all classic), generation = the group epoch, each member's target in
        ``group`` as its assignment; None when the records could not be written."""
        group_id = group.group_id
        classic = ClassicGroup(
            group_id,
            GroupState.STABLE,
            self.c.now,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
        )
        for m in members:
            assert m.classic is not None
            classic.add(
                ClassicGroupMember(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.classic.session_timeout_ms,
                    CONSUMER_PROTOCOL_TYPE,
                    m.classic.supported_protocols,
                ),
                None,
            )
        classic.protocol_name = classic.select_protocol()
        assignments = {}
        for cm in classic.members.values():
            target = group.target.get(cm.member_id, {})
            assignments[cm.member_id] = self._assignment_bytes(
                target, cm.metadata(classic.protocol_name)
            )
            cm.assignment = assignments[cm.member_id]
        records = [*group_records(before, None), group_metadata_record(classic, assignments)]
        if self.c.append(group_id, records) != NONE:
            return None
        before.dead = True
        self.c.consumer.groups.pop(group_id, None)
        self.c.timer.cancel_if(
            lambda key: (
                isinstance(key, tuple)
                and len(key) == 3
                and key[1] == group_id
                and str(key[0]).startswith("consumer-")
            )
        )
        self.c.groups[group_id] = classic
        for cm in classic.members.values():
            self.c.rebalancer.reschedule_heartbeat(classic, cm)
        logger.info(
            "consumer group %s downgraded to a classic group (generation %d, %d member(s))",
            group_id,
            classic.generation_id,
            len(classic.members),
        )
        return classic
