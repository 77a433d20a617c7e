"""Compression codecs of record batches (attribute bits 0-2, spec 2.2).

When a batch is compressed, everything after the 61-byte header (the records section) is one
compressed stream. The codecs and the stream formats Kafka uses:

==========  ====  ==========================================================================
codec       id    stream
==========  ====  ==========================================================================
none        0     the records as they are
gzip        1     a gzip stream (RFC 1952); concatenated members are read as one stream
snappy      2     xerial "snappy-java" framing (below); plain raw snappy is read as well
lz4         3     LZ4 frame format; written as Kafka's ``Lz4BlockOutputStream`` (below)
zstd        4     zstd frames (RFC 8878); concatenated frames are read as one stream
==========  ====  ==========================================================================

Writing gives the bytes Kafka's Java code gives for the same records section (checked against
Kafka 4.4's log cleaner by the ``kafka`` test tier), so that a batch compactlog rebuilds is the
batch Kafka would have rebuilt:

* gzip: ``java.util.zip.GZIPOutputStream`` at ``Deflater`` level 6: a 10-byte header with no
  name and no time and OS byte 255 (JDK 16 on), one raw deflate stream from zlib (level 6,
  window 15, memory level 8), CRC-32 and size;
* snappy: snappy-java's ``SnappyOutputStream`` framing, 32 KiB blocks;
* lz4: Kafka's ``Lz4BlockOutputStream``: frame descriptor FLG 0x60 (version 1, independent
  blocks, no block or content checksum, no content size), BD 0x40 (64 KiB blocks), header
  checksum 0x82; each block compressed by LZ4's fast compressor at the default level 9, or by
  LZ4 HC at any other level, and stored uncompressed (high bit of its size set) when that is
  not smaller; an end mark of four zero bytes;
* zstd: zstd-jni's streaming ``ZstdOutputStream`` behind a ``BufferedOutputStream``, as Kafka
  closes it: the input compressed, one flush (a block that is not the last), then the end of
  the frame (an empty last block); no content size, no checksum.

Reading is strict: bytes after the last complete member, frame or block are refused as corrupt
(Java's ``GZIPInputStream`` would skip junk after a gzip member; no producer writes any).

Xerial snappy framing, as written by snappy-java's ``SnappyOutputStream`` (Kafka's producer)::

    header   16 bytes   0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00, int32 version = 1,
                        int32 compatible version = 1 (big-endian)
    blocks   repeated   int32 compressed length (big-endian), raw snappy block; each block
                        holds at most 32 KiB of uncompressed input

An empty input gives an empty output (snappy-java writes the header lazily), and a reader sees an
empty stream as no records. When reading, a new header may appear between blocks (streams can be
concatenated), and the version fields are not checked, as some writers get their byte order wrong.

Decompression bombs: a few KiB of zstd can claim gigabytes. :func:`decompress` takes a
``max_size`` and never writes more than ``max_size + 1`` bytes of output: snappy blocks state
their size before they are inflated, zstd and LZ4 frames are inflated into a bounded buffer
(and refused at once when their header states too large a size), so an oversized stream fails
as soon as it overflows. cramjam does the work for snappy, LZ4 and zstd; its bounded
``decompress_into`` stops after the first frame, so the frames are split here first (their block
headers carry the sizes). gzip is read with the standard library's :mod:`zlib` instead: only a
streaming inflater can both stop at a size limit and find where one gzip member ends and the
next begins.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import cramjam
import numpy as np

from compactlog.errors import CorruptRecordError, UnsupportedCompressionError

Buffer = bytes | bytearray | memoryview


class Compression(enum.IntEnum):
    """Codec ids as stored in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """The codec for a ``compression.type`` value; ``uncompressed`` is an alias of ``none``.

        (``producer`` is a topic-level setting, not a codec, and is resolved by the caller.)
        """
        codec = _BY_NAME.get(name.strip().lower())
        if codec is None:
            raise UnsupportedCompressionError(
                f"unknown compression codec name {name!r}; expected one of "
                "none, uncompressed, gzip, snappy, lz4, zstd"
            )
        return codec

    @classmethod
    def from_id(cls, codec_id: int) -> Compression:
        """The codec for attribute bits 0-2; ids 5-7 are not codecs."""
        try:
            return cls(codec_id)
        except ValueError:
            raise UnsupportedCompressionError(
                f"unknown compression codec id {codec_id} (valid ids are 0-4)"
            ) from None

    @property
    def kafka_name(self) -> str:
        """The name Kafka uses in ``compression.type``."""
        return self.name.lower()


