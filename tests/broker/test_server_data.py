"""Produce, Fetch, ListOffsets and InitProducerId over a real socket (spec 1.4, 2.4, 5.1)."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.server import BrokerThread
from compactlog.protocol.messages import InitProducerIdRequest, ListOffsetsRequest
from compactlog.records import Compression, iter_batches
from tests.broker.test_server_basics import (
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    NOW,
    PRODUCE,
    Client,
    batch,
    connected,
    create_topic,
    fetch_request,
    fetch_results,
    produce_request,
    produce_results,
    running_broker,
    start_broker,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    yield from running_broker(tmp_path)


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def produce(client: Client, topic: str, partition: int, data: bytes | None, **kw: Any) -> Any:
    response = client.call(PRODUCE, 7, produce_request({(topic, partition): data}, **kw))
    return produce_results(response)[(topic, partition)]


def fetch(client: Client, topic: str, partition: int, offset: int, **kw: Any) -> Any:
    return fetch_results(client.call(FETCH, 11, fetch_request({(topic, partition): offset}, **kw)))[
        (topic, partition)
    ]


def records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in iter_batches(data) for r in b.records()]


def log_end_offset(server: BrokerThread, topic: str, partition: int = 0) -> int:
    store = server.broker.store
    assert store is not None
    return server.call(lambda: store.log_end_offset(topic, partition))


# --- produce and fetch ---------------------------------------------------------------------------
@pytest.mark.parametrize("codec", list(Compression), ids=lambda codec: codec.name.lower())
def test_produce_then_fetch_with_every_codec(
    server: BrokerThread, client: Client, codec: Compression
) -> None:
    create_topic(server, "t", config={"cleanup.policy": "compact"})
    records = [(b"k%d" % i, b"value-%d-" % i + b"x" * 100) for i in range(20)]
    first = produce(client, "t", 0, batch(records[:10], codec))
    second = produce(client, "t", 0, batch(records[10:], codec))
    assert (first.error_code, first.base_offset, first.log_start_offset) == (c.NONE, 0, 0)
    assert (second.error_code, second.base_offset) == (c.NONE, 10)
    got = fetch(client, "t", 0, 0)
    assert (got.error_code, got.high_watermark, got.last_stable_offset) == (c.NONE, 20, 20)
    assert got.log_start_offset == 0 and got.aborted_transactions is None
    assert [b.compression for b in iter_batches(got.records)] == [codec] * 2
    assert records_of(got.records) == [(i, k, v) for i, (k, v) in enumerate(records)]


def test_keyless_record_to_a_compacted_topic_is_invalid_record_and_nothing_is_appended(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "c", 2, {"cleanup.policy": "compact,delete"})
    request = produce_request(
        {
            ("c", 0): batch([(b"k", b"1"), (None, b"2")], Compression.GZIP),
            ("c", 1): batch([(b"k", b"1")]),
        }
    )
    results = produce_results(client.call(PRODUCE, 7, request))
    assert (results[("c", 0)].error_code, results[("c", 0)].base_offset) == (c.INVALID_RECORD, -1)
    assert results[("c", 1)].error_code == c.NONE
    assert log_end_offset(server, "c", 0) == 0 and log_end_offset(server, "c", 1) == 1
    # v8 names the records and says why, as Kafka 4.4 does (its Java producer raises that)
    keyless = batch([(None, b"0"), (b"k", b"1")] + [(None, b"%d" % i) for i in range(2, 6)])
    refused = produce_results(client.call(PRODUCE, 8, produce_request({("c", 0): keyless})))
    p = refused[("c", 0)]
    why = "Compacted topic cannot accept message without key in topic partition c-0"
    assert (p.error_code, p.base_offset, p.log_start_offset) == (c.INVALID_RECORD, -1, 0)
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (i, why) for i in (0, 2, 3, 4, 5)
    ]
    assert p.error_message == (
        "One or more records have been rejected due to 5 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=0, message='{why}'), "
        f"RecordError(batchIndex=2, message='{why}'), RecordError(batchIndex=3, message='{why}')]"
    )
    assert log_end_offset(server, "c", 0) == 0


def _with_magic(data: bytes, magic: int) -> bytes:
    out = bytearray(data)
    out[16] = magic
    return bytes(out)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown topic", c.UNKNOWN_TOPIC_OR_PARTITION),
        ("unknown partition", c.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad topic name", c.INVALID_TOPIC_EXCEPTION),
        ("no records", c.INVALID_RECORD),
        ("two batches", c.INVALID_RECORD),
        ("magic 1", c.INVALID_RECORD),
        ("truncated", c.CORRUPT_MESSAGE),
        ("bad crc", c.CORRUPT_MESSAGE),
        ("too large", c.MESSAGE_TOO_LARGE),
        ("transactional batch", c.INVALID_TXN_STATE),
        ("transactional id", c.INVALID_TXN_STATE),
        ("acks 2", c.INVALID_REQUIRED_ACKS),
    ],
)
def test_produce_errors_per_partition(
    server: BrokerThread, client: Client, case: str, expected: int
) -> None:
    create_topic(server, "e", config={"max.message.bytes": 1000})
    good = batch([(b"k", b"v")])
    topic, partition = "e", 0
    data: bytes | None = good
    kw: dict[str, Any] = {}
    if case == "unknown topic":
        topic = "nope"
    elif case == "unknown partition":
        partition = 5
    elif case == "bad topic name":
        topic = "../etc"
    elif case == "no records":
        data = None
    elif case == "two batches":
        data = good + good
    elif case == "magic 1":
        data = _with_magic(good, 1)
    elif case == "truncated":
        data = good[:-3]
    elif case == "bad crc":
        data = good[:-1] + bytes([good[-1] ^ 1])
    elif case == "too large":
        data = batch([(b"k", b"x" * 2000)])
    elif case == "transactional batch":
        data = batch(
            [(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
        )
    elif case == "transactional id":
        kw = {"transactional_id": "txn-1"}
    elif case == "acks 2":
        kw = {"acks": 2}
    result = produce(client, topic, partition, data, **kw)
    assert result.error_code == expected, case
    assert (result.base_offset, result.log_append_time_ms, result.log_start_offset) == (-1, -1, -1)
    assert log_end_offset(server, "e") == 0


def test_zstd_needs_produce_v7(server: BrokerThread, client: Client) -> None:
    create_topic(server, "z")
    data = batch([(b"k", b"v")], Compression.ZSTD)
    v6 = client.call(PRODUCE, 6, produce_request({("z", 0): data}))
    assert produce_results(v6)[("z", 0)].error_code == c.UNSUPPORTED_COMPRESSION_TYPE
    assert produce(client, "z", 0, data).error_code == c.NONE


def test_idempotent_retry_is_answered_with_the_original_offsets(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "i")
    producer_id = client.call(
        INIT_PRODUCER_ID, 1, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1)
    ).producer_id
    produce(client, "i", 0, batch([(b"other", b"x")]))

    def idempotent(sequence: int, n: int = 2) -> bytes:
        return batch(
            [(b"k", b"%d" % (sequence + i)) for i in range(n)],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
        )

    first = produce(client, "i", 0, idempotent(0))
    assert (first.error_code, first.base_offset) == (c.NONE, 1)
    retry = produce(client, "i", 0, idempotent(0))
    assert (retry.error_code, retry.base_offset) == (c.NONE, 1)
    assert log_end_offset(server, "i") == 3
    assert produce(client, "i", 0, idempotent(5)).error_code == c.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, "i", 0, idempotent(2)).base_offset == 3


# --- fetch ---------------------------------------------------------------------------------------
def test_fetch_long_poll_is_woken_by_a_produce(server: BrokerThread) -> None:
    create_topic(server, "w")
    with Client(server.port) as consumer, Client(server.port) as producer:
        started = time.monotonic()
        consumer.send(FETCH, 11, fetch_request({("w", 0): 0}, max_wait_ms=10_000, min_bytes=1))
        time.sleep(0.2)  # the fetch is waiting now
        assert produce(producer, "w", 0, batch([(b"k", b"v")])).error_code == c.NONE
        _, response = consumer.receive()
        elapsed = time.monotonic() - started
    got = fetch_results(response)[("w", 0)]
    assert records_of(got.records) == [(0, b"k", b"v")]
    assert elapsed < 5, elapsed


def test_fetch_long_poll_times_out_at_max_wait(server: BrokerThread, client: Client) -> None:
    create_topic(server, "w")
    produce(client, "w", 0, batch([(b"k", b"v")]))
    started = time.monotonic()
    got = fetch(client, "w", 0, 1, max_wait_ms=300, min_bytes=1)
    elapsed = time.monotonic() - started
    assert (got.error_code, got.records, got.high_watermark) == (c.NONE, b"", 1)
    assert 0.28 <= elapsed < 3, elapsed
    # min_bytes larger than what is there: waits the whole max_wait, then returns what there is.
    started = time.monotonic()
    got = fetch(client, "w", 0, 0, max_wait_ms=300, min_bytes=1 << 20)
    assert records_of(got.records) == [(0, b"k", b"v")]
    assert time.monotonic() - started >= 0.28


def test_a_waiting_fetch_holds_up_only_its_own_connection(server: BrokerThread) -> None:
    create_topic(server, "w")
    with Client(server.port) as waiting, Client(server.port) as other:
        waiting.send(FETCH, 11, fetch_request({("w", 0): 0}, max_wait_ms=2000))
        started = time.monotonic()
        assert produce(other, "w", 0, batch([(b"k", b"v")]), acks=1).error_code == c.NONE
        assert time.monotonic() - started < 1
        waiting.receive()


@pytest.mark.parametrize("offset", [-1, 2, 100])
def test_fetch_out_of_range_has_empty_records(
    server: BrokerThread, client: Client, offset: int
) -> None:
    create_topic(server, "r")
    produce(client, "r", 0, batch([(b"k", b"v")]))
    got = fetch(client, "r", 0, offset, max_wait_ms=5000)
    assert got.error_code == c.OFFSET_OUT_OF_RANGE
    assert got.records == b""  # never null (spec 1.4 item 3)
    assert (got.high_watermark, got.last_stable_offset, got.log_start_offset) == (-1, -1, -1)


def test_fetch_unknown_partition_and_read_committed(server: BrokerThread, client: Client) -> None:
    create_topic(server, "u")
    response = client.call(
        FETCH, 11, fetch_request({("u", 0): 0, ("u", 1): 0, ("x", 0): 0}, isolation_level=1)
    )
    got = fetch_results(response)
    assert got[("u", 0)].error_code == c.NONE and got[("u", 0)].aborted_transactions == []
    assert got[("u", 1)].error_code == c.UNKNOWN_TOPIC_OR_PARTITION
    assert got[("x", 0)].error_code == c.UNKNOWN_TOPIC_OR_PARTITION
    assert got[("x", 0)].records == b""


def test_fetch_sizes_keep_the_first_batch_whole(server: BrokerThread, client: Client) -> None:
    create_topic(server, "s", 2)
    for partition in (0, 1):
        for i in range(3):
            produce(client, "s", partition, batch([(b"k", b"%d" % i + b"x" * 500)]))
    size = len(batch([(b"k", b"0" + b"x" * 500)]))
    # KIP-74: the first batch comes whole even when it is larger than both limits.
    response = client.call(
        FETCH,
        11,
        fetch_request({("s", 0): 0, ("s", 1): 0}, max_bytes=10, partition_max_bytes=10),
    )
    got = fetch_results(response)
    assert len(got[("s", 0)].records) == size and got[("s", 1)].records == b""
    # partition_max_bytes bounds each partition; max_bytes the whole response.
    got = fetch_results(
        client.call(
            FETCH,
            11,
            fetch_request(
                {("s", 0): 0, ("s", 1): 0}, max_bytes=3 * size, partition_max_bytes=2 * size
            ),
        )
    )
    assert len(got[("s", 0)].records) == 2 * size and len(got[("s", 1)].records) == size
    # Never a partial batch: 1.5 batches of room give one.
    got = fetch_results(
        client.call(FETCH, 11, fetch_request({("s", 0): 1}, partition_max_bytes=size + size // 2))
    )
    assert [b.base_offset for b in iter_batches(got[("s", 0)].records)] == [1]


def test_fetch_on_a_compacted_log_returns_whole_batches_from_the_one_holding_the_offset(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "cc", config={"cleanup.policy": "compact"})
    produce(client, "cc", 0, batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]))  # 0-2
    produce(client, "cc", 0, batch([(b"b", b"2"), (b"c", b"1")], Compression.GZIP))  # 3-4
    produce(client, "cc", 0, batch([(b"c", b"2")]))  # 5
    store, logs = server.broker.store, server.broker.log_manager
    assert store is not None and logs is not None
    server.call(lambda: store.roll("cc", 0))
    produce(client, "cc", 0, batch([(b"d", b"1")]))  # 6, in the active segment
    server.call(lambda: logs.clean_log("cc", 0))
    whole = fetch(client, "cc", 0, 0)
    headers = [(b.base_offset, b.last_offset) for b in iter_batches(whole.records)]
    assert headers == [(0, 2), (3, 4), (5, 5), (6, 6)]  # batch boundaries survive cleaning
    assert records_of(whole.records) == [(2, b"a", b"2"), (3, b"b", b"2"), (5, b"c", b"2"),
                                          (6, b"d", b"1")]  # fmt: skip
    # Offset 1 was compacted away: the answer starts at the batch holding it (base 0).
    got = fetch(client, "cc", 0, 1)
    assert [b.base_offset for b in iter_batches(got.records)][:1] == [0]
    # Offset 4 (c=1, superseded) lies in batch 3-4, whose only record left is 3.
    got = fetch(client, "cc", 0, 4)
    assert next((b.base_offset, b.last_offset) for b in iter_batches(got.records)) == (3, 4)
    assert (got.high_watermark, got.log_start_offset) == (7, 0)


def test_incremental_fetch_sessions_are_not_kept(server: BrokerThread, client: Client) -> None:
    create_topic(server, "f")
    full = client.call(FETCH, 11, fetch_request({("f", 0): 0}, session_epoch=0))
    assert (full.error_code, full.session_id) == (c.NONE, 0)
    incremental = client.call(FETCH, 11, fetch_request({("f", 0): 0}, session_epoch=1))
    assert incremental.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND: the client starts over


# --- ListOffsets ---------------------------------------------------------------------------------
def test_list_offsets(server: BrokerThread, client: Client) -> None:
    create_topic(server, "l")
    produce(client, "l", 0, batch([(b"a", b"1"), (b"b", b"2")]))  # NOW
    later = [(b"c", b"3"), (b"d", b"4")]
    data = batch(later, timestamps=[NOW + 1000, NOW + 2000])
    produce(client, "l", 0, data)
    store = server.broker.store
    assert store is not None
    server.call(lambda: store.delete_records("l", 0, 1))

    def list_offset(timestamp: int, version: int = 3) -> tuple[int, int, int]:
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=1,
            topics=[{"name": "l", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        )
        p = client.call(LIST_OFFSETS, version, request).topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert list_offset(-2) == (c.NONE, 1, -1)  # earliest: the log start offset
    assert list_offset(-1, version=1) == (c.NONE, 4, -1)  # latest: the high watermark
    assert list_offset(NOW + 500) == (c.NONE, 2, NOW + 1000)
    assert list_offset(NOW + 1001) == (c.NONE, 3, NOW + 2000)
    assert list_offset(NOW + 2001) == (c.NONE, -1, -1)
    unknown = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": "zz", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    p = client.call(LIST_OFFSETS, 2, unknown).topics[0].partitions[0]
    assert (p.error_code, p.offset) == (c.UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_list_offsets_special_timestamps_and_leader_epochs(
    server: BrokerThread, client: Client
) -> None:
    """What Kafka 4.4 answered for the same log (v4+ leader epochs, v7+ max timestamp, v8+
    earliest local, v9+ latest tiered, v11 earliest pending upload)."""
    create_topic(server, "m")
    create_topic(server, "empty")
    produce(client, "m", 0, batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
                                  timestamps=[NOW + 1000, NOW + 5000, NOW + 4000]))  # fmt: skip
    produce(client, "m", 0, batch([(b"c", b"3"), (b"d", b"4")], timestamps=[NOW + 5000, NOW]))

    def ask(
        topic: str, timestamp: int, version: int = 11, epoch: int = -1
    ) -> tuple[int, int, int, int]:
        partition = {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": timestamp}
        request = ListOffsetsRequest(
            replica_id=-1, topics=[{"name": topic, "partitions": [partition]}], timeout_ms=1000
        )
        p = client.call(LIST_OFFSETS, version, request).topics[0].partitions[0]
        return p.error_code, p.timestamp, p.offset, p.leader_epoch

    assert ask("m", -1) == (c.NONE, -1, 5, 0)
    assert ask("m", -2) == (c.NONE, -1, 0, 0)
    assert ask("m", -3) == (c.NONE, NOW + 5000, 1, 0)  # the first record holding the max
    assert ask("m", -4) == (c.NONE, -1, 0, 0)
    assert ask("m", -5) == (c.NONE, -1, -1, -1)
    assert ask("m", -6) == (c.NONE, -1, -1, -1)
    assert ask("m", -7) == (c.UNSUPPORTED_VERSION, -1, -1, -1)
    assert ask("m", NOW + 1500) == (c.NONE, NOW + 5000, 1, 0)
    assert ask("m", NOW + 5001) == (c.NONE, -1, -1, -1)
    assert ask("empty", -3) == (c.NONE, -1, -1, -1)
    assert ask("empty", -1) == (c.NONE, -1, 0, 0)
    for timestamp, first in ((-3, 7), (-4, 8), (-5, 9), (-6, 11)):
        assert ask("m", timestamp, version=first - 1)[0] == c.UNSUPPORTED_VERSION
        assert ask("m", timestamp, version=first)[0] == c.NONE
    assert ask("m", -1, epoch=1)[0] == c.UNKNOWN_LEADER_EPOCH
    assert ask("m", -1, epoch=-2)[0] == c.FENCED_LEADER_EPOCH
    assert ask("m", -1, epoch=0)[0] == c.NONE
    assert ask("m", -1, version=3)[3] == -1  # no leader epoch before v4
    twice = ListOffsetsRequest(
        replica_id=-1,
        topics=[{"name": "m", "partitions": [{"partition_index": 0, "timestamp": -1}] * 2}],
    )
    (p,) = client.call(LIST_OFFSETS, 11, twice).topics[0].partitions
    assert (p.partition_index, p.error_code) == (0, c.INVALID_REQUEST)


# --- InitProducerId and restarts -----------------------------------------------------------------
def _init_producer_id(client: Client, transactional_id: str | None = None) -> Any:
    return client.call(
        INIT_PRODUCER_ID,
        1,
        InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000),
    )


def test_producer_ids_are_unique_across_restarts_and_data_survives(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    seen = []
    for round_ in range(3):
        broker = start_broker(data_dir)
        try:
            with Client(broker.port) as conn:
                for _ in range(3):
                    response = _init_producer_id(conn)
                    assert (response.error_code, response.producer_epoch) == (c.NONE, 0)
                    seen.append(response.producer_id)
                if round_ == 0:
                    create_topic(broker, "keep")
                    assert produce(conn, "keep", 0, batch([(b"k", b"v")])).base_offset == 0
                got = fetch(conn, "keep", 0, 0)
                assert records_of(got.records) == [(0, b"k", b"v")]
        finally:
            broker.stop()
    assert len(set(seen)) == len(seen) == 9
    block = json.loads((data_dir / "compactlog-producer-ids.json").read_text())
    assert block["block_end"] >= max(seen)


def test_producer_ids_stay_above_those_the_logs_know(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        create_topic(broker, "p")
        with Client(broker.port) as conn:
            data = batch([(b"k", b"v")], producer_id=5000, producer_epoch=0, base_sequence=0)
            assert produce(conn, "p", 0, data).error_code == c.NONE
    finally:
        broker.stop()
    (data_dir / "compactlog-producer-ids.json").unlink(missing_ok=True)  # a lost file
    broker = start_broker(data_dir)
    try:
        with Client(broker.port) as conn:
            assert _init_producer_id(conn).producer_id > 5000
    finally:
        broker.stop()


def test_transactional_init_producer_id_is_refused(client: Client) -> None:
    response = _init_producer_id(client, "my-transactions")
    assert (response.error_code, response.producer_id) == (c.UNSUPPORTED_VERSION, -1)
    assert _init_producer_id(client, "").error_code == c.INVALID_REQUEST


def test_records_survive_a_restart_byte_for_byte(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir)
    try:
        create_topic(broker, "b")
        with Client(broker.port) as conn:
            produce(conn, "b", 0, batch([(b"k", b"v")] * 3, Compression.LZ4))
            before = fetch(conn, "b", 0, 0).records
    finally:
        broker.stop()
    broker = start_broker(data_dir)
    try:
        with Client(broker.port) as conn:
            assert fetch(conn, "b", 0, 0).records == before
    finally:
        broker.stop()
    assert struct.unpack_from(">q", before)[0] == 0


def test_producer_state_survives_cleaning_and_a_restart(tmp_path: Path) -> None:
    """A retry that arrives after the log was cleaned and the broker restarted is still answered
    with the batch's original offsets, and a gap in sequences is still refused."""
    data_dir = tmp_path / "data"

    def idempotent(producer_id: int, sequence: int, key: bytes) -> bytes:
        return batch(
            [(key, b"v%d" % sequence)],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
        )

    broker = start_broker(data_dir)
    try:
        create_topic(broker, "ps", config={"cleanup.policy": "compact"})
        with Client(broker.port) as conn:
            producer_id = _init_producer_id(conn).producer_id
            assert produce(conn, "ps", 0, idempotent(producer_id, 0, b"a")).base_offset == 0
            assert produce(conn, "ps", 0, idempotent(producer_id, 1, b"a")).base_offset == 1
        store, logs = broker.broker.store, broker.broker.log_manager
        assert store is not None and logs is not None
        broker.call(lambda: store.roll("ps", 0))
        broker.call(lambda: logs.clean_log("ps", 0))
    finally:
        broker.stop()
    broker = start_broker(data_dir)
    try:
        with Client(broker.port) as conn:
            retry = produce(conn, "ps", 0, idempotent(producer_id, 1, b"a"))
            assert (retry.error_code, retry.base_offset) == (c.NONE, 1)
            gap = produce(conn, "ps", 0, idempotent(producer_id, 3, b"a"))
            assert gap.error_code == c.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(conn, "ps", 0, idempotent(producer_id, 2, b"b")).base_offset == 2
    finally:
        broker.stop()
