"""Issue 17, findings 1, 2, 6 and 9: damage never costs more than the damaged bytes.

Each test reproduces a finding as the issue wrote it, on a fresh data directory, and checks the
new behaviour: sealed segments are never cut after a clean shutdown, damage is quarantined
before anything is cut, every valid batch is kept, and every read path fails loudly (naming
the file and the position) at damage after delivering what comes before it.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from compactlog.cli.main import main as cli
from compactlog.errors import CorruptRecordError
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.quarantine import list_quarantined
from compactlog.storage.store import Store
from tests.managed import manager_of

StoreFactory = Callable[..., Store]
MAGIC_POSITION = 16
RECORDS_COUNT_POSITION = 57


def part_dir(tmp_path: Path, topic: str = "t") -> Path:
    return tmp_path / "data" / f"{topic}-0"


def digest(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.suffix == ".log"
    }


def thirty_then_roll(open_store: StoreFactory) -> tuple[Store, list[int]]:
    """Finding 1's set-up: 30 one-record batches to a compacted topic, roll, one more."""
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    for i in range(30):
        store.append("t", 0, [(b"k%d" % (i % 3), b"v%d" % i)])
    store.log("t", 0).roll()
    store.append("t", 0, [(b"k0", b"v30")])
    positions = [b.position for b in store.log("t", 0).segments()[0].batches()]
    return store, positions


