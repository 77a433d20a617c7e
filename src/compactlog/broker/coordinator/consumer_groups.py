"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe, session and
rebalance timeouts, and the member checks of OffsetCommit (Kafka's ``GroupMetadataManager`` for
consumer groups). The model and the reconciliation are in :mod:`.consumer_group`.

A heartbeat does, in order, what Kafka's does:

1. Check the request (INVALID_REQUEST with Kafka's message; UNSUPPORTED_ASSIGNOR for an
   assignor not in ``group.consumer.assignors``). Epoch -1 is a leave: the member is removed
   and the group epoch goes up.
2. Find the member: a new one with epoch 0 (GROUP_MAX_SIZE_REACHED beyond
   ``group.consumer.max.size``); otherwise it must exist (UNKNOWN_MEMBER_ID) with the epoch
   the coordinator gave it, or the one before when what it owns shows that the last response
   was lost (FENCED_MEMBER_EPOCH otherwise: the member drops its partitions and rejoins).
3. Update its subscription; a change, a new member or a change of the subscribed topics'
   partitions bumps the group epoch.
4. Recompute the target assignment when the group epoch is ahead of it.
5. Reconcile the member (:func:`~.consumer_group.reconcile`) and answer its epoch and, when
   it changed or the request was a full one, its assignment.

Every heartbeat re-arms the member's session (``group.consumer.session.timeout.ms``); a member
that must revoke partitions has its rebalance timeout to do so. Either deadline passing fences
the member: it is removed and the group epoch goes up, so the others get its partitions.

Every change is written to ``__consumer_offsets`` as Kafka's ConsumerGroup* records
(:mod:`.consumer_records`) before it takes effect or is answered (a failed write changes nothing
and is answered with Kafka's error for it); :meth:`ConsumerGroupManager.load` takes the groups
replayed from them at start-up, so a group, its epochs, assignments and members survive a
restart, and the members carry on if they heartbeat within their session timeout.

Static members (``InstanceId``) follow Kafka: one that leaves with epoch -2 keeps its partitions
until its session expires, and a member that joins with the same instance id takes its place and
its partitions without a rebalance (UNRELEASED_INSTANCE_ID while the old one has not left;
FENCED_INSTANCE_ID for the replaced member id).

A regex subscription (``SubscribedTopicRegex``, Python's ``re`` where Kafka has RE2/J: the same
for the usual patterns) matches whole topic names, internal topics left out; a topic created or
deleted later changes the matches, and the group epoch, at the next heartbeat. A pattern that
does not compile is INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from compactlog.broker.coordinator.api import append_error_to_response_error
from compactlog.broker.coordinator.assignors import (
    ASSIGNORS,
    MemberSpec,
    Partitions,
    TopicMetadata,
)
from compactlog.broker.coordinator.config import GroupCoordinatorConfig
from compactlog.broker.coordinator.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    is_subset,
    reconcile,
)
from compactlog.broker.coordinator.consumer_records import group_records
from compactlog.broker.coordinator.delayed import Timer
from compactlog.broker.coordinator.runtime import Record
from compactlog.errors import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
)

logger = logging.getLogger("compactlog.broker.groups")

OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]

#: The timers of a member (keys ``(kind, group id, member id)``): its session, its revocation,
#: and, for a classic member, the JoinGroup it owes after REBALANCE_IN_PROGRESS and the SyncGroup
#: it owes after a JoinGroup (:mod:`.migration`).
MEMBER_TIMERS = ("consumer-session", "consumer-revocation", "consumer-join", "consumer-sync")

#: The group epoch of a consumer group before its first member joins (observed on Kafka 4.4).
NEW_GROUP_EPOCH = 1


class ConsumerRuntime(Protocol):
    config: GroupCoordinatorConfig

    @property
    def now(self) -> int: ...

    @property
    def timer(self) -> Timer: ...

    def append(self, group_id: str, records: Sequence[Record]) -> int: ...


def clone(group: ConsumerGroup) -> ConsumerGroup:
    """A copy to change; members are immutable, so copying the dicts suffices."""
    return ConsumerGroup(
        group.group_id,
        group.group_epoch,
        group.assignment_epoch,
        dict(group.members),
        dict(group.target),
        dict(group.subscription_metadata),
    )


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None: unchanged since the member's last heartbeat.
    assignment: Partitions | None = None


