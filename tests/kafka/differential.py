"""The cleaner, differential: the same log cleaned by Kafka's cleaner and by compactlog's.

How one *stage* runs (``Differential.stage``):

1. **Produce.** A real Kafka broker with its cleaner off (``log.cleaner.enable=false``) takes
   the stage's appends: hand-built record batches sent as Produce requests
   (:class:`RawProducer`), so that each batch's records, codec, timestamps and producer fields
   are the workload's choice, and segments roll where the workload's timestamps make Kafka roll
   them (``segment.ms``). The broker stops cleanly.
2. **The same input twice.** The stopped log directory is copied ("pre"). A compactlog data
   directory gets the same topics and configs and, for every partition, Kafka's own segment,
   index and producer-snapshot files and checkpoints: both cleaners start from the same bytes.
3. **Kafka cleans.** compactlog first runs its own cleaner iterations on one copy
   (``LogManager.clean`` until none finds a log to clean, at ``now`` = the stage's start): the
   *natural* run, which says which logs it would clean, in which rounds, to which checkpoint.
   Kafka restarts with its cleaner on and cleans on its own; the stage waits until Kafka's
   ``cleaner-offset-checkpoint`` holds what compactlog's does (and nothing was cleaned for a
   while), then stops it cleanly. Its cleaner log gives every round (log, dirty section,
   figures).
4. **compactlog replays Kafka's rounds** on a second copy, one ``LogManager.clean_log`` per round,
   each at the time that round of Kafka's ran. A delete horizon is "the cleaning's start time +
   delete.retention.ms" (spec 5.5), so a round that stamped horizons gives its time exactly;
   the others are given the time their summary was logged (no byte depends on it).
5. **Compare** (:func:`compare_partition`): the replay's files against Kafka's, byte for byte:
   the segments (base offsets), every batch (a difference is reported field by field, with the
   records), the offset and time index entries; the rounds (dirty sections and the summary
   figures that do not depend on time) of all three runs; the cleaner checkpoint and the log
   start offsets of Kafka and the natural run.

The next stage appends to Kafka's cleaned log, so a later stage checks a second cleaning
(tombstones past their horizon, empty batches of producers that moved on) from identical input
again.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from compactlog.protocol import RequestHeader, decode_response, encode_request
from compactlog.protocol.messages.produce import InitProducerIdRequest, ProduceRequest
from compactlog.records import Compression, RecordBatch, build_batch
from tests.broker.helpers.wire import recv_frame
from tests.kafka.harness import (
    CleanerSummary,
    KafkaBroker,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from tests.managed import manager_of, open_managed

PRODUCE, INIT_PRODUCER_ID = 0, 22
#: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS,
#: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: a broker that has just started answers these
#: until its partitions and coordinators are ready.
RETRIABLE = frozenset({3, 6, 14, 15, 16})

# --- producing ---------------------------------------------------------------------------------


@dataclass
class Producer:
    """An idempotent producer's id, epoch and next sequence per partition."""

    producer_id: int
    epoch: int
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)


class RawProducer:
    """Sends hand-built record batches (Produce v7, ``acks=all``) to one broker.

    The batch is exactly what the broker stores, but for the base offset and the partition
    leader epoch it assigns (and the CRC that covers them).
    """

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def _call(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation += 1
        header = RequestHeader(api_key, version, self.correlation, "differential")
        self.sock.sendall(encode_request(header, body))
        return decode_response(recv_frame(self.sock), api_key, version).body

    def init_producer_id(self) -> Producer:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
        for _ in range(100):
            response = self._call(INIT_PRODUCER_ID, 1, request)
            if response.error_code not in RETRIABLE:
                break
            time.sleep(0.1)
        assert response.error_code == 0, response
        return Producer(response.producer_id, response.producer_epoch)

    def send(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        timestamps: int | Sequence[int],
        compression: str = "none",
        producer: Producer | None = None,
    ) -> int:
        """One batch of ``records``; returns its base offset."""
        fields: dict[str, Any] = {}
        if producer is not None:
            sequence = producer.sequences.get((topic, partition), 0)
            fields = {
                "producer_id": producer.producer_id,
                "producer_epoch": producer.epoch,
                "base_sequence": sequence,
            }
            producer.sequences[(topic, partition)] = sequence + len(records)
        batch = build_batch(
            records,
            timestamps=timestamps,
            compression=Compression.from_name(compression),
            **fields,
        )
        request = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )
        for _ in range(100):
            response = self._call(PRODUCE, 7, request)
            answer = response.responses[0].partition_responses[0]
            if answer.error_code not in RETRIABLE:
                break
            time.sleep(0.1)  # nothing was appended: the same batch again
        assert answer.error_code == 0, f"{topic}-{partition}: error {answer.error_code}"
        base_offset: int = answer.base_offset
        return base_offset


