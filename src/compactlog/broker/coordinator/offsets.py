"""Committed offsets: OffsetCommit, OffsetFetch, their expiry and their records (Kafka's
``OffsetMetadataManager``).

A commit is validated against the group (:meth:`ClassicGroup.validate_offset_commit`), written
to the group's ``__consumer_offsets`` partition as one batch of OffsetCommit records, and only
then applied in memory; a failed write changes nothing and every partition gets the error.

Expiry (every ``offsets.retention.check.interval.ms``): an offset expires when its explicit
expire timestamp (OffsetCommit v2-v4 retention) has passed, or else when
``offsets.retention.minutes`` have passed since

* the group became Empty (groups that had members), or
* the commit itself (groups of standalone consumers; and, in a Stable consumer group, offsets of
  topics no member subscribes to any more).

Offsets of topics a live group still subscribes to never expire, nor do those of non-consumer
groups with members. An expired offset gets a tombstone; an Empty group left without offsets
gets a GroupMetadata tombstone and is forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from compactlog.broker.coordinator.api import (
    NO_OFFSET,
    GroupError,
    OffsetCommitPartition,
    OffsetFetchPartition,
    OffsetFetchResult,
    PartitionResult,
    append_error_to_response_error,
)
from compactlog.broker.coordinator.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
)
from compactlog.broker.coordinator.offsets_topic import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from compactlog.broker.coordinator.rebalance import Rebalancer
from compactlog.broker.coordinator.runtime import CoordinatorRuntime, Record
from compactlog.errors import (
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NON_EMPTY_GROUP,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
)

#: ``OffsetCommitRequest.DEFAULT_RETENTION_TIME``: use the broker's retention.
DEFAULT_RETENTION_TIME = -1


class CommittedOffset(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none


def java_length(s: str) -> int:
    """``String.length()``: UTF-16 code units (characters outside the BMP count twice)."""
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)), None)


def group_tombstone(group_id: str) -> Record:
    return Record(encode_group_metadata_key(GroupMetadataKey(group_id)), None)


class OffsetManager:
    """The committed offsets of every group the coordinator holds."""

    def __init__(self, rt: CoordinatorRuntime, rebalancer: Rebalancer) -> None:
        self.rt = rt
        self.rebalancer = rebalancer
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}

    # --- OffsetCommit -------------------------------------------------------------------------
    def _validate_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        group = self.rt.groups.get(group_id)
        if group is None:
            # Generation -1: a consumer without group management (or an admin tool) commits
            # for a group nobody has joined, which creates a "simple" group. Otherwise the
            # group is gone; before OffsetCommit v9 that is ILLEGAL_GENERATION.
            return NONE if generation_id < 0 else ILLEGAL_GENERATION
        return group.validate_offset_commit(member_id, group_instance_id, generation_id)

    def commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        retention_ms: int,
        partitions: Sequence[OffsetCommitPartition],
        *,
        validated: bool = False,
    ) -> list[PartitionResult]:
        """``validated``: the caller checked the commit against a group that is not classic (a
        KIP-848 consumer group), so no classic group is looked up or created."""
        error = (
            NONE
            if validated
            else self._validate_commit(group_id, generation_id, member_id, group_instance_id)
        )
        if error != NONE:
            return [PartitionResult(p.topic, p.partition, error) for p in partitions]
        group = self.rt.groups.get(group_id)
        if group is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # A commit keeps a member's session alive, as a heartbeat does.
            self.rebalancer.reschedule_heartbeat(group, group.member(member_id))
        now = self.rt.now
        expire = -1 if retention_ms == DEFAULT_RETENTION_TIME else now + retention_ms
        limit = self.rt.config.offset_metadata_max_bytes
        results: list[PartitionResult] = []
        records: list[Record] = []
        committed: list[tuple[tuple[str, int], CommittedOffset]] = []
        for p in partitions:
            metadata = "" if p.metadata is None else p.metadata
            if java_length(metadata) > limit:
                results.append(PartitionResult(p.topic, p.partition, OFFSET_METADATA_TOO_LARGE))
                continue
            results.append(PartitionResult(p.topic, p.partition, NONE))
            value = CommittedOffset(p.offset, p.leader_epoch, metadata, now, expire)
            committed.append(((p.topic, p.partition), value))
            records.append(
                Record(
                    encode_offset_commit_key(OffsetCommitKey(group_id, p.topic, p.partition)),
                    encode_offset_commit_value(OffsetCommitValue(*value)),
                )
            )
        if records:
            error = self.rt.append(group_id, records)
            if error != NONE:
                error = append_error_to_response_error(error)
                return [PartitionResult(p.topic, p.partition, error) for p in partitions]
            if not validated:
                self.rt.get_or_create_group(group_id)
            self.offsets.setdefault(group_id, {}).update(committed)
        return results

    # --- OffsetFetch --------------------------------------------------------------------------
    def fetch(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        *,
        exists: bool = False,
    ) -> OffsetFetchResult:
        """``exists``: the group is known as another type than classic (a consumer group)."""
        group = self.rt.groups.get(group_id)
        known = exists or (group is not None and not group.is_in(GroupState.DEAD))
        offsets = self.offsets.get(group_id, {}) if known else {}
        if partitions is None:
            return OffsetFetchResult(
                NONE,
                tuple(
                    OffsetFetchPartition(t, p, c.offset, c.leader_epoch, c.metadata)
                    for (t, p), c in sorted(offsets.items())
                ),
            )
        out = []
        for topic, partition in partitions:
            c = offsets.get((topic, partition))
            if c is None:
                # No commit: -1 and empty metadata, no error; the client applies its reset policy.
                out.append(OffsetFetchPartition(topic, partition, NO_OFFSET, -1, ""))
            else:
                out.append(
                    OffsetFetchPartition(topic, partition, c.offset, c.leader_epoch, c.metadata)
                )
        return OffsetFetchResult(NONE, tuple(out))

    # --- expiry and deletion ------------------------------------------------------------------
    def _is_expired(self, group: ClassicGroup | None, c: CommittedOffset, base: str) -> bool:
        now = self.rt.now
        if c.expire_timestamp >= 0:
            return now >= c.expire_timestamp
        since = c.commit_timestamp
        if base == "state" and group is not None and group.current_state_timestamp is not None:
            since = group.current_state_timestamp
        return now - since >= self.rt.config.offsets_retention_ms

    def _expired_offsets(self, group_id: str) -> tuple[bool, list[tuple[str, int]]]:
        """The group's expired partitions, and whether every offset of the group expired."""
        offsets = self.offsets.get(group_id)
        if not offsets:
            return True, []
        group = self.rt.groups.get(group_id)
        base = "commit" if group is None else group.offset_expiry_base()
        if base is None:
            return False, []
        subscribed = None if group is None else group.subscribed_topics()
        uses_consumer_protocol = group is not None and group.protocol_type == CONSUMER_PROTOCOL_TYPE
        expired = []
        all_expired = True
        for (topic, partition), c in offsets.items():
            is_subscribed = (
                topic in subscribed if subscribed is not None else uses_consumer_protocol
            )
            if not is_subscribed and self._is_expired(group, c, base):
                expired.append((topic, partition))
            else:
                all_expired = False
        return all_expired, expired

    def expire(self) -> int:
        """One run of the retention check; returns the number of tombstones written."""
        written = 0
        for group_id in list(self.rt.groups):
            all_expired, expired = self._expired_offsets(group_id)
            records = [offset_tombstone(group_id, t, p) for t, p in expired]
            group = self.rt.groups[group_id]
            delete_group = all_expired and group.is_in(GroupState.EMPTY)
            if delete_group:
                records.append(group_tombstone(group_id))
            if not records or self.rt.append(group_id, records) != NONE:
                continue  # a failed write is retried at the next check
            written += len(records)
            offsets = self.offsets.get(group_id, {})
            for tp in expired:
                offsets.pop(tp, None)
            if delete_group:
                self.offsets.pop(group_id, None)
                self.rt.remove_group(group_id)
        return written

    def expire_unless(
        self, group_id: str, is_subscribed: Callable[[str], bool]
    ) -> tuple[int, bool]:
        """Expiry for a group that is not classic (a KIP-848 consumer group, whose offsets
        expire ``offsets.retention.minutes`` after their commit unless a member subscribes to
        their topic): (tombstones written, whether the group has no offset left)."""
        offsets = self.offsets.get(group_id, {})
        expired = [
            tp
            for tp, c in sorted(offsets.items())
            if not is_subscribed(tp[0]) and self._is_expired(None, c, "commit")
        ]
        if expired:
            records = [offset_tombstone(group_id, t, p) for t, p in expired]
            if self.rt.append(group_id, records) != NONE:
                return 0, False  # retried at the next check
            for tp in expired:
                offsets.pop(tp, None)
        if not offsets:
            self.offsets.pop(group_id, None)
        return len(expired), not offsets

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: tombstones for its offsets and for the group."""
        group = self.rt.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND
        if not group.is_in(GroupState.EMPTY):
            return NON_EMPTY_GROUP
        offsets = self.offsets.get(group_id, {})
        records = [offset_tombstone(group_id, t, p) for t, p in sorted(offsets)]
        records.append(group_tombstone(group_id))
        error = self.rt.append(group_id, records)
        if error != NONE:
            return append_error_to_response_error(error)
        self.offsets.pop(group_id, None)
        self.rt.remove_group(group_id)
        return NONE

    def delete_all_offsets(self, group_id: str) -> int:
        """Tombstones for every offset of a group that is being deleted; NONE or the error."""
        offsets = self.offsets.get(group_id, {})
        if offsets:
            records = [offset_tombstone(group_id, t, p) for t, p in sorted(offsets)]
            error = self.rt.append(group_id, records)
            if error != NONE:
                return append_error_to_response_error(error)
        self.offsets.pop(group_id, None)
        return NONE

    def delete_groups(self, group_ids: Sequence[str]) -> list[GroupError]:
        return [GroupError(g, self.delete_group(g)) for g in group_ids]

    # --- OffsetDelete -------------------------------------------------------------------------
    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[int, list[PartitionResult]]:
        """OffsetDelete, as Kafka's ``OffsetMetadataManager.deleteOffsets`` for a classic group:
        (the group's error, one result per partition). An unknown or Dead group is
        GROUP_ID_NOT_FOUND; a group with members that is not a consumer group is
        NON_EMPTY_GROUP; a partition of a topic the members subscribe to is
        GROUP_SUBSCRIBED_TO_TOPIC. Every other partition gets NONE and, when the group has an
        offset for it, a tombstone in ``__consumer_offsets``."""
        group = self.rt.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND, []
        if not group.is_in(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return NON_EMPTY_GROUP, []
        return self.delete_offsets_unless(group_id, partitions, group.is_subscribed_to_topic)

    def delete_offsets_unless(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]],
        is_subscribed: Callable[[str], bool],
    ) -> tuple[int, list[PartitionResult]]:
        """OffsetDelete once the group passed its checks: GROUP_SUBSCRIBED_TO_TOPIC for topics
        ``is_subscribed``, tombstones for the others."""
        offsets = self.offsets.get(group_id, {})
        results = []
        deleted = []
        for topic, partition in partitions:
            if is_subscribed(topic):
                results.append(PartitionResult(topic, partition, GROUP_SUBSCRIBED_TO_TOPIC))
                continue
            results.append(PartitionResult(topic, partition, NONE))
            if (topic, partition) in offsets and (topic, partition) not in deleted:
                deleted.append((topic, partition))
        if deleted:
            error = self.rt.append(group_id, [offset_tombstone(group_id, t, p) for t, p in deleted])
            if error != NONE:
                return append_error_to_response_error(error), []
            for tp in deleted:
                offsets.pop(tp, None)
            if not offsets:
                self.offsets.pop(group_id, None)
        return NONE, results

    # --- loading ------------------------------------------------------------------------------
    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self.offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.offsets[key.group]
            return
        # Offsets without group metadata belong to a simple group (standalone consumers).
        self.rt.get_or_create_group(key.group)
        self.offsets.setdefault(key.group, {})[tp] = CommittedOffset(*value)
