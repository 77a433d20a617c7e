"""Statistics of one cleaning round and Kafka's summary log message (spec 5.11).

The message is Kafka's, field for field, quirks included: the "Cleaned" line reports the bytes
*read*, and two lines say "Mb/sec" where the first says "MB/sec".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MB = 1024.0 * 1024.0


@dataclass
class CleanerStats:
    """Counters of one round; times are milliseconds of the cleaner's clock (durations only)."""

    start_ms: int
    map_complete_ms: int = -1
    end_ms: int = -1
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    groups: int = 0
    segments_read: int = 0
    notes: list[str] = field(default_factory=list)

    def elapsed_secs(self) -> float:
        return max(self.end_ms - self.start_ms, 0) / 1000.0

    def elapsed_indexing_secs(self) -> float:
        return max(self.map_complete_ms - self.start_ms, 0) / 1000.0


def _div(a: float, b: float) -> float:
    """Java's double division: x/0.0 is Infinity (NaN for 0/0), which Kafka prints as is."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def _f(x: float, grouped: bool = True) -> str:
    """Java's ``%,.1f`` (or ``%.1f``), including its spelling of infinities and NaN."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return f"{x:,.1f}" if grouped else f"{x:.1f}"


def summary_message(
    thread_id: int, log_name: str, first_dirty: int, end_offset: int, stats: CleanerStats
) -> str:
    """Kafka's INFO message after a successful round (it starts with a newline).

    Field for field Kafka's format strings: ``%,.1f`` (grouped) for megabytes, seconds of the
    first line and rates, ``%.1f`` for the other seconds and percentages, ``%,d`` for counts.
    """
    total = stats.elapsed_secs()
    indexing = stats.elapsed_indexing_secs()
    cleaning = total - indexing
    read_mb = stats.bytes_read / MB
    map_mb = stats.map_bytes_read / MB
    written_mb = stats.bytes_written / MB
    return (
        f"\n\tLog cleaner thread {thread_id} cleaned log {log_name} "
        f"(dirty section = [{first_dirty}, {end_offset}])\n"
        f"\t{_f(read_mb)} MB of log processed in {_f(total)} seconds "
        f"({_f(_div(stats.bytes_read, total) / MB)} MB/sec).\n"
        f"\tIndexed {_f(map_mb)} MB in {_f(indexing, False)} seconds "
        f"({_f(_div(map_mb, indexing))} Mb/sec, {_f(100 * _div(indexing, total), False)}% of "
        f"total time)\n"
        f"\tBuffer utilization: {_f(100.0 * stats.buffer_utilization, False)}%\n"
        f"\tCleaned {_f(read_mb)} MB in {_f(cleaning, False)} seconds "
        f"({_f(_div(read_mb, cleaning))} Mb/sec, {_f(100 * _div(cleaning, total), False)}% of "
        f"total time)\n"
        f"\tStart size: {_f(read_mb)} MB ({stats.messages_read:,} messages)\n"
        f"\tEnd size: {_f(written_mb)} MB ({stats.messages_written:,} messages)\n"
        f"\t{_f(100 * (1 - _div(stats.bytes_written, stats.bytes_read)), False)}% size reduction "
        f"({_f(100 * (1 - _div(stats.messages_written, stats.messages_read)), False)}% fewer "
        f"messages)\n"
    )


def delayed_partitions_line(cleanable: int, delayed: int, max_delay_ms: int) -> str:
    return (
        f"\tCleanable partitions: {cleanable}, Delayed partitions: {delayed}, "
        f"max delay: {max_delay_ms}"
    )


def invalid_messages_line(count: int) -> str:
    return f"\tFound {count} invalid messages during compaction."