# --- batches, read without compactlog's reader ---------------------------------------------------

#: The v2 batch header (61 bytes): baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
#: attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
#: baseSequence, recordsCount.
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_FIELDS = (
    "baseOffset",
    "batchLength",
    "partitionLeaderEpoch",
    "magic",
    "crc",
    "attributes",
    "lastOffsetDelta",
    "baseTimestamp",
    "maxTimestamp",
    "producerId",
    "producerEpoch",
    "baseSequence",
    "recordsCount",
)
#: Attribute bit 6 (KIP-534): baseTimestamp holds the batch's delete horizon.
HAS_DELETE_HORIZON = 0x40


@dataclass
class Batch:
    position: int
    header: dict[str, int]
    data: bytes

    @property
    def has_horizon(self) -> bool:
        return bool(self.header["attributes"] & HAS_DELETE_HORIZON)


def read_batches(path: Path) -> list[Batch]:
    data = path.read_bytes()
    batches, position = [], 0
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        end = position + 12 + length
        assert end <= len(data), f"{path}: a batch at {position} runs past the end"
        values = _HEADER.unpack_from(data, position)
        batches.append(
            Batch(position, dict(zip(HEADER_FIELDS, values, strict=True)), data[position:end])
        )
        position = end
    assert position == len(data), f"{path}: {len(data) - position} bytes after the last batch"
    return batches


def read_index(path: Path, entry: str) -> list[tuple[int, int]]:
    """``.index`` entries (relative offset, position) or ``.timeindex`` ones (timestamp,
    relative offset), up to the first zero entry of a pre-allocated file."""
    if not path.exists():
        return []
    layout = struct.Struct(entry)
    data = path.read_bytes()
    out = []
    for i in range(len(data) // layout.size):
        value = layout.unpack_from(data, i * layout.size)
        if i > 0 and value == (0, 0):
            break
        out.append(value)
    return out


# --- comparing -----------------------------------------------------------------------------------


@dataclass
class Comparison:
    """What differs between Kafka's cleaned partition and compactlog's."""

    partition: str
    differences: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)  # differences with a named reason
    batches: int = 0
    identical_batches: int = 0

    def differ(self, what: str) -> None:
        self.differences.append(f"{self.partition}: {what}")


