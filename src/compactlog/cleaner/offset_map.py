"""The cleaner's dedupe buffer: a fixed-size table from key to the latest offset of that key.

Theory of operation
-------------------
The cleaner builds the map over the dirty range (spec 5.2), one record at a time, until the map
holds ``max_desired_size = floor(slots * load_factor)`` keys, then rewrites the log keeping a
keyed record only when its offset is not below the map's offset for its key. Keys are not stored:
each is represented by a fixed-width hash, so a map's capacity depends only on its memory.

Two maps implement :class:`OffsetMap`:

* :class:`SkimpyOffsetMap` is Kafka's ``SkimpyOffsetMap`` exactly (spec 5.1): 24-byte entries
  (MD5 digest + big-endian int64 offset) in one byte array, an all-zero entry is empty, and the
  probe sequence, ``get``'s probe limit and the full-map error are Kafka's.
* :class:`CompactOffsetMap` stores 16-byte entries: the first 96 bits of MurmurHash3_x64_128 of
  the key and the offset as an unsigned 32-bit number relative to ``base_offset`` (which
  ``clear(base_offset=...)`` sets; the cleaner passes the first dirty offset). Probing is linear
  from ``hash mod slots``. A pass spans at most 2^32 offsets: ``put_batch`` stops at an offset
  outside ``[base_offset, base_offset + 2^32)`` just as it stops at a full map, so the caller
  finishes the pass there (an empty map adopts such an offset as its base instead, so a pass
  never stops before its first key).

Keys per pass (``keys_per_mib``; load factor 0.9; the default 128 MiB buffer, one thread)::

    map                 bytes/entry  keys per MiB   keys per 128 MiB pass
    SkimpyOffsetMap     24           39,321.0       5,033,164
    CompactOffsetMap    16           58,982.4       7,549,747   (1.5x)

Collisions in the compact map
-----------------------------
Two keys with equal hashes are one key to the map. If ``a`` and ``b`` collide and the map holds
``b``'s latest offset, the cleaner treats ``a``'s records below that offset as superseded and
drops them: ``a`` can lose its latest value (or a tombstone can be dropped early). Nothing
detects it. Kafka has the same failure mode with MD5 (spec 9 item 6), only with 128 bits.

By the birthday bound, n distinct keys in one pass collide somewhere with probability about
``n^2 / 2^(b+1)`` for a b-bit hash; a key being cleaned that is *not* in the map collides with
one of the n mapped keys with probability about ``n / 2^b``, so K distinct keys in the cleaned
log add about ``n K / 2^b``. With b = 96:

* the default 128 MiB buffer, n = 7,549,747: ``n^2 / 2^97`` = 3.6e-16 per pass, and with
  K = 1e9 keys in the log, ``n K / 2^96`` = 9.5e-14 per pass;
* n = 1e9 keys in one pass (a 16.6 GiB buffer): ``n^2 / 2^97`` = 6.3e-12 per pass, and
  ``n K / 2^96`` = 1.3e-11 with K = 1e9.

Even a pass every second for a year (3.2e7 passes) merges two keys with probability about
3e-6 at the default size and 6e-4 with billion-key passes. A 64-bit hash would not do: one
billion-key pass alone gives ``n^2 / 2^65`` = 2.7%. Hence 96 bits rather than 64, and 96
rather than 128 leaves room for the 32-bit offset in 16 bytes.

These numbers assume keys that are not chosen to collide. MurmurHash3 is not a cryptographic
hash, and producers who can choose keys could search for colliding pairs; Kafka's MD5 is not
collision resistant either (MD5 collisions are cheap to construct), so neither map defends a
topic against hostile producers.

MurmurHash3 of the empty key with seed 0 is all zeros, which marks an empty slot; that hash is
replaced by ``(1, 0, 0)``, which merges two keys only if a key's hash is exactly that value
(2^-96 per key).

Kernels
-------
``put_batch`` and ``get_batch`` run one kernel over whole record columns (see
:mod:`._map_kernels`): ``kernel="numba"`` compiled, ``kernel="python"`` the same source
interpreted (the reference the tests compare against), ``"auto"`` numba when it is installed.
``put`` and ``get`` are one-record batches.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

from compactlog.cleaner import _map_kernels as _k
from compactlog.errors import CompactlogError, ConfigError, OffsetMapFullError, OffsetMapRangeError

MIB = 1 << 20
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
KERNELS = ("auto", "numba", "python")

Data: TypeAlias = bytes | bytearray | memoryview | npt.NDArray[np.uint8]
IntColumn: TypeAlias = npt.NDArray[np.integer[Any]] | Sequence[int]


class OffsetMap(Protocol):
    """What the cleaner needs of a dedupe map; both maps here implement it."""

    slots: int  # capacity in entries
    entry_size: int  # bytes per entry
    load_factor: float

    @property
    def size(self) -> int: ...  # distinct keys (hashes) stored
    @property
    def latest_offset(self) -> int: ...  # -1 after clear
    @property
    def max_desired_size(self) -> int: ...  # floor(slots * load_factor)
    @property
    def utilization(self) -> float: ...  # size / slots
    @property
    def spare_bytes(self) -> int: ...  # of the map's memory, what its table leaves unused
    def clear(self, base_offset: int | None = None, *, expected_puts: int = 0) -> None: ...
    def put(self, key: bytes, offset: int) -> None: ...
    def get(self, key: bytes) -> int: ...
    def update_latest_offset(self, offset: int) -> None: ...
    def put_batch(
        self,
        data: Data,
        key_pos: IntColumn,
        key_len: IntColumn,
        offsets: IntColumn,
        start: int,
        stop: int,
        first_dirty_offset: int,
    ) -> int: ...
    def get_batch(
        self, data: Data, key_pos: IntColumn, key_len: IntColumn
    ) -> npt.NDArray[np.int64]: ...
    def hash_keys(
        self,
        data: Data,
        key_pos: IntColumn,
        key_len: IntColumn,
        start: int = 0,
        stop: int | None = None,
    ) -> HashedKeys: ...
    def put_hashed(self, keys: HashedKeys, offsets: IntColumn, first_dirty_offset: int) -> int: ...
    def track_latest(self, start: int, end: int) -> None: ...
    def latest_marks(
        self, offsets: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None: ...


def keys_per_mib(
    map_class: type[SkimpyOffsetMap | CompactOffsetMap], load_factor: float = 0.9
) -> float:
    """Usable keys per MiB of dedupe buffer: the slots of a 1 MiB map times the load factor."""
    return (MIB // map_class.entry_size) * load_factor


def _select_kernels(kernel: str) -> _k.MapKernels:
    if kernel == "auto":
        kernel = "numba" if _k.numba_available() else "python"
    if kernel == "numba":
        return _k.numba_kernels()
    if kernel == "python":
        return _k.PYTHON_KERNELS
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {', '.join(KERNELS)}")


class _Columns:
    """Key columns, checked and shaped for one kernel (arrays for numba, lists for Python)."""

    def __init__(
        self,
        compiled: bool,
        data: Data,
        key_pos: IntColumn,
        key_len: IntColumn,
        start: int,
        stop: int,
    ) -> None:
        if isinstance(data, np.ndarray):
            if data.dtype != np.uint8 or data.ndim != 1:
                raise ValueError(f"data must be a 1-D uint8 array, not {data.dtype} {data.shape}")
            arr = np.ascontiguousarray(data)
        else:
            arr = np.frombuffer(data, np.uint8)
        pos = np.ascontiguousarray(key_pos, np.int64)
        lens = np.ascontiguousarray(key_len, np.int32)
        n = len(pos)
        if len(lens) != n:
            raise ValueError("key_pos and key_len must have the same length")
        if not 0 <= start <= stop <= n:
            raise ValueError(f"bad record range [{start}, {stop}) of {n} records")
        # The compiled kernel does not check bounds: every key must lie inside data.
        sel_pos = pos[start:stop]
        sel_len = lens[start:stop]
        keyed = sel_len >= 0
        if np.any(keyed & ((sel_pos < 0) | (sel_pos > len(arr) - sel_len.astype(np.int64)))):
            raise ValueError(f"a key lies outside data ({len(arr)} bytes)")
        self.length = n
        self.data: Any
        self.key_pos: Any
        self.key_len: Any
        if compiled:
            # Always read-only, so numba compiles one specialisation, not one per writability.
            self.data = arr.view()
            self.data.flags.writeable = False
            self.key_pos = pos
            self.key_len = lens
        else:
            self.data = arr.data
            self.key_pos = pos.tolist()
            self.key_len = lens.tolist()


@dataclass(frozen=True, eq=False)
class HashedKeys:
    """The keys of records ``[start, stop)`` of some record columns, hashed for one map by
    :meth:`OffsetMap.hash_keys`, ready for :meth:`OffsetMap.put_hashed`. Hashing only reads
    the keys, so it may run on another thread while the map takes earlier puts."""

    start: int
    stop: int
    length: int  # records in the columns
    key_len: Any  # the whole key-length column, as the kernel takes it
    hashes: tuple[Any, ...]  # the kernel's hash tables, one row per record of the range
    owner: object  # the map they were hashed for
    table_slots: int  # the size of its table then, which decides the home slots


_NO_MARKS = np.zeros(1, np.uint8)


def _zeroed_table(
    count: int, dtype: type[np.unsignedinteger[Any]], expected_puts: int
) -> npt.NDArray[Any]:
    """A zeroed array for a map's slots, lazily allocated like ``np.zeros``; backed by
    transparent huge pages (where the OS has them) when the puts to come will touch most of it.

    Puts and gets land on random slots of a table of up to hundreds of MiB: with 4 KiB pages
    nearly every one also misses the TLB. Advising huge pages halved the time of a million puts
    into a 128 MiB map (0.17 s to 0.07 s). But a huge page is zeroed whole on first touch, so
    a round of a few keys would zero the whole table; below one expected put per 4 KiB of
    table (where most small pages stay untouched) the table keeps small pages.
    """
    nbytes = count * np.dtype(dtype).itemsize
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    if advise is None or nbytes < _HUGE_PAGE or expected_puts < nbytes // mmap.PAGESIZE:
        return np.zeros(count, dtype)
    mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(OSError):  # a kernel without THP: ordinary pages
        mapped.madvise(advise)
    return np.frombuffer(mapped, dtype)


_HUGE_PAGE = 2 << 20
# The smallest table a promise of few puts gets (unless the whole map is smaller): 96 KiB of
# Kafka's entries, so that a tiny round does not pay for sizing to the key.
_MIN_TABLE_SLOTS = 4096


class _HashOffsetMap:
    """What both maps share: sizing, the counters, and the calls into the kernels."""

    entry_size: int = 0
    _table_dtype: type[np.unsignedinteger[Any]] = np.uint8

    def __init__(self, memory: int, load_factor: float, kernel: str) -> None:
        if not 0.0 < load_factor <= 1.0:
            raise ConfigError(f"offset map load factor must be in (0, 1], not {load_factor}")
        self.memory = memory
        self.slots = max(0, memory) // self.entry_size
        self.load_factor = load_factor
        if not self.slots * load_factor > 1:
            # Kafka's LogCleaner refuses to start: nothing could ever be cleaned.
            raise ConfigError(
                f"offset map of {memory} bytes ({self.slots} slots at load factor {load_factor}) "
                "is too small to fit in even a single message, so log cleaning will never make "
                "progress; increase log.cleaner.dedupe.buffer.size or decrease "
                "log.cleaner.threads"
            )
        self._kernels = _select_kernels(kernel)
        self.kernel = "numba" if self._kernels.compiled else "python"
        self._table_slots = self.slots
        self._promised_puts = 0  # 0: none, the table has every slot
        self._table = self._new_table(expected_puts=0)
        self._size = 0
        self._latest = -1
        self._marks = _NO_MARKS
        self._marks_base = 0
        self._marks_len = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def latest_offset(self) -> int:
        return self._latest

    @property
    def max_desired_size(self) -> int:
        return int(self.slots * self.load_factor)

    @property
    def utilization(self) -> float:
        return self._size / self.slots

    @property
    def spare_bytes(self) -> int:
        """The memory the map was given that its table does not take: none for a full table,
        most of it for one sized for a few promised puts (see :meth:`clear`)."""
        return max(0, self.memory - self._table.nbytes)

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def clear(self, base_offset: int | None = None, *, expected_puts: int = 0) -> None:
        """Empty the map; latest offset -1.

        ``expected_puts`` > 0 promises at most that many puts before the next clear (the
        cleaner: one per offset it may map), so at most that many keys; a put that finds the
        map holding that many keys breaks the promise and raises ``ValueError``. The map then
        behaves exactly as before (same capacity, same stopping point, same answers: the slot
        a key lands in is never visible), but its table only has room for the promised keys
        at half load when that is smaller than the full table. Kafka zeroes its whole buffer
        every round; a cleaning of 200,000 keys into the default 128 MiB buffer spent 0.09 s
        of its map pass faulting in and zeroing pages it barely used. ``expected_puts`` also
        picks the page size (see :func:`_zeroed_table`).

        The table is a fresh zeroed allocation rather than a zeroed old one: the OS maps zero
        pages lazily, so a round pays only for the pages its keys touch.
        """
        self._table_slots = self.slots
        self._promised_puts = 0
        if expected_puts > 0 and 2 * expected_puts < self.slots:
            self._table_slots = max(2 * expected_puts, min(self.slots, _MIN_TABLE_SLOTS))
            self._promised_puts = expected_puts
        self._table = self._new_table(expected_puts)
        self._size = 0
        self._latest = -1
        self._marks = _NO_MARKS
        self._marks_base = 0
        self._marks_len = 0

    def _new_table(self, expected_puts: int) -> npt.NDArray[Any]:
        itemsize = np.dtype(self._table_dtype).itemsize
        count = self._table_slots * self.entry_size // itemsize
        return _zeroed_table(count, self._table_dtype, expected_puts)

    def track_latest(self, start: int, end: int) -> None:
        """From now on, mark which offsets of ``[start, end)`` are the latest of their key.

        Each put marks its offset and unmarks the key's previous one, so once the map is built,
        a record at offset ``o`` inside the window, mapped by this round, is the latest of its
        key exactly when ``o`` is marked: the cleaner then needs no second hash of its key
        (:meth:`latest_marks`). The window is one bit per offset and at most
        ``memory`` bits (an eighth of the map's own size), allocated lazily like the table.
        """
        self._marks_base = start
        self._marks_len = max(0, min(end - start, self.memory))
        self._marks = np.zeros((self._marks_len + 7) // 8, np.uint8)

    def latest_marks(
        self, offsets: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None:
        """For records at ``offsets``: which lie in the marked window (and were mapped), and
        which of those are marked latest; None when nothing is tracked."""
        if self._marks_len == 0:
            return None
        rel = offsets - self._marks_base
        covered = (rel >= 0) & (rel < self._marks_len) & (offsets <= self._latest)
        safe = np.where(covered, rel, 0)
        marked = covered & ((self._marks[safe >> 3] >> (safe & 7)) & 1).astype(bool)
        return covered, marked

    def _marks_args(self) -> tuple[Any, int, int]:
        marks = self._marks if self._kernels.compiled else self._marks.data
        return marks, self._marks_base, self._marks_len

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (overwriting its entry if present); latest offset = offset.

        Raises :class:`OffsetMapFullError` when ``size >= slots``, even if the key is present.
        """
        if self._size >= self.slots:
            raise OffsetMapFullError("Attempted to add a new entry to a full offset map.")
        if not INT64_MIN <= offset <= INT64_MAX:
            raise ValueError(f"offset {offset} is not an int64")
        keys = self.hash_keys(key, [0], [len(key)])
        stopped = self._capped_put(keys, self._offsets([offset]), INT64_MIN, self.slots)
        if stopped != 1:
            raise self._stop_error(offset)

    def get(self, key: bytes) -> int:
        """The offset mapped for ``key``, or -1."""
        return int(self._get(self.hash_keys(key, [0], [len(key)]))[0])

    def hash_keys(
        self,
        data: Data,
        key_pos: IntColumn,
        key_len: IntColumn,
        start: int = 0,
        stop: int | None = None,
    ) -> HashedKeys:
        """Hash the keys of records ``[start, stop)`` (default: all) for this map. Thread-safe:
        it reads only the keys and the table's size (fixed until the next :meth:`clear`), never
        the table."""
        stop = len(key_pos) if stop is None else stop
        cols = _Columns(self._kernels.compiled, data, key_pos, key_len, start, stop)
        return HashedKeys(
            start,
            stop,
            cols.length,
            cols.key_len,
            self._hash(cols, start, stop),
            self,
            self._table_slots,
        )

    def put_hashed(self, keys: HashedKeys, offsets: IntColumn, first_dirty_offset: int) -> int:
        """:meth:`put_batch` of keys hashed by :meth:`hash_keys`; ``offsets`` is the whole
        offset column of the records they came from."""
        self._check_hashed(keys)
        if len(offsets) != keys.length:
            raise ValueError("key_pos, key_len and offsets must have the same length")
        return self._capped_put(keys, self._offsets(offsets), first_dirty_offset, None)

    def put_batch(
        self,
        data: Data,
        key_pos: IntColumn,
        key_len: IntColumn,
        offsets: IntColumn,
        start: int,
        stop: int,
        first_dirty_offset: int,
    ) -> int:
        """Kafka's map-building loop over records ``[start, stop)`` of record columns.

        ``data`` holds the bytes that ``key_pos`` refers to; ``key_len`` -1 is a null key. In
        order, a record is skipped if it has no key or ``offset < first_dirty_offset``; else, if
        ``size >= max_desired_size`` (checked before every put, even of a key already present:
        Kafka's rule) the loop stops and returns that record's index; else the key is put and
        the latest offset becomes its offset. Returns ``stop`` when every record was processed.
        """
        keys = self.hash_keys(data, key_pos, key_len, start, stop)
        return self.put_hashed(keys, offsets, first_dirty_offset)

    def get_batch(
        self, data: Data, key_pos: IntColumn, key_len: IntColumn
    ) -> npt.NDArray[np.int64]:
        """``get`` of every record's key: an int64 array, -1 for null and absent keys."""
        return self._get(self.hash_keys(data, key_pos, key_len))

    def _check_hashed(self, keys: HashedKeys) -> None:
        if keys.owner is not self:
            raise ValueError("the keys were hashed for another offset map")
        if keys.table_slots != self._table_slots:
            raise ValueError("the keys were hashed before the map was last cleared")

    def _capped_put(
        self, keys: HashedKeys, offsets: Any, first_dirty: int, max_desired: int | None
    ) -> int:
        """``_put`` with Kafka's stopping size (``max_desired``; None: ``max_desired_size``),
        lowered to the puts promised to :meth:`clear` when the table was sized for them."""
        if max_desired is None:
            max_desired = self.max_desired_size
        cap = min(max_desired, self._promised_puts or max_desired)
        index = self._put(keys, offsets, first_dirty, cap)
        # The kernel checks the size first: a stop at the cap below Kafka's is the promise's.
        if cap < max_desired and self._size >= cap and index < keys.stop:
            raise ValueError(
                f"more than the {cap} puts promised to clear(expected_puts=...); the "
                "table was sized for that many keys"
            )
        return index

    def _offsets(self, offsets: IntColumn) -> Any:
        if self._kernels.compiled:
            return np.ascontiguousarray(offsets, np.int64)
        return np.asarray(offsets, np.int64).tolist()

    def _new(self, n: int) -> Any:
        """A kernel table of n int64 values: an array for numba, a list for the Python kernel."""
        return np.zeros(n, np.int64) if self._kernels.compiled else [0] * n

    def _table_view(self) -> Any:
        return self._table if self._kernels.compiled else self._table.data

    def _hash(self, cols: _Columns, start: int, stop: int) -> tuple[Any, ...]:
        raise NotImplementedError

    def _put(self, keys: HashedKeys, offsets: Any, first_dirty: int, max_desired: int) -> int:
        raise NotImplementedError

    def _get(self, keys: HashedKeys) -> npt.NDArray[np.int64]:
        raise NotImplementedError

    def _stop_error(self, offset: int) -> CompactlogError:
        return OffsetMapFullError("Attempted to add a new entry to a full offset map.")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(slots={self.slots}, size={self._size}, "
            f"latest_offset={self._latest}, kernel={self.kernel!r})"
        )


class SkimpyOffsetMap(_HashOffsetMap):
    """Kafka's ``SkimpyOffsetMap``: MD5 digest + big-endian offset, 24 bytes an entry.

    ``slots = memory // 24``; the table is one uint8 array. The probe sequence, ``get``'s limit
    of ``slots + 12`` probes and the full-map error are Kafka's (spec 5.1). Kafka caps
    ``memory`` at ``Int.MaxValue`` (its ``LogCleaner`` does, per thread); this class does not.
    ``clear`` accepts a ``base_offset`` so that callers can treat both maps alike; it is unused.
    """

    entry_size = _k.SKIMPY_ENTRY_SIZE
    _table_dtype = np.uint8

    def __init__(
        self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR, *, kernel: str = "auto"
    ) -> None:
        super().__init__(memory, load_factor, kernel)

    def _hash(self, cols: _Columns, start: int, stop: int) -> tuple[Any, ...]:
        n = stop - start
        digests: Any
        if self._kernels.compiled:
            digests = np.zeros(n * _k.SKIMPY_HASH_SIZE, np.uint8)
            dwords = digests.view(np.int64)
        else:
            digests = bytearray(n * _k.SKIMPY_HASH_SIZE)
            dwords = memoryview(digests).cast("q")
        home = self._new(n)
        self._kernels.skimpy_hash_batch(
            self._table_slots,
            cols.data,
            cols.key_pos,
            cols.key_len,
            start,
            stop,
            self._new(16),
            self._new(16),
            digests,
            home,
        )
        return digests, dwords, home

    def _words(self) -> Any:
        """The table as int64 words (see ``_map_kernels``: compared, never computed with)."""
        if self._kernels.compiled:
            return self._table.view(np.int64)
        return self._table.data.cast("q")

    def _put(self, keys: HashedKeys, offsets: Any, first_dirty: int, max_desired: int) -> int:
        digests, dwords, home = keys.hashes
        index, size, latest, _ = self._kernels.skimpy_put_hashed(
            self._table_view(),
            self._words(),
            self._table_slots,
            keys.key_len,
            offsets,
            keys.start,
            keys.stop,
            first_dirty,
            max_desired,
            self._size,
            self._latest,
            digests,
            dwords,
            home,
            *self._marks_args(),
        )
        self._size = int(size)
        self._latest = int(latest)
        return int(index)

    def _get(self, keys: HashedKeys) -> npt.NDArray[np.int64]:
        digests, dwords, home = keys.hashes
        out = self._new(keys.length)
        self._kernels.skimpy_get_hashed(
            self._table_view(),
            self._words(),
            self._table_slots,
            keys.key_len,
            digests,
            dwords,
            home,
            out,
        )
        return np.asarray(out, np.int64)


class CompactOffsetMap(_HashOffsetMap):
    """16-byte entries: a 96-bit MurmurHash3 key hash and a 32-bit offset relative to a base.

    Layout: a uint32 array, four words an entry: the hash (the first 12 bytes of
    MurmurHash3_x64_128 with seed 0, as three little-endian words; all zeros means empty) and
    ``offset - base_offset``. Linear probing from slot ``hash mod slots``; ``get`` stops at an
    empty slot or after ``slots`` probes. See the module docstring for the collision arithmetic.
    """

    entry_size = _k.COMPACT_ENTRY_SIZE
    _table_dtype = np.uint32

    def __init__(
        self,
        memory: int,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        base_offset: int = 0,
        *,
        kernel: str = "auto",
    ) -> None:
        super().__init__(memory, load_factor, kernel)
        self._base = self._checked_base(base_offset)

    @property
    def base_offset(self) -> int:
        """Offsets are stored as ``offset - base_offset``, in ``[0, 2^32)``."""
        return self._base

    @property
    def max_offset(self) -> int:
        """The largest offset this map can hold with its current base."""
        return self._base + _k.COMPACT_MAX_RELATIVE

    def clear(self, base_offset: int | None = None, *, expected_puts: int = 0) -> None:
        """Empty the map; with ``base_offset``, offsets from then on are stored relative to it
        (the cleaner passes the first dirty offset). Without it the base stays as it was."""
        super().clear(expected_puts=expected_puts)
        if base_offset is not None:
            self._base = self._checked_base(base_offset)

    def put(self, key: bytes, offset: int) -> None:
        """As :meth:`SkimpyOffsetMap.put`; also raises :class:`OffsetMapRangeError` for an offset
        outside ``[base_offset, base_offset + 2^32)`` unless the map is empty, in which case
        that offset becomes the base."""
        if 0 < self._size < self.slots and not self._base <= offset <= self.max_offset:
            raise self._stop_error(offset)
        super().put(key, offset)

    @staticmethod
    def _checked_base(base_offset: int) -> int:
        if not 0 <= base_offset <= INT64_MAX - _k.COMPACT_MAX_RELATIVE:
            raise ValueError(f"base offset {base_offset} out of range")
        return base_offset

    def _stop_error(self, offset: int) -> CompactlogError:
        if self._size >= self.slots:
            return super()._stop_error(offset)
        return OffsetMapRangeError(
            f"offset {offset} does not fit in the offset map: it stores offsets in "
            f"[{self._base}, {self.max_offset}] (base offset + 32 bits); clear the map with a "
            "new base_offset and start a new pass"
        )

    def _hash(self, cols: _Columns, start: int, stop: int) -> tuple[Any, ...]:
        rows = self._new((stop - start) * _k.COMPACT_ROW)
        self._kernels.compact_hash_batch(
            self._table_slots, cols.data, cols.key_pos, cols.key_len, start, stop, rows
        )
        return (rows,)

    def _put(self, keys: HashedKeys, offsets: Any, first_dirty: int, max_desired: int) -> int:
        index, size, latest, base, _ = self._kernels.compact_put_hashed(
            self._table_view(),
            self._table_slots,
            keys.key_len,
            offsets,
            keys.start,
            keys.stop,
            first_dirty,
            max_desired,
            self._size,
            self._latest,
            self._base,
            keys.hashes[0],
            *self._marks_args(),
        )
        self._size = int(size)
        self._latest = int(latest)
        self._base = int(base)
        return int(index)

    def _get(self, keys: HashedKeys) -> npt.NDArray[np.int64]:
        out = self._new(keys.length)
        self._kernels.compact_get_hashed(
            self._table_view(), self._table_slots, keys.key_len, self._base, keys.hashes[0], out
        )
        return np.asarray(out, np.int64)
