"""The rebalance engine of classic groups: the join phase, the sync deadline and sessions (the
timer-driven half of Kafka's ``GroupMetadataManager``; the request handlers are in
:mod:`compactlog.broker.coordinator.membership`).

Three kinds of timer per group, keyed like Kafka's:

* ``("heartbeat", group, member)``: the member's session. Rescheduled by every heartbeat, commit
  and completed rebalance; when it fires, a member that is not parked in a rebalance is removed.
  A new member's first deadline is the new-member join timeout (five minutes) instead.
* ``("join", group)``: the end of the join phase, the initial rebalance delay for a new group or
  the rebalance timeout for an existing one. When it fires, members that did not rejoin are
  removed and the next generation starts.
* ``("sync", group)``: the rebalance timeout after a join phase; members that have not sent their
  SyncGroup by then are removed and the group rebalances again.

Records: the group's metadata is written when a generation is stored (the leader's SyncGroup),
when a join phase ends with no members, when a static member is replaced in a Stable group, and
(empty) when the group is created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from compactlog.broker.coordinator.api import (
    JoinGroupResult,
    SyncGroupResult,
)
from compactlog.broker.coordinator.classic_group import ClassicGroup, ClassicGroupMember, GroupState
from compactlog.broker.coordinator.offsets_topic import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from compactlog.broker.coordinator.runtime import CoordinatorRuntime, Record
from compactlog.errors import (
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

logger = logging.getLogger("compactlog.broker.groups")

S = GroupState


def group_metadata_record(group: ClassicGroup, assignment: Mapping[str, bytes]) -> Record:
    """The group's GroupMetadataValue (``newGroupMetadataRecord``)."""
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(group.protocol_name),
            assignment[m.member_id],
        )
        for m in group.members.values()
    )
    value = GroupMetadataValue(
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        -1 if group.current_state_timestamp is None else group.current_state_timestamp,
        members,
    )
    return Record(
        encode_group_metadata_key(GroupMetadataKey(group.group_id)),
        encode_group_metadata_value(value),
    )


def empty_group_metadata_record(group: ClassicGroup) -> Record:
    """What Kafka writes for a group it has just created (``newEmptyGroupMetadataRecord``)."""
    timestamp = -1 if group.current_state_timestamp is None else group.current_state_timestamp
    value = GroupMetadataValue("", 0, None, None, timestamp, ())
    return Record(
        encode_group_metadata_key(GroupMetadataKey(group.group_id)),
        encode_group_metadata_value(value),
    )


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


class Rebalancer:
    """Moves groups through their rebalances over the coordinator's groups, timer and log."""

    def __init__(self, rt: CoordinatorRuntime) -> None:
        self.rt = rt

    def schedule(self, key: tuple[str, ...], delay_ms: int, callback: Callable[[], object]) -> None:
        # At least 1 ms: a zero timeout that reschedules itself (a rebalance timeout of 0 with
        # nobody rejoining) then moves through time instead of spinning at one instant.
        self.rt.timer.schedule(key, self.rt.now + max(delay_ms, 1), callback)

    # --- the join phase ---------------------------------------------------------------------
    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)
        else:
            self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (
            group.is_in(S.PREPARING_REBALANCE)
            and group.previous_state is not S.EMPTY  # the initial delay runs its full course
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment(group, REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.rt.timer.cancel(sync_key(group.group_id))
        initial = group.is_in(S.EMPTY)
        if initial:
            delay = self.rt.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group.group_id, delay, remaining)
        group.transition_to(S.PREPARING_REBALANCE, self.rt.now)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self._schedule_join_timeout(group)

    def _schedule_join_timeout(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.schedule(
            join_key(group_id),
            group.rebalance_timeout_ms(),
            lambda: self._complete_join_by_id(group_id),
        )

    def _schedule_initial_join(self, group_id: str, delay: int, remaining: int) -> None:
        self.schedule(
            join_key(group_id),
            delay,
            lambda: self._try_complete_initial_rebalance(group_id, delay, remaining),
        )

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        """Members joined during the initial delay extend it, up to the rebalance timeout."""
        group = self.rt.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.rt.config.group_initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group_id, new_delay, max(remaining - delay, 0))
        else:
            self.complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.rt.groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation and answer every parked JoinGroup (the leader's with all members)."""
        group_id = group.group_id
        self.rt.timer.cancel(join_key(group_id))
        for member in group.not_yet_rejoined():
            if not member.is_static:
                group.remove(member.member_id)
                self.rt.timer.cancel(heartbeat_key(group_id, member.member_id))
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members are left and none rejoined: wait for them (or their sessions).
            self._schedule_join_timeout(group)
            return
        group.init_next_generation(self.rt.now)
        if group.is_in(S.EMPTY):
            error = self.rt.append(group_id, [group_metadata_record(group, {})])
            if error != NONE:
                logger.warning("could not store the empty group %s: error %d", group_id, error)
            return
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            group.complete_join(member, group.join_result(member.member_id, members=is_leader))
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.schedule(
            sync_key(group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.rt.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                group.remove(member_id)
                self.rt.timer.cancel(heartbeat_key(group_id, member_id))
            self.prepare_rebalance(group)

    # --- sessions ---------------------------------------------------------------------------
    def reschedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None
    ) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.schedule(
            heartbeat_key(group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self.expire_heartbeat(group_id, member_id),
        )

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.rt.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
        elif group.has_member(member_id):
            member = group.member(member_id)
            if not member.has_satisfied_heartbeat():
                logger.info("member %s of group %s expired", member_id, group_id)
                self._remove_member_and_update(group, member)

    def _remove_member_and_update(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        group.complete_join(member, JoinGroupResult(UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            self.rt.timer.cancel(sync_key(group.group_id))

    def reset_and_propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == NONE
        for member in list(group.members.values()):
            result = SyncGroupResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.complete_sync(member, result):
                # Sessions restart once the assignment is out: a member's heartbeat deadline
                # may have passed (and been ignored) while it waited for the leader.
                self.reschedule_heartbeat(group, member)

    # --- loading and unloading ------------------------------------------------------------------
    def on_loaded(self) -> None:
        """Sessions of members read from the log start now: those that do not come back expire."""
        for group in self.rt.groups.values():
            for member in group.members.values():
                self.reschedule_heartbeat(group, member)

    def on_unloaded(self) -> None:
        """Answer every parked request with NOT_COORDINATOR (the coordinator is going away)."""
        for group in self.rt.groups.values():
            for member in group.members.values():
                group.complete_join(
                    member, JoinGroupResult(NOT_COORDINATOR, member_id=member.member_id)
                )
                group.complete_sync(member, SyncGroupResult(NOT_COORDINATOR))
