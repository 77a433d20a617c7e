"""Where the Spark sink keeps its staged rows and its commit journals (no pyarrow here).

Layout inside a data directory::

    <data-dir>/
      .spark-staging/<write-id>/part-<task>-<attempt-uuid>.arrow   one file per task attempt
      .spark-sinks/batch-<write-id>.json      a batch write's journal, only while it commits
      .spark-sinks/stream-<sink-hash>.json    a streaming query's journal, kept for good

A journal is a small JSON document, always replaced atomically (write ``.tmp``, fsync, rename,
fsync the directory), holding:

* ``committed_batch``: the last micro-batch id whose rows are in the log (streams only);
* ``pending``: the commit in progress, written *before* the first append: the staged files in
  order, the log end offset of every partition that receives rows, how many rows each receives,
  the timestamp for rows without one, the round-robin start for keyless rows and the partition
  counts. With these the row-to-partition plan is a pure function of the journal, so an
  interrupted commit can be finished later: partition by partition, the rows already in the log
  (log end offset minus the recorded start) are skipped and the rest appended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from typing import Any

from compactlog.errors import StorageError
from compactlog.storage.fs import FileSystem, write_file_atomically

STAGING_DIR = ".spark-staging"
SINKS_DIR = ".spark-sinks"
JOURNAL_VERSION = 1


def staging_dir(data_dir: str, write_id: str) -> str:
    return os.path.join(data_dir, STAGING_DIR, write_id)


def sinks_dir(data_dir: str) -> str:
    return os.path.join(data_dir, SINKS_DIR)


def batch_journal_name(write_id: str) -> str:
    return f"batch-{write_id}.json"


def stream_journal_name(sink_id: str) -> str:
    """A file name for a streaming sink identity (a checkpoint path may hold any character)."""
    return f"stream-{hashlib.sha256(sink_id.encode()).hexdigest()[:24]}.json"


@dataclass
class PendingCommit:
    """A commit whose appends may have started: enough to redo it exactly (see module doc)."""

    batch_id: int | None
    files: list[str]
    compression: str
    now_ms: int
    round_robin_start: int
    partition_counts: dict[str, int]
    #: ``[topic, partition, log end offset before the commit, rows planned]`` per partition.
    starts: list[tuple[str, int, int, int]]

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "files": self.files,
            "compression": self.compression,
            "now_ms": self.now_ms,
            "round_robin_start": self.round_robin_start,
            "partition_counts": self.partition_counts,
            "starts": [list(s) for s in self.starts],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PendingCommit:
        batch_id = doc["batch_id"]
        return cls(
            batch_id=None if batch_id is None else int(batch_id),
            files=[str(f) for f in doc["files"]],
            compression=str(doc["compression"]),
            now_ms=int(doc["now_ms"]),
            round_robin_start=int(doc["round_robin_start"]),
            partition_counts={str(k): int(v) for k, v in doc["partition_counts"].items()},
            starts=[(str(t), int(p), int(o), int(n)) for t, p, o, n in doc["starts"]],
        )


@dataclass
class Journal:
    """One sink's journal file (see the module doc)."""

    sink_id: str
    committed_batch: int | None = None
    pending: PendingCommit | None = None

    def encode(self) -> bytes:
        doc = {
            "version": JOURNAL_VERSION,
            "sink_id": self.sink_id,
            "committed_batch": self.committed_batch,
            "pending": None if self.pending is None else self.pending.to_json(),
        }
        return json.dumps(doc, indent=1).encode() + b"\n"


def read_journal(fs: FileSystem, path: str) -> Journal | None:
    """The journal at ``path``, or None when there is none; a damaged one raises."""
    if not fs.exists(path):
        return None
    try:
        doc = json.loads(fs.read_file(path).decode("utf-8"))
        if doc.get("version") != JOURNAL_VERSION:
            raise ValueError(f"unknown version {doc.get('version')!r}")
        committed = doc["committed_batch"]
        pending = doc["pending"]
        return Journal(
            sink_id=str(doc["sink_id"]),
            committed_batch=None if committed is None else int(committed),
            pending=None if pending is None else PendingCommit.from_json(pending),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StorageError(
            f"the Spark sink journal {path} is damaged ({exc}); it records which rows of an "
            "interrupted write are in the log, so it is not ignored: inspect it by hand"
        ) from exc


def write_journal(fs: FileSystem, path: str, journal: Journal) -> None:
    fs.makedirs(os.path.dirname(path))
    write_file_atomically(fs, path, journal.encode())


def remove_staged(paths: list[str]) -> None:
    """Delete staged files, then their directories once empty (best effort: garbage only)."""
    dirs = set()
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        dirs.add(os.path.dirname(path))
    for directory in dirs:
        with contextlib.suppress(OSError):
            os.rmdir(directory)  # not empty: another attempt's file, removed with its write


def remove_staging_dirs(data_dir: str, write_ids: set[str]) -> None:
    """Delete whole staging directories, including files of failed or speculative attempts."""
    for write_id in write_ids:
        shutil.rmtree(staging_dir(data_dir, write_id), ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.join(data_dir, STAGING_DIR))
