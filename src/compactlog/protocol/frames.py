"""Framing: every request and response is an int32 size followed by that many bytes.

:class:`FrameReader` is sans-I/O: the connection feeds it whatever bytes arrived and gets back
the complete frames (without their size prefix), so it can be tested, and fuzzed, byte by byte
without a socket. A size is checked the moment its four bytes are in, before any of the body is
waited for: a negative size or one over the limit is a :class:`~compactlog.errors.ProtocolError`,
and the reader refuses further input (the connection cannot be resynchronised; close it).
"""

from __future__ import annotations

from compactlog.errors import ProtocolError
from compactlog.protocol.primitives import INT32

__all__ = ["MAX_REQUEST_FRAME_SIZE", "SIZE_PREFIX_BYTES", "FrameReader"]

# Kafka's socket.request.max.bytes default (100 MiB): the largest request a broker accepts.
# A Produce request larger than this could not have been accepted by Kafka either, and the
# limit keeps one connection from making us buffer an unbounded amount of memory.
MAX_REQUEST_FRAME_SIZE = 104_857_600
SIZE_PREFIX_BYTES = 4


class FrameReader:
    """Splits a byte stream into frames of at most ``max_frame_size`` bytes each.

    When a bad size follows complete frames in the same ``data``, :meth:`feed` returns those
    frames and the error is raised by the next call (``feed(b"")`` will do; :attr:`failed`
    tells without raising). So the frames seen before an error are the same whether the
    stream is fed whole or byte by byte.
    """

    def __init__(self, max_frame_size: int = MAX_REQUEST_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._failed: str | None = None

    @property
    def failed(self) -> bool:
        """True once a bad size was seen: the stream cannot be read any further."""
        return self._failed is not None

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Adds ``data``; returns the frames it completed (possibly none), in order."""
        if self._failed is not None:
            raise ProtocolError(f"the stream is unusable after an earlier error: {self._failed}")
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos, end = 0, len(buf)
        with memoryview(buf) as view:  # one copy per frame: view slice -> bytes
            while end - pos >= SIZE_PREFIX_BYTES:
                size = INT32.unpack_from(view, pos)[0]
                if size < 0 or size > self.max_frame_size:
                    limit = self.max_frame_size
                    what = "is negative" if size < 0 else f"exceeds the limit of {limit}"
                    self._failed = f"frame size {size} {what}"
                    break
                start = pos + SIZE_PREFIX_BYTES
                if end - start < size:
                    break
                frames.append(bytes(view[start : start + size]))
                pos = start + size
        if self._failed is not None:
            del buf[:]
            if not frames:
                raise ProtocolError(self._failed)
            return frames  # the error comes with the next call; see the class docstring
        if pos:
            del buf[:pos]
        return frames
