"""R14 at its CI tier: 2,000 Hypothesis examples per target, of the decoders the broker runs on
every byte a client sends (the frame reader, the request header, each supported API and version,
the record-batch parser).

Each input is a valid frame or batch with a few bytes overwritten, cut short or extended. It
either decodes or raises the package's one protocol error (:class:`ProtocolError`) or, for
record batches, its one corruption error (:class:`CorruptRecordError`); any other exception fails
the test. Streams are fed whole and one byte at a time, with the same result. Decoding opens no
file or socket, and its peak memory (tracemalloc; a fixed quarter of the request inputs, every
batch input) stays within 4 x the input + 1 MiB.

(tests/protocol fuzzes the same decoders at 300 examples per test as part of the protocol's own
suite; this is the reliability tier of reliability-tests.md.)
"""

from __future__ import annotations

import builtins
import socket
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptRecordError, ProtocolError
from compactlog.protocol import SUPPORTED, RequestHeader, decode_request, encode_request
from compactlog.protocol.frames import FrameReader
from compactlog.protocol.messages import REQUESTS
from compactlog.records import Compression, build_batch
from compactlog.records.batch import iter_batches
from tests.protocol.protocol_helpers import Sampler

pytestmark = [
    pytest.mark.broker,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

R14 = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
CASES = [(key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]
MEMORY_SLACK = 2**20
MEMORY_SAMPLE = 4


def request_frame(key: int, version: int, nulls: bool) -> bytes:
    """A valid request frame, size prefix included, with every field set (or null)."""
    body = REQUESTS[key].cls(**Sampler(version, nulls).struct(REQUESTS[key].struct))
    return bytes(encode_request(RequestHeader(key, version, 1234, "fuzz"), body))


Edits = list[tuple[str, int, int]]
EDITS = st.lists(
    st.tuples(
        st.sampled_from(["set", "cut", "insert"]), st.integers(0, 2**16), st.integers(0, 255)
    ),
    min_size=1,
    max_size=4,
)


def mutate(data: bytes, edits: Edits, keep_prefix: int = 0) -> bytes:
    """Apply ``edits`` after the first ``keep_prefix`` bytes."""
    out = bytearray(data)
    for op, pos, value in edits:
        span = len(out) - keep_prefix
        if span <= 0:
            break
        at = keep_prefix + pos % span
        if op == "set":
            out[at] = value
        elif op == "cut":
            del out[at:]
        else:
            out[at:at] = bytes([value]) * (1 + value % 8)
    return bytes(out)


class NoIo:
    """Opening a file or a socket while decoding fails the test (run each decoder once before,
    so that lazy loading of code is not counted)."""

    def __enter__(self) -> None:
        self.saved = builtins.open, socket.socket.__init__

        def refuse(*_: Any, **__: Any) -> Any:
            raise AssertionError("the decoder did I/O")

        builtins.open = refuse
        socket.socket.__init__ = refuse  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        builtins.open, socket.socket.__init__ = self.saved  # type: ignore[method-assign]


def outcome_of_stream(stream: bytes, chunks: Iterator[bytes]) -> list[Any]:
    """What the broker's reading side makes of ``stream``: each frame decoded (its repr) or the
    name of the ProtocolError it raised, and the framing error at the end, if any."""
    reader = FrameReader()
    frames: list[bytes] = []
    result: list[Any] = []
    try:
        for chunk in chunks:
            frames += reader.feed(chunk)
        frames += reader.feed(b"")
    except ProtocolError as e:
        result.append(("framing", type(e).__name__))
    for frame in frames:
        try:
            result.append(repr(decode_request(frame)))
        except ProtocolError as e:
            result.append(("request", type(e).__name__))
    return result


def check_stream(stream: bytes) -> None:
    # tracemalloc makes decoding ten times slower: the memory bound is checked on a fixed
    # quarter of the inputs (chosen by their CRC, so a replayed input is checked again).
    measure = zlib.crc32(stream) % MEMORY_SAMPLE == 0
    if measure:
        tracemalloc.start()
    try:
        with NoIo():
            whole = outcome_of_stream(stream, iter([stream]))
        peak = tracemalloc.get_traced_memory()[1] if measure else 0
    finally:
        if measure:
            tracemalloc.stop()
    assert peak <= 4 * len(stream) + MEMORY_SLACK, f"peak {peak} B for {len(stream)} B of input"
    one_by_one = outcome_of_stream(stream, (stream[i : i + 1] for i in range(len(stream))))
    assert one_by_one == whole


@pytest.mark.parametrize("case", CASES, ids=[f"{REQUESTS[k].name[:-7]}-v{v}" for k, v in CASES])
def test_r14_request_decoder(case: tuple[int, int]) -> None:
    key, version = case
    valid = {nulls: request_frame(key, version, nulls) for nulls in (False, True)}

    @R14
    @given(st.booleans(), EDITS, st.booleans())
    def run(nulls: bool, edits: Edits, keep_size: bool) -> None:
        frame = valid[nulls]
        mutated = mutate(frame, edits, keep_prefix=4 if keep_size else 0)
        if keep_size:  # a consistent size prefix: the body's decoder sees the damage
            mutated = len(mutated[4:]).to_bytes(4, "big", signed=True) + mutated[4:]
        check_stream(mutated + frame)  # a valid frame follows: framing must stay in step

    run()


def test_r14_frame_reader_and_request_header() -> None:
    """Arbitrary bytes as a stream: sizes (negative, huge, zero), headers cut anywhere."""

    @R14
    @given(st.binary(max_size=300), st.sampled_from([b"", b"\x00\x00\x00\x04\x00\x12\x00\x00"]))
    def run(data: bytes, tail: bytes) -> None:
        check_stream(data + tail)

    run()


BATCHES = [
    build_batch(
        [(b"k%d" % i, b"v" * (i * 7), (("h", b"x"),) if i % 2 else ()) for i in range(5)],
        timestamps=1_700_000_000_000,
        compression=codec,
    )
    for codec in Compression
]


def test_r14_record_batch_parser() -> None:
    # Load the compiled kernels first: numba reads its on-disk cache at a kernel's first call,
    # which is loading code, not the decoder reading anything.
    for valid in BATCHES:
        for batch in iter_batches(valid):
            batch.records(max_decompressed=1 << 20, verify_crc=True)

    @R14
    @given(st.sampled_from(range(len(BATCHES))), EDITS, st.booleans())
    def run(which: int, edits: Edits, verify_crc: bool) -> None:
        data = mutate(BATCHES[which], edits)
        tracemalloc.start()
        try:
            with NoIo():
                try:
                    for batch in iter_batches(data):
                        batch.records(max_decompressed=1 << 20, verify_crc=verify_crc)
                except CorruptRecordError:
                    pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= 4 * len(data) + MEMORY_SLACK, f"peak {peak} B for {len(data)} B"

    run()
