"""Bulk decoding of record batches into columns: numpy arrays, no Python object per record.

:func:`decode_columns` takes a buffer of whole v2 batches back to back (a segment file's bytes, a
produce request's record set) and returns a :class:`RecordColumns`: for record ``i``, its offset,
timestamp, and where its key, value and headers lie in ``data``. Keys and values are not copied
out; ask for ``key(i)``/``value(i)``, or everything at once with ``to_records()``.

How the work is split:

* per batch: header parse and checks, and the count check that stops a header claiming 2^31
  records before any array is allocated. Buffers of 16 KiB and more are framed by a compiled
  scan into one table of header fields (``RecordColumns.batch_table``); smaller ones, and any
  buffer the scan cannot frame cleanly, by a Python loop that also names the problem. Then, in
  Python, only the batches that need it: CRC-32C (C) and decompression (Rust);
* per record, in a kernel (:mod:`compactlog.records._kernels`): walk the varints, check every
  length against the bytes, and record positions. ``kernel="numba"`` is the compiled kernel,
  ``kernel="python"`` the same source run by the interpreter (the reference); ``"auto"`` picks
  numba when it is installed. Both give identical arrays and identical errors;
* offsets and timestamps are finished with numpy: base + delta per batch, and LogAppendTime
  batches take their maxTimestamp for every record.

Positions in ``data``: when no batch is compressed, ``data`` is the input itself (no copy when
the input is ``bytes``). Compressed batches are decompressed into new buffers that are appended
after the input (or, when every batch is compressed, make up ``data`` on their own), and their
records' positions point there.

Validation is that of Kafka's reader, made strict: every record length must fit the bytes left
and equal the bytes its fields take; after ``recordsCount`` records no byte may remain; key and
value lengths must be >= -1, header counts and header key lengths >= 0, header keys UTF-8.
Every failure is a :class:`CorruptRecordError` naming the batch, the field, the position and
the numbers.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from compactlog.errors import CorruptRecordError
from compactlog.records import _kernels
from compactlog.records.batch_header import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)
from compactlog.records.compression import Compression, decompress
from compactlog.records.record import Buffer, Header, Record
from compactlog.records.varint import decode_varint

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]

KERNELS = ("auto", "numba", "python")

# Below this many records a GC pass is unlikely during to_records(), so it is not paused.
_GC_PAUSE_MIN_RECORDS = 2000


class RecordColumns:
    """Records of one or more batches as parallel arrays (see the module docstring).

    Per record (length ``n``): ``offsets``, ``timestamps`` (int64), ``key_pos``/``value_pos``/
    ``headers_pos``/``record_pos`` (int64 positions in ``data``; a record starts at its length
    varint), ``key_len``/``value_len`` (int32, -1 = null),
    ``headers_count`` (int32), ``batch_index`` (int32, the batch of the input it came from).

    Per batch: ``batch_table``, the header fields as one int64 row per batch (columns as
    ``compactlog.records._kernels.HEADER_COLUMNS``: the 13 header fields in file order, then the
    batch's byte position in the input), and views of it: ``batch_position``, ``batch_size``,
    ``batch_base_offset``, ``batch_last_offset``, ``batch_attributes``,
    ``batch_records_count``, ``batch_base_timestamp``, ``batch_max_timestamp``.
    ``batch_headers`` (a :class:`BatchHeader` per batch) is built on first use.
    """

    def __init__(
        self,
        *,
        data: bytes | memoryview,
        offsets: Int64Array,
        timestamps: Int64Array,
        key_pos: Int64Array,
        key_len: Int32Array,
        value_pos: Int64Array,
        value_len: Int32Array,
        headers_pos: Int64Array,
        headers_count: Int32Array,
        record_pos: Int64Array,
        batch_index: Int32Array,
        batch_table: Int64Array,
        batch_headers: list[BatchHeader] | None = None,
    ) -> None:
        self.data = data
        self.offsets = offsets
        self.timestamps = timestamps
        self.key_pos = key_pos
        self.key_len = key_len
        self.value_pos = value_pos
        self.value_len = value_len
        self.headers_pos = headers_pos
        self.record_pos = record_pos
        self.headers_count = headers_count
        self.batch_index = batch_index
        self.batch_table = batch_table
        if batch_headers is not None:
            self.__dict__["batch_headers"] = batch_headers

    @cached_property
    def batch_headers(self) -> list[BatchHeader]:
        rows = self.batch_table[:, : _kernels.H_POSITION].tolist()
        return list(map(BatchHeader._make, rows))

    @property
    def batch_count(self) -> int:
        return len(self.batch_table)

    @property
    def batch_position(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_POSITION]

    @cached_property
    def batch_size(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_BATCH_LENGTH] + LOG_OVERHEAD

    @property
    def batch_base_offset(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_BASE_OFFSET]

    @cached_property
    def batch_last_offset(self) -> Int64Array:
        return (
            self.batch_table[:, _kernels.H_BASE_OFFSET]
            + self.batch_table[:, _kernels.H_LAST_OFFSET_DELTA]
        )

    @property
    def batch_attributes(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_ATTRIBUTES]

    @property
    def batch_producer_id(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_PRODUCER_ID]

    @property
    def batch_records_count(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_RECORDS_COUNT]

    @property
    def batch_base_timestamp(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_BASE_TIMESTAMP]

    @property
    def batch_max_timestamp(self) -> Int64Array:
        return self.batch_table[:, _kernels.H_MAX_TIMESTAMP]

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records in {self.batch_count} batches)"

    def key(self, i: int) -> bytes | None:
        n = int(self.key_len[i])
        if n < 0:
            return None
        p = int(self.key_pos[i])
        return bytes(self.data[p : p + n])

    def value(self, i: int) -> bytes | None:
        n = int(self.value_len[i])
        if n < 0:
            return None
        p = int(self.value_pos[i])
        return bytes(self.data[p : p + n])

    def headers(self, i: int) -> tuple[Header, ...]:
        count = int(self.headers_count[i])
        if count == 0:
            return ()
        data = self.data
        pos = int(self.headers_pos[i])
        out: list[Header] = []
        # Already validated by the kernel: lengths fit and keys are UTF-8.
        for _ in range(count):
            key_len, pos = decode_varint(data, pos)
            name = bytes(data[pos : pos + key_len]).decode("utf-8")
            pos += key_len
            value_len, pos = decode_varint(data, pos)
            if value_len < 0:
                out.append((name, None))
            else:
                out.append((name, bytes(data[pos : pos + value_len])))
                pos += value_len
        return tuple(out)

    def _slices(self, pos: Int64Array, length: Int32Array) -> list[bytes | None]:
        # map/slice run in C: one bytes object per record and no Python frame.
        # A null (length -1) gives an empty slice here, then None below.
        starts = pos.tolist()
        ends = (pos + length).tolist()
        data = self.data if isinstance(self.data, bytes) else bytes(self.data)
        out: list[bytes | None] = list(map(data.__getitem__, map(slice, starts, ends)))
        nulls = length < 0
        if nulls.any():
            for i in np.flatnonzero(nulls).tolist():
                out[i] = None
        return out

    def keys(self) -> list[bytes | None]:
        """Every key, in record order (None for a null key)."""
        return self._slices(self.key_pos, self.key_len)

    def values(self) -> list[bytes | None]:
        """Every value, in record order (None for a null value)."""
        return self._slices(self.value_pos, self.value_len)

    def all_headers(self) -> list[tuple[Header, ...]]:
        """Every record's headers, in record order."""
        out: list[tuple[Header, ...]] = [()] * len(self)
        for i in np.flatnonzero(self.headers_count).tolist():
            out[i] = self.headers(i)
        return out

    def has_null_key(self) -> bool:
        return bool((self.key_len < 0).any())

    def to_records(self) -> list[Record]:
        """Every record as a :class:`Record`, built without a Python-level loop per record."""
        n = len(self)
        if n == 0:
            return []
        if n < _GC_PAUSE_MIN_RECORDS:
            return self._to_records()
        # The cyclic GC would scan the growing list again and again while it fills, doubling
        # the cost for large n; none of these objects can form a cycle, so pause it meanwhile.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._to_records()
        finally:
            if was_enabled:
                gc.enable()

    def _to_records(self) -> list[Record]:
        headers: Any = self.all_headers() if self.headers_count.any() else repeat((), len(self))
        rows = zip(
            self.offsets.tolist(),
            self.timestamps.tolist(),
            self.keys(),
            self.values(),
            headers,
            strict=True,
        )
        # tuple.__new__(Record, row) is what Record._make does, minus a Python-level call.
        return list(map(tuple.__new__, repeat(Record), rows))


# --------------------------------------------------------------------------------------------


def _select_kernel(kernel: str) -> tuple[Callable[..., int], bool]:
    if kernel == "auto":
        kernel = "numba" if _kernels.numba_available() else "python"
    if kernel == "numba":
        return _kernels.numba_walk_records(), True
    if kernel == "python":
        return _kernels.walk_records, False
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {', '.join(KERNELS)}")


def _batch_error(
    exc_type: type[CorruptRecordError], position: int, header: BatchHeader, message: str
) -> CorruptRecordError:
    return exc_type(
        f"record batch at position {position} (base offset {header.base_offset}): {message}"
    )


def _check_count(
    count: int, available: int, position: int, header: BatchHeader, what: str = "of records"
) -> None:
    # A record takes at least MIN_RECORD_SIZE bytes: refuse impossible counts before the
    # per-record arrays are sized from them (or a stream is decompressed for them).
    if count > available // MIN_RECORD_SIZE:
        raise _batch_error(
            CorruptRecordError,
            position,
            header,
            f"recordsCount {count} cannot fit in {available} bytes {what} "
            f"(a record takes at least {MIN_RECORD_SIZE} bytes)",
        )


def decode_columns(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_decompressed: int | None = None,
    kernel: str = "auto",
) -> RecordColumns:
    """Decode a buffer of whole v2 batches into :class:`RecordColumns`.

    ``verify_crc`` checks each batch's CRC first. ``max_decompressed`` bounds the decompressed
    records section of each compressed batch. ``kernel`` is ``"auto"``, ``"numba"`` or
    ``"python"``. Raises CorruptRecordError (UnsupportedCompressionError for codec ids 5-7);
    ValueError only for bad arguments.
    """
    walk, compiled = _select_kernel(kernel)
    if max_decompressed is not None and max_decompressed < 0:
        raise ValueError(f"max_decompressed must be >= 0, not {max_decompressed}")
    # bytes and read-only byte views (a memory-mapped segment) are decoded in place.
    source = buf if isinstance(buf, bytes | memoryview) and _is_flat(buf) else bytes(buf)
    try:
        return _decode(source, walk, compiled, verify_crc, max_decompressed)
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        # Every length is checked before it is used, so this is a backstop: whatever slipped
        # through is still reported as corrupt data, not as a crash.
        raise CorruptRecordError(f"malformed record batch data: {exc!r}") from exc


def _is_flat(buf: bytes | memoryview) -> bool:
    return isinstance(buf, bytes) or (buf.format in ("B", "b", "c") and buf.contiguous)


# Buffers at least this long are framed by the compiled header scan; below it the Python loop
# is as fast (one or a few batches). Both give identical tables and identical errors.
_SCAN_MIN_BYTES = 16384
_NO_TABLE = np.empty((0, _kernels.HEADER_COLUMNS), np.int64)


@dataclass
class _Framing:
    """Where each batch's records section lies in ``data`` (see the module docstring)."""

    table: Int64Array
    headers: list[BatchHeader] | None  # when the Python loop parsed them anyway
    data: bytes | memoryview
    sec_start: Int64Array
    sec_end: Int64Array
    sec_count: Int64Array
    decompressed: npt.NDArray[np.bool_]


def _decode(
    source: bytes | memoryview,
    walk: Callable[..., int],
    compiled: bool,
    verify_crc: bool,
    max_decompressed: int | None,
) -> RecordColumns:
    framing = None
    if compiled and len(source) >= _SCAN_MIN_BYTES:
        framing = _frame_scanned(source, verify_crc, max_decompressed)
    if framing is None:  # the Python loop, which also names whatever does not frame
        framing = _frame_python(source, verify_crc, max_decompressed)
    table = framing.table
    data = framing.data
    sec_count = framing.sec_count
    n = int(sec_count.sum())
    out64: Any
    out32: Any
    err: Any
    sections: Any
    if compiled:
        out64 = np.empty((_kernels.OUT64_ROWS, n), np.int64)
        out32 = np.empty((_kernels.OUT32_ROWS, n), np.int32)
        err = np.zeros(_kernels.ERR_SIZE, np.int64)
        sections = np.array([framing.sec_start, framing.sec_end, sec_count], np.int64)
        status = walk(np.frombuffer(data, np.uint8), sections, out64, out32, err)
    else:
        out64 = [[0] * n for _ in range(_kernels.OUT64_ROWS)]
        out32 = [[0] * n for _ in range(_kernels.OUT32_ROWS)]
        err = [0] * _kernels.ERR_SIZE
        sections = [framing.sec_start.tolist(), framing.sec_end.tolist(), sec_count.tolist()]
        status = walk(data, sections, out64, out32, err)
        out64 = np.array(out64, np.int64).reshape(_kernels.OUT64_ROWS, n)
        out32 = np.array(out32, np.int32).reshape(_kernels.OUT32_ROWS, n)
    if status != _kernels.OK:
        raise _kernel_error([int(x) for x in err], framing)

    # Offsets and timestamps: base + delta per batch, in place in the output rows. numpy
    # integer arrays wrap on overflow, like Java's long arithmetic.
    offsets = out64[_kernels.OUT_OFFSET_DELTA]
    timestamps = out64[_kernels.OUT_TS_DELTA]
    nb = len(table)
    if nb == 1:
        # One batch (RecordBatch.records()): scalars instead of gathers.
        row = table[0]
        batch_index = np.zeros(n, np.int32)
        offsets += row[_kernels.H_BASE_OFFSET]
        if row[_kernels.H_ATTRIBUTES] & TIMESTAMP_TYPE_MASK:
            timestamps[:] = row[_kernels.H_MAX_TIMESTAMP]
        else:
            timestamps += row[_kernels.H_BASE_TIMESTAMP]
    else:
        batch_index = np.repeat(np.arange(nb, dtype=np.int32), sec_count)
        offsets += table[:, _kernels.H_BASE_OFFSET][batch_index]
        timestamps += table[:, _kernels.H_BASE_TIMESTAMP][batch_index]
        log_append = (table[:, _kernels.H_ATTRIBUTES] & TIMESTAMP_TYPE_MASK) != 0
        if log_append.any():
            per_record = log_append[batch_index]
            timestamps[per_record] = table[:, _kernels.H_MAX_TIMESTAMP][batch_index[per_record]]

    return RecordColumns(
        data=data,
        offsets=offsets,
        timestamps=timestamps,
        key_pos=out64[_kernels.OUT_KEY_POS],
        key_len=out32[_kernels.OUT_KEY_LEN],
        value_pos=out64[_kernels.OUT_VALUE_POS],
        value_len=out32[_kernels.OUT_VALUE_LEN],
        headers_pos=out64[_kernels.OUT_HEADERS_POS],
        headers_count=out32[_kernels.OUT_HEADERS_COUNT],
        record_pos=out64[_kernels.OUT_RECORD_POS],
        batch_index=batch_index,
        batch_table=table,
        batch_headers=framing.headers,
    )


def _header_of(table: Int64Array, b: int) -> BatchHeader:
    return BatchHeader._make(table[b, : _kernels.H_POSITION].tolist())


def _check_crc(source: bytes | memoryview, pos: int, size: int, header: BatchHeader) -> None:
    computed = compute_crc(source, pos, size)
    if computed != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch at offset {header.base_offset}: "
            f"stored 0x{header.crc:08x}, computed 0x{computed:08x} (position {pos})"
        )


