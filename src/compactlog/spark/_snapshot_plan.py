"""What a snapshot run starts from: the offsets of the topic's log now, the previous version's
manifest, and the decision, partition by partition, of what to read and what to keep.

Pure functions over small files (no Spark, no pyarrow), so the decision table of
:mod:`compactlog.spark.snapshot` is tested on its own.

The manifest ``<version>/_snapshot.json`` and the pointer ``_current`` are small JSON documents::

    _current:        {"format": 1, "version": "version-00000003"}
    _snapshot.json:  {"format": 1, "topic": "orders", "topic_id": "...", "headers": false,
                      "rows": 17, "partitions": {"0": {"log_start": 0, "end": 120, "rows": 9,
                                                       "files": ["part-00000.parquet"]}, ...}}

``end`` is the exclusive end offset the version covers, ``log_start`` the log start offset it
started from. Neither holds a time or a host name, so the same offsets give the same bytes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from compactlog.errors import (
    SnapshotError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from compactlog.spark.remote_fs import filesystem
from compactlog.spark.source import (
    _log_end_offset,
    _log_start_offsets,
    _partition_dirs,
    _segment_files,
)
from compactlog.storage.topic_catalog import read_topics_file
from compactlog.storage.topic_names import validate_topic_name

FORMAT = 1
CURRENT_FILE = "_current"
MANIFEST_FILE = "_snapshot.json"
VERSION_PREFIX = "version-"
VERSION_NAME = re.compile(r"version-([0-9]{8,})")


# --- what the log holds now ------------------------------------------------------------------


@dataclass(frozen=True)
class TopicLayout:
    """The offsets of a topic's partitions as its files show them now."""

    topic: str
    topic_id: str | None
    #: partition -> (log start offset, log end offset)
    offsets: dict[int, tuple[int, int]]


def _topic_id(data_dir: str, topic: str) -> str | None:
    """The topic id from the store's topics file; None without a readable one (a data
    directory copied without it: recreation of the topic then goes unnoticed)."""
    try:
        topics = read_topics_file(filesystem(data_dir), data_dir)
    except (StorageError, OSError):
        return None
    info = None if topics is None else topics.get(topic)
    return None if info is None else info.topic_id


def topic_layout(data_dir: str, topic: str) -> TopicLayout:
    """Log start and log end offset of every partition of ``topic``, read as the ``compactlog``
    source reads them (segment files and the log-start-offset checkpoint; no lock)."""
    validate_topic_name(topic)
    if not filesystem(data_dir).is_dir(data_dir):
        raise SnapshotError(f"data directory {data_dir!r} does not exist")
    dirs = {p: d for (t, p), d in _partition_dirs(data_dir).items() if t == topic}
    if not dirs:
        raise UnknownTopicOrPartitionError(
            f"unknown topic {topic!r}: {data_dir} has no partition directory of it"
        )
    checkpointed = _log_start_offsets(data_dir)
    offsets = {}
    for partition, directory in sorted(dirs.items()):
        segments = _segment_files(directory)
        first_base = segments[0][0] if segments else 0
        log_start = max(first_base, checkpointed.get((topic, partition), 0))
        offsets[partition] = (log_start, max(_log_end_offset(segments), log_start))
    return TopicLayout(topic, _topic_id(data_dir, topic), offsets)