_BY_NAME: dict[str, Compression] = {c.name.lower(): c for c in Compression}
_BY_NAME["uncompressed"] = Compression.NONE

# Levels the Java client uses by default (KIP-390): gzip Deflater.DEFAULT_COMPRESSION (6),
# lz4 9 (which Kafka maps to LZ4's fast compressor, not to LZ4 HC level 9), zstd 3.
DEFAULT_GZIP_LEVEL = 6
DEFAULT_LZ4_LEVEL = 9
DEFAULT_ZSTD_LEVEL = 3

#: java.util.zip.GZIPOutputStream's header: magic, deflate, no flags, no mtime, no extra flags,
#: OS 255 ("unknown", what JDK 16 and later write).
_GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF])
_GZIP_TRAILER = struct.Struct("<II")  # CRC-32, input size mod 2^32
#: Kafka's LZ4 frame header: magic, FLG 0x60, BD 0x40 (64 KiB blocks), header checksum (the
#: second byte of xxHash32 of FLG and BD, a constant for these two bytes).
_KAFKA_LZ4_HEADER = bytes([0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82])
_KAFKA_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_UINT32_LE = struct.Struct("<I")

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)
#: snappy-java's default block size: uncompressed bytes handed to snappy per block.
XERIAL_BLOCK_SIZE = 32 * 1024

# First output buffer of a decompression. Most record sections compress less than 8x, so one
# attempt usually suffices; a larger output retries with 4x the room (up to max_size + 1).
_FIRST_GUESS_RATIO = 8
_MIN_FIRST_GUESS = 64 * 1024
# Input given to and output asked of zlib per call: bounds the temporary bytes beside the buffer.
_GZIP_STEP = 256 * 1024
_OVERFLOW_MARKERS = ("failed to write whole buffer", "smaller than required")

_INT32_BE = struct.Struct(">i")

# (end of the frame, skippable?, content size stated in its header or -1)
_Frame = tuple[int, bool, int]


# --------------------------------------------------------------------------------------------
# compression


