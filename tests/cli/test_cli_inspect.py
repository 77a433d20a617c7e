"""compactlog.storage.inspect: dump_log_file's Kafka-format lines and verify_data_dir's checks,
one kind of damage at a time, and the promise that neither writes anything."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import (
    CompactlogError,
    CorruptRecordError,
    StorageError,
    UnsupportedFileError,
)
from compactlog.records import Compression, build_batch, read_header
from compactlog.storage.inspect import VerifyReport, dump_log_file, verify_data_dir
from compactlog.storage.store import Store

T0 = 1_700_000_000_000
SEG0 = "00000000000000000000"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 1
        return self.now


def build_data_dir(path: Path) -> Path:
    """Two topics, several segments each, index entries in every segment, a multi-batch append."""
    with Store.open(path, clock=Clock()) as store:
        store.create_topic("alpha", 2, {"segment.bytes": "1024", "index.interval.bytes": "64"})
        store.create_topic("beta", 1, {"cleanup.policy": "compact", "segment.bytes": "2048",
                                       "index.interval.bytes": "100"})  # fmt: skip
        for i in range(40):
            store.append("alpha", i % 2, [(f"k{i}".encode(), f"value-{i}".encode() * (i % 4 + 1))])
        for i in range(30):
            records = [
                (f"key{j}".encode(), None if j == i % 5 else b"v" * j) for j in range(i % 3 + 1)
            ]
            store.append("beta", 0, records, compression="gzip" if i % 4 == 0 else "none")
        # One append of two batches (as a producer request may carry): Kafka indexes it by its
        # largest offset at the position of its first batch.
        two = build_batch([(b"a", b"1")], timestamps=T0) + build_batch(
            [(b"b", b"2"), (b"c", b"3")], timestamps=T0 + 1
        )
        for _ in range(3):
            store.append_batch("beta", 0, two)
    return path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_data_dir(tmp_path_factory.mktemp("pristine") / "data")


@pytest.fixture
def data(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(pristine, target)
    return target


def batch_positions(log: Path) -> list[int]:
    raw = log.read_bytes()
    positions, position = [], 0
    while position < len(raw):
        positions.append(position)
        position += read_header(raw, position).size_in_bytes
    return positions


def segments(data: Path, partition: str) -> list[Path]:
    return sorted((data / partition).glob("*.log"))


def patch(path: Path, position: int, new: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[position : position + len(new)] = new
    path.write_bytes(bytes(raw))


def problems(report: VerifyReport) -> list[str]:
    return [str(p) for p in report.problems]


def tree_snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    snapshot = {}
    for directory, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            full = os.path.join(directory, name)
            stat = os.lstat(full)
            digest = ""
            if os.path.isfile(full):
                digest = hashlib.sha256(Path(full).read_bytes()).hexdigest()
            snapshot[os.path.relpath(full, root)] = (stat.st_size, stat.st_mtime_ns, digest)
    return snapshot


# --------------------------------------------------------------------------------------------
# clean data


def test_a_clean_data_dir_verifies(data: Path) -> None:
    report = verify_data_dir(str(data))
    assert report.ok, problems(report)
    assert report.notes == []
    assert (report.partitions, report.segments) == (3, len(list(data.glob("*/*.log"))))
    assert report.segments > 5
    assert report.batches == 40 + 30 + 6
    assert report.summary().startswith("OK: 3 partition(s)")
    # The multi-batch appends are indexed by their largest offset at their first batch.
    index = (data / "beta-0").glob("*.index")
    assert any(path.stat().st_size for path in index)


def test_verify_never_writes(data: Path) -> None:
    before = tree_snapshot(data)
    verify_data_dir(str(data))
    log = segments(data, "alpha-0")[0]
    patch(log, 30, b"\xff")
    (data / "alpha-0" / f"{SEG0}.index").write_bytes(b"\x00" * 24)
    damaged = tree_snapshot(data)
    assert not verify_data_dir(str(data)).ok
    for path in data.glob("*/*"):
        if path.suffix in (".log", ".index", ".timeindex"):
            list_lines(path)
    assert tree_snapshot(data) == damaged
    assert before != damaged


def list_lines(path: Path) -> list[str]:
    lines: list[str] = []
    try:
        for line in dump_log_file(str(path)):
            lines.append(line)
    except CompactlogError:
        pass
    return lines


def test_inspection_opens_files_read_only(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Works on a read-only copy (a backup, a snapshot mount): every open is O_RDONLY."""
    flags_seen: list[int] = []
    real_open = os.open

    def spying_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        flags_seen.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spying_open)
    flip_record_byte(data)
    verify_data_dir(str(data))
    for path in data.glob("*/*"):
        list_lines(path)
    assert flags_seen
    assert all(flags & os.O_ACCMODE == os.O_RDONLY for flags in flags_seen)
    assert not any(flags & (os.O_CREAT | os.O_TRUNC | os.O_APPEND) for flags in flags_seen)


