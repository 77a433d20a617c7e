"""The five codecs: names, stream formats, foreign streams, bad data, decompression bombs."""

from __future__ import annotations

import contextlib
import gzip
import random
import struct
import tracemalloc

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptRecordError, UnsupportedCompressionError
from compactlog.records import Compression, compress, decompress
from compactlog.records.compression import XERIAL_BLOCK_SIZE, XERIAL_HEADER

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]


def payload(size: int, seed: int = 0) -> bytes:
    """Half-compressible bytes (random words), deterministic."""
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


# ---------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("none", Compression.NONE),
        ("uncompressed", Compression.NONE),
        ("UNCOMPRESSED", Compression.NONE),
        ("gzip", Compression.GZIP),
        ("Snappy", Compression.SNAPPY),
        ("LZ4", Compression.LZ4),
        ("zstd", Compression.ZSTD),
    ],
)
def test_from_name(name: str, codec: Compression) -> None:
    assert Compression.from_name(name) is codec


@pytest.mark.parametrize("name", ["producer", "brotli", "", "gz"])
def test_from_name_unknown(name: str) -> None:
    with pytest.raises(UnsupportedCompressionError, match="unknown compression codec name"):
        Compression.from_name(name)


def test_kafka_names_and_ids() -> None:
    assert [c.kafka_name for c in Compression] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [int(c) for c in Compression] == [0, 1, 2, 3, 4]
    for codec_id in (5, 6, 7, -1):
        with pytest.raises(UnsupportedCompressionError):
            Compression.from_id(codec_id)
        with pytest.raises(UnsupportedCompressionError):
            decompress(codec_id, b"x")


# ---------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "size", [0, 1, 100, XERIAL_BLOCK_SIZE - 1, XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE + 1, 300_000]
)
def test_round_trip(codec: Compression, size: int) -> None:
    data = payload(size, seed=size)
    packed = compress(codec, data)
    if codec is Compression.GZIP or codec is Compression.LZ4 or codec is Compression.ZSTD:
        assert packed  # these formats always have a header, even for no data
    assert decompress(codec, packed) == data
    assert decompress(codec, packed, max_size=size) == data
    assert decompress(codec, bytearray(packed)) == data
    assert decompress(codec, memoryview(packed)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_levels(codec: Compression) -> None:
    data = payload(50_000)
    for level in (1, 3):
        assert decompress(codec, compress(codec, data, level=level)) == data


@settings(deadline=None)
@given(st.binary(max_size=3000), st.sampled_from(CODECS))
def test_round_trip_property(data: bytes, codec: Compression) -> None:
    assert decompress(codec, compress(codec, data), max_size=len(data)) == data


# ---------------------------------------------------------------------------------------------
# Stream formats


def test_snappy_writes_xerial_framing() -> None:
    data = payload(2 * XERIAL_BLOCK_SIZE + 5)
    packed = compress(Compression.SNAPPY, data)
    assert packed[:16] == bytes.fromhex(
        "82 53 4e 41 50 50 59 00 00000001 00000001".replace(" ", "")
    )
    assert packed[:16] == XERIAL_HEADER
    pos = 16
    blocks = []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 5]
    assert b"".join(blocks) == data


def test_snappy_empty_is_empty() -> None:
    # snappy-java writes its header lazily: no input, no bytes.
    assert compress(Compression.SNAPPY, b"") == b""
    assert decompress(Compression.SNAPPY, b"") == b""
    assert decompress(Compression.SNAPPY, XERIAL_HEADER) == b""