def _segments(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


#: The one difference with a reason that a comparison may allow: a snappy batch the cleaner
#: rebuilt. cramjam's snappy compressor (the Rust ``snap`` crate) writes the same bytes as
#: snappy-java's (C++ snappy 1.1.10) for full 32 KiB xerial blocks, but can differ by a few bytes
#: in a shorter block; the records are the same and Kafka reads either. Such a batch is then
#: compared without its batchLength, crc and compressed bytes, and the positions after it (in
#: the log and in the offset index) by batch instead of by byte.
SNAPPY_PAYLOAD = "compressed bytes of a rebuilt snappy batch (and its batchLength and crc)"
_SNAPPY = 2


def compare_partition(
    kafka_dir: Path, ours_dir: Path, name: str, allow_snappy: bool = False
) -> Comparison:
    """Compare two partition directories (``name`` is ``<topic>-<partition>``) batch by batch
    and index entry by index entry; a differing batch is reported field by field."""
    result = Comparison(name)
    theirs, ours = kafka_dir / name, ours_dir / name
    segments = _segments(theirs)
    if segments != _segments(ours):
        result.differ(f"segments: Kafka {segments}, compactlog {_segments(ours)}")
        return result
    for base in segments:
        stem = f"{base:020d}"
        kb = read_batches(theirs / f"{stem}.log")
        ob = read_batches(ours / f"{stem}.log")
        if [b.header["baseOffset"] for b in kb] != [b.header["baseOffset"] for b in ob]:
            result.differ(
                f"{stem}.log batches: Kafka at offsets {[b.header['baseOffset'] for b in kb]}, "
                f"compactlog at {[b.header['baseOffset'] for b in ob]}"
            )
            continue
        shifted = False
        for k, o in zip(kb, ob, strict=True):
            result.batches += 1
            if k.data == o.data:
                result.identical_batches += 1
                continue
            at = f"{stem}.log batch at offset {k.header['baseOffset']}"
            fields = [f for f in HEADER_FIELDS if k.header[f] != o.header[f]]
            if (
                allow_snappy
                and (k.header["attributes"] & 7) == _SNAPPY
                and set(fields) <= {"batchLength", "crc"}
                and records_of(k.data) == records_of(o.data)
            ):
                result.allowed.append(f"{name}: {at}: {SNAPPY_PAYLOAD}")
                shifted = True
                continue
            detail = ", ".join(f"{f} Kafka {k.header[f]} compactlog {o.header[f]}" for f in fields)
            k_records, o_records = records_of(k.data), records_of(o.data)
            if k_records != o_records:
                detail += f"; records: Kafka {k_records[:3]}..., compactlog {o_records[:3]}..."
            elif k.data[61:] != o.data[61:]:
                detail += "; the same records, encoded differently (compression?)"
            result.differ(f"{at}: {detail}")
        for suffix, entry in ((".index", ">ii"), (".timeindex", ">qi")):
            k_entries = read_index(theirs / f"{stem}{suffix}", entry)
            o_entries = read_index(ours / f"{stem}{suffix}", entry)
            if shifted and suffix == ".index":  # positions as batch numbers
                k_at = {b.position: i for i, b in enumerate(kb)}
                o_at = {b.position: i for i, b in enumerate(ob)}
                k_entries = [(rel, k_at.get(pos, -1)) for rel, pos in k_entries]
                o_entries = [(rel, o_at.get(pos, -1)) for rel, pos in o_entries]
            if k_entries != o_entries:
                result.differ(f"{stem}{suffix}: Kafka {k_entries}, compactlog {o_entries}")
    return result


def records_of(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    batch = RecordBatch(data)
    return [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]


# --- the stages ------------------------------------------------------------------------------


@dataclass
class Topic:
    """A topic of the differential: created with ``config``; ``altered`` is applied (with
    kafka-configs) after the first stage's appends, before anything is cleaned."""

    name: str
    partitions: int
    config: dict[str, str]
    altered: dict[str, str] = field(default_factory=dict)
    #: Compare Kafka's files with the natural run's instead of the replay's: for a log that
    #: only retention changes (``compact,delete``), which the replay of cleanings does not run.
    natural: bool = False

    @property
    def cleaning_config(self) -> dict[str, str]:
        return {**self.config, **self.altered}


Appends = Callable[[RawProducer, KafkaBroker], None]


class Round(NamedTuple):
    """One cleaning of one log: which log, its dirty section, the summary's figures."""

    log: str
    first_dirty_offset: int
    end_offset: int
    figures: tuple[str, ...]


#: The figures of a summary message that do not depend on time: the sizes and message counts
#: before and after, the size reduction and the offset map's utilization.
_FIGURES = re.compile(
    r"Buffer utilization: [\d.]+%|Start size: .*|End size: .*|[\d.]+% size reduction.*"
)


def figures(summary: str) -> tuple[str, ...]:
    return tuple(m.group(0).strip() for m in _FIGURES.finditer(summary))


@dataclass
class StageResult:
    """Kafka's cleaning of a stage beside compactlog's, two ways.

    ``natural``: compactlog's own cleaner iterations (``LogManager.clean`` until it finds nothing),
    at the stage's start time: which logs it cleans, in which rounds, to which checkpoint.
    ``replay``: Kafka's rounds, one by one, with ``LogManager.clean_log`` at the time each of
    Kafka's rounds ran (from the delete horizons it stamped): the files, byte for byte.
    """

    now: int
    kafka_rounds: list[Round]
    natural_rounds: list[Round]
    replay_rounds: list[Round]
    comparisons: list[Comparison]
    kafka_checkpoint: dict[tuple[str, int], int]
    natural_checkpoint: dict[tuple[str, int], int]
    kafka_log_start: dict[tuple[str, int], int]
    natural_log_start: dict[tuple[str, int], int]
    horizons: set[int]  # every delete horizon in Kafka's cleaned files
    kafka_uncleanable: set[str]
    natural_uncleanable: set[str]


class Differential:
    """One Kafka broker and, per stage, compactlog copies of its log directory."""

    def __init__(
        self,
        workdir: Path,
        make_kafka: Callable[..., KafkaBroker],
        topics: Sequence[Topic],
        broker_config: Mapping[str, str],
        allow_snappy: frozenset[str] = frozenset(),
    ) -> None:
        """``allow_snappy``: topics whose rebuilt snappy batches may differ in their compressed
        bytes (see :data:`SNAPPY_PAYLOAD`)."""
        self.workdir = workdir
        self.allow_snappy = allow_snappy
        self._natural = {t.name for t in topics if t.natural}
        self.topics = list(topics)
        self.broker_config = dict(broker_config)
        self.kafka = make_kafka(
            config={**self.broker_config, "log.cleaner.backoff.ms": "100"}, start=False
        )
        self.stages = 0

    def _partitions(self) -> list[tuple[str, int]]:
        return [(t.name, p) for t in self.topics for p in range(t.partitions)]

    def _retention(self, log: str) -> int:
        topic = next(t for t in self.topics if log.startswith(t.name + "-"))
        return int(topic.cleaning_config.get("delete.retention.ms", 86_400_000))

    def stage(
        self,
        appends: Appends,
        not_before_ms: int = 0,
        settle_s: float = 2.0,
        timeout_s: float = 120.0,
    ) -> StageResult:
        """One stage (see the module docstring). ``not_before_ms``: the cleaning starts no
        earlier than this wall-clock time (past a delete horizon, say)."""
        self.stages += 1
        here = self.workdir / f"stage-{self.stages}"
        pre = here / "pre"
        self._produce(appends)
        shutil.copytree(self.kafka.data_dir, pre)

        wait = not_before_ms - time.time() * 1000
        if wait > 0:
            time.sleep(wait / 1000)
        now = int(time.time() * 1000)

        natural = here / "compactlog"
        self._compactlog_copy(pre, natural)
        natural_rounds = []
        natural_uncleanable: set[str] = set()
        with open_managed(natural, clock=lambda: now, config=self.broker_config) as store:
            for _ in range(1000):
                result = manager_of(store).clean(now)
                failed = {f"{t}-{p}" for t, p in result.uncleanable} - natural_uncleanable
                if result.cleaned is None and not failed:
                    break
                natural_uncleanable |= failed
                if result.cleaned is not None and result.end_offset >= 0:  # not a failed round
                    natural_rounds.append(_round(result))
            natural_log_start = {tp: store.log_start_offset(*tp) for tp in self._partitions()}
        natural_checkpoint = self._checkpoint(natural)

        kafka_rounds = self._kafka_cleans(natural_checkpoint, settle_s, timeout_s)
        post = here / "kafka"
        shutil.copytree(self.kafka.data_dir, post)

        replay = here / "replay"
        self._compactlog_copy(pre, replay)
        replay_rounds = []
        with open_managed(replay, clock=lambda: now, config=self.broker_config) as store:
            for kafka_round, at in self._round_times(kafka_rounds, pre, post):
                topic, partition = kafka_round.log.rsplit("-", 1)
                replay_rounds.append(_round(manager_of(store).clean_log(topic, int(partition), at)))

        log_starts = read_offset_checkpoint(post / "log-start-offset-checkpoint")
        return StageResult(
            now=now,
            kafka_rounds=[r for r, _ in kafka_rounds],
            natural_rounds=natural_rounds,
            replay_rounds=replay_rounds,
            comparisons=[
                compare_partition(
                    post,
                    natural if t in self._natural else replay,
                    f"{t}-{p}",
                    allow_snappy=t in self.allow_snappy,
                )
                for t, p in self._partitions()
            ],
            kafka_checkpoint=self._checkpoint(post),
            natural_checkpoint=natural_checkpoint,
            # Kafka checkpoints a log start offset only when it lies above the first segment's
            # base; at load it takes the larger of the two (spec 1.5, step 8).
            kafka_log_start={
                tp: max(log_starts.get(tp, 0), _segments(post / f"{tp[0]}-{tp[1]}")[0])
                for tp in self._partitions()
            },
            natural_log_start=natural_log_start,
            horizons={h for t, p in self._partitions() for h in _horizons(post / f"{t}-{p}")},
            kafka_uncleanable=self.kafka.uncleanable()
            & {f"{t}-{p}" for t, p in self._partitions()},
            natural_uncleanable=natural_uncleanable,
        )

    def _produce(self, appends: Appends) -> None:
        """Start Kafka with its cleaner off, run the appends (and, in the first stage, create the
        topics before and alter them after), stop it cleanly."""
        kafka = self.kafka
        kafka.config["log.cleaner.enable"] = "false"
        kafka.start()
        if self.stages == 1:
            for topic in self.topics:
                configs = [a for k, v in topic.config.items() for a in ("--config", f"{k}={v}")]
                done = kafka.tool(
                    "kafka-topics",
                    "--create",
                    "--topic",
                    topic.name,
                    "--partitions",
                    str(topic.partitions),
                    *configs,
                )
                assert done.returncode == 0, done.stderr
        producer = RawProducer(kafka.bootstrap)
        try:
            appends(producer, kafka)
        finally:
            producer.close()
        if self.stages == 1:
            for topic in self.topics:
                if topic.altered:
                    done = kafka.tool(
                        "kafka-configs",
                        "--alter",
                        "--entity-type",
                        "topics",
                        "--entity-name",
                        topic.name,
                        "--add-config",
                        ",".join(f"{k}={v}" for k, v in topic.altered.items()),
                    )
                    assert done.returncode == 0, done.stderr
        kafka.stop()

    def _kafka_cleans(
        self, expected: Mapping[tuple[str, int], int], settle_s: float, timeout_s: float
    ) -> list[tuple[Round, CleanerSummary]]:
        """Start Kafka with its cleaner on; wait until its checkpoint holds ``expected`` (what
        compactlog's cleaner reached) and nothing was cleaned for ``settle_s``; stop it."""
        kafka = self.kafka
        before = len(kafka.cleaner_summaries())
        kafka.config["log.cleaner.enable"] = "true"
        kafka.start()
        mine = set(self._partitions())

        def caught_up() -> bool:
            got = {tp: o for tp, o in kafka.cleaner_checkpoint().items() if tp in mine}
            return all(got.get(tp) == o for tp, o in expected.items())

        # Not reaching it is reported by the comparison of the checkpoints, with the rest.
        with contextlib.suppress(TimeoutError):
            kafka.wait_for(caught_up, f"the cleaner checkpoint {dict(expected)}", timeout_s)
        seen = len(kafka.cleaner_summaries())
        while True:
            time.sleep(settle_s)
            if len(kafka.cleaner_summaries()) == seen:
                break
            seen = len(kafka.cleaner_summaries())
        kafka.stop()
        names = {f"{t}-{p}" for t, p in mine}
        return [
            (Round(s.log, s.first_dirty_offset, s.end_offset, figures(s.text)), s)
            for s in kafka.cleaner_summaries()[before:]
            if s.log in names
        ]

    def _round_times(
        self, rounds: list[tuple[Round, CleanerSummary]], pre: Path, post: Path
    ) -> Iterator[tuple[Round, int]]:
        """Kafka's rounds, each with the time it cleaned at: for a log cleaned once in the stage
        that stamped delete horizons, exactly ``horizon - delete.retention.ms`` (spec 5.5);
        otherwise when its summary was logged (no byte depends on it then)."""
        per_log: dict[str, int] = {}
        for r, _ in rounds:
            per_log[r.log] = per_log.get(r.log, 0) + 1
        for r, summary in rounds:
            stamped = _horizons(post / r.log) - _horizons(pre / r.log)
            if not stamped:
                yield r, summary.logged_ms
                continue
            assert per_log[r.log] == 1 and len(stamped) == 1, (
                f"{r.log}: {per_log[r.log]} cleanings stamped horizons {sorted(stamped)}: "
                "which one ran when is ambiguous; give that log one cleaning per stage"
            )
            yield r, stamped.pop() - self._retention(r.log)

    def _checkpoint(self, data_dir: Path) -> dict[tuple[str, int], int]:
        mine = set(self._partitions())
        entries = read_offset_checkpoint(data_dir / "cleaner-offset-checkpoint")
        return {tp: o for tp, o in entries.items() if tp in mine}

    def _compactlog_copy(self, pre: Path, ours: Path) -> None:
        """A compactlog data directory with this differential's topics, holding Kafka's files
        and checkpoint entries for their partitions."""
        with open_managed(ours, config=self.broker_config) as store:
            for topic in self.topics:
                store.create_topic(topic.name, topic.partitions, topic.cleaning_config)
        kinds = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
        for topic, partition in self._partitions():
            name = f"{topic}-{partition}"
            for path in (ours / name).iterdir():
                if path.suffix in kinds:
                    path.unlink()
            for path in (pre / name).iterdir():
                if path.suffix in kinds:
                    shutil.copy2(path, ours / name / path.name)
        mine = set(self._partitions())
        for checkpoint in (
            "cleaner-offset-checkpoint",
            "log-start-offset-checkpoint",
            "recovery-point-offset-checkpoint",
        ):
            entries = read_offset_checkpoint(pre / checkpoint)
            write_offset_checkpoint(
                ours / checkpoint, {tp: o for tp, o in entries.items() if tp in mine}
            )


def _round(result: Any) -> Round:
    assert result.cleaned is not None, result
    topic, partition = result.cleaned
    return Round(
        f"{topic}-{partition}",
        result.first_dirty_offset,
        result.end_offset,
        figures(result.summary),
    )


def _horizons(partition_dir: Path) -> set[int]:
    return {
        b.header["baseTimestamp"]
        for log in partition_dir.glob("*.log")
        for b in read_batches(log)
        if b.has_horizon
    }
