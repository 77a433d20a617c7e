"""Topic creation runs off the broker's event loop: other connections are served while a topic's
partitions are created (each writes and fsyncs several files), and no request ever sees a
topic whose partitions are not all there."""

from __future__ import annotations

import itertools
import select
import threading
import time
from pathlib import Path

import pytest

from compactlog.broker.server import BrokerThread
from compactlog.storage.store import Store
from tests.broker.helpers.wire import (
    API_VERSIONS,
    CREATE_TOPICS,
    METADATA,
    Wire,
    create_topics_body,
    metadata_body,
    parse_create_topics_response,
)

pytestmark = pytest.mark.broker


def test_other_connections_are_served_while_a_topic_is_created(tmp_path: Path) -> None:
    with BrokerThread(tmp_path / "data") as broker, Wire(broker.bootstrap, timeout=120) as slow:
        slow.send(CREATE_TOPICS, 3, create_topics_body([("wide", 400)]))
        started = time.monotonic()
        answers = [started]
        with Wire(broker.bootstrap) as other:
            # Until the creation is answered, the other connection keeps asking.
            while not select.select([slow.sock], [], [], 0)[0]:
                other.request(API_VERSIONS, 0, b"")
                answers.append(time.monotonic())
            _, body = slow.recv()
        took = time.monotonic() - started
        assert parse_create_topics_response(body) == {"wide": 0}
        longest_wait = max(b - a for a, b in itertools.pairwise(answers))
        print(f"creation {took:.2f} s, {len(answers) - 1} answers meanwhile, {longest_wait=:.3f} s")
        # Held for the creation, the loop would answer nothing for most of it.
        assert longest_wait < took / 4, f"{longest_wait:.2f} s without an answer of {took:.2f} s"
        with Wire(broker.bootstrap) as check:
            meta = check.request(METADATA, 4, metadata_body(["wide"], False))
            assert b"wide" in meta


def test_a_topic_is_published_with_all_its_partitions(tmp_path: Path) -> None:
    """A reader in another thread never sees a topic whose logs are not all loaded."""
    with Store.open(tmp_path / "data") as store:
        seen_incomplete: list[str] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for name in store.topics():
                    for p in range(store.partitions(name)):
                        if (name, p) not in store.logs():
                            seen_incomplete.append(f"{name}-{p}")

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            for n in range(6):
                store.create_topic(f"t{n}", 40)
            store.create_partitions("t0", 80)
        finally:
            done.set()
            watcher.join()
        assert seen_incomplete == []
        assert store.partitions("t0") == 80
        assert all(("t0", p) in store.logs() for p in range(80))
