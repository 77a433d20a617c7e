"""Bulk decoding of record batches into columns: numpy arrays, no Python object per record.

:func:`decode_columns` takes a buffer of whole v2 batches back to back (a segment file's bytes, a
produce request's record set) and returns a :class:`RecordColumns`: for record ``i``, its offset,
timestamp, and where its key, value and headers lie in ``data``. Keys and values are not copied
out; ask for ``key(i)``/``value(i)``, or everything at once with ``to_records()``.

How the work is split:

* per batch, in Python: header parse and checks, CRC-32C (C), decompression (Rust), and the
  count check that stops a header claiming 2^31 records before any array is allocated;
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
from functools import cached_property
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from compactlog.errors import CorruptRecordError
from compactlog.records import _kernels
from compactlog.records.batch import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
    Header,
    Record,
    compute_crc,
    read_header,
)
from compactlog.records.compression import Compression, decompress
from compactlog.records.varint import decode_varint

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]

KERNELS = ("auto", "numba", "python")

# Below this many records a GC pass is unlikely during to_records(), so it is not paused.
_GC_PAUSE_MIN_RECORDS = 2000


class RecordColumns:
    """Records of one or more batches as parallel arrays (see the module docstring).

    Per record (length ``n``): ``offsets``, ``timestamps`` (int64), ``key_pos``/``value_pos``/
    ``headers_pos`` (int64 positions in ``data``), ``key_len``/``value_len`` (int32, -1 = null),
    ``headers_count`` (int32), ``batch_index`` (int32, the batch of the input it came from).

    Per batch: ``batch_headers`` (the parsed :class:`BatchHeader` of each batch) and, built
    on first use, ``batch_position`` (byte position in the input), ``batch_size``,
    ``batch_base_offset``, ``batch_last_offset``, ``batch_attributes``, ``batch_records_count``,
    ``batch_base_timestamp``, ``batch_max_timestamp`` (all int64).
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
        batch_index: Int32Array,
        batch_headers: list[BatchHeader],
        batch_positions: list[int],
        batch_sizes: list[int],
    ) -> None:
        self.data = data
        self.offsets = offsets
        self.timestamps = timestamps
        self.key_pos = key_pos
        self.key_len = key_len
        self.value_pos = value_pos
        self.value_len = value_len
        self.headers_pos = headers_pos
        self.headers_count = headers_count
        self.batch_index = batch_index
        self.batch_headers = batch_headers
        self._batch_positions = batch_positions
        self._batch_sizes = batch_sizes

    # Per-batch header fields, built when asked for: RecordBatch.records() never needs them.
    def _header_field(self, name: str) -> Int64Array:
        return np.array([getattr(h, name) for h in self.batch_headers], np.int64)

    @cached_property
    def batch_position(self) -> Int64Array:
        return np.array(self._batch_positions, np.int64)

    @cached_property
    def batch_size(self) -> Int64Array:
        return np.array(self._batch_sizes, np.int64)

    @cached_property
    def batch_base_offset(self) -> Int64Array:
        return self._header_field("base_offset")

    @cached_property
    def batch_last_offset(self) -> Int64Array:
        return self._header_field("last_offset")

    @cached_property
    def batch_attributes(self) -> Int64Array:
        return self._header_field("attributes")

    @cached_property
    def batch_records_count(self) -> Int64Array:
        return self._header_field("records_count")

    @cached_property
    def batch_base_timestamp(self) -> Int64Array:
        return self._header_field("base_timestamp")

    @cached_property
    def batch_max_timestamp(self) -> Int64Array:
        return self._header_field("max_timestamp")

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records in {len(self.batch_headers)} batches)"

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


