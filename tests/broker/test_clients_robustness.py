"""Reliability tests R16, R17 and R18 (spec reliability-tests.md) at their CI tiers, on the wire.

* R16: corrupt produce payloads are refused with their specific error code, the partition's log
  end offset does not move, and the other partition of the same request is appended.
* R17: resource limits: oversized and negative frame sizes, huge array counts, batches above
  ``message.max.bytes``, decompression bombs, idle and half-sent connections, pipelining.
* R18: bad topic names through CreateTopics, Metadata auto-creation and Produce.

Requests are written by hand (tests/broker/helpers/wire.py): no client sends these.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.records import Compression, build_batch
from tests.broker.helpers.clients import wait_until
from tests.broker.helpers.server import CliBroker
from tests.broker.helpers.store import append, create_topic, log_end_offset, topics
from tests.broker.helpers.wire import (
    API_VERSIONS,
    ATTRIBUTES_AT,
    BATCH_LENGTH_AT,
    COUNT_AT,
    CREATE_TOPICS,
    MAGIC_AT,
    METADATA,
    NOW_MS,
    PRODUCE,
    Closed,
    Reader,
    Wire,
    batch,
    create_topics_body,
    fix_crc,
    good_batch,
    i8,
    i16,
    i32,
    metadata_body,
    parse_create_topics_response,
    parse_metadata_topic_errors,
    parse_produce_response,
    produce_body,
    record,
    string,
    varint,
)

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]

CORRUPT_MESSAGE, INVALID_TOPIC, MESSAGE_TOO_LARGE = 2, 17, 10
INVALID_RECORD, UNSUPPORTED_COMPRESSION = 87, 76


def _patch(data: bytes, at: int, fmt: str, value: int, crc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return fix_crc(out) if crc else bytes(out)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _crc_mismatch() -> bytes:
    data = bytearray(good_batch())
    data[-3] ^= 0xFF  # a value byte; the CRC is left as it was
    return bytes(data)


R16_CASES: dict[str, tuple[Callable[[], bytes], set[int]]] = {
    "crc-mismatch": (_crc_mismatch, {CORRUPT_MESSAGE}),
    "bad-magic": (lambda: _patch(good_batch(), MAGIC_AT, ">b", 1), {INVALID_RECORD}),
    "magic-3": (lambda: _patch(good_batch(), MAGIC_AT, ">b", 3), {INVALID_RECORD, CORRUPT_MESSAGE}),
    "count-too-high": (
        lambda: _patch(good_batch(), COUNT_AT, ">i", 3),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "count-too-low": (
        lambda: _patch(good_batch(), COUNT_AT, ">i", 1),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "count-negative": (
        lambda: _patch(good_batch(), COUNT_AT, ">i", -1),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "offset-deltas-not-monotonic": (
        lambda: batch(record(1, b"a", b"1") + record(0, b"b", b"2"), 2, 1),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "offset-deltas-not-monotonic-gzip": (
        lambda: batch(_gzip(record(1, b"a", b"1") + record(0, b"b", b"2")), 2, 1, attributes=1),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "last-offset-delta-short": (
        lambda: batch(record(0, b"a", b"1") + record(1, b"b", b"2"), 2, 0),
        {INVALID_RECORD, CORRUPT_MESSAGE},
    ),
    "negative-batch-length": (
        lambda: _patch(good_batch(), BATCH_LENGTH_AT, ">i", -1, crc=False),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "batch-length-past-end": (
        lambda: _patch(good_batch(), BATCH_LENGTH_AT, ">i", len(good_batch()) + 100, crc=False),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "negative-record-length": (
        lambda: batch(record(0, b"a", b"1", length=-5), 1, 0),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "record-length-past-end": (
        lambda: batch(record(0, b"a", b"1", length=1000), 1, 0),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "negative-key-length-below-minus-one": (
        lambda: batch(varint(6) + i8(0) + varint(0) + varint(0) + varint(-7) + b"\0\0", 1, 0),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "negative-header-count": (
        lambda: batch(record(0, b"a", b"1", headers=-3), 1, 0),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "control-bit-from-a-client": (
        lambda: batch(record(0, b"\0\0\0\0", b"\0\0\0\0\0\0"), 1, 0, attributes=0x20),
        {INVALID_RECORD},
    ),
    "unknown-codec-5": (
        lambda: _patch(good_batch(), ATTRIBUTES_AT, ">h", 5),
        {UNSUPPORTED_COMPRESSION},
    ),
    "unknown-codec-7": (
        lambda: _patch(good_batch(), ATTRIBUTES_AT, ">h", 7),
        {UNSUPPORTED_COMPRESSION},
    ),
    "gzip-garbage": (
        lambda: batch(b"\x1f\x8b not gzip at all", 1, 0, attributes=1),
        {CORRUPT_MESSAGE, INVALID_RECORD},
    ),
    "two-batches-in-one-partition": (lambda: good_batch() + good_batch(), {INVALID_RECORD}),
}


@pytest.mark.parametrize("case", sorted(R16_CASES))
def test_r16_corrupt_produce_payload_is_refused(broker: Any, case: str) -> None:
    make, codes = R16_CASES[case]
    create_topic(broker, "r16", 2)
    append(broker, "r16", 0, [(b"before", b"x")])
    with Wire(broker.bootstrap) as wire:
        body = produce_body({("r16", 0): make(), ("r16", 1): good_batch(3)})
        result = parse_produce_response(wire.request(PRODUCE, 7, body))
    assert result[("r16", 0)][0] in codes, f"{case}: {result}"
    assert result[("r16", 1)] == (0, 0), f"{case}: the good partition {result[('r16', 1)]}"
    assert log_end_offset(broker, "r16", 0) == 1
    assert log_end_offset(broker, "r16", 1) == 3


def test_r16_keyless_record_to_compacted_topic(broker: Any) -> None:
    create_topic(broker, "r16c", 2, {"cleanup.policy": "compact"})
    keyless = batch(record(0, b"k", b"1") + record(1, None, b"2"), 2, 1)
    with Wire(broker.bootstrap) as wire:
        body = produce_body({("r16c", 0): keyless, ("r16c", 1): good_batch()})
        result = parse_produce_response(wire.request(PRODUCE, 7, body))
    assert result[("r16c", 0)][0] == INVALID_RECORD
    assert result[("r16c", 1)] == (0, 0)
    assert log_end_offset(broker, "r16c", 0) == 0


def test_r16_zstd_below_produce_v7(broker: Any) -> None:
    create_topic(broker, "r16z", 1)
    zstd = build_batch([(b"k", b"v" * 100)], timestamps=NOW_MS, compression=Compression.ZSTD)
    with Wire(broker.bootstrap) as wire:
        result = parse_produce_response(wire.request(PRODUCE, 6, produce_body({("r16z", 0): zstd})))
    assert result[("r16z", 0)][0] == UNSUPPORTED_COMPRESSION
    assert log_end_offset(broker, "r16z", 0) == 0


# --- R17: resource limits ------------------------------------------------------------------------
@pytest.fixture
def served(cli_broker: Callable[..., CliBroker]) -> Iterator[CliBroker]:
    """A ``compactlog serve`` process (its memory is measured apart from the test's)."""
    b = cli_broker({"message.max.bytes": 2 * 2**20, "connections.max.idle.ms": 1000})
    b.start()
    yield b
    assert b.alive(), f"the broker died:\n{b.log_tail()}"


def reset_peak_rss(b: CliBroker) -> None:
    """Make VmHWM restart from the current RSS (``clear_refs`` 5), so a later peak is the
    request's."""
    Path(f"/proc/{b.pid}/clear_refs").write_text("5")


def ping(bootstrap: str) -> None:
    """A new connection gets ApiVersions answered."""
    with Wire(bootstrap) as wire:
        assert Reader(wire.request(API_VERSIONS, 0, b"")).i16() == 0


def closes_within(wire: Wire, seconds: float) -> float:
    """Seconds until the broker closes ``wire`` (fails after ``seconds``)."""
    started = time.monotonic()
    wire.sock.settimeout(seconds)
    try:
        while wire.sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {seconds} s") from None
    return time.monotonic() - started


@pytest.mark.parametrize("size", [200 * 2**20, 2**31 - 1, -1, -(2**31)])
def test_r17_oversized_or_negative_frame_closes_at_once(served: CliBroker, size: int) -> None:
    reset_peak_rss(served)
    rss_before = served.status("VmRSS")
    with Wire(served.bootstrap) as wire:
        wire.sock.sendall(i32(size) + b"\0" * 1000)
        assert closes_within(wire, 5) < 0.1
    assert served.status("VmHWM") - rss_before < 5 * 1024, "RSS grew by 5 MiB or more"
    ping(served.bootstrap)


def test_r17_array_count_of_2_31_is_refused_without_allocating(served: CliBroker) -> None:
    reset_peak_rss(served)
    rss_before = served.status("VmRSS")
    with Wire(served.bootstrap) as wire:
        # Metadata v4 claiming 2**31 - 1 topic names, with no bytes behind the count.
        wire.send(METADATA, 4, i32(2**31 - 1) + i8(1))
        try:
            wire.sock.settimeout(15)
            _, body = wire.recv()
        except Closed:
            pass  # closing is an answer too
        except TimeoutError:
            raise AssertionError(f"no answer and no close:\n{served.log_tail()}") from None
        else:
            assert body  # an error response
    # Produce with a record count of 2**31 - 1 in a small batch.
    create = create_topics_body([("r17", 1)])
    with Wire(served.bootstrap) as wire:
        parse_create_topics_response(wire.request(CREATE_TOPICS, 3, create))
        huge = _patch(good_batch(), COUNT_AT, ">i", 2**31 - 1)
        result = parse_produce_response(wire.request(PRODUCE, 7, produce_body({("r17", 0): huge})))
        assert result[("r17", 0)][0] in {CORRUPT_MESSAGE, INVALID_RECORD}
    assert served.status("VmHWM") - rss_before < 5 * 1024, "RSS grew by 5 MiB or more"


def test_r17_batch_above_message_max_bytes(served: CliBroker) -> None:
    big = build_batch([(b"k", os.urandom(3 * 2**20))], timestamps=NOW_MS)
    with Wire(served.bootstrap) as wire:
        parse_create_topics_response(
            wire.request(CREATE_TOPICS, 3, create_topics_body([("big", 1)]))
        )
        result = parse_produce_response(wire.request(PRODUCE, 7, produce_body({("big", 0): big})))
    assert result[("big", 0)][0] == MESSAGE_TOO_LARGE


def _bomb_records(size: int) -> Iterator[bytes]:
    """The records section of one record whose value is ``size`` zero bytes, in chunks."""
    value_len = varint(size)
    body_len = 1 + 1 + 1 + 1 + len(b"k") + len(value_len) + size + 1
    yield varint(body_len) + i8(0) + varint(0) + varint(0) + varint(1) + b"k" + value_len
    chunk = b"\0" * 2**20
    for _ in range(size // len(chunk)):
        yield chunk
    yield b"\0" * (size % len(chunk)) + varint(0)  # no headers


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """1 GiB of records compressed with gzip (about 1 MiB) and zstd (tens of KiB)."""
    import zstandard

    size = 2**30
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    gzip_blob = b"".join(gz.compress(c) for c in _bomb_records(size)) + gz.flush()
    zc = zstandard.ZstdCompressor(level=3).compressobj()
    zstd_blob = b"".join(zc.compress(c) for c in _bomb_records(size)) + zc.flush()
    return {
        "gzip": batch(gzip_blob, 1, 0, attributes=1),
        "zstd": batch(zstd_blob, 1, 0, attributes=4),
    }


@pytest.mark.parametrize("policy", ["compact", "delete"])
@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_r17_decompression_bomb_is_refused_in_bounded_memory(
    served: CliBroker, bombs: dict[str, bytes], codec: str, policy: str
) -> None:
    message_max = 2 * 2**20
    topic = f"bomb-{codec}-{policy}"
    with Wire(served.bootstrap) as wire:
        create = create_topics_body([(topic, 1)], {"cleanup.policy": policy})
        assert parse_create_topics_response(wire.request(CREATE_TOPICS, 3, create)) == {topic: 0}
        # An honest batch of the same codec first: the first append of a kind loads (and may
        # compile) code, which is not the bomb's memory.
        honest = build_batch(
            [(b"k", b"v" * 1000)], timestamps=NOW_MS, compression=Compression.from_name(codec)
        )
        warm = parse_produce_response(wire.request(PRODUCE, 7, produce_body({(topic, 0): honest})))
        assert warm[(topic, 0)][0] == 0, warm
        reset_peak_rss(served)
        rss_before = served.status("VmRSS")
        wire.sock.settimeout(30)
        result = parse_produce_response(
            wire.request(PRODUCE, 7, produce_body({(topic, 0): bombs[codec]}))
        )
    growth_kib = served.status("VmHWM") - rss_before
    limit_kib = (2 * message_max + 16 * 2**20) // 1024
    error = result[(topic, 0)][0]
    assert growth_kib <= limit_kib and error in {
        CORRUPT_MESSAGE,
        INVALID_RECORD,
        MESSAGE_TOO_LARGE,
    }, f"peak RSS grew {growth_kib} KiB (limit {limit_kib} KiB); error code {error}"


@pytest.mark.timeout(120)
def test_r17_idle_and_half_sent_connections_are_closed(served: CliBroker) -> None:
    """1,000 connections (idle, or stopped inside a frame) with ``connections.max.idle.ms`` 1 s."""
    conns = []
    try:
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", served.port), timeout=10)
            if i % 2:
                s.sendall(i32(100) + b"\0\x12")  # a frame of 100 bytes, 2 of them sent
            conns.append(s)
        deadline = time.monotonic() + 20
        open_ = list(conns)
        while open_ and time.monotonic() < deadline:
            still = []
            for s in open_:
                s.settimeout(0.01)
                try:
                    if s.recv(1) == b"":
                        continue
                except TimeoutError:
                    still.append(s)
                    continue
                except ConnectionResetError:
                    continue
            open_ = still
        assert not open_, f"{len(open_)} of 1000 connections still open after 20 s"
    finally:
        for s in conns:
            s.close()
    wait_until(lambda: _pings(served.bootstrap), "a new client to connect", timeout=10)


def _pings(bootstrap: str) -> bool:
    try:
        ping(bootstrap)
    except (OSError, Closed):
        return False
    return True


@pytest.mark.parametrize("requests", [100, 1000])
def test_r17_pipelined_requests_are_answered_in_order(served: CliBroker, requests: int) -> None:
    """All requests are written before any answer is read: the broker reads ahead only a few
    (bounded in-flight requests), the rest wait in the socket buffers, and every response comes
    in request order with its correlation id."""
    reset_peak_rss(served)
    rss_before = served.status("VmRSS")
    with Wire(served.bootstrap, timeout=30) as wire:
        frames = []
        for cid in range(requests):
            key, version, body = [(API_VERSIONS, 0, b""), (METADATA, 4, metadata_body([], False))][
                cid % 2
            ]
            payload = i16(key) + i16(version) + i32(cid) + string("pipeline") + body
            frames.append(i32(len(payload)) + payload)
        wire.sock.sendall(b"".join(frames))
        got = [wire.recv()[0] for _ in range(requests)]
    assert got == list(range(requests))
    assert served.status("VmHWM") - rss_before < 5 * 1024


# --- R18: topic names ----------------------------------------------------------------------------
BAD_NAMES: list[str | bytes] = [
    ".",
    "..",
    "../x",
    "../../etc/x",
    "a/b",
    "/abs",
    "a\\b",
    "nul\0byte",
    "",
    "x" * 250,
    "t\u043epic",  # a Cyrillic o
    "caf\u00e9",
    "space name",
    "tab\tname",
    b"\xff\xfe",  # not UTF-8
]


def user_topics(broker: Any) -> list[str]:
    return [t for t in topics(broker) if not t.startswith("__")]


def _listing(root: Path, skip: Path) -> str:
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            continue
        entries += [os.path.join(dirpath, n) for n in sorted(dirnames + filenames)]
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


@pytest.fixture
def nested_broker(brokers: Any, tmp_path: Path) -> Any:
    """A broker whose data directory sits inside a tree the test watches."""
    (tmp_path / "tree" / "sibling").mkdir(parents=True)
    return brokers.start(tmp_path / "tree" / "data")


def test_r18_bad_topic_names_are_invalid_everywhere(nested_broker: Any, tmp_path: Path) -> None:
    broker = nested_broker
    data = tmp_path / "tree" / "data"
    before = _listing(tmp_path / "tree", data)
    failures = []
    for name in BAD_NAMES:
        shown = repr(name)[:40]
        calls: list[tuple[str, int, int, bytes, Callable[[bytes], dict[Any, Any]]]] = [
            (
                "CreateTopics",
                CREATE_TOPICS,
                3,
                create_topics_body([(name, 1)]),
                parse_create_topics_response,
            ),
            (
                "Metadata auto-create",
                METADATA,
                4,
                metadata_body([name], True),
                parse_metadata_topic_errors,
            ),
        ]
        for what, key, version, body, parse in calls:
            with Wire(broker.bootstrap) as wire:
                try:
                    errors = list(parse(wire.request(key, version, body)).values())
                except Closed:
                    # A name that is not UTF-8 makes the request malformed: closing is Kafka's
                    # answer to that.
                    errors = [INVALID_TOPIC] if isinstance(name, bytes) else ["closed"]
            if errors != [INVALID_TOPIC]:
                failures.append(f"{what} {shown}: {errors}")
    assert _listing(tmp_path / "tree", data) == before, "files appeared outside the data directory"
    assert user_topics(broker) == []
    assert not failures, "\n".join(failures)


def test_r18_produce_to_a_bad_topic_name_is_invalid_topic(broker: Any) -> None:
    """R18 asks for INVALID_TOPIC_EXCEPTION (17) from Produce too. (Apache Kafka answers a
    Produce to a topic it does not have with UNKNOWN_TOPIC_OR_PARTITION (3), whatever the name,
    which producers retry until their timeout; 17 tells them at once that the name is wrong.)"""
    failures = []
    for name in BAD_NAMES:
        with Wire(broker.bootstrap) as wire:
            try:
                produced = parse_produce_response(
                    wire.request(PRODUCE, 7, produce_body({(name, 0): good_batch()}))
                )
                errors: list[Any] = [e for e, _ in produced.values()]
            except Closed:
                errors = [INVALID_TOPIC] if isinstance(name, bytes) else ["closed"]
        if errors != [INVALID_TOPIC]:
            failures.append(f"Produce {repr(name)[:40]}: {errors}")
    assert user_topics(broker) == []
    assert not failures, "\n".join(failures)


def test_r18_collisions_and_legal_odd_names(broker: Any) -> None:
    with Wire(broker.bootstrap) as wire:

        def create(name: str) -> int:
            return parse_create_topics_response(
                wire.request(CREATE_TOPICS, 3, create_topics_body([(name, 1)]))
            )[name]

        assert create("a.b") == 0
        assert create("a_b") == INVALID_TOPIC  # collides with a.b in metric names
        assert create("x" * 249) == 0  # the longest legal name
        # Legal in Kafka and here (topic_names docstring): a name that looks like an option.
        assert create("-rf") == 0
    assert (Path(broker.broker.store.path) / "-rf-0").is_dir()


def test_r18_foreign_files_in_the_data_directory_do_not_stop_startup(
    brokers: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    broker = brokers.start(data)
    create_topic(broker, "kept", 1)
    append(broker, "kept", 0, [(b"k", b"v")])
    brokers.stop(broker)
    (data / "not-a-partition").mkdir()
    (data / "kept-x").mkdir()
    (data / "stray.txt").write_text("hello")
    (data / "kept-01").mkdir()  # a leading zero: not kept-1
    broker = brokers.start(data)
    assert user_topics(broker) == ["kept"]
    assert log_end_offset(broker, "kept", 0) == 1
    ping(broker.bootstrap)