def _decompress_section(
    source: bytes | memoryview, pos: int, size: int, header: BatchHeader, limit: int | None
) -> bytes:
    if limit is not None:
        _check_count(header.records_count, limit, pos, header, "(max_decompressed)")
    try:
        codec = Compression.from_id(header.attributes & COMPRESSION_CODEC_MASK)
        with memoryview(source) as view:
            section = decompress(codec, view[pos + RECORD_BATCH_OVERHEAD : pos + size], limit)
    except CorruptRecordError as exc:  # add which batch; keep the class
        raise _batch_error(type(exc), pos, header, str(exc)) from exc
    _check_count(header.records_count, len(section), pos, header)
    return section


def _join(
    source: bytes | memoryview,
    chunks: list[bytes],
    plain_bytes: bool,
    sec_start: Int64Array,
    sec_end: Int64Array,
    decompressed: npt.NDArray[np.bool_],
) -> bytes | memoryview:
    """The records' buffer: the input, the decompressed sections, or both one after the other
    (then the decompressed sections' positions move past the input)."""
    if not chunks:
        return source
    if not plain_bytes:
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    sec_start[decompressed] += len(source)
    sec_end[decompressed] += len(source)
    return b"".join([source, *chunks])


def _frame_scanned(
    source: bytes | memoryview, verify_crc: bool, max_decompressed: int | None
) -> _Framing | None:
    """Frame with the compiled header scan; None when something does not frame cleanly."""
    scan = _kernels.numba_scan_batches()
    raw = np.frombuffer(source, np.uint8)
    nb = scan(raw, len(source), _NO_TABLE, False)
    if nb < 0:
        return None
    table = np.empty((nb, _kernels.HEADER_COLUMNS), np.int64)
    scan(raw, len(source), table, True)
    pos = table[:, _kernels.H_POSITION]
    size = table[:, _kernels.H_BATCH_LENGTH] + LOG_OVERHEAD
    count = table[:, _kernels.H_RECORDS_COUNT].copy()
    codec = table[:, _kernels.H_ATTRIBUTES] & COMPRESSION_CODEC_MASK
    sec_start = pos + RECORD_BATCH_OVERHEAD
    sec_end = pos + size
    no_section = (codec != Compression.NONE) & (count == 0) & (size == RECORD_BATCH_OVERHEAD)
    sec_start[no_section] = 0
    sec_end[no_section] = 0
    decompressed = (codec != Compression.NONE) & ~no_section
    plain_bytes = bool(((codec == Compression.NONE) & (size > RECORD_BATCH_OVERHEAD)).any())
    chunks: list[bytes] = []
    chunks_size = 0
    # Per batch in Python only what needs it, in batch order (so errors come in the same
    # order as from the Python loop): CRC checks, decompression.
    slow = range(nb) if verify_crc else np.flatnonzero(decompressed).tolist()
    for b in slow:
        p, sz = int(pos[b]), int(size[b])
        if verify_crc:
            _check_crc(source, p, sz, _header_of(table, b))
        if decompressed[b]:
            section = _decompress_section(source, p, sz, _header_of(table, b), max_decompressed)
            sec_start[b] = chunks_size
            chunks_size += len(section)
            sec_end[b] = chunks_size
            chunks.append(section)
    data = _join(source, chunks, plain_bytes, sec_start, sec_end, decompressed)
    return _Framing(table, None, data, sec_start, sec_end, count, decompressed)


