"""Issue 17 through the broker: a Fetch that reaches damaged bytes gets CORRUPT_MESSAGE for that
partition only, after the batches before the damage; other partitions and offsets are served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog import errors as c
from compactlog.broker.server import BrokerThread
from compactlog.records import iter_batches
from tests.broker.test_server_basics import (
    FETCH,
    PRODUCE,
    Client,
    batch,
    connected,
    create_topic,
    fetch_request,
    fetch_results,
    produce_request,
    running_broker,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    yield from running_broker(tmp_path)


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def test_fetch_of_a_damaged_batch_is_corrupt_message_for_that_partition_only(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "t", 2)
    for i in range(10):
        for partition in (0, 1):
            request = produce_request({("t", partition): batch([(b"k%d" % i, b"v%d" % i)])})
            client.call(PRODUCE, 7, request)
    store = server.broker.store
    assert store is not None
    segment = server.call(lambda: store.log("t", 0).active_segment)
    positions = server.call(lambda: [b.position for b in segment.batches()])
    path = Path(segment.log_path)
    data = bytearray(path.read_bytes())
    data[positions[6] + 70] ^= 0x01  # a record byte of offset 6 (CRC-covered)
    path.write_bytes(bytes(data))

    def fetch(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], object]:
        return fetch_results(client.call(FETCH, 11, fetch_request(offsets)))

    results = fetch({("t", 0): 0, ("t", 1): 0})
    head = results[("t", 0)]
    assert head.error_code == c.NONE  # type: ignore[attr-defined]
    got = [b.base_offset for b in iter_batches(head.records)]  # type: ignore[attr-defined]
    assert got == list(range(6))  # every batch before the damage
    other = results[("t", 1)]
    assert other.error_code == c.NONE  # type: ignore[attr-defined]
    assert len(list(iter_batches(other.records))) == 10  # type: ignore[attr-defined]

    at_damage = fetch({("t", 0): 6, ("t", 1): 3})
    assert at_damage[("t", 0)].error_code == c.CORRUPT_MESSAGE  # type: ignore[attr-defined]
    assert at_damage[("t", 1)].error_code == c.NONE  # type: ignore[attr-defined]
    beyond = fetch({("t", 0): 7})[("t", 0)]
    assert beyond.error_code == c.NONE  # type: ignore[attr-defined]
    assert [b.base_offset for b in iter_batches(beyond.records)] == [7, 8, 9]  # type: ignore[attr-defined]


def test_quarantined_ranges_are_counted_in_the_metrics(tmp_path: Path) -> None:
    from compactlog.broker.metrics import BrokerMetrics, render
    from compactlog.log_manager import LogManager
    from tests.broker.test_server_limits import _samples

    data = tmp_path / "data"
    with LogManager.open(data) as manager:
        manager.store.create_topic("q", 2)
        for i in range(3):
            manager.store.append("q", 1, [(b"k", b"v%d" % i)])
    with open(data / "q-1" / "00000000000000000000.log", "ab") as f:
        f.write(b"\x07" * 41)  # garbage after the last batch
    with LogManager.open(data) as manager:
        text = render(BrokerMetrics(), manager)
    samples = _samples(text)
    assert samples['compactlog_log_quarantined_ranges{topic="q",partition="1"}'] == 1
    assert samples['compactlog_log_quarantined_bytes{topic="q",partition="1"}'] == 41
    assert samples['compactlog_log_quarantined_ranges{topic="q",partition="0"}'] == 0
