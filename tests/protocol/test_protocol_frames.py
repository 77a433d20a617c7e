"""FrameReader: the same frames whether the stream comes whole, byte by byte or in any chunks;
bad sizes refused as soon as their four bytes are in."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import ProtocolError
from compactlog.protocol import MAX_REQUEST_FRAME_SIZE, FrameReader

FRAMES = [b"", b"a", b"\x00" * 3, bytes(range(256)) * 3, b"last"]


def stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def feed_in_chunks(reader: FrameReader, data: bytes, cuts: list[int]) -> list[bytes]:
    out: list[bytes] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        out += reader.feed(data[start:cut])
        start = max(start, cut)
    return out


def test_whole_and_byte_by_byte_agree() -> None:
    data = stream(FRAMES)
    whole = FrameReader().feed(data)
    reader = FrameReader()
    byte_by_byte = [f for i in range(len(data)) for f in reader.feed(data[i : i + 1])]
    assert whole == byte_by_byte == FRAMES
    assert reader.buffered == 0
    assert all(type(f) is bytes for f in whole)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=6),
    st.lists(st.integers(0, 300), max_size=10),
)
def test_any_chunking_gives_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    data = stream(frames)
    assert feed_in_chunks(FrameReader(), data, cuts) == frames


def test_partial_frame_stays_buffered() -> None:
    reader = FrameReader()
    assert reader.feed(struct.pack(">i", 5) + b"abc") == []
    assert reader.buffered == 7
    assert reader.feed(b"de" + struct.pack(">i", 1)) == [b"abcde"]
    assert reader.buffered == 4


def test_memoryview_and_bytearray_input() -> None:
    data = stream([b"xyz"])
    assert FrameReader().feed(memoryview(data)) == [b"xyz"]
    assert FrameReader().feed(bytearray(data)) == [b"xyz"]


@pytest.mark.parametrize("size", [-1, -(2**31), 101])
def test_bad_size_raises_before_the_body_arrives(size: int) -> None:
    reader = FrameReader(max_frame_size=100)
    assert reader.feed(struct.pack(">i", size)[:3]) == []
    with pytest.raises(ProtocolError, match=f"frame size {size} "):
        reader.feed(struct.pack(">i", size)[3:])
    assert reader.failed
    with pytest.raises(ProtocolError, match="unusable"):
        reader.feed(b"\x00\x00\x00\x00")


def test_size_at_the_limit_is_fine() -> None:
    assert FrameReader(max_frame_size=3).feed(stream([b"abc"])) == [b"abc"]


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert MAX_REQUEST_FRAME_SIZE == 104_857_600
    reader = FrameReader()
    with pytest.raises(ProtocolError, match="exceeds the limit of 104857600"):
        reader.feed(struct.pack(">i", 104_857_601))


@pytest.mark.parametrize("byte_by_byte", [False, True])
def test_frames_before_a_bad_size_come_out_then_the_error(byte_by_byte: bool) -> None:
    data = stream([b"one", b"two"]) + struct.pack(">i", -5) + b"junk"
    reader = FrameReader()
    if byte_by_byte:
        frames: list[bytes] = []
        with pytest.raises(ProtocolError, match="-5 is negative"):
            for i in range(len(data)):
                frames += reader.feed(data[i : i + 1])
    else:
        frames = reader.feed(data)
        assert reader.failed
        with pytest.raises(ProtocolError, match="-5 is negative"):
            reader.feed(b"")
    assert frames == [b"one", b"two"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.lists(st.integers(0, 64), max_size=5))
def test_any_stream_gives_frames_or_protocol_error(data: bytes, cuts: list[int]) -> None:
    reader = FrameReader(max_frame_size=32)
    try:
        frames = feed_in_chunks(reader, data, cuts)
    except ProtocolError:
        return
    assert stream(frames) == data[: len(data) - reader.buffered]