def poke(path: Path, position: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("victim", [5, 0])
def test_finding_1_a_flipped_byte_in_a_sealed_segment_costs_only_that_batch(
    open_store: StoreFactory, tmp_path: Path, victim: int
) -> None:
    store, positions = thirty_then_roll(open_store)
    manager_of(store).close()
    first = part_dir(tmp_path) / "00000000000000000000.log"
    poke(first, positions[victim] + MAGIC_POSITION, 0xFF)
    before = digest(part_dir(tmp_path))

    again = open_store()
    stats = again.load_stats[("t", 0)]
    # Nothing cut after a clean shutdown: the damage stays in place and is reported.
    assert digest(part_dir(tmp_path)) == before
    [(path, damage)] = stats.damaged_in_place
    assert path == str(first) and damage.start == positions[victim]
    assert again.log_end_offset("t", 0) == 31
    # A read delivers every record before the damage, then names the file and the position.
    seen = []
    with pytest.raises(CorruptRecordError, match=rf"{first}: position {positions[victim]}"):
        for record in again.read("t", 0):
            seen.append(record.offset)
    assert seen == list(range(victim))
    # Reads beyond the damage work: the rebuilt index has an entry past it.
    assert [r.offset for r in again.read("t", 0, victim + 1)] == list(range(victim + 1, 31))
    # The cleaner leaves the partition alone and changes no byte.
    result = manager_of(again).clean_log("t", 0)
    assert ("t", 0) in result.uncleanable
    assert digest(part_dir(tmp_path)) == before

    # The operator's step: salvage moves the damaged batch to quarantine and keeps the rest.
    stats = again.salvage("t", 0)
    [kept] = stats.quarantined
    size = positions[victim + 1] - positions[victim]
    assert (kept.start, kept.size, kept.offsets) == (positions[victim], size, f"{victim}..{victim}")
    assert [r.offset for r in again.read("t", 0)] == [o for o in range(31) if o != victim]
    assert again.log_end_offset("t", 0) == 31
    assert len(list_quarantined(OsFileSystem(), str(part_dir(tmp_path)))) == 1


def test_finding_2_garbage_after_the_active_segment_is_quarantined_not_hidden(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    for i in range(4):
        store.append("t", 0, [(b"k", b"v%d" % i)])
    manager_of(store).close()
    active = part_dir(tmp_path) / "00000000000000000000.log"
    garbage = random.Random(2).randbytes(37)
    with open(active, "ab") as f:
        f.write(garbage)

    again = open_store()
    [kept] = again.load_stats[("t", 0)].quarantined
    assert Path(kept.path).read_bytes() == garbage
    assert again.append("t", 0, [(b"k", b"after")]) == 4
    assert [r.value for r in again.read("t", 0)] == [b"v0", b"v1", b"v2", b"v3", b"after"]
    manager_of(again).close()
    third = open_store()
    assert [r.value for r in third.read("t", 0, 4)] == [b"after"]
    assert third.load_stats[("t", 0)].indexes_rebuilt == 0


def ten_batches_with_a_flip(
    open_store: StoreFactory, tmp_path: Path, offset: int, into: int, bit: int
) -> list[int]:
    """Ten one-record batches in one segment, closed cleanly, then byte ``into`` of the batch
    of ``offset`` XOR ``bit``; returns the batch positions."""
    store = open_store()
    store.create_topic("t", 1)
    for i in range(10):
        store.append("t", 0, [(b"k%d" % i, b"v%d" % i)])
    positions = [b.position for b in store.log("t", 0).active_segment.batches()]
    manager_of(store).close()
    log = part_dir(tmp_path) / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[positions[offset] + into] ^= bit
    log.write_bytes(bytes(data))
    return positions


def test_finding_6_a_flipped_records_count_is_an_error_not_a_skip(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    # 1 record -> 0 records in the batch of offset 6
    positions = ten_batches_with_a_flip(open_store, tmp_path, 6, RECORDS_COUNT_POSITION + 3, 1)

    again = open_store()
    seen = []
    with pytest.raises(CorruptRecordError, match=rf"position {positions[6]}.*CRC mismatch"):
        for record in again.read("t", 0):
            seen.append(record.offset)
    assert seen == list(range(6))
    # The broker's read (Log.read) returns the batches before the damage, then raises there.
    head = again.log("t", 0).read(0, 1 << 20)
    assert len(head) == positions[6]
    with pytest.raises(CorruptRecordError):
        again.log("t", 0).read(6, 1 << 20)
    # Offsets after the damage are served: the search steps over damage that ends below them.
    assert [r.offset for r in again.read("t", 0, 7)] == [7, 8, 9]


def test_finding_6_an_index_entry_in_order_but_wrong_is_not_trusted(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"index.interval.bytes": 1})
    for i in range(20):
        store.append("t", 0, [(b"k%d" % i, b"v%d" % i)])
    log = store.log("t", 0)
    entries = [(b.header.last_offset, b.position) for b in log.active_segment.batches()][1:]
    manager_of(store).close()
    index = part_dir(tmp_path) / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    # The entry for offset 11 (the 11th entry) points at the batch of offset 12 instead.
    k = [o for o, _ in entries].index(11)
    struct.pack_into(">i", raw, k * 8 + 4, entries[k + 1][1])
    index.write_bytes(bytes(raw))

    again = open_store()
    assert [r.offset for r in again.read("t", 0, 11)][:2] == [11, 12]


def test_finding_6_consume_prints_the_good_records_before_the_damage(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    positions = ten_batches_with_a_flip(open_store, tmp_path, 7, 68, 0x40)  # a value byte
    result = CliRunner().invoke(
        cli, ["--data-dir", str(tmp_path / "data"), "consume", "t", "--format", "%o %s\n"]
    )
    assert result.exit_code == 3, result.output
    assert result.stdout.splitlines() == [f"{i} v{i}" for i in range(7)]
    assert f"position {positions[7]}" in result.stderr


def test_salvage_and_quarantine_commands(open_store: StoreFactory, tmp_path: Path) -> None:
    store, positions = thirty_then_roll(open_store)
    manager_of(store).close()
    first = part_dir(tmp_path) / "00000000000000000000.log"
    poke(first, positions[5] + 40, 0x7F)  # inside the CRC-covered header
    data_dir = str(tmp_path / "data")
    run = CliRunner().invoke
    assert (
        "no quarantined ranges" in run(cli, ["--data-dir", data_dir, "quarantine", "list"]).output
    )

    done = run(cli, ["--data-dir", data_dir, "salvage", "t"])
    assert done.exit_code == 0, done.output
    size = positions[6] - positions[5]
    assert f"t-0: cut {size} damaged bytes (1 range(s) kept in quarantine)" in done.output
    listed = run(cli, ["--data-dir", data_dir, "quarantine", "list", "--json"])
    [entry] = __import__("json").loads(listed.output)
    assert (entry["partition"], entry["offsets"], entry["size"]) == ("t-0", "5..5", size)
    assert "CRC mismatch" in entry["reason"]
    verified = run(cli, ["--data-dir", data_dir, "verify"])
    assert verified.exit_code == 0, verified.output
    assert f"quarantined: bytes {positions[5]}..{positions[6]} of 00000000000000000000.log" in (
        verified.output
    )
    assert "; 1 quarantined range(s)" in verified.output
    shown = run(cli, ["quarantine", "show", entry["path"]])
    assert "batch at 0: offsets 5..5, CRC mismatch, 1 record(s) decode" in shown.output, (
        shown.output
    )
    refused = run(cli, ["quarantine", "delete", entry["path"]])
    assert refused.exit_code == 2 and os.path.exists(entry["path"])
    deleted = run(cli, ["quarantine", "delete", "--yes", entry["path"]])
    assert deleted.exit_code == 0 and not os.path.exists(entry["path"])
    assert not os.path.exists(entry["path"] + ".json")
    again = run(cli, ["--data-dir", data_dir, "salvage", "t"])
    assert "t-0: no damage found" in again.output


def test_finding_8_verify_judges_the_topics_file_and_snapshots_as_the_store_does(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """``verify`` used to pass a topics file the store refused and to ignore ``.snapshot``
    files; it now reports both, as the store treats them (set aside; deleted and rebuilt)."""
    from compactlog.records import build_batch
    from compactlog.storage.verify import verify_data_dir

    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    store.append_batch(
        "t", 0, build_batch([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=0)
    )
    manager_of(store).close()
    data = tmp_path / "data"
    assert verify_data_dir(str(data)).ok
    topics = data / "compactlog-topics.json"
    topics.write_text(topics.read_text().replace("cleanup.policy", "cleanup.rolicy"))
    [snapshot] = part_dir(tmp_path).glob("*.snapshot")
    snapshot.write_bytes(snapshot.read_bytes()[:-3])
    report = verify_data_dir(str(data))
    problems = {p.path: str(p) for p in report.problems}
    assert "cleanup.rolicy" in problems[str(topics)]
    assert "the loader deletes it" in problems[str(snapshot)]
    again = open_store()
    assert again.topic_config("t").compact  # restored from the partition's copy
    assert (data / "compactlog-topics.json.corrupt-1").exists()


def test_producer_state_replay_steps_over_damage_left_in_place(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """Without a snapshot the state is replayed from the log; damage left in place (below the
    recovery point, which recovery does not re-read) is stepped over, so the producer's later
    batches still count (its last sequence)."""
    from compactlog.records import build_batch

    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    for i in range(12):
        batch = build_batch([(b"k", b"v%d" % i)], producer_id=9, producer_epoch=0, base_sequence=i)
        store.append_batch("t", 0, batch)
    store.log("t", 0).roll()
    positions = [b.position for b in store.log("t", 0).segments()[0].batches()]
    store.flush()  # the recovery point passes the damage: recovery will not re-read it
    manager_of(store).abandon()
    poke(part_dir(tmp_path) / "00000000000000000000.log", positions[5] + MAGIC_POSITION, 0xFF)
    for snapshot in part_dir(tmp_path).glob("*.snapshot"):
        snapshot.unlink()
    again = open_store()
    [state] = again.producer_state("t", 0)
    assert state.producer_id == 9 and state.last_sequence == 11