def _frame_python(
    source: bytes | memoryview, verify_crc: bool, max_decompressed: int | None
) -> _Framing:
    total = len(source)
    headers: list[BatchHeader] = []
    rows: list[tuple[int, ...]] = []
    sec_start: list[int] = []
    sec_end: list[int] = []
    decompressed: list[bool] = []
    chunks: list[bytes] = []
    chunks_size = 0
    plain_bytes = False
    pos = 0
    while pos < total:
        header = read_header(source, pos)
        size = header.batch_length + LOG_OVERHEAD
        if size > total - pos:
            raise _batch_error(
                CorruptRecordError,
                pos,
                header,
                f"batch is {size} bytes but only {total - pos} remain in the buffer",
            )
        if verify_crc:
            _check_crc(source, pos, size, header)
        count = header.records_count
        section_size = size - RECORD_BATCH_OVERHEAD
        codec_id = header.attributes & COMPRESSION_CODEC_MASK
        if codec_id == Compression.NONE:
            _check_count(count, section_size, pos, header)
            start = pos + RECORD_BATCH_OVERHEAD
            end = pos + size
            plain_bytes = plain_bytes or section_size > 0
            in_chunk = False
        elif count == 0 and section_size == 0:
            start = end = 0
            in_chunk = False
        else:
            section = _decompress_section(source, pos, size, header, max_decompressed)
            start = chunks_size
            end = chunks_size + len(section)
            chunks.append(section)
            chunks_size = end
            in_chunk = True
        headers.append(header)
        rows.append((*header, pos))
        sec_start.append(start)
        sec_end.append(end)
        decompressed.append(in_chunk)
        pos += size
    table = np.array(rows, np.int64).reshape(len(rows), _kernels.HEADER_COLUMNS)
    starts = np.array(sec_start, np.int64)
    ends = np.array(sec_end, np.int64)
    flags = np.array(decompressed, bool)
    data = _join(source, chunks, plain_bytes, starts, ends, flags)
    counts = table[:, _kernels.H_RECORDS_COUNT].copy()
    return _Framing(table, headers, data, starts, ends, counts, flags)