def test_verify_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        verify_data_dir(str(tmp_path / "missing"))


def test_an_unclean_shutdown_leaves_preallocated_indexes(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "data", clock=Clock())
    store.create_topic("t")
    store.append("t", 0, [(b"k", b"v")])
    store.abandon()
    report = verify_data_dir(str(tmp_path / "data"))
    # The active segment of a crashed writer (compactlog, or Kafka after a SIGKILL): its
    # pre-allocated index space is what the loader rebuilds anyway, so a note, not a problem.
    assert report.ok, problems(report)
    zero_notes = [str(n) for n in report.notes if "are zero: pre-allocated space" in str(n)]
    assert len(zero_notes) == 2 and all("after an unclean stop" in n for n in zero_notes)
    assert any(".kafka_cleanshutdown" in str(n) for n in report.notes)
    # dump-log stops at the first zero entry, as Kafka's does, then reports the zero space.
    index = tmp_path / "data" / "t-0" / f"{SEG0}.index"
    assert index.stat().st_size == 10 * 1024 * 1024
    lines: list[str] = []
    with pytest.raises(CompactlogError, match="entries 0-1310719 are zero"):
        lines.extend(dump_log_file(str(index)))
    assert lines == ["offset: 0 position: 0"]
    # Opening the store repairs it.
    Store.open(tmp_path / "data").close()
    assert verify_data_dir(str(tmp_path / "data")).ok
    assert not any("are zero" in str(n) for n in verify_data_dir(str(tmp_path / "data")).notes)


