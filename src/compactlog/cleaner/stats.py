"""Statistics of one cleaning round and Kafka's summary log message (spec 5.11).

The message is Kafka's, field for field, quirks included: the "Cleaned" line reports the bytes
*read*, and two lines say "Mb/sec" where the first says "MB/sec".
"""

from __future__ import annotations

from dataclasses import dataclass, field

MB = 1024.0 * 1024.0


@dataclass
class CleanerStats:
    """Counters of one round; times are in milliseconds of the cleaner's clock."""

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


def _rate(amount: float, secs: float) -> float:
    return amount / secs if secs > 0 else 0.0


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def summary_message(
    thread_id: int, log_name: str, first_dirty: int, end_offset: int, stats: CleanerStats
) -> str:
    """Kafka's INFO message after a successful round (it starts with a newline)."""
    total = stats.elapsed_secs()
    indexing = stats.elapsed_indexing_secs()
    cleaning = max(total - indexing, 0.0)
    read_mb = stats.bytes_read / MB
    map_mb = stats.map_bytes_read / MB
    written_mb = stats.bytes_written / MB
    size_reduction = (
        100.0 * (1.0 - _rate(stats.bytes_written, stats.bytes_read)) if stats.bytes_read else 0.0
    )
    fewer = (
        100.0 * (1.0 - _rate(stats.messages_written, stats.messages_read))
        if stats.messages_read
        else 0.0
    )
    return (
        f"\n\tLog cleaner thread {thread_id} cleaned log {log_name} "
        f"(dirty section = [{first_dirty}, {end_offset}])\n"
        f"\t{read_mb:.1f} MB of log processed in {total:.1f} seconds "
        f"({_rate(read_mb, total):.1f} MB/sec).\n"
        f"\tIndexed {map_mb:.1f} MB in {indexing:.1f} seconds "
        f"({_rate(map_mb, indexing):.1f} Mb/sec, {_pct(indexing, total):.1f}% of total time)\n"
        f"\tBuffer utilization: {100.0 * stats.buffer_utilization:.1f}%\n"
        f"\tCleaned {read_mb:.1f} MB in {cleaning:.1f} seconds "
        f"({_rate(read_mb, cleaning):.1f} Mb/sec, {_pct(cleaning, total):.1f}% of total time)\n"
        f"\tStart size: {read_mb:.1f} MB ({stats.messages_read:,} messages)\n"
        f"\tEnd size: {written_mb:.1f} MB ({stats.messages_written:,} messages)\n"
        f"\t{size_reduction:.1f}% size reduction ({fewer:.1f}% fewer messages)\n"
    )


def delayed_partitions_line(cleanable: int, delayed: int, max_delay_ms: int) -> str:
    return (
        f"\tCleanable partitions: {cleanable}, Delayed partitions: {delayed}, "
        f"max delay: {max_delay_ms}"
    )


def invalid_messages_line(count: int) -> str:
    return f"\tFound {count} invalid messages during compaction."
