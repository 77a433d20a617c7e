"""The last offset gap of each partition, found without sorting a partition in one task.

The definition is seed 000's "last compaction" script's (``tests/broker/seed000/``): the last
record whose offset is not the one after the previous record's, "the last place where
compaction provably happened", with that record's timestamp, and the records after it (which
are contiguous: no offset is missing after the last gap). The gap before the first record
counts too, measured from the log start offset: cleaning that removed the first records of a
partition leaves its first survivor above the log start offset.

Offsets missing for other reasons are gaps as well, as they are to a consumer: control batches
(transaction markers, which no consumer sees) and records below a batch's first kept one.

Theory of operation:

* **Pieces.** The ``compactlog`` source gives each task one byte range of one segment and yields
  its records in offset order, so what a task sees of a partition is a run of consecutive
  records. A ``mapInArrow`` on the scan (no shuffle; the report's aggregation reads through it)
  feeds every batch to :func:`track_pieces`, which summarises each run as a :class:`Piece`:
  first and last offset, the first record's timestamp, and the run's own last gap; it also
  checks the order it relies on (``ordered``).
* **Joining.** On the driver, :func:`join_pieces` sorts a partition's pieces by first offset; the
  gaps of the partition are the pieces' own, those between the last record of a piece and the
  first of the next, and the one between the log start offset and the first record. Walking in
  offset order and keeping the latest gap seen gives the last one.
* **Fallback.** Pieces that overlap (a task holding two non-adjacent ranges of a partition, which
  the source never plans) or are out of order cannot be joined; then :func:`gaps_by_window` runs
  a window over each partition ordered by offset, which sorts a partition in one task but is
  right whatever the input order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetGap:
    """The last gap in the offsets of a partition's records (seed 000's "last compaction")."""

    #: The last record before the gap; the log start offset - 1 when the gap is before the
    #: partition's first record.
    previous_offset: int
    #: The first record after it.
    next_offset: int
    #: The timestamp (epoch ms) of the record at ``next_offset``.
    timestamp_ms: int
    #: Records after ``next_offset`` (all contiguous): the seed's "contiguous ~dirty since gap".
    records_after: int

    @property
    def missing(self) -> int:
        """Offsets in between that hold no record (removed, or control batches)."""
        return self.next_offset - self.previous_offset - 1


@dataclass
class Piece:
    """The records of one partition that one task read, as a run: its ends and its own last
    gap (``gap_next`` -1: none inside the run)."""

    topic: str
    partition: int
    first_offset: int = -1
    first_ms: int = -1
    last_offset: int = -1
    #: Every record's offset is above the one before it in the task's input.
    ordered: bool = True
    gap_previous: int = -1
    gap_next: int = -1
    gap_ms: int = -1

    def add(self, offsets: npt.NDArray[np.int64], ms: npt.NDArray[np.int64]) -> None:
        """Records that follow the piece's last one in the task's input."""
        if self.first_offset < 0:
            self.first_offset, self.first_ms = int(offsets[0]), int(ms[0])
            before, after, after_ms = offsets[:-1], offsets[1:], ms[1:]
        else:
            before = np.concatenate((np.array([self.last_offset], np.int64), offsets[:-1]))
            after, after_ms = offsets, ms
        jumps = after - before
        if len(jumps):
            self.ordered = self.ordered and bool((jumps > 0).all())
            gaps = np.flatnonzero(jumps > 1)
            if len(gaps):
                i = int(gaps[-1])  # the last
                self.gap_previous, self.gap_next = int(before[i]), int(after[i])
                self.gap_ms = int(after_ms[i])
        self.last_offset = int(offsets[-1])


def _run_starts(topics: Any, partitions: npt.NDArray[np.int32]) -> list[int]:
    """Where (topic, partition) changes along a batch (a split holds one partition, so there
    is normally a single run)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    n = len(partitions)
    change = np.ones(n, dtype=bool)
    if n > 1:
        same = pc.equal(topics.slice(1), topics.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        change[1:] = ~same | (partitions[1:] != partitions[:-1])
    return [int(i) for i in np.flatnonzero(change)]


def track_pieces(pieces: dict[TopicPartition, Piece], batch: Any) -> None:
    """Extend ``pieces`` by an Arrow batch with ``topic``, ``partition``, ``offset`` and
    ``timestamp`` columns: the task's next records, in its input order."""
    import pyarrow as pa  # noqa: PLC0415

    n = batch.num_rows
    if n == 0:
        return
    topics = batch.column("topic")
    partitions = batch.column("partition").to_numpy()
    offsets = batch.column("offset").to_numpy().astype(np.int64, copy=False)
    ms = batch.column("timestamp").cast(pa.int64()).to_numpy() // 1000  # exact: whole ms
    starts = _run_starts(topics, partitions)
    for s, e in zip(starts, [*starts[1:], n], strict=True):
        tp = (str(topics[s].as_py()), int(partitions[s]))
        pieces.setdefault(tp, Piece(*tp)).add(offsets[s:e], ms[s:e])


#: A piece's fields besides topic and partition, with their Spark types.
PIECE_COLUMNS = tuple(
    (f.name, "BOOLEAN" if f.name == "ordered" else "BIGINT")
    for f in dataclasses.fields(Piece)
    if f.name not in ("topic", "partition")
)


def join_pieces(
    pieces: Sequence[Piece], log_starts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, OffsetGap | None] | None:
    """The last gap of each partition from its pieces (None for a partition without one), the
    one before its first record counted from ``log_starts`` (0 for a partition not in it);
    None if the pieces of some partition overlap or are out of order."""
    by_tp: dict[TopicPartition, list[Piece]] = {}
    for piece in pieces:
        by_tp.setdefault((piece.topic, piece.partition), []).append(piece)
    gaps: dict[TopicPartition, OffsetGap | None] = {}
    for tp, parts in by_tp.items():
        parts.sort(key=lambda p: p.first_offset)
        last = log_starts.get(tp, 0) - 1  # the offset before the first readable one
        gap: tuple[int, int, int] | None = None  # previous offset, next offset, its timestamp
        for p in parts:
            if not p.ordered or p.first_offset <= last:
                return None
            if p.first_offset > last + 1:
                gap = (last, p.first_offset, p.first_ms)
            if p.gap_next >= 0:
                gap = (p.gap_previous, p.gap_next, p.gap_ms)
            last = p.last_offset
        gaps[tp] = None if gap is None else OffsetGap(*gap, records_after=last - gap[1])
    return gaps


def gaps_by_window(
    rows: Any, log_starts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, OffsetGap | None]:
    """The last gap of each partition that has one, from (topic, partition, offset, timestamp)
    rows in any order, by a window over each partition ordered by offset (one job, one shuffle;
    a partition is sorted in one task). ``log_starts`` as for :func:`join_pieces`."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    order = Window.partitionBy("topic", "partition").orderBy("offset")
    ms = F.expr("unix_micros(timestamp) DIV 1000").alias("ms")
    rows = rows.select(
        "topic", "partition", "offset", F.lag("offset").over(order).alias("previous"), ms
    )
    found = (
        rows.groupBy("topic", "partition")
        .agg(
            F.min(F.struct("offset", "ms")).alias("first"),
            F.max("offset").alias("last"),
            # The gap with the highest offset after it (the first row's previous is null).
            F.max(
                F.when(
                    F.col("offset") - F.col("previous") > 1,
                    F.struct("offset", "previous", "ms"),
                )
            ).alias("gap"),
        )
        .collect()
    )
    gaps: dict[TopicPartition, OffsetGap | None] = {}
    for r in found:
        tp = (str(r["topic"]), int(r["partition"]))
        start, last = log_starts.get(tp, 0), int(r["last"])
        if r["gap"] is not None:
            g = r["gap"]
            gaps[tp] = OffsetGap(
                int(g["previous"]), int(g["offset"]), int(g["ms"]), last - int(g["offset"])
            )
        elif int(r["first"]["offset"]) > start:
            first = int(r["first"]["offset"])
            gaps[tp] = OffsetGap(start - 1, first, int(r["first"]["ms"]), last - first)
    return gaps
