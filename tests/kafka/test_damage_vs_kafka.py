"""Issue 17 against the oracle: the same damaged log directory opened by Kafka and by
compactlog, after a crash (no clean-shutdown marker, every recovery point at 0, so both re-read
every batch). compactlog must keep at least every record Kafka keeps, and, where Kafka cuts a
segment at the damage and deletes every later one, keep the valid batches after the damage too.

Three partitions, damaged three ways: a CRC-covered byte flipped in the middle of the first
(sealed) segment; the active segment truncated inside a batch; a flipped byte in the middle
segment and garbage appended to the active one.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.records import build_batch
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.quarantine import list_quarantined
from tests.conftest import ManualClock
from tests.kafka.harness import (
    Consumed,
    KafkaBroker,
    java_consume,
    read_offset_checkpoint,
    store_view,
    write_offset_checkpoint,
)
from tests.managed import open_managed

pytestmark = pytest.mark.kafka

TOPIC = "damaged"
BATCHES = 24


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x20
    path.write_bytes(bytes(data))


def _middle_batch(segment: Path) -> int:
    """The position of the middle batch of ``segment`` (walking its framing by hand)."""
    data = segment.read_bytes()
    positions, at = [], 0
    while at < len(data):
        positions.append(at)
        at += int.from_bytes(data[at + 8 : at + 12], "big") + 12
    return positions[len(positions) // 2]


def _damage(data_dir: Path) -> None:
    rng = random.Random(17)
    p0 = _segments(data_dir / f"{TOPIC}-0")
    _flip(p0[0], _middle_batch(p0[0]) + 70)  # a record byte (CRC-covered)
    p1 = _segments(data_dir / f"{TOPIC}-1")
    cut = _middle_batch(p1[-1]) + 30
    p1[-1].write_bytes(p1[-1].read_bytes()[:cut])
    p2 = _segments(data_dir / f"{TOPIC}-2")
    _flip(p2[1], _middle_batch(p2[1]) + 64)
    with open(p2[-1], "ab") as f:
        f.write(rng.randbytes(37))


def _as_after_a_crash(data_dir: Path) -> None:
    (data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    path = data_dir / "recovery-point-offset-checkpoint"
    points = read_offset_checkpoint(path)
    write_offset_checkpoint(path, {tp: (0 if tp[0] == TOPIC else o) for tp, o in points.items()})


def test_compactlog_keeps_every_record_kafka_keeps_from_a_damaged_directory(
    kafka: Callable[..., KafkaBroker], tmp_path: Path
) -> None:
    broker = kafka(config={"log.cleaner.enable": "false"})
    done = broker.tool("kafka-topics", "--create", "--topic", TOPIC, "--partitions", "3")
    assert done.returncode == 0, done.stderr
    broker.stop()

    clock = ManualClock(int(time.time() * 1000) - 60_000)
    written: dict[tuple[int, int], bytes] = {}
    with open_managed(broker.data_dir, clock=clock) as store:
        for partition in range(3):
            for i in range(BATCHES):
                value = b"p%d-value-%03d" % (partition, i)
                offset = store.append_batch(
                    TOPIC, partition, build_batch([(b"k%d" % i, value)], timestamps=clock())
                )
                written[(partition, offset)] = value
                if i % 8 == 7 and i < BATCHES - 1:
                    store.log(TOPIC, partition).roll()  # Kafka's segment.bytes is >= 1 MiB
            assert len(store.segments(TOPIC, partition)) == 3
    _damage(broker.data_dir)
    ours = tmp_path / "compactlog-copy"
    shutil.copytree(broker.data_dir, ours)
    _as_after_a_crash(broker.data_dir)
    _as_after_a_crash(ours)

    broker.start()
    theirs = java_consume(broker.bootstrap, TOPIC)
    broker.stop()
    with open_managed(ours, clock=clock) as store:
        kept = store_view(store, TOPIC)

    def by_partition(records: list[Consumed]) -> dict[int, dict[int, bytes | None]]:
        out: dict[int, dict[int, bytes | None]] = {0: {}, 1: {}, 2: {}}
        for r in records:
            out[r.partition][r.offset] = r.value
        return out

    kafka_kept, compactlog_kept = by_partition(theirs), by_partition(kept)
    for partition in range(3):
        k, c = kafka_kept[partition], compactlog_kept[partition]
        assert k.items() <= c.items(), f"partition {partition}: Kafka kept records compactlog lost"
        for offset, value in c.items():
            assert written[(partition, offset)] == value, (partition, offset)
        lost = set(o for p, o in written if p == partition) - set(c)
        quarantined = list_quarantined(OsFileSystem(), str(ours / f"{TOPIC}-{partition}"))
        for offset in lost:
            assert any(
                q.first_offset <= offset
                and (q.next_valid_offset is None or offset < q.next_valid_offset)
                for q in quarantined
            ), f"partition {partition}: offset {offset} lost and not in quarantine"
    # Where the damage is not at the end, Kafka cuts the rest of the log; compactlog keeps it.
    assert len(compactlog_kept[0]) > len(kafka_kept[0])
    assert len(compactlog_kept[2]) > len(kafka_kept[2])
    print(
        "records kept of",
        BATCHES,
        "per partition: Kafka",
        [len(kafka_kept[p]) for p in range(3)],
        "compactlog",
        [len(compactlog_kept[p]) for p in range(3)],
    )
