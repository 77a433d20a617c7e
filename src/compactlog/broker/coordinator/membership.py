"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic groups: the request-driven half of
the classic paths of Kafka's ``GroupMetadataManager``. What happens between requests (the end of
a join phase, deadlines, sessions) is in :mod:`compactlog.broker.coordinator.rebalance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from compactlog.broker.coordinator.api import (
    NO_MEMBER_ID,
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    MemberResult,
    SyncGroupResult,
    append_error_to_response_error,
)
from compactlog.broker.coordinator.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    Protocols,
)
from compactlog.broker.coordinator.delayed import Pending
from compactlog.broker.coordinator.rebalance import (
    Rebalancer,
    empty_group_metadata_record,
    group_metadata_record,
    heartbeat_key,
)
from compactlog.broker.coordinator.runtime import CoordinatorRuntime
from compactlog.errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
)

S = GroupState


class GroupMembership:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic groups."""

    def __init__(self, rt: CoordinatorRuntime, rebalancer: Rebalancer) -> None:
        self.rt = rt
        self.rebalancer = rebalancer

    # --- JoinGroup --------------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Protocols,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
    ) -> Pending[JoinGroupResult]:
        future: Pending[JoinGroupResult] = Pending()
        request = _JoinRequest(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            protocol_type,
            protocols,
            session_timeout_ms,
            rebalance_timeout_ms,
            require_known_member_id,
            supports_skip_assignment,
        )
        is_unknown = member_id == NO_MEMBER_ID
        is_new_group = group_id not in self.rt.groups
        if is_new_group and not is_unknown:
            future.complete(JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id))
            return future
        group = self.rt.get_or_create_group(group_id)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            future.complete(JoinGroupResult(GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)
        if is_new_group:
            # Kafka commits a new group to its log at once, whatever the join's outcome.
            error = self.rt.append(group_id, [empty_group_metadata_record(group)])
            if error != NONE:
                self.rt.remove_group(group_id)
                future.complete(JoinGroupResult(append_error_to_response_error(error)))
        return future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.rt.config.group_max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            # Counting parked joins (not members) lets the last rejoiners be the ones refused.
            return (
                group.has_member(member_id) and group.member(member_id).awaiting_join is not None
            ) or group.num_awaiting_join < limit
        return group.has_member(member_id) or len(group.members) < limit

    def _join_new_member(
        self, group: ClassicGroup, req: _JoinRequest, future: Pending[JoinGroupResult]
    ) -> None:
        if group.is_in(S.DEAD):
            future.complete(JoinGroupResult(COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, req.protocol_names):
            future.complete(JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
            if req.group_instance_id is not None:
                existing = group.static_members.get(req.group_instance_id)
                if existing is not None:
                    self._replace_static_member(group, req, existing, new_member_id, future)
                else:
                    self._add_member_then_rebalance(group, req, new_member_id, future)
            elif req.require_known_member_id:
                # The member must come back with this id: until then it is pending, and a
                # session timeout forgets it.
                group.pending_join_members.add(new_member_id)
                group_id = group.group_id
                self.rebalancer.schedule(
                    heartbeat_key(group_id, new_member_id),
                    req.session_timeout_ms,
                    lambda: self.rebalancer.expire_heartbeat(group_id, new_member_id),
                )
                future.complete(JoinGroupResult(MEMBER_ID_REQUIRED, member_id=new_member_id))
            else:
                self._add_member_then_rebalance(group, req, new_member_id, future)

    def _join_existing_member(
        self, group: ClassicGroup, req: _JoinRequest, future: Pending[JoinGroupResult]
    ) -> None:
        member_id = req.member_id
        if group.is_in(S.DEAD):
            future.complete(JoinGroupResult(COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocol_names):
            future.complete(JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:  # pending members are never static
                future.complete(JoinGroupResult(UNKNOWN_SERVER_ERROR, member_id=member_id))
            else:
                self._add_member_then_rebalance(group, req, member_id, future)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error != NONE:
            future.complete(JoinGroupResult(error, member_id=member_id))
            return
        member = group.member(member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_then_rebalance(group, member, req, future)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # A retry of a join whose response was lost: answer with this generation.
                future.complete(group.join_result(member_id, members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance(group, member, req, future)
        elif group.is_in(S.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoins to make the group reassign (new topic metadata, say).
                self._update_member_then_rebalance(group, member, req, future)
            else:
                future.complete(group.join_result(member_id, members=False))
        else:
            future.complete(JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_member_then_rebalance(
        self,
        group: ClassicGroup,
        req: _JoinRequest,
        member_id: str,
        future: Pending[JoinGroupResult],
    ) -> None:
        member = ClassicGroupMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member, future)
        # A parked JoinGroup sends no heartbeats: a new member that gave up is dropped after
        # the join timeout instead of its session timeout.
        self.rebalancer.reschedule_heartbeat(
            group, member, self.rt.config.new_member_join_timeout_ms
        )
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_then_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        req: _JoinRequest,
        future: Pending[JoinGroupResult],
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        req: _JoinRequest,
        old_member_id: str,
        new_member_id: str,
        future: Pending[JoinGroupResult],
    ) -> None:
        """A static member rejoins with no member id: it takes over its instance's place."""
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self.rt.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self.rebalancer.reschedule_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        if group.is_in(S.STABLE):
            if group.protocol_name != group.select_protocol():
                self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
                return
            # Same protocol: store the new member id, no rebalance.
            error = self.rt.append(
                group.group_id,
                [group_metadata_record(group, {m: x.assignment for m, x in group.members.items()})],
            )
            if error != NONE:
                group.update_member(member, old[0], old[1], old[2], None)
                restored = group.replace_static_member(
                    req.group_instance_id, new_member_id, old_member_id
                )
                self.rt.timer.cancel(heartbeat_key(group.group_id, new_member_id))
                self.rebalancer.reschedule_heartbeat(group, restored)
                future.complete(
                    JoinGroupResult(
                        append_error_to_response_error(error),
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or NO_MEMBER_ID,
                    )
                )
            elif req.supports_skip_assignment:
                is_leader = group.is_leader(new_member_id)
                group.complete_join(
                    member,
                    group.join_result(new_member_id, members=is_leader, skip_assignment=is_leader),
                )
            else:
                # Before JoinGroup v9 the old leader id is returned, so that a returning leader
                # does not compute an assignment a Stable group would ignore.
                group.complete_join(
                    member,
                    group.join_result(
                        new_member_id, members=False, leader=current_leader or NO_MEMBER_ID
                    ),
                )
        elif group.is_in(S.COMPLETING_REBALANCE):
            # The leader may have assigned to the old member id already: assign again.
            self.rebalancer.prepare_rebalance(group)
        elif group.is_in(S.EMPTY, S.DEAD):
            raise AssertionError(f"a static member rejoined group {group.group_id} while Empty")
        else:
            self.rebalancer.maybe_complete_join_phase(group)

    # --- SyncGroup --------------------------------------------------------------------------
    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
    ) -> Pending[SyncGroupResult]:
        future: Pending[SyncGroupResult] = Pending()
        group = self.rt.groups.get(group_id)
        if group is None or group.is_in(S.EMPTY):
            future.complete(SyncGroupResult(UNKNOWN_MEMBER_ID))
            return future
        error = self._validate_sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        if error != NONE:
            future.complete(SyncGroupResult(error))
        elif group.is_in(S.PREPARING_REBALANCE):
            future.complete(SyncGroupResult(REBALANCE_IN_PROGRESS))
        elif group.is_in(S.COMPLETING_REBALANCE):
            member = group.member(member_id)
            # A second SyncGroup of the same member (from another connection) replaces the
            # first; Kafka leaves the first unanswered, which would park a request for ever.
            group.complete_sync(member, SyncGroupResult(REBALANCE_IN_PROGRESS))
            member.awaiting_sync = future
            self.rebalancer.remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_assignment(group, dict(assignments))
        elif group.is_in(S.STABLE):
            self.rebalancer.remove_pending_sync_member(group, member_id)
            future.complete(
                SyncGroupResult(
                    NONE,
                    group.protocol_type,
                    group.protocol_name,
                    group.member(member_id).assignment,
                )
            )
        return future

    def _validate_sync(
        self,
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> int:
        if group.is_in(S.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error != NONE:
            return error
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            return INCONSISTENT_GROUP_PROTOCOL
        return NONE

    def _store_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """The leader's SyncGroup: store the generation, then answer every parked SyncGroup."""
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        error = self.rt.append(group.group_id, [group_metadata_record(group, assignment)])
        if error != NONE:
            self.rebalancer.reset_and_propagate_assignment(
                group, append_error_to_response_error(error)
            )
            self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self.rebalancer.propagate_assignment(group, NONE)
        group.transition_to(S.STABLE, self.rt.now)

    # --- Heartbeat --------------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        group = self.rt.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_in(S.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error != NONE:
            return error
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.is_in(S.EMPTY):
            return UNKNOWN_MEMBER_ID
        self.rebalancer.reschedule_heartbeat(group, group.member(member_id))
        # CompletingRebalance answers 0: the member has its JoinGroup response and is about to
        # send SyncGroup.
        return REBALANCE_IN_PROGRESS if group.is_in(S.PREPARING_REBALANCE) else NONE

    # --- LeaveGroup -------------------------------------------------------------------------
    def leave(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        group = self.rt.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                NONE,
                tuple(
                    MemberResult(m.member_id, m.group_instance_id, UNKNOWN_MEMBER_ID)
                    for m in members
                ),
            )
        if group.is_in(S.DEAD):
            return LeaveGroupResult(COORDINATOR_NOT_AVAILABLE)
        results: list[MemberResult] = []
        left = False
        for identity in members:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            if member_id == NO_MEMBER_ID:
                # An admin removing a static member by its instance id.
                static_id = group.static_members.get(instance_id) if instance_id else None
                if static_id is None:
                    error = UNKNOWN_MEMBER_ID
                else:
                    self._remove_current_member(group, static_id)
                    error = NONE
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.rt.timer.cancel(heartbeat_key(group_id, member_id))
                error = NONE
            else:
                error = group.validate_member(member_id, instance_id)
                if error == NONE:
                    self._remove_current_member(group, member_id)
            results.append(MemberResult(member_id, instance_id, error))
            left = left or error == NONE
        if left:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(S.PREPARING_REBALANCE):
                self.rebalancer.maybe_complete_join_phase(group)
        return LeaveGroupResult(NONE, tuple(results))

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        self.rt.timer.cancel(heartbeat_key(group.group_id, member_id))
        group.remove(member_id)  # answers a parked JoinGroup with UNKNOWN_MEMBER_ID


@dataclass(frozen=True, slots=True)
class _JoinRequest:
    """The fields of one JoinGroup request, passed along the join paths."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool
    supports_skip_assignment: bool
    protocol_names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        names = list(dict.fromkeys(name for name, _ in self.protocols))
        object.__setattr__(self, "protocol_names", names)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
