"""The largest offset gap of each partition, found without sorting a partition in one task.

The gap is the largest jump between the offsets of two consecutive records, the first one when
several tie, with the timestamp of the record after it.

Theory of operation:

* **Pieces.** The ``compactlog`` source gives each task one byte range of one segment and yields
  its records in offset order, so what a task sees of a partition is a run of consecutive
  records. A ``mapInArrow`` on the scan (no shuffle; the report's aggregation reads through it)
  feeds every batch to :func:`track_pieces`, which summarises each run as a :class:`Piece`:
  first and last offset, the first record's timestamp, and the run's own largest jump; it also
  checks the order it relies on (``ordered``).
* **Joining.** On the driver, :func:`join_pieces` sorts a partition's pieces by first offset; the
  jumps of the partition are the pieces' own and those between the last record of a piece and
  the first of the next. Walking in offset order and replacing the best only on a strictly larger
  jump keeps the first of equal jumps.
* **Fallback.** Pieces that overlap (a task holding two non-adjacent ranges of a partition, which
  the source never plans) or are out of order cannot be joined; then :func:`gaps_by_window` runs
  a window over each partition ordered by offset, which sorts a partition in one task but is
  right whatever the input order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetGap:
    """The largest jump between the offsets of two consecutive records of a partition."""

    #: The last record before the jump.
    previous_offset: int
    #: The first record after it.
    next_offset: int
    #: The timestamp (epoch ms) of the record at ``next_offset``.
    timestamp_ms: int

    @property
    def missing(self) -> int:
        """Offsets in between that hold no record (removed, or control batches)."""
        return self.next_offset - self.previous_offset - 1


@dataclass
class Piece:
    """The records of one partition that one task read, as a run: its ends and its own largest
    jump (``jump`` 0: fewer than two records)."""

    topic: str
    partition: int
    first_offset: int = -1
    first_ms: int = -1
    last_offset: int = -1
    #: Every record's offset is above the one before it in the task's input.
    ordered: bool = True
    jump: int = 0
    previous_offset: int = -1
    next_offset: int = -1
    next_ms: int = -1

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
            i = int(np.argmax(jumps))  # the first of the largest
            if jumps[i] > self.jump:
                self.jump = int(jumps[i])
                self.previous_offset, self.next_offset = int(before[i]), int(after[i])
                self.next_ms = int(after_ms[i])
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


def join_pieces(pieces: Sequence[Piece]) -> dict[TopicPartition, OffsetGap | None] | None:
    """The largest gap of each partition from its pieces (None for a partition without one);
    None if the pieces of some partition overlap or are out of order."""
    by_tp: dict[TopicPartition, list[Piece]] = {}
    for piece in pieces:
        by_tp.setdefault((piece.topic, piece.partition), []).append(piece)
    gaps: dict[TopicPartition, OffsetGap | None] = {}
    for tp, parts in by_tp.items():
        parts.sort(key=lambda p: p.first_offset)
        best = (0, -1, -1, -1)  # jump, previous offset, next offset, timestamp of next
        for i, p in enumerate(parts):
            if not p.ordered:
                return None
            if i:
                last = parts[i - 1].last_offset
                if p.first_offset <= last:
                    return None
                if p.first_offset - last > best[0]:
                    best = (p.first_offset - last, last, p.first_offset, p.first_ms)
            if p.jump > best[0]:
                best = (p.jump, p.previous_offset, p.next_offset, p.next_ms)
        gaps[tp] = OffsetGap(best[1], best[2], best[3]) if best[0] > 1 else None
    return gaps


def gaps_by_window(rows: Any) -> dict[TopicPartition, OffsetGap | None]:
    """The largest gap of each partition that has one, from (topic, partition, offset,
    timestamp) rows in any order, by a window over each partition ordered by offset (one job,
    one shuffle; a partition is sorted in one task)."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    order = Window.partitionBy("topic", "partition").orderBy("offset")
    best = (
        rows.select(
            "topic",
            "partition",
            "offset",
            F.lag("offset").over(order).alias("previous"),
            F.expr("unix_micros(timestamp) DIV 1000").alias("ms"),
        )
        .withColumn("jump", F.col("offset") - F.col("previous"))
        .where(F.col("jump") > 1)
        .groupBy("topic", "partition")
        .agg(
            # The largest jump; among equal ones the smallest offset (hence -offset).
            F.max(
                F.struct("jump", (-F.col("offset")).alias("earliest"), "previous", "offset", "ms")
            ).alias("best")
        )
        .collect()
    )
    return {
        (str(r["topic"]), int(r["partition"])): OffsetGap(
            int(r["best"]["previous"]), int(r["best"]["offset"]), int(r["best"]["ms"])
        )
        for r in best
    }