def _decode(
    source: bytes | memoryview,
    walk: Callable[..., int],
    compiled: bool,
    verify_crc: bool,
    max_decompressed: int | None,
) -> RecordColumns:
    total = len(source)

    headers: list[BatchHeader] = []
    positions: list[int] = []
    sizes: list[int] = []
    sec_start: list[int] = []
    sec_end: list[int] = []
    sec_count: list[int] = []
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
            computed = compute_crc(source, pos, size)
            if computed != header.crc:
                raise CorruptRecordError(
                    f"record batch CRC mismatch at offset {header.base_offset}: "
                    f"stored 0x{header.crc:08x}, computed 0x{computed:08x} (position {pos})"
                )
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
            if max_decompressed is not None:
                _check_count(count, max_decompressed, pos, header, "(max_decompressed)")
            try:
                codec = Compression.from_id(codec_id)
                with memoryview(source) as view:
                    section = decompress(
                        codec, view[pos + RECORD_BATCH_OVERHEAD : pos + size], max_decompressed
                    )
            except CorruptRecordError as exc:  # add which batch; keep the class
                raise _batch_error(type(exc), pos, header, str(exc)) from exc
            _check_count(count, len(section), pos, header)
            start = chunks_size
            end = chunks_size + len(section)
            chunks.append(section)
            chunks_size = end
            in_chunk = True
        headers.append(header)
        positions.append(pos)
        sizes.append(size)
        sec_start.append(start)
        sec_end.append(end)
        sec_count.append(count)
        decompressed.append(in_chunk)
        pos += size

    # Where the records live: the input, the decompressed sections, or both one after the other.
    if not chunks:
        data = source
    elif not plain_bytes:
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    else:
        data = b"".join([source, *chunks])
        for b, in_chunk in enumerate(decompressed):
            if in_chunk:
                sec_start[b] += total
                sec_end[b] += total

    n = sum(sec_count)
    out64: Any
    out32: Any
    err: Any
    if compiled:
        out64 = np.empty((_kernels.OUT64_ROWS, n), np.int64)
        out32 = np.empty((_kernels.OUT32_ROWS, n), np.int32)
        err = np.zeros(_kernels.ERR_SIZE, np.int64)
        sections = np.array([sec_start, sec_end, sec_count], np.int64)
        status = walk(np.frombuffer(data, np.uint8), sections, out64, out32, err)
    else:
        out64 = [[0] * n for _ in range(_kernels.OUT64_ROWS)]
        out32 = [[0] * n for _ in range(_kernels.OUT32_ROWS)]
        err = [0] * _kernels.ERR_SIZE
        status = walk(data, [sec_start, sec_end, sec_count], out64, out32, err)
        out64 = np.array(out64, np.int64).reshape(_kernels.OUT64_ROWS, n)
        out32 = np.array(out32, np.int32).reshape(_kernels.OUT32_ROWS, n)
    if status != _kernels.OK:
        raise _kernel_error(
            [int(x) for x in err], headers, positions, sec_start, sec_count, decompressed
        )

    # Offsets and timestamps: base + delta per batch, in place in the output rows. numpy
    # integer arrays wrap on overflow, like Java's long arithmetic.
    offsets = out64[_kernels.OUT_OFFSET_DELTA]
    timestamps = out64[_kernels.OUT_TS_DELTA]
    nb = len(headers)
    if nb == 1:
        # One batch (RecordBatch.records()): scalars instead of gathers.
        h = headers[0]
        batch_index = np.zeros(n, np.int32)
        offsets += h.base_offset
        if h.attributes & TIMESTAMP_TYPE_MASK:
            timestamps[:] = h.max_timestamp
        else:
            timestamps += h.base_timestamp
    else:
        batch_index = np.repeat(np.arange(nb, dtype=np.int32), sec_count)
        offsets += np.array([h.base_offset for h in headers], np.int64)[batch_index]
        timestamps += np.array([h.base_timestamp for h in headers], np.int64)[batch_index]
        log_append = np.array([h.attributes & TIMESTAMP_TYPE_MASK != 0 for h in headers], bool)
        if log_append.any():
            max_timestamps = np.array([h.max_timestamp for h in headers], np.int64)
            per_record = log_append[batch_index]
            timestamps[per_record] = max_timestamps[batch_index[per_record]]

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
        batch_index=batch_index,
        batch_headers=headers,
        batch_positions=positions,
        batch_sizes=sizes,
    )


def _kernel_error(
    err: list[int],
    headers: list[BatchHeader],
    positions: list[int],
    sec_start: list[int],
    sec_count: list[int],
    decompressed: list[bool],
) -> CorruptRecordError:
    """Turn the kernel's status record into a CorruptRecordError with the numbers."""
    k = _kernels
    status, field_id, b, pos, a, c = err
    field = k.FIELD_NAMES[field_id]
    if decompressed[b]:
        where = f"byte {pos - sec_start[b]} of the decompressed records"
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
        message = f"{a} bytes left over after the last of {sec_count[b]} records, at {where}"
    elif status == k.E_HEADER_KEY_UTF8:
        message = f"header key of {a} bytes at {where} is not valid UTF-8"
    else:  # pragma: no cover - the kernel has no other status
        message = f"record decoder status {status} at {where}"
    return _batch_error(CorruptRecordError, positions[b], headers[b], message)