# --- the manifest ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    """What a snapshot version holds of one partition."""

    log_start: int
    end: int
    rows: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    """A version's ``_snapshot.json``: the offsets it covers and its files."""

    topic: str
    topic_id: str | None
    headers: bool
    partitions: dict[int, PartitionState]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions.values())

    def encode(self) -> bytes:
        doc = {
            "format": FORMAT,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "headers": self.headers,
            "rows": self.rows,
            "partitions": {
                str(p): {
                    "log_start": s.log_start,
                    "end": s.end,
                    "rows": s.rows,
                    "files": list(s.files),
                }
                for p, s in sorted(self.partitions.items())
            },
        }
        return json.dumps(doc, indent=1).encode() + b"\n"

    @classmethod
    def decode(cls, data: bytes, path: str) -> Manifest:
        try:
            doc = json.loads(data.decode("utf-8"))
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, this compactlog reads {FORMAT}")
            topic_id = doc["topic_id"]
            return cls(
                topic=str(doc["topic"]),
                topic_id=None if topic_id is None else str(topic_id),
                headers=bool(doc["headers"]),
                partitions={
                    int(p): PartitionState(
                        int(s["log_start"]),
                        int(s["end"]),
                        int(s["rows"]),
                        tuple(str(f) for f in s["files"]),
                    )
                    for p, s in doc["partitions"].items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SnapshotError(f"snapshot manifest {path} is unreadable: {exc}") from exc


def _read_json(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc.strerror or exc}") from exc


def current_version(output_dir: str) -> tuple[str, Manifest] | None:
    """``(version directory, manifest)`` of the snapshot ``_current`` names; None if none."""
    pointer = os.path.join(output_dir, CURRENT_FILE)
    if not os.path.exists(pointer):
        return None
    try:
        doc = json.loads(_read_json(pointer).decode("utf-8"))
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, this compactlog reads {FORMAT}")
        name = str(doc["version"])
        if not VERSION_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a version directory name")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"{pointer} is unreadable: {exc}") from exc
    version_dir = os.path.join(output_dir, name)
    manifest_path = os.path.join(version_dir, MANIFEST_FILE)
    return version_dir, Manifest.decode(_read_json(manifest_path), manifest_path)


# --- planning a run --------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionPlan:
    partition: int
    log_start: int
    #: first offset this run reads; the run reads ``[read_from, end)``
    read_from: int
    end: int
    #: previous rows of this partition are merged in (those at or above ``log_start``)
    keep_previous: bool
    #: previous rows below ``log_start`` are dropped (the log start moved)
    pruned: bool = False
    #: why the previous rows of this partition were not used
    rebuilt: str | None = None


@dataclass(frozen=True)
class RefreshPlan:
    partitions: tuple[PartitionPlan, ...]
    #: why the whole topic is rebuilt (None: per partition, see each plan)
    reason: str | None = None

    @property
    def incremental(self) -> bool:
        return any(p.keep_previous for p in self.partitions)

    def unchanged(self, previous: Manifest | None) -> bool:
        """Nothing to read and nothing to drop: the previous version is still exact."""
        return (
            previous is not None
            and self.reason is None
            and set(previous.partitions) == {p.partition for p in self.partitions}
            and all(
                p.keep_previous and not p.pruned and p.read_from == p.end for p in self.partitions
            )
        )


def plan_refresh(
    layout: TopicLayout, previous: Manifest | None, *, full: bool, headers: bool, why: str = ""
) -> RefreshPlan:
    """Decide, partition by partition, what a run reads and keeps (module doc: theory)."""

    def rebuild_all(reason: str) -> RefreshPlan:
        return RefreshPlan(
            tuple(
                PartitionPlan(p, start, start, end, keep_previous=False)
                for p, (start, end) in sorted(layout.offsets.items())
            ),
            reason,
        )

    if full:
        return rebuild_all("full=True was asked for")
    if previous is None:
        return rebuild_all(why or "there is no previous snapshot")
    if previous.topic_id != layout.topic_id:
        return rebuild_all(
            f"topic {layout.topic!r} was recreated (topic id {previous.topic_id} is now "
            f"{layout.topic_id})"
        )
    if previous.headers != headers:
        stored = "with" if previous.headers else "without"
        return rebuild_all(f"the previous snapshot was built {stored} headers")
    gone = sorted(set(previous.partitions) - set(layout.offsets))
    if gone:
        return rebuild_all(
            f"the topic has {len(layout.offsets)} partitions, the previous snapshot "
            f"{len(previous.partitions)} (partitions {gone} are gone)"
        )
    plans = []
    for p, (start, end) in sorted(layout.offsets.items()):
        before = previous.partitions.get(p)
        rebuilt = None
        if before is None:
            rebuilt = "a new partition"
        elif start > before.end:
            rebuilt = (
                f"its log start offset {start} is past the snapshot's end {before.end}: "
                f"retention deleted offsets {before.end}..{start - 1} before a snapshot read them"
            )
        elif end < before.end:
            rebuilt = (
                f"its log end offset {end} is below the snapshot's end {before.end} "
                "(the log was truncated)"
            )
        if before is None or rebuilt is not None:
            plans.append(PartitionPlan(p, start, start, end, keep_previous=False, rebuilt=rebuilt))
        else:
            plans.append(
                PartitionPlan(
                    p, start, before.end, end, keep_previous=True, pruned=start > before.log_start
                )
            )
    return RefreshPlan(tuple(plans))