class ConsumerGroupError(Exception):
    """A heartbeat refused with a Kafka error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class DescribedConsumerMember:
    member: ConsumerGroupMember
    target: Partitions


@dataclass(frozen=True)
class DescribedConsumerGroup:
    error_code: int
    error_message: str | None
    group_id: str
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


class ConsumerGroupManager:
    """The consumer groups of one coordinator, by group id."""

    def __init__(
        self,
        rt: ConsumerRuntime,
        topics: Callable[[Iterable[str]], dict[str, TopicMetadata]],
        topic_names: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        """``topics``: the metadata of the named topics that exist; ``topic_names``: every topic
        a regex subscription may match (Kafka leaves out internal topics)."""
        self.rt = rt
        self.topics = topics
        self.topic_names = topic_names
        self.groups: dict[str, ConsumerGroup] = {}
        #: Called with (group id, member id) before a member leaves or is fenced; True when it
        #: converted the group to a classic one instead (see :mod:`.migration`).
        self.downgrade: Callable[[str, str], bool] | None = None

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topics a member subscribes to: its names and what its regex matches now."""
        names = frozenset(member.subscribed_topic_names)
        if not member.subscribed_topic_regex:
            return names
        pattern = re.compile(member.subscribed_topic_regex)
        return names | {t for t in self.topic_names() if pattern.fullmatch(t)}

    def group_topics(self, group: ConsumerGroup) -> frozenset[str]:
        return frozenset(t for m in group.members.values() for t in self.member_topics(m))

    @property
    def config(self) -> GroupCoordinatorConfig:
        return self.rt.config

    # --- ConsumerGroupHeartbeat ---------------------------------------------------------------
    def heartbeat(
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
        try:
            self._validate(
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
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(group_id, member_id, member_epoch, instance_id)
            return self._heartbeat(
                group_id,
                member_id or str(uuid.uuid4()),
                member_epoch,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topic_names,
                subscribed_topic_regex,
                server_assignor,
                owned,
                client_id,
                client_host,
            )
        except ConsumerGroupError as exc:
            return HeartbeatResult(exc.code, exc.message, member_epoch=member_epoch)

    def _validate(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: Sequence[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: OwnedPartitions | None,
    ) -> None:
        def invalid(message: str) -> ConsumerGroupError:
            return ConsumerGroupError(INVALID_REQUEST, message)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        # An empty regex clears it (librdkafka sends one with every subscription by name).
        if subscribed_topic_regex:
            try:
                re.compile(subscribed_topic_regex)
            except re.error as exc:
                raise ConsumerGroupError(
                    INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{subscribed_topic_regex}` is not a valid regular "
                    f"expression: {exc}.",
                ) from exc
        if member_epoch > 0 or member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or len(owned) > 0:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining."
                )
        else:
            raise invalid("MemberEpoch is invalid.")
        assignors = self.config.group_consumer_assignors
        if server_assignor is not None and server_assignor not in assignors:
            raise ConsumerGroupError(
                UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                f"{', '.join(assignors)}.",
            )

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise ConsumerGroupError(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            raise ConsumerGroupError(
                UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        return member

    def _heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: Sequence[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: OwnedPartitions | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        before = self.groups.get(group_id)
        group = None if before is None else clone(before)
        if group is None:
            if not joining:
                raise ConsumerGroupError(
                    GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                )
            # Kafka 4.4 answers the first member of a new group with epoch 2 (its log shows
            # one bump, "to 2"), and kafka-consumer-groups shows that epoch: start where it does.
            group = ConsumerGroup(group_id, group_epoch=NEW_GROUP_EPOCH, assignment_epoch=1)
        replaced: str | None = None
        static = None if instance_id is None else group.static_member(instance_id)
        if static is not None and joining:
            # A static member comes back under a new member id: it takes the place (and the
            # partitions) of its previous incarnation, which must have left with epoch -2.
            if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise ConsumerGroupError(
                    UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {static.member_id} member.",
                )
            replaced = static.member_id
            del group.members[replaced]
            target = group.target.pop(replaced, None)
            if target is not None:
                group.target[member_id] = target
            group.members[member_id] = replace(
                static, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
        elif instance_id is not None and not joining:
            if static is None:
                raise ConsumerGroupError(
                    UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
                )
            if static.member_id != member_id:
                raise ConsumerGroupError(
                    FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {static.member_id}.",
                )
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise ConsumerGroupError(
                    UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                )
            if len(group.members) >= self.config.group_consumer_max_size:
                raise ConsumerGroupError(
                    GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.group_consumer_max_size} members.",
                )
            member = ConsumerGroupMember(member_id, instance_id=instance_id)
        elif not joining:
            self._check_epoch(member, member_epoch, owned)

        updated = replace(
            member,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                tuple(sorted(set(subscribed_topic_names)))
                if subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (subscribed_topic_regex or None)
                if subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=(
                server_assignor if server_assignor is not None else member.server_assignor
            ),
            client_id=client_id,
            client_host=client_host,
        )
        bump = (
            (member_id not in group.members)
            or updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or updated.server_assignor != member.server_assignor
        )
        group.members[member_id] = updated
        metadata = self.topics(self.group_topics(group))
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            logger.info("consumer group %s: group epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)

        reconciled = reconcile(
            updated,
            group.assignment_epoch,
            group.target.get(member_id, {}),
            group.partition_owners(excluding=member_id),
            None if owned is None else [(t, list(ps)) for t, ps in owned],
        )
        group.members[member_id] = reconciled
        error = self._write(group_id, before, group)
        if error != NONE:
            return HeartbeatResult(error, None, member_id, member_epoch)
        if replaced is not None:
            self.rt.timer.cancel(("consumer-session", group_id, replaced))
            self.rt.timer.cancel(("consumer-revocation", group_id, replaced))
            logger.info(
                "consumer group %s: static member %s replaces %s", group_id, member_id, replaced
            )
        self._schedule_session(group_id, member_id)
        self._schedule_revocation(group_id, member, reconciled)

        full = joining or (
            rebalance_timeout_ms != -1 and subscribed_topic_names is not None and owned is not None
        )
        changed = reconciled.assigned != member.assigned or joining
        return HeartbeatResult(
            NONE,
            None,
            member_id,
            reconciled.member_epoch,
            self.config.group_consumer_heartbeat_interval_ms,
            reconciled.assigned if full or changed else None,
        )

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember, received: int, owned: OwnedPartitions | None
    ) -> None:
        if received > member.member_epoch:
            raise ConsumerGroupError(
                FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )
        if received < member.member_epoch and not (
            received == member.previous_member_epoch
            and is_subset([(t, list(ps)) for t, ps in owned or ()], member.assigned)
            and owned is not None
        ):
            raise ConsumerGroupError(
                FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )

    def _update_target(self, group: ConsumerGroup) -> None:
        name = group.preferred_assignor(self.config.group_consumer_assignors[0])
        specs = {
            m.member_id: MemberSpec(self.member_topics(m), group.target.get(m.member_id, {}))
            for m in group.members.values()
        }
        group.target = ASSIGNORS[name](specs, group.subscription_metadata)
        group.assignment_epoch = group.group_epoch

    # --- leaving and fencing --------------------------------------------------------------------
    def _write(
        self, group_id: str, before: ConsumerGroup | None, after: ConsumerGroup | None
    ) -> int:
        """Write the records from ``before`` to ``after`` to ``__consumer_offsets`` and, once
        written, make ``after`` the group; NONE or the error the client gets."""
        records = group_records(before, after)
        if records:
            error = self.rt.append(group_id, records)
            if error != NONE:
                return append_error_to_response_error(error)
        if after is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = after
        return NONE

    def _leave(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None
    ) -> HeartbeatResult:
        group = self._group(group_id)
        if instance_id is None:
            self._member(group, member_id)
        else:
            static = group.static_member(instance_id)
            if static is None:
                raise ConsumerGroupError(
                    UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
                )
            if static.member_id != member_id:
                raise ConsumerGroupError(
                    FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {static.member_id}.",
                )
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # It will be back: it keeps its partitions (until its session expires).
                after = clone(group)
                after.members[member_id] = replace(
                    static, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}
                )
                error = self._write(group_id, group, after)
                if error != NONE:
                    return HeartbeatResult(error, None, member_id, member_epoch)
                self.rt.timer.cancel(("consumer-revocation", group_id, member_id))
                logger.info("consumer group %s: static member %s left for now", group_id, member_id)
                return HeartbeatResult(NONE, None, member_id, member_epoch, 0, None)
        error = self.remove_member(group_id, member_id)
        if error != NONE:
            return HeartbeatResult(error, None, member_id, member_epoch)
        logger.info("consumer group %s: member %s left", group_id, member_id)
        return HeartbeatResult(NONE, None, member_id, member_epoch, 0, None)

    def remove_member(self, group_id: str, member_id: str) -> int:
        """Fence a member: its partitions become free and the group epoch goes up."""
        if self.downgrade is not None and self.downgrade(group_id, member_id):
            return NONE
        before = self.groups[group_id]
        group = clone(before)
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        group.subscription_metadata = self.topics(self.group_topics(group))
        group.group_epoch += 1
        error = self._write(group_id, before, group)
        if error == NONE:
            timer = self.rt.timer
            for kind in MEMBER_TIMERS:
                timer.cancel((kind, group_id, member_id))
        return error

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        if self.remove_member(group_id, member_id) != NONE:
            # The fencing could not be written (the log says why): the member stays in the
            # group until a retry a second later succeeds.
            self.rt.timer.schedule(
                ("consumer-session", group_id, member_id),
                self.rt.now + 1000,
                lambda: self._fence(group_id, member_id, why),
            )
            return
        logger.info("consumer group %s: member %s fenced (%s)", group_id, member_id, why)

    # --- loading --------------------------------------------------------------------------------
    def load(self, groups: Iterable[ConsumerGroup]) -> None:
        """Take the groups replayed from ``__consumer_offsets``; their members must heartbeat
        within a session timeout, as after any coordinator failover."""
        for group in groups:
            group.subscription_metadata = self.topics(self.group_topics(group))
            self.groups[group.group_id] = group
            for member_id in group.members:
                self._schedule_session(group.group_id, member_id)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        """A member's session: a classic member's own session timeout, else the broker's."""
        member = self.groups[group_id].members.get(member_id)
        timeout = self.config.group_consumer_session_timeout_ms
        if member is not None and member.classic is not None:
            timeout = member.classic.session_timeout_ms
        self.rt.timer.schedule(
            ("consumer-session", group_id, member_id),
            self.rt.now + timeout,
            lambda: self._fence(group_id, member_id, "session timeout"),
        )

    def _schedule_revocation(
        self, group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember
    ) -> None:
        key = ("consumer-revocation", group_id, after.member_id)
        if after.state != MemberState.UNREVOKED_PARTITIONS:
            self.rt.timer.cancel(key)
        elif before.state != MemberState.UNREVOKED_PARTITIONS or key not in self.rt.timer:
            timeout = max(after.rebalance_timeout_ms, 0)
            self.rt.timer.schedule(
                key,
                self.rt.now + timeout,
                lambda: self._fence(group_id, after.member_id, "rebalance timeout"),
            )

    # --- the other APIs -------------------------------------------------------------------------
    def describe(self, group_ids: Sequence[str]) -> list[DescribedConsumerGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                message = f"Group {group_id} not found."
                out.append(DescribedConsumerGroup(GROUP_ID_NOT_FOUND, message, group_id))
                continue
            out.append(
                DescribedConsumerGroup(
                    NONE,
                    None,
                    group_id,
                    group.state.value,
                    group.group_epoch,
                    group.assignment_epoch,
                    group.preferred_assignor(self.config.group_consumer_assignors[0]),
                    tuple(
                        DescribedConsumerMember(m, group.target.get(m.member_id, {}))
                        for m in group.members.values()
                    ),
                )
            )
        return out

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int) -> int:
        """OffsetCommit's member check (``ConsumerGroup.validateOffsetCommit``): -1 with no
        members is a standalone commit; otherwise the member must exist with this epoch."""
        if epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def delete(self, group_id: str) -> int:
        """Forget a group, writing its tombstones; NONE or the error."""
        group = self.groups.get(group_id)
        if group is None:
            return NONE
        error = self._write(group_id, group, None)
        if error == NONE:
            group.dead = True
            self.rt.timer.cancel_if(
                lambda key: (
                    isinstance(key, tuple)
                    and len(key) == 3
                    and key[1] == group_id
                    and str(key[0]).startswith("consumer-")
                )
            )
        return error

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or group.state == ConsumerGroupState.EMPTY

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        group = self.groups.get(group_id)
        return frozenset() if group is None else self.group_topics(group)