def test_snappy_reads_raw_and_concatenated_streams() -> None:
    data = payload(100_000)
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    twice = compress(Compression.SNAPPY, data) + compress(Compression.SNAPPY, data)
    assert decompress(Compression.SNAPPY, twice) == data + data
    # Some writers get the version fields' byte order wrong; they are not checked.
    odd = bytearray(compress(Compression.SNAPPY, data))
    odd[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(Compression.SNAPPY, bytes(odd)) == data


def test_lz4_frame_like_kafka() -> None:
    packed = compress(Compression.LZ4, payload(200_000))
    assert packed[:4] == bytes.fromhex("04224d18")
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks
    assert not flg & 0x04  # no content checksum
    assert not flg & 0x08  # no content size
    assert bd == 0x40  # 64 KiB blocks


def test_lz4_reads_other_frame_options() -> None:
    import lz4.frame

    data = payload(300_000)
    for kwargs in (
        {},
        {"block_linked": False},
        {"content_checksum": True, "block_checksum": True, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ):
        assert decompress(Compression.LZ4, lz4.frame.compress(data, **kwargs)) == data
    two = lz4.frame.compress(data) + lz4.frame.compress(b"tail")
    assert decompress(Compression.LZ4, two) == data + b"tail"


def test_zstd_reads_frames_and_skippable_frames() -> None:
    import zstandard

    data = payload(100_000)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    assert decompress(Compression.ZSTD, frame + skippable + frame) == data + data
    streamed = zstandard.ZstdCompressor().compressobj()
    no_size = streamed.compress(data) + streamed.flush()
    assert decompress(Compression.ZSTD, no_size, max_size=len(data)) == data


def test_gzip_reads_concatenated_members() -> None:
    data = payload(10_000)
    assert decompress(Compression.GZIP, gzip.compress(data) + gzip.compress(b"x")) == data + b"x"


@pytest.mark.parametrize("max_size", [None, 3_000_000])
def test_gzip_members_larger_than_the_inflate_steps(max_size: int | None) -> None:
    # Input is fed to zlib in slices and output taken in steps: members that end inside a
    # slice, span several, and expand to many steps must all come back whole.
    parts = [payload(700_000, seed=1), b"", payload(1_500_000, seed=2), bytes(600_000)]
    packed = b"".join(gzip.compress(p, compresslevel=1) for p in parts)
    assert decompress(Compression.GZIP, packed, max_size=max_size) == b"".join(parts)
    with pytest.raises(CorruptRecordError, match="truncated stream"):
        decompress(Compression.GZIP, packed[:-20], max_size=max_size)


# ---------------------------------------------------------------------------------------------
# Invalid data


def _corruptions(codec: Compression) -> list[bytes]:
    good = compress(codec, payload(50_000))
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    cases = [b"garbage bytes that are not compressed", good[: len(good) // 2], good + b"junk"]
    if codec is not Compression.SNAPPY:
        cases += [b"", good[:3]]
    if codec in (Compression.GZIP, Compression.SNAPPY):
        cases.append(bytes(flipped))  # gzip has a CRC; snappy's tags break
    return cases


@pytest.mark.parametrize("codec", COMPRESSED)
def test_invalid_data(codec: Compression) -> None:
    for bad in _corruptions(codec):
        with pytest.raises(CorruptRecordError, match=f"invalid {codec.kafka_name} data"):
            decompress(codec, bad)
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad, max_size=1 << 20)


def test_snappy_bad_block_lengths() -> None:
    for length in (0, -5, 10_000):
        with pytest.raises(CorruptRecordError, match="xerial block length"):
            decompress(Compression.SNAPPY, XERIAL_HEADER + struct.pack(">i", length) + b"\x00")
    with pytest.raises(CorruptRecordError, match="truncated xerial block length"):
        decompress(Compression.SNAPPY, XERIAL_HEADER + b"\x00\x00")


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=200), st.sampled_from(COMPRESSED))
def test_random_bytes_decode_or_raise_corrupt(data: bytes, codec: Compression) -> None:
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, data, max_size=1 << 16)


@settings(deadline=None, max_examples=300)
@given(st.data(), st.sampled_from(COMPRESSED))
def test_mutated_streams_decode_or_raise_corrupt(data: st.DataObject, codec: Compression) -> None:
    packed = bytearray(compress(codec, payload(5000)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(packed) - 1))
        packed[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, bytes(packed), max_size=1 << 16)


# ---------------------------------------------------------------------------------------------
# Decompression bombs


@pytest.mark.parametrize("codec", COMPRESSED)
def test_max_size_boundary(codec: Compression) -> None:
    data = payload(70_000)
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match=f"more than max_decompressed = {len(data) - 1}"):
        decompress(codec, packed, max_size=len(data) - 1)
    with pytest.raises(CorruptRecordError, match="max_decompressed = 0"):
        decompress(codec, packed, max_size=0)


@pytest.mark.slow
@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_refused_without_materialising_it(codec: Compression) -> None:
    bomb = compress(codec, bytes(64 << 20), level=1 if codec is not Compression.SNAPPY else None)
    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than max_decompressed"):
            decompress(codec, bomb, max_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Python-side allocations stay near the limit (the capped output buffer, the input, and one
    # step of zlib's output), far below the 64 MiB the bomb holds: the output is never copied
    # into a larger buffer, nor joined from pieces.
    assert peak < limit + 2 * len(bomb) + (1 << 20)


def test_none_codec_respects_max_size() -> None:
    assert decompress(Compression.NONE, b"abc", max_size=3) == b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(Compression.NONE, b"abcd", max_size=3)
    with pytest.raises(ValueError, match="max_size"):
        decompress(Compression.GZIP, b"", max_size=-1)


@pytest.mark.parametrize("size", [0, 1, 100, 255, 256, 300, 65_791, 65_792, 70_000, 1 << 20])
def test_stated_content_sizes_are_read_exactly(size: int) -> None:
    import lz4.frame
    import zstandard

    data = payload(size, seed=3)
    zstd_frame = zstandard.ZstdCompressor(write_content_size=True).compress(data)
    lz4_frame = lz4.frame.compress(data, store_size=True)
    assert decompress(Compression.ZSTD, zstd_frame, max_size=size) == data
    assert decompress(Compression.LZ4, lz4_frame, max_size=size) == data
    if size:
        with pytest.raises(CorruptRecordError, match="more than max_decompressed"):
            decompress(Compression.ZSTD, zstd_frame, max_size=size - 1)
        with pytest.raises(CorruptRecordError, match="more than max_decompressed"):
            decompress(Compression.LZ4, lz4_frame, max_size=size - 1)


def test_stated_size_refuses_a_bomb_before_inflating() -> None:
    import zstandard

    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(bytes(256 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than max_decompressed = 1000"):
            decompress(Compression.ZSTD, bomb, max_size=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