def _kernel_error(err: list[int], framing: _Framing) -> CorruptRecordError:
    """Turn the kernel's status record into a CorruptRecordError with the numbers."""
    k = _kernels
    status, field_id, b, pos, a, c = err
    field = k.FIELD_NAMES[field_id]
    if framing.decompressed[b]:
        where = f"byte {pos - int(framing.sec_start[b])} of the decompressed records"
    else:
        where = f"position {pos}"
    if status == k.E_VARINT_TRUNCATED:
        limit = "records section" if field_id == k.F_RECORD_LENGTH else "record"
        message = f"{field} varint at {where} runs past the end of the {limit}"
    elif status == k.E_VARINT_TOO_LONG:
        longest = 10 if field_id == k.F_TIMESTAMP_DELTA else 5
        message = f"{field} varint at {where} is longer than {longest} bytes"
    elif status == k.E_VARINT_OVERFLOW:
        bits = 64 if field_id == k.F_TIMESTAMP_DELTA else 32
        message = f"{field} varint at {where} does not fit in {bits} bits"
    elif status == k.E_RECORD_LENGTH:
        message = (
            f"record length {a} at {where} is negative"
            if a < 0
            else f"record length {a} at {where} exceeds the {c} bytes left in the batch"
        )
    elif status == k.E_FIELD_MISSING:
        message = f"record ends before its attributes byte at {where}"
    elif status == k.E_BAD_LENGTH:
        message = f"invalid {field} {a} at {where}"
    elif status == k.E_PAST_END:
        message = f"{field} of {a} bytes at {where} runs past the end of its record ({c} left)"
    elif status == k.E_SIZE_MISMATCH:
        message = f"record at {where} has length {a} but its fields take {c} bytes"
    elif status == k.E_LEFTOVER:
        records = int(framing.sec_count[b])
        message = f"{a} bytes left over after the last of {records} records, at {where}"
    elif status == k.E_HEADER_KEY_UTF8:
        message = f"header key of {a} bytes at {where} is not valid UTF-8"
    else:  # pragma: no cover - the kernel has no other status
        message = f"record decoder status {status} at {where}"
    position = int(framing.table[b, _kernels.H_POSITION])
    return _batch_error(CorruptRecordError, position, _header_of(framing.table, b), message)
