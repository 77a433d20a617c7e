"""Kafka's KRaft metadata log written record by record, in the encoding of Kafka's generated
message classes, for the tests of storage/kraft_metadata.py and storage/topic_catalog.py."""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Sequence
from pathlib import Path

from compactlog.records import build_batch
from compactlog.records.varint import encode_unsigned_varint
from compactlog.storage.kraft_metadata import METADATA_DIR, render_uuid

CLUSTER_DEFAULT = ""
TOPIC, BROKER = 2, 4


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return encode_unsigned_varint(0)
    raw = text.encode()
    return encode_unsigned_varint(len(raw) + 1) + raw


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    # frame version 1, api key, version, the fields, then an empty tagged-field section
    return bytes([1]) + encode_unsigned_varint(api_key) + bytes([version]) + body + b"\x00"


def topic_record(name: str, topic_id: bytes) -> bytes:
    return _frame(2, 0, _compact_string(name) + topic_id)


def partition_record(partition: int, topic_id: bytes) -> bytes:
    # version 2: replicas [1], isr [1], removing [], adding [], leader 1, epochs, directories
    arrays = b"\x02\x00\x00\x00\x01" * 2 + b"\x01" * 2
    rest = struct.pack(">iii", 1, 0, 0) + b"\x02" + bytes(16)
    return _frame(3, 2, struct.pack(">i", partition) + topic_id + arrays + rest)


def config_record(kind: int, resource: str, name: str, value: str | None) -> bytes:
    body = bytes([kind]) + _compact_string(resource) + _compact_string(name)
    return _frame(4, 0, body + _compact_string(value))


def remove_topic_record(topic_id: bytes) -> bytes:
    return _frame(9, 0, topic_id)


def feature_level_record(name: str, level: int) -> bytes:
    return _frame(12, 0, _compact_string(name) + struct.pack(">h", level))


BEGIN = _frame(23, 0, b"")
END = _frame(24, 0, b"")
ABORT = _frame(25, 0, b"")


def new_id() -> bytes:
    return uuid.uuid4().bytes


class MetadataLog:
    """Writes ``__cluster_metadata-0`` of a log directory: segments and snapshots."""

    def __init__(self, data_dir: Path, node_id: int = 1) -> None:
        self.dir = data_dir / METADATA_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "meta.properties").write_text(
            f"#\nnode.id={node_id}\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\nversion=1\n"
            "cluster.id=4F5jbyZxTNKBmHtR4QM1Hw\n"
        )
        (self.dir / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1}')
        self.next_offset = 0

    def append(self, values: Sequence[bytes], segment: int = 0) -> int:
        """One batch of records at the log end, in the segment with base ``segment``."""
        batch = build_batch(
            [(None, v) for v in values], base_offset=self.next_offset, timestamps=1000
        )
        with (self.dir / f"{segment:020d}.log").open("ab") as f:
            f.write(batch)
        self.next_offset += len(values)
        return self.next_offset

    def control(self, segment: int = 0) -> None:
        """A control batch (a leader change: key type 2), which carries no metadata."""
        batch = build_batch(
            [(b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01")],
            base_offset=self.next_offset,
            timestamps=1000,
            is_control=True,
        )
        with (self.dir / f"{segment:020d}.log").open("ab") as f:
            f.write(batch)
        self.next_offset += 1

    def snapshot(self, end_offset: int, values: Sequence[bytes], epoch: int = 1) -> None:
        """A snapshot holding the state below ``end_offset``: header, records, footer."""
        header = build_batch(
            [(b"\x00\x00\x00\x04", b"\x00\x00" + bytes(8))], timestamps=1000, is_control=True
        )
        body = build_batch([(None, v) for v in values], base_offset=1, timestamps=1000)
        footer = build_batch(
            [(b"\x00\x00\x00\x05", b"\x00\x00")],
            base_offset=1 + len(values),
            timestamps=1000,
            is_control=True,
        )
        (self.dir / f"{end_offset:020d}-{epoch:010d}.checkpoint").write_bytes(
            header + body + footer
        )


def partition_dirs(data_dir: Path, topic: str, count: int, topic_id: bytes | None) -> None:
    """Partition directories as Kafka leaves them: empty logs and ``partition.metadata``."""
    for p in range(count):
        d = data_dir / f"{topic}-{p}"
        d.mkdir(parents=True, exist_ok=True)
        if topic_id is not None:
            (d / "partition.metadata").write_text(f"version: 0\ntopic_id: {render_uuid(topic_id)}")
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