def test_zero_index_space_is_a_problem_after_a_clean_shutdown_or_before_the_last_segment(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with Store.open(data, clock=Clock()) as store:
        store.create_topic("t")
        store.append("t", 0, [(b"k", b"v")])
        store.roll("t", 0)
        store.append("t", 0, [(b"k", b"w")])
    first = data / "t-0" / f"{SEG0}.index"
    with first.open("ab") as f:
        f.write(bytes(8 * 4))  # zero entries after the real ones of an inactive segment
    assert any("are zero" in p for p in problems(verify_data_dir(str(data))))
    (data / ".kafka_cleanshutdown").unlink()  # still a problem: not the crashed active segment
    assert any("are zero" in p for p in problems(verify_data_dir(str(data))))


# --------------------------------------------------------------------------------------------
# damage, one kind at a time

Damage = Callable[[Path], tuple[Path, int | None]]


def flip_record_byte(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-0")[1]
    position = batch_positions(log)[2]
    patch(log, position + 65, bytes([log.read_bytes()[position + 65] ^ 0x10]))
    return log, position


def flip_crc_field(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-1")[0]
    position = batch_positions(log)[1]
    patch(log, position + 17, bytes([log.read_bytes()[position + 17] ^ 0x01]))
    return log, position


def bad_magic(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-1")[0]
    position = batch_positions(log)[1]
    patch(log, position + 16, b"\x01")
    return log, position


def tiny_length(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "beta-0")[0]
    position = batch_positions(log)[3]
    patch(log, position + 8, struct.pack(">i", 5))
    return log, position


def huge_length(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "beta-0")[0]
    position = batch_positions(log)[3]
    patch(log, position + 8, struct.pack(">i", 2**30))
    return log, position


def torn_tail(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-0")[-1]
    position = batch_positions(log)[-1]
    log.write_bytes(log.read_bytes()[: position + 20])
    return log, position


def garbage_appended(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-0")[0]
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x02garbage!")
    return log, size


def lower_base_offset(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-1")[0]
    position = batch_positions(log)[2]
    base = read_header(log.read_bytes(), position).base_offset
    patch(log, position, struct.pack(">q", base - 1))  # outside the CRC
    return log, position


def last_base_offset_moved(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-1")[-1]
    position = batch_positions(log)[-1]
    base = read_header(log.read_bytes(), position).base_offset
    patch(log, position, struct.pack(">q", base + 4))  # a gap: only the checkpoint can tell
    return data / "recovery-point-offset-checkpoint", None


def epoch_goes_down(data: Path) -> tuple[Path, int | None]:
    log = segments(data, "alpha-0")[0]
    position = batch_positions(log)[1]
    patch(log, position + 12, struct.pack(">i", 7))  # outside the CRC; the next batch has 0
    return log, batch_positions(log)[2]


def offsets_cross_segments(data: Path) -> tuple[Path, int | None]:
    first, second = segments(data, "alpha-0")[:2]
    position = batch_positions(first)[-1]
    base = int(second.name.split(".")[0])
    raw = first.read_bytes()
    delta = read_header(raw, position).last_offset_delta
    patch(first, position, struct.pack(">q", base - delta))  # its last offset = next base
    return first, position


def index_deleted(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.index"
    index.unlink()
    return index, None


def time_index_deleted(data: Path) -> tuple[Path, int | None]:
    index = data / "beta-0" / f"{SEG0}.timeindex"
    index.unlink()
    return index, None


def index_odd_length(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-1" / f"{SEG0}.index"
    index.write_bytes(index.read_bytes()[:-3])
    return index, None


def index_zero_filled(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-1" / f"{SEG0}.index"
    index.write_bytes(bytes(index.stat().st_size))
    return index, 0


def index_out_of_order(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.index"
    raw = index.read_bytes()
    assert len(raw) >= 16
    index.write_bytes(raw[8:16] + raw[:8] + raw[16:])
    return index, 8


def index_not_at_a_batch(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.index"
    relative, position = struct.unpack(">ii", index.read_bytes()[:8])
    patch(index, 0, struct.pack(">ii", relative, position + 1))
    return index, 0


def index_wrong_offset(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.index"
    relative, position = struct.unpack(">ii", index.read_bytes()[:8])
    patch(index, 0, struct.pack(">ii", relative - 1, position))
    return index, 0


def time_index_out_of_order(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.timeindex"
    raw = index.read_bytes()
    assert len(raw) >= 24
    index.write_bytes(raw[12:24] + raw[:12] + raw[24:])
    return index, 12


def time_index_wrong_timestamp(data: Path) -> tuple[Path, int | None]:
    index = data / "alpha-0" / f"{SEG0}.timeindex"
    timestamp, relative = struct.unpack(">qi", index.read_bytes()[:12])
    patch(index, 0, struct.pack(">qi", timestamp - 1, relative))
    return index, 0


def orphan_index(data: Path) -> tuple[Path, int | None]:
    orphan = data / "alpha-0" / "00000000000000099999.index"
    orphan.write_bytes(b"")
    return orphan, None


def topics_file_damaged(data: Path) -> tuple[Path, int | None]:
    path = data / "compactlog-topics.json"
    path.write_text('{"version": 1, "topics": {"alpha": {"partitions": "two"}}}')
    return path, None


def checkpoint_malformed(data: Path) -> tuple[Path, int | None]:
    path = data / "log-start-offset-checkpoint"
    path.write_text("0\n5\nalpha 0\n")
    return path, None


def partition_dir_missing(data: Path) -> tuple[Path, int | None]:
    shutil.rmtree(data / "alpha-1")
    return data / "alpha-1", None


DAMAGE: dict[str, tuple[Damage, str]] = {
    "record byte flipped": (flip_record_byte, "CRC mismatch"),
    "crc field flipped": (flip_crc_field, "CRC mismatch"),
    "magic changed": (bad_magic, "unsupported magic 1"),
    "length below 14": (tiny_length, "record size 5 is smaller than the minimum"),
    "length past the end": (huge_length, "torn tail: the batch here claims 1073741836 bytes"),
    "torn tail": (torn_tail, "torn tail"),
    "garbage appended": (garbage_appended, "record size 2 is smaller"),
    "base offset lowered": (lower_base_offset, "is not after the previous batch's last offset"),
    "last base offset moved": (last_base_offset_moved, "recovery point"),
    "leader epoch goes down": (epoch_goes_down, "partition leader epoch 0 is below"),
    "offsets cross segments": (offsets_cross_segments, "reaches into the next segment"),
    "index deleted": (index_deleted, "missing (the loader rebuilds it"),
    "time index deleted": (time_index_deleted, "missing (the loader rebuilds it"),
    "index odd length": (index_odd_length, "is not a multiple of the entry size 8"),
    "index zero-filled": (index_zero_filled, "are zero"),
    "index out of order": (index_out_of_order, "is not after"),
    "index not at a batch": (index_not_at_a_batch, "not at a batch"),
    "index wrong offset": (index_wrong_offset, "and no batch before the next entry ends at"),
    "time index out of order": (time_index_out_of_order, "is not after"),
    "time index wrong timestamp": (time_index_wrong_timestamp, "differs from the max timestamp"),
    "orphan index": (orphan_index, "orphaned index"),
    "topics file damaged": (topics_file_damaged, "the store keeps it aside"),
    "checkpoint malformed": (checkpoint_malformed, "malformed"),
    "partition dir missing": (partition_dir_missing, "partition directory missing"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_reported_with_file_and_position(data: Path, kind: str) -> None:
    damage, expected = DAMAGE[kind]
    path, position = damage(data)
    report = verify_data_dir(str(data))
    assert not report.ok
    where = f"{path}: position {position}: " if position is not None else f"{path}: "
    matching = [p for p in problems(report) if p.startswith(where) and expected in p]
    assert matching, (where, expected, problems(report))


def test_foreign_files_are_notes(data: Path) -> None:
    (data / "README").write_text("hello")
    (data / "alpha-0" / "notes.txt").write_text("hello")
    (data / "alpha-0" / f"{SEG0}.log.deleted").write_bytes(b"")
    (data / "lost+found").mkdir()
    (data / "gamma-0").mkdir()
    (data / "alpha-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    report = verify_data_dir(str(data))
    assert report.ok, problems(report)
    notes = "\n".join(str(n) for n in report.notes)
    assert "README: foreign file, ignored" in notes
    assert "notes.txt: foreign file, ignored" in notes
    assert ".log.deleted: leftover of a cleaner swap, a deletion or a salvage" in notes
    assert "lost+found: not a partition directory, ignored" in notes
    assert "gamma-0: not a partition of a topic in compactlog-topics.json" in notes
    assert "marked -delete" in notes


def test_problems_per_file_are_capped(data: Path) -> None:
    index = data / "alpha-0" / f"{SEG0}.index"
    index.write_bytes(bytes(range(256)) * 40)  # 1280 nonsense entries
    report = verify_data_dir(str(data))
    mine = [p for p in problems(report) if p.startswith(str(index))]
    assert len(mine) == 11
    assert mine[-1].endswith("more problem(s) in this file")


# --------------------------------------------------------------------------------------------
# dump_log_file


def test_dump_of_a_batch_follows_kafka(tmp_path: Path) -> None:
    log = tmp_path / f"{SEG0}.log"
    batch = build_batch(
        [(b"grape", b"$2.69", [("h1", b"x"), ("h2", None)]), (b"lime", None)],
        timestamps=[T0, T0 + 5],
        partition_leader_epoch=0,
    )
    log.write_bytes(batch)
    crc = read_header(batch).crc
    assert list(dump_log_file(str(log))) == [
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {T0 + 5} size: "
        f"{len(batch)} magic: 2 compresscodec: none crc: {crc} isvalid: true",
        f"| offset: 0 CreateTime: {T0} keySize: 5 valueSize: 5 sequence: -1 headerKeys: [h1,h2] "
        "key: grape payload: $2.69",
        f"| offset: 1 CreateTime: {T0 + 5} keySize: 4 valueSize: -1 sequence: -1 headerKeys: [] "
        "key: lime",
    ]
    assert len(list(dump_log_file(str(log), print_data_log=False))) == 2


def test_dump_of_special_batches(tmp_path: Path) -> None:
    from compactlog.records import build_end_txn_marker_batch

    log = tmp_path / f"{100:020d}.log.deleted"
    data = build_batch(
        [(b"k", b"v")], base_offset=100, timestamps=T0, compression=Compression.ZSTD,
        producer_id=7, producer_epoch=1, base_sequence=2**31 - 1, delete_horizon_ms=T0 + 9,
    )  # fmt: skip
    marker = build_end_txn_marker_batch(
        commit=True, producer_id=7, producer_epoch=1, coordinator_epoch=3, base_offset=101,
        timestamp=T0,
    )  # fmt: skip
    log.write_bytes(data + marker)
    lines = list(dump_log_file(str(log)))
    assert lines[0] == "Log starting offset: 100"
    assert "producerId: 7 producerEpoch: 1" in lines[1]
    assert f"deleteHorizonMs: OptionalLong[{T0 + 9}]" in lines[1]
    assert "compresscodec: zstd" in lines[1]
    assert "sequence: 2147483647" in lines[2]
    assert "isTransactional: true isControl: true" in lines[3]
    assert lines[4].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")


def test_dump_of_a_damaged_log_yields_then_raises(data: Path) -> None:
    batches = len(batch_positions(segments(data, "alpha-0")[-1]))
    path, position = torn_tail(data)
    lines: list[str] = []
    with pytest.raises(CorruptRecordError, match=rf"{path}: position {position}: torn tail"):
        for line in dump_log_file(str(path)):
            lines.append(line)
    assert lines[-1].startswith("Found 20 invalid bytes at the end of")
    assert sum(line.startswith("baseOffset") for line in lines) == batches - 1


def test_dump_of_a_damaged_index_names_the_entry(data: Path) -> None:
    path, _ = index_not_at_a_batch(data)
    with pytest.raises(CompactlogError, match=rf"{path}: position 0: entry 0 .* not at a batch"):
        list(dump_log_file(str(path)))


def test_dump_of_other_files(data: Path, tmp_path: Path) -> None:
    lines = list(dump_log_file(str(data / "log-start-offset-checkpoint")))
    assert "topic: alpha partition: 1 offset: 0" in lines
    with pytest.raises(UnsupportedFileError):
        dump_log_file(str(data / "compactlog-topics.json"))
    with pytest.raises(StorageError):
        dump_log_file(str(tmp_path / "nothing.log"))
    txn = tmp_path / f"{SEG0}.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 7, 10, 20, 15))
    assert list(dump_log_file(str(txn))) == [
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 20 lastStableOffset: 15"
    ]
    txn.write_bytes(txn.read_bytes() + b"\x00")
    with pytest.raises(CompactlogError, match="not a multiple of 34"):
        list(dump_log_file(str(txn)))
    topics = json.loads((data / "compactlog-topics.json").read_text())
    assert set(topics["topics"]) == {"alpha", "beta"}
