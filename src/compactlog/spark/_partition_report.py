"""One row of the compaction report: :class:`PartitionReport`, the figures of one topic-partition.

:mod:`compactlog.spark.report` computes the rows and writes them as a table or JSON;
:mod:`compactlog.spark._report_chart` draws them. Both import the row from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compactlog.spark._gaps import OffsetGap


@dataclass(frozen=True)
class PartitionReport:
    """One topic-partition; :mod:`compactlog.spark.report` defines every figure."""

    topic: str
    partition: int
    cleanup_policy: str
    records: int
    bytes: int
    distinct_keys: int
    superseded: int
    tombstones: int
    keyless: int
    log_start_offset: int
    log_end_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    dirty_keys: int
    keys_per_pass: int
    passes_needed: int
    #: None: the records' offsets are consecutive from the log start offset (or no records).
    last_gap: OffsetGap | None = field(default=None)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"
