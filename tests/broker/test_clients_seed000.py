"""Seed 000's kcat + gawk "last compaction" script, run unchanged against ``compactlog serve``.

The script (``seed000/last-compaction.sh``, the seed's published text) reports the LAST gap in
a partition's offsets, "the last place where compaction provably happened": the offset and row
of the record after it, its time, the last offset and row, and the rows after the gap. Here it
runs against a topic before and after cleaning, on a ``compactlog serve`` child process (cleaned
with the broker stopped, as an operator cleans with the CLI) and on an in-process broker
(cleaned through its own store); every figure must be the one computed from the store's records.
The Spark report's gap column is checked against the same script in
``tests/spark/test_report_seed000.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers.clients import needs_gawk, needs_kcat
from tests.broker.helpers.kcat import kcat
from tests.broker.helpers.seed000 import (
    PUBLISHED_SHA256,
    SCRIPT,
    T0,
    LastCompaction,
    expected,
    fill,
    run_script,
    seconds_iso,
)
from tests.broker.helpers.server import CliBroker
from tests.broker.helpers.store import create_topic, on_broker
from tests.managed import manager_of, open_managed

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(90),
    needs_kcat,
    needs_gawk,
    pytest.mark.usefixtures("collect_client_garbage"),
]

TOPIC = "fruit-prices"


def test_the_script_is_the_published_one() -> None:
    assert hashlib.sha256(SCRIPT.read_bytes()).hexdigest() == PUBLISHED_SHA256


def test_the_script_finds_the_last_gap_on_compactlog_serve(
    cli_broker: Callable[..., CliBroker], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with open_managed(data) as store:
        fill(store, TOPIC)
    serve = cli_broker(data_dir=data).start()
    # Nothing cleaned: no gap; every row counts as contiguous.
    assert run_script(serve.bootstrap, TOPIC, 0) == LastCompaction(
        None, None, "1970-01-01T00:00:00", 19, 20, 20
    )
    serve.stop()

    with open_managed(data) as store:  # offline, as an operator cleans with the CLI
        for p in range(2):
            store.roll(TOPIC, p)
            manager_of(store).clean_log(TOPIC, p)
        records = [list(store.read(TOPIC, p, 0)) for p in range(2)]
    serve.start()
    found = [run_script(serve.bootstrap, TOPIC, p) for p in range(2)]
    assert found == [expected(records[p]) for p in range(2)]

    # Kept in partition 0: cherry 0, banana 4, lime 13, apple 14, grape 16, kiwi 17, fig 18,
    # pear 19. The last gap is before grape 16 (pear 15 went), not the largest one (5..12).
    assert found[0] == LastCompaction(16, 5, seconds_iso(T0 + 16_000), 19, 8, 3)
    # Partition 1 kept its last round only (offsets 1200..1599): its one gap is before the first
    # surviving record, and the 399 records after it are contiguous.
    assert found[1] == LastCompaction(1200, 1, seconds_iso(T0 + 1_200_000), 1599, 400, 399)


def test_the_script_on_a_topic_cleaned_by_a_running_broker(broker: Any) -> None:
    """Produced with kcat, cleaned through the running broker's own store."""
    create_topic(broker, TOPIC, 1, {"cleanup.policy": "compact"})
    rounds = [[0, 1, 2], [1, 2], [1, 2], [1, 2], [1, 2], [3]]  # k0 and k3 written once
    for i, keys in enumerate(rounds):
        kcat(
            broker.bootstrap,
            "-P",
            "-t",
            TOPIC,
            "-K:",
            input=b"".join(b"k%d:v%d-%d\n" % (k, i, k) for k in keys),
        )
    on_broker(
        broker,
        lambda store: (store.roll(TOPIC, 0), broker.broker.log_manager.clean_log(TOPIC, 0)),
    )
    records = on_broker(broker, lambda store: list(store.read(TOPIC, 0, 0)))
    # Kept: k0 at 0, k1 and k2 of the fifth round (9, 10), k3 at 11: the last gap is before 9.
    assert [r.offset for r in records] == [0, 9, 10, 11]
    assert run_script(broker.bootstrap, TOPIC) == expected(records)
    assert expected(records).gap_offset == 9
