"""One partition's files on local disk: Kafka's ``LocalLog``, held by the partition's
:class:`~compactlog.storage.log.Log` (Kafka's ``UnifiedLog``).

Theory of operation:

* **Directory and segments.** A :class:`LocalLog` owns the partition directory and the list of
  its segments sorted by base offset; the last one is *active* and the only one written. It keeps
  the two offsets that describe the files: the log end offset (the next offset to assign) and the
  recovery point, below which every segment was fsynced (after an unclean stop only the segments
  from the one holding it are re-checked). What those offsets mean to readers (log start offset,
  high watermark) and when to roll, flush or delete is decided by the :class:`Log` above it.
* **Rolling** (:meth:`LocalLog.roll`) closes the active segment's indexes to writes and starts a
  new segment at the log end offset, with its own roll jitter.
* **I/O errors** (disk full, EIO) in an append or a roll are undone before the error is raised:
  the segment's files and bookkeeping return to their state before the call
  (:meth:`LogSegment.rollback <compactlog.storage.segment.LogSegment.rollback>`), a segment the
  roll created is removed, and the log end offset does not move, so the offsets the append would
  have taken are handed out again to the next append, which writes where the refused one would
  have. When the undo fails too, the log is *offline* (:attr:`LocalLog.offline`, set by the
  :class:`Log`, which also takes it offline when an fsync fails): its files no longer match what
  the log believes, so the :class:`Log` refuses every later write until the store is reopened and
  recovers the log from its files. Reads keep working on what was acknowledged.
* **Flushing** (:meth:`LocalLog.flush`) fsyncs the segments holding offsets between the recovery
  point and a target; the directory itself is fsynced only after a file in it was created, renamed
  or removed (:meth:`LocalLog.note_dir_change`, :meth:`LocalLog.sync_dir_if_changed`).
* **Deleting segments** (:meth:`LocalLog.remove_and_delete_segments`): a segment leaves the map,
  is renamed ``.deleted`` at once and its files are removed after ``file.delete.delay.ms``
  (:meth:`LocalLog.remove_deleted_files`), so readers that still hold it finish their read. Other
  files renamed ``.deleted`` by the :class:`Log` (producer snapshots) wait in the same queue.
* **The cleaner's swap** (:meth:`LocalLog.replace_segments`): a ``.cleaned`` segment replaces a
  group of segments through renames that a crash at any point leaves recoverable by
  :mod:`compactlog.storage.loader`, which also builds the segment list a :class:`LocalLog` starts
  from.

A :class:`LocalLog` is not thread-safe on its own: every change runs under its :class:`Log`'s
lock, and whether the log is still open is the :class:`Log`'s to check.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

from compactlog.errors import CompactlogError, StorageError
from compactlog.storage.config import LogConfig
from compactlog.storage.fs import FileSystem, write_file_atomically
from compactlog.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_RANGE_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    SegmentMark,
    SegmentSettings,
    draw_roll_jitter,
)

Clock = Callable[[], int]

logger = logging.getLogger("compactlog.storage")


def segment_settings(config: LogConfig) -> SegmentSettings:
    return SegmentSettings(
        index_interval_bytes=config.index_interval_bytes,
        segment_index_bytes=config.segment_index_bytes,
        preallocate=config.preallocate,
        segment_bytes=config.segment_bytes,
    )


class _UnfinishedSwap:
    """A swap whose segment map switched to ``new`` but whose renames are not all done."""

    def __init__(self, new: LogSegment, old: list[LogSegment], range_path: str, now: int) -> None:
        self.new = new
        self.old = old
        self.range_path = range_path
        self.now = now


def _rename_files(segment: LogSegment, old: str, new: str) -> None:
    """:meth:`LogSegment.change_suffix`, skipping the files that an earlier call, stopped by an
    I/O error, renamed already."""

    def done(path: str) -> bool:
        return path.endswith(new) if new else not path.endswith(old)

    def renamed(path: str) -> str:
        return path[: len(path) - len(old)] + new

    if not done(segment.log_path) and segment.fs.exists(segment.log_path):
        target = renamed(segment.log_path)
        segment.fs.rename(segment.log_path, target)
        segment.log_path = target
    for index in (segment.offset_index, segment.time_index):
        if not done(index.path):
            if segment.fs.exists(index.path):
                index.rename(renamed(index.path))
            else:
                index.path = renamed(index.path)
    if not done(segment.txn_index_path):
        target = renamed(segment.txn_index_path)
        if segment.fs.exists(segment.txn_index_path):
            segment.fs.rename(segment.txn_index_path, target)
        segment.txn_index_path = target
    segment.suffix = new


@dataclass
class PendingDeletion:
    """A segment renamed ``.deleted`` (or, with ``segment`` None, the files in ``paths``: the
    producer snapshots of deleted segments), removed at ``delete_after_ms``."""

    segment: LogSegment | None
    delete_after_ms: int
    paths: tuple[str, ...] = ()


class LocalLog:
    """A partition directory and its segments. :func:`compactlog.storage.loader.load_log` builds
    one from the recovered segments and hands it to a :class:`~compactlog.storage.log.Log`."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        *,
        recovery_point: int,
        rng: random.Random,
    ) -> None:
        if not segments:
            raise CompactlogError(f"log {directory} has no segment")
        self.fs = fs
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self._config = config
        self.clock = clock
        self.rng = rng
        self._segments = segments
        self._recovery_point = recovery_point
        self._next_offset = segments[-1].read_next_offset()
        self._last_flush_ms = clock()
        self._pending_deletions: list[PendingDeletion] = []
        # Swaps whose segment map switched but whose renames an I/O error stopped (see
        # replace_segments); finished by finish_swaps.
        self._unfinished_swaps: list[_UnfinishedSwap] = []
        # The directory needs an fsync only after a file in it was created, renamed or removed.
        self._dir_needs_sync = True
        #: Why the log stopped accepting writes (see the module doc), or None while it accepts.
        self.offline: StorageError | None = None

    # --- identity and state ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first."""
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    # --- appends and rolling --------------------------------------------------------------
    def append(
        self,
        last_offset: int,
        data: bytes | bytearray | memoryview,
        fields: list[tuple[int, int, int]] | None = None,
    ) -> SegmentMark:
        """Write validated whole batches to the active segment; the log end offset moves to
        ``last_offset + 1``. ``fields``: as :meth:`LogSegment.append` takes them. Returns the
        active segment's state before the append (for :meth:`withdraw_append`).

        On an error nothing of the append stays (see the module doc): a :class:`StorageError`
        says so, or that the log went offline because the undo failed too."""
        segment = self._segments[-1]
        mark = segment.mark()
        try:
            segment.append(data, fields)
        except Exception as exc:
            error = self._undo(
                f"an append of offsets {self._next_offset}..{last_offset}",
                exc,
                lambda: segment.rollback(mark),
            )
            if error is None:
                raise
            raise error from exc
        self._next_offset = last_offset + 1
        return mark

    def withdraw_append(self, mark: SegmentMark, log_end_offset: int) -> bool:
        """Take back the last append of an offline log (its flush failed, so it was never
        acknowledged): readers stop seeing it at once; returns whether its bytes were also cut
        from the files (the log is offline either way)."""
        segment = self._segments[-1]
        self._next_offset = log_end_offset
        try:
            segment.rollback(mark)
        except Exception:
            return False
        return True

    def _undo(self, what: str, exc: Exception, undo: Callable[[], None]) -> StorageError | None:
        """Run ``undo`` after ``what`` failed with ``exc``; return the error to raise instead of
        ``exc`` (None: re-raise ``exc`` itself, an error that is not about the disk).

        If ``undo`` fails, the log goes offline and the error says so."""
        try:
            undo()
        except Exception as undo_exc:
            self.offline = StorageError(
                f"{self.name} is offline: {what} failed ({exc}) and undoing it failed too "
                f"({undo_exc}); appends, rolls and flushes of {self.name} are refused until the "
                f"store is reopened, which recovers the log from its files in {self.dir} (the "
                "refused records may be found there then; they were never acknowledged)"
            )
            logger.error("%s", self.offline)
            return self.offline
        if not isinstance(exc, StorageError):
            return None
        return StorageError(
            f"{self.name}: {what} failed and was undone (nothing of it is on disk and the log "
            f"end offset stays {self._next_offset}): {exc}"
        )

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or a larger expected offset); an
        empty active segment at that offset is kept and returned as it is."""
        new_offset = max(expected_next_offset or 0, self._next_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset:
            if active.size == 0:
                return active  # rolling an empty segment at the same offset changes nothing
            raise CompactlogError(
                f"cannot roll {self.name}: a segment with base offset {new_offset} exists"
            )
        if new_offset < active.base_offset:
            raise CompactlogError(
                f"cannot roll {self.name} at {new_offset}, below the active segment "
                f"{active.base_offset}"
            )
        # The rolled segment's records (and its own directory entry) are made durable before
        # the new segment can be: otherwise a power cut can keep the new segment and lose the
        # end of the old one, a hole in the offsets that recovery cannot tell from compaction
        # (spec R2: the prefix property under Kafka's default policy too). Kafka flushes the
        # rolled segment only afterwards, asynchronously; the rest of that flush (indexes, the
        # recovery point) still is (``Log.flush_pending``).
        try:
            active.sync_log()
            self.sync_dir_if_changed()
        except StorageError as exc:
            # A failed fsync cannot be retried (the kernel may have dropped the pages).
            self.offline = StorageError(
                f"{self.name} is offline: the fsync before a roll failed ({exc}); appends, rolls "
                f"and flushes of {self.name} are refused until the store is reopened"
            )
            logger.error("%s", self.offline)
            raise self.offline from exc
        mark = active.mark()
        created: list[LogSegment] = []
        try:
            active.on_become_inactive()
            active.release_index_handles()
            segment = self._new_segment(new_offset)
            created.append(segment)
            self._segments.append(segment)
            segment.make_active()
        except Exception as exc:

            def undo() -> None:
                if created and self._segments[-1] is created[0]:
                    self._segments.pop()
                if created:
                    created[0].delete_files()
                else:  # the new segment's constructor failed: what it created goes
                    self._remove_segment_files(new_offset)
                active.rollback(mark)
                active.make_active()

            error = self._undo(f"a roll to a new segment at offset {new_offset}", exc, undo)
            if error is None:
                raise
            raise error from exc
        return segment

    def _remove_segment_files(self, base_offset: int) -> None:
        prefix = os.path.join(self.dir, f"{base_offset:020d}")
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            self.fs.remove(prefix + suffix)

    def _new_segment(self, base_offset: int) -> LogSegment:
        config = self._config
        self._remove_segment_files(base_offset)
        jitter = draw_roll_jitter(config.segment_jitter_ms, config.segment_ms, self.rng)
        self._dir_needs_sync = True
        return LogSegment(
            self.fs,
            self.dir,
            base_offset,
            segment_settings(config),
            now_ms=self.clock(),
            roll_jitter_ms=jitter,
        )

    # --- durability -----------------------------------------------------------------------
    def flush(self, offset: int) -> None:
        """fsync every segment holding offsets in ``[recovery point, offset)``. The directory
        and the recovery point are the caller's next steps (:meth:`sync_dir_if_changed`,
        :meth:`mark_flushed`)."""
        for i, segment in enumerate(self._segments):
            upper = (
                self._segments[i + 1].base_offset
                if i + 1 < len(self._segments)
                else self._next_offset
            )
            if upper > self._recovery_point and segment.base_offset < offset:
                segment.flush()

    def note_dir_change(self) -> None:
        """A file in the directory was created, renamed or removed: the next flush fsyncs it."""
        self._dir_needs_sync = True

    def sync_dir_if_changed(self) -> None:
        if self._dir_needs_sync:
            self.fs.sync_dir(self.dir)
            self._dir_needs_sync = False

    def mark_flushed(self, recovery_point: int) -> None:
        """Everything below ``recovery_point`` is on disk, as of now."""
        self._recovery_point = recovery_point
        self._last_flush_ms = self.clock()

    # --- the cleaner's swap ---------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty ``<base>.log.cleaned`` segment (leftovers of an earlier attempt removed)."""
        prefix = os.path.join(self.dir, f"{base_offset:020d}")
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            self.fs.remove(prefix + suffix + CLEANED_SUFFIX)
        config = self._config
        settings = SegmentSettings(
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            preallocate=False,
            segment_bytes=config.segment_bytes,
        )
        return LogSegment(
            self.fs, self.dir, base_offset, settings, now_ms=self.clock(), suffix=CLEANED_SUFFIX
        )

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment]
    ) -> tuple[list[LogSegment], int]:
        """Swap a finished ``.cleaned`` segment in for ``old`` (Kafka's ``replaceSegments``).

        The protocol, with what a crash at each point leaves (the loader finishes or undoes it):

        1. ``new``'s files are renamed ``.cleaned`` -> ``.swap`` (a crash before all are
           renamed: the loader deletes the ``.swap`` at or above a ``.cleaned`` offset and every
           ``.cleaned``, so the originals stay);
        2. the segment map switches to ``new`` at once, so readers see either the old segments or
           the new one, never a mix;
        3. each old segment is renamed ``.deleted`` (a crash now: the loader deletes the
           originals that the ``.swap`` covers and completes the swap);
        4. ``new``'s files are renamed ``.swap`` -> final names and the directory is fsynced.

        Old segments stay readable by readers that already hold them until ``file.delete.delay.ms``.

        Beyond Kafka: before step 1, the replaced offset range is written to
        ``<base>.swaprange`` (atomically) and removed after step 4. Kafka's loader infers the
        range from the ``.swap`` segment's own offsets, which falls short when the group's last
        segments were compacted away entirely: after a crash between steps 1 and 3 those
        originals would come back next to the new segment. With the range file the loader
        removes them too.

        Returns the segments of ``old`` that were in the map (now replaced) and the clock time
        their deletion was scheduled at, for the files of the caller's that go with them.

        An I/O error (disk full) before step 2 undoes what was done, as far as it can: ``new``'s
        files and the range file are removed, the old segments stay the log (a file that cannot
        be removed is one the loader removes). After step 2 the swap can only go forward: the
        error is raised, the swap is kept and :meth:`finish_swaps` (run again before the next
        swap, retention or deletion of this log) completes its renames; until then the files
        on disk are ones the loader completes.
        """
        present = [s for s in old if any(s is t for t in self._segments)]
        range_path = os.path.join(self.dir, f"{new.base_offset:020d}{SWAP_RANGE_SUFFIX}")
        if present:
            i = next(i for i, s in enumerate(self._segments) if s is present[-1])
            end = (
                self._segments[i + 1].base_offset
                if i + 1 < len(self._segments)
                else present[-1].read_next_offset()
            )
        self.finish_swaps()
        try:
            if present:
                write_file_atomically(self.fs, range_path, f"{end}\n".encode())
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self.fs.sync_dir(self.dir)
        except Exception:
            self._undo_swap(new, range_path)
            raise
        if present:
            first = next(i for i, s in enumerate(self._segments) if s is present[0])
            last = next(i for i, s in enumerate(self._segments) if s is present[-1])
            self._segments[first : last + 1] = [new]
        else:
            self._segments.append(new)
            self._segments.sort(key=lambda s: s.base_offset)
        now = self.clock()
        self._unfinished_swaps.append(_UnfinishedSwap(new, present, range_path, now))
        self.finish_swaps()
        return present, now

    def finish_swaps(self) -> None:
        """Steps 3 and 4 of the swaps whose segment map already switched: rename each old
        segment ``.deleted`` (its removal scheduled), ``new``'s files ``.swap`` -> final, fsync
        the directory, remove the range file. Every file renamed already is skipped, so this
        goes on where an I/O error stopped it; the error is raised again if it recurs."""
        delay = self._config.file_delete_delay_ms
        while self._unfinished_swaps:
            swap = self._unfinished_swaps[0]
            for segment in swap.old:
                if segment.suffix != DELETED_SUFFIX:
                    _rename_files(segment, "", DELETED_SUFFIX)
                    segment.release_index_handles()
                    self._pending_deletions.append(PendingDeletion(segment, swap.now + delay))
            if swap.new.suffix == SWAP_SUFFIX:
                _rename_files(swap.new, SWAP_SUFFIX, "")
            self.fs.sync_dir(self.dir)
            self.fs.remove(swap.range_path)
            self._dir_needs_sync = True
            self._unfinished_swaps.pop(0)

    def _undo_swap(self, new: LogSegment, range_path: str) -> None:
        """Best effort after a swap failed before the map switched: remove ``new``'s files,
        its log last (the loader would rename an index ``.swap`` left without its log over the
        old segment's index; a log ``.swap`` left alone it completes as a swap, which is a
        correct cleaning too), then the range file. The old segments stay the log either way."""
        try:
            new.close_handles()
            log_path, *others = new.all_paths()
            for path in [*others, log_path]:
                self.fs.remove(path)
            self.fs.remove(range_path)
        except Exception:  # the caller raises the swap's own error; the loader tidies up
            pass

    # --- deletion -------------------------------------------------------------------------
    def remove_and_delete_segments(self, deletable: list[LogSegment], now: int) -> None:
        """Take ``deletable`` out of the map and rename them ``.deleted``; their files go after
        ``file.delete.delay.ms``. The recovery point moves up to the first remaining segment."""
        self.finish_swaps()  # a segment still named .swap must not be renamed .swap.deleted
        for segment in deletable:
            self._segments.remove(segment)
            segment.change_suffix("", DELETED_SUFFIX)
            segment.release_index_handles()
            self._pending_deletions.append(
                PendingDeletion(segment, now + self._config.file_delete_delay_ms)
            )
        self.fs.sync_dir(self.dir)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)

    def delete_files_later(self, paths: tuple[str, ...], now: int) -> None:
        """Remove ``paths``, already renamed ``.deleted`` by the caller, after
        ``file.delete.delay.ms`` (with the segments waiting the same way)."""
        self._dir_needs_sync = True
        self._pending_deletions.append(
            PendingDeletion(None, now + self._config.file_delete_delay_ms, paths)
        )

    def remove_deleted_files(self, now: int | None = None, *, force: bool = False) -> None:
        """Physically remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        now = self.clock() if now is None else now
        keep: list[PendingDeletion] = []
        for pending in self._pending_deletions:
            if force or now >= pending.delete_after_ms:
                if pending.segment is not None:
                    pending.segment.delete_files()
                for path in pending.paths:
                    self.fs.remove(path)
            else:
                keep.append(pending)
        self._pending_deletions = keep

    # --- life cycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Close every segment and remove the files waiting as ``.deleted``."""
        for segment in self._segments:
            segment.close()
        self.remove_deleted_files(force=True)

    def close_handles(self) -> None:
        """Release file handles only, the ``.deleted`` segments' too (their files stay)."""
        for segment in self._segments:
            segment.close_handles()
        for pending in self._pending_deletions:
            if pending.segment is not None:
                pending.segment.close_handles()

    def delete_all_segments(self) -> None:
        """Remove the files of every segment, and of those waiting as ``.deleted``."""
        for segment in self._segments:
            segment.delete_files()
        self.remove_deleted_files(force=True)

    def delete_dir(self) -> None:
        """Remove every file left in the directory, then the directory."""
        for name in self.fs.listdir(self.dir):
            self.fs.remove(os.path.join(self.dir, name))
        self.fs.rmdir(self.dir)