def compress(codec: Compression | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records section with ``codec`` (``level`` = codec level, Kafka's default if
    None; ignored for none and snappy)."""
    codec = Compression.from_id(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return _gzip_compress(data, DEFAULT_GZIP_LEVEL if level is None else level)
    if codec is Compression.SNAPPY:
        return _xerial_snappy_compress(data)
    if codec is Compression.LZ4:
        return _kafka_lz4_compress(data, DEFAULT_LZ4_LEVEL if level is None else level)
    compressor = cramjam.zstd.Compressor(level=DEFAULT_ZSTD_LEVEL if level is None else level)
    compressor.compress(data)
    flushed = bytes(compressor.flush())
    return flushed + bytes(compressor.finish())


def _gzip_compress(data: Buffer, level: int) -> bytes:
    # Python's zlib is the zlib Java's Deflater wraps (the system's, on Linux): same level,
    # window and memory level give the same deflate stream.
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8)
    body = deflater.compress(data) + deflater.flush()
    view = memoryview(data).cast("B")
    trailer = _GZIP_TRAILER.pack(zlib.crc32(view), view.nbytes & 0xFFFFFFFF)
    return _GZIP_HEADER + body + trailer


def _kafka_lz4_compress(data: Buffer, level: int) -> bytes:
    view = memoryview(data).cast("B")
    fast = level == DEFAULT_LZ4_LEVEL
    parts = [_KAFKA_LZ4_HEADER]
    for start in range(0, view.nbytes, _KAFKA_LZ4_BLOCK_SIZE):
        block = view[start : start + _KAFKA_LZ4_BLOCK_SIZE]
        if fast:
            packed = bytes(cramjam.lz4.compress_block(block, mode="default", store_size=False))
        else:
            packed = bytes(
                cramjam.lz4.compress_block(
                    block, mode="high_compression", compression=level, store_size=False
                )
            )
        if len(packed) >= block.nbytes:
            parts += [_UINT32_LE.pack(block.nbytes | _LZ4_UNCOMPRESSED_BLOCK), bytes(block)]
        else:
            parts += [_UINT32_LE.pack(len(packed)), packed]
    parts.append(_UINT32_LE.pack(0))  # end mark
    return b"".join(parts)


def _xerial_snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data).cast("B")
    if not view.nbytes:
        return b""
    parts = [XERIAL_HEADER]
    for start in range(0, view.nbytes, XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# decompression


def decompress(codec: Compression | int, data: Buffer, max_size: int | None = None) -> bytes:
    """Decompress a records section.

    Raises :class:`CorruptRecordError` when ``data`` is not a valid stream for ``codec`` or when
    the output would exceed ``max_size`` bytes (then at most ``max_size + 1`` bytes are written
    before giving up), and :class:`UnsupportedCompressionError` for codec ids 5-7.
    """
    codec = Compression.from_id(codec)
    if max_size is not None and max_size < 0:
        raise ValueError(f"max_size must be >= 0, not {max_size}")
    view = memoryview(data).cast("B")
    if codec is Compression.NONE:
        if max_size is not None and view.nbytes > max_size:
            raise _too_large(codec, max_size)
        return bytes(view)
    out = _Output(codec, view.nbytes, max_size)
    if codec is Compression.GZIP:
        _gzip_decompress(view, out)
    elif codec is Compression.SNAPPY:
        _snappy_decompress(view, out)
    elif codec is Compression.LZ4:
        _framed_decompress(view, out, _lz4_frame_end, cramjam.lz4.decompress_into)
    else:
        _framed_decompress(view, out, _zstd_frame_end, cramjam.zstd.decompress_into)
    return out.getvalue()


def _too_large(codec: Compression, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec.kafka_name} records section decompresses to more than "
        f"max_decompressed = {max_size} bytes"
    )


def _invalid(codec: Compression, detail: object) -> CorruptRecordError:
    return CorruptRecordError(f"invalid {codec.kafka_name} data: {detail}")


class _Output:
    """A growing output buffer that refuses to grow past ``max_size + 1`` bytes.

    numpy's uninitialised arrays, unlike ``bytearray``, cost nothing for the room a stream does
    not end up using.
    """

    def __init__(self, codec: Compression, input_size: int, max_size: int | None) -> None:
        self.codec = codec
        self.max_size = max_size
        # One byte past the limit so that "exactly max_size" and "more" can be told apart.
        self.hard_cap = None if max_size is None else max_size + 1
        guess = max(_MIN_FIRST_GUESS, input_size * _FIRST_GUESS_RATIO)
        self.buf = np.empty(guess if self.hard_cap is None else min(guess, self.hard_cap), np.uint8)
        self.size = 0

    def reserve(self, n: int) -> None:
        """Make room for ``n`` more bytes, refusing when that passes max_size."""
        if self.max_size is not None and self.size + n > self.max_size:
            raise _too_large(self.codec, self.max_size)
        if len(self.buf) - self.size < n:
            self._resize(max(len(self.buf) * 2, self.size + n))

    def append(self, chunk: bytes) -> None:
        """Copy ``chunk`` in, refusing when that passes max_size."""
        self.reserve(len(chunk))
        self.buf[self.size : self.size + len(chunk)] = np.frombuffer(chunk, np.uint8)
        self.size += len(chunk)

    def grow(self) -> bool:
        """Make more room; False when already at the cap."""
        current = len(self.buf)
        if self.hard_cap is not None and current >= self.hard_cap:
            return False
        self._resize(current * 4)
        return True

    def _resize(self, capacity: int) -> None:
        # In place (realloc: a large block is moved by remapping its pages, not copied), so a
        # bomb never holds the old and the new buffer at once. No view of the buffer outlives
        # the call that wrote through it, which is what makes skipping the reference check safe.
        if self.hard_cap is not None:
            capacity = min(capacity, self.hard_cap)
        self.buf.resize(capacity, refcheck=False)

    def decompress_into(self, fn: Callable[[Buffer, Buffer], int], src: Buffer) -> None:
        """Run a cramjam ``decompress_into`` for one frame, retrying with more room."""
        while True:
            try:
                n = fn(src, self.buf[self.size :].data)
            except Exception as exc:  # cramjam raises DecompressionError, and others on junk
                overflow = any(m in str(exc) for m in _OVERFLOW_MARKERS)
                if overflow and self.grow():
                    continue
                if overflow and self.max_size is not None:
                    raise _too_large(self.codec, self.max_size) from exc
                raise _invalid(self.codec, exc) from exc
            self.size += n
            if self.max_size is not None and self.size > self.max_size:
                raise _too_large(self.codec, self.max_size)
            return

    def getvalue(self) -> bytes:
        return self.buf[: self.size].tobytes()


def _gzip_decompress(view: memoryview, out: _Output) -> None:
    """Inflate every gzip member of ``view`` (GZIPInputStream reads concatenated members).

    Input goes to zlib in slices and output comes back in steps, so besides the output buffer a
    bomb costs one slice and one step, whatever it claims to expand to.
    """
    codec = Compression.GZIP
    total = view.nbytes
    if not total:
        raise _invalid(codec, "empty input")
    pos = 0
    try:
        while True:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            pending: Buffer = b""
            while not inflater.eof:
                if not pending and pos < total:
                    pending = view[pos : pos + _GZIP_STEP]
                    pos += len(pending)
                # Never more than one byte past the cap (and never 0, which means "no limit").
                room = _GZIP_STEP
                if out.hard_cap is not None:
                    room = min(room, out.hard_cap - out.size)
                piece = inflater.decompress(pending, room)
                out.append(piece)  # raises once past max_size
                pending = inflater.unconsumed_tail
                if not piece and not pending and pos >= total and not inflater.eof:
                    raise _invalid(codec, "truncated stream")
            # What the finished member did not use belongs to the next member, if any.
            pos -= len(inflater.unused_data)
            if pos >= total:
                return
    except zlib.error as exc:
        raise _invalid(codec, exc) from exc


def _snappy_decompress(view: memoryview, out: _Output) -> None:
    codec = Compression.SNAPPY
    size = view.nbytes
    if size == 0:
        return
    if size < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        _raw_snappy_block(view, out)
        return
    pos = len(XERIAL_HEADER)
    while pos < size:
        if view[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            # A concatenated stream: its header can only start with 0x82, which as the first
            # byte of a block length would make it negative, so there is no ambiguity.
            pos += len(XERIAL_HEADER)
            continue
        if pos + 4 > size:
            raise _invalid(codec, f"truncated xerial block length at byte {pos}")
        (block_len,) = _INT32_BE.unpack_from(view, pos)
        pos += 4
        if block_len <= 0 or block_len > size - pos:
            raise _invalid(
                codec,
                f"xerial block length {block_len} at byte {pos - 4} does not fit the "
                f"{size - pos} bytes left",
            )
        _raw_snappy_block(view[pos : pos + block_len], out)
        pos += block_len


def _raw_snappy_block(block: memoryview, out: _Output) -> None:
    """Decompress one raw snappy block; its header states the output size, so check it first."""
    codec = Compression.SNAPPY
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:
        raise _invalid(codec, exc) from exc
    out.reserve(n)
    try:
        target = out.buf[out.size : out.size + n].data
        written = cramjam.snappy.decompress_raw_into(block, target)
    except Exception as exc:
        raise _invalid(codec, exc) from exc
    if written != n:
        raise _invalid(codec, f"block claims {n} bytes but holds {written}")
    out.size += n


def _framed_decompress(
    view: memoryview,
    out: _Output,
    frame_end: Callable[[memoryview, int], _Frame],
    decompress_into: Callable[[Buffer, Buffer], int],
) -> None:
    """Split ``view`` into frames and decompress them one by one into ``out``."""
    if not view.nbytes:
        raise _invalid(out.codec, "empty input")
    pos = 0
    while pos < view.nbytes:
        end, skippable, content_size = frame_end(view, pos)
        if not skippable:
            if content_size >= 0:
                # The frame states its size: refuse a bomb before inflating it, and size the
                # buffer right. (The size is only a claim; the buffer bound still holds.)
                out.reserve(content_size)
            out.decompress_into(decompress_into, view[pos:end])
        pos = end


def _need(view: memoryview, pos: int, n: int, codec: Compression, what: str) -> None:
    if pos + n > view.nbytes:
        raise _invalid(codec, f"truncated {what} at byte {pos}")


_LZ4_MAGIC = 0x184D2204
_ZSTD_MAGIC = 0xFD2FB528
# Both formats reserve the same range of 16 magic numbers for skippable frames.
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50


def _skippable_end(view: memoryview, pos: int, codec: Compression) -> int:
    _need(view, pos, 8, codec, "skippable frame header")
    size: int = struct.unpack_from("<I", view, pos + 4)[0]
    _need(view, pos + 8, size, codec, "skippable frame")
    return pos + 8 + size


def _lz4_frame_end(view: memoryview, pos: int) -> _Frame:
    """End of the LZ4 frame starting at ``pos``, whether it is a skippable frame, and its
    content size if the header states it (else -1)."""
    codec = Compression.LZ4
    _need(view, pos, 7, codec, "frame header")
    (magic,) = struct.unpack_from("<I", view, pos)
    if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
        return _skippable_end(view, pos, codec), True, -1
    if magic != _LZ4_MAGIC:
        raise _invalid(codec, f"bad frame magic 0x{magic:08x} at byte {pos}")
    flg = view[pos + 4]
    if flg >> 6 != 1:
        raise _invalid(codec, f"unsupported frame version {flg >> 6} at byte {pos}")
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    header = 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    _need(view, pos, header, codec, "frame header")
    content_size: int = struct.unpack_from("<Q", view, pos + 6)[0] if flg & 0x08 else -1
    p = pos + header
    while True:
        _need(view, p, 4, codec, "block size")
        (block,) = struct.unpack_from("<I", view, p)
        p += 4
        if block == 0:  # end mark
            break
        p += (block & 0x7FFFFFFF) + (4 if block_checksum else 0)
        _need(view, p, 0, codec, "block")
    if content_checksum:
        p += 4
        _need(view, p, 0, codec, "content checksum")
    return p, False, content_size


def _zstd_frame_end(view: memoryview, pos: int) -> _Frame:
    """Like :func:`_lz4_frame_end`, for a zstd frame (RFC 8878 section 3.1)."""
    codec = Compression.ZSTD
    _need(view, pos, 5, codec, "frame header")
    (magic,) = struct.unpack_from("<I", view, pos)
    if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
        return _skippable_end(view, pos, codec), True, -1
    if magic != _ZSTD_MAGIC:
        raise _invalid(codec, f"bad frame magic 0x{magic:08x} at byte {pos}")
    fhd = view[pos + 4]
    fcs_flag = fhd >> 6
    single_segment = bool(fhd & 0x20)
    has_checksum = bool(fhd & 0x04)
    dict_id_size = (0, 1, 2, 4)[fhd & 0x03]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    header = 5 + (0 if single_segment else 1) + dict_id_size + fcs_size
    _need(view, pos, header, codec, "frame header")
    content_size = -1
    if fcs_size:
        fcs_at = pos + header - fcs_size
        content_size = int.from_bytes(view[fcs_at : pos + header], "little")
        if fcs_size == 2:
            content_size += 256  # the 2-byte form is offset by 256
    p = pos + header
    while True:
        _need(view, p, 3, codec, "block header")
        block_header = view[p] | (view[p + 1] << 8) | (view[p + 2] << 16)
        p += 3
        block_type = (block_header >> 1) & 0x03
        block_size = block_header >> 3
        if block_type == 3:
            raise _invalid(codec, f"reserved block type at byte {p - 3}")
        p += 1 if block_type == 1 else block_size  # an RLE block stores a single byte
        _need(view, p, 0, codec, "block")
        if block_header & 1:  # last block
            break
    if has_checksum:
        p += 4
        _need(view, p, 0, codec, "content checksum")
    return p, False, content_size
