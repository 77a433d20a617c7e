"""Seed 000's kcat + gawk "last compaction" script, run unchanged against a cleaned topic.

The topic is produced with kcat (as the seed's users do), cleaned with the broker stopped
(``Store.open``, roll, clean, close: the offline way an operator would), and served again. The
script must report the largest offset gap of the cleaned partition (the first of equal ones) and
the time of the record after it, computed here from the store.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.storage.store import Store
from tests.broker.helpers.clients import needs_gawk, needs_kcat
from tests.broker.helpers.kcat import kcat
from tests.broker.helpers.server import Brokers
from tests.broker.helpers.store import create_topic, on_broker
from tests.managed import manager_of, open_managed

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    needs_kcat,
    needs_gawk,
    pytest.mark.usefixtures("collect_client_garbage"),
]

SCRIPT = Path(__file__).parent / "seed000" / "last-compaction.sh"
TOPIC = "fruit-prices"


def expected_gap(store: Store) -> tuple[int, int, int]:
    """(offsets removed, offset after the gap, its timestamp) of the first largest gap."""
    records = list(store.read(TOPIC, 0, store.log_start_offset(TOPIC, 0)))
    best: tuple[int, int, int] | None = None
    for before, after in itertools.pairwise(records):
        jump = after.offset - before.offset
        if jump > 1 and (best is None or jump - 1 > best[0]):
            best = (jump - 1, after.offset, after.timestamp)
    assert best is not None, "cleaning left no gap"
    return best


def run_script(bootstrap: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), bootstrap, TOPIC, "0"], capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def test_last_compaction_script_finds_the_largest_gap(brokers: Brokers) -> None:
    broker = brokers.start()
    create_topic(broker, TOPIC, 1, {"cleanup.policy": "compact"})
    lines = [b"cherry:$3.00", b"grape:$2.69", b"lime:$0.49", b"apple:$1.10", b"banana:$0.25"]
    lines += [b"lime:$0.%d" % (50 + i) for i in range(7)]  # a run of lime updates ...
    lines += [b"grape:$2.79", b"lime:$1.59"]  # ... all superseded by this one
    lines += [b"apple:$1.20", b"pear:$0.99", b"grape:$2.89"]
    for line in lines:  # one kcat run per record: a batch each, timestamps apart
        kcat(broker.bootstrap, "-P", "-t", TOPIC, "-K:", input=line + b"\n")
        time.sleep(0.002)
    assert run_script(broker.bootstrap) == "no compaction gap"

    data_dir = Path(broker.broker.store.path)
    brokers.stop(broker)
    with open_managed(data_dir) as store:  # offline, as an operator cleans with the CLI
        store.roll(TOPIC, 0)
        manager_of(store).clean_log(TOPIC, 0)
        removed, after, timestamp = expected_gap(store)
    broker = brokers.start(data_dir)

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp // 1000))
    assert run_script(broker.bootstrap) == (
        f"last compaction: {removed} offsets removed before offset {after} ({when} UTC)"
    )
    # Kept: cherry 0, banana 4, lime 13, apple 14, pear 15, grape 16. The largest gap is where
    # the run of lime updates was, between banana and lime:$1.59.
    assert (removed, after) == (8, 13)


def test_script_output_matches_report_on_a_client_cleaned_topic(broker: Any) -> None:
    """The same script while the broker keeps the store (cleaned through ``broker.store``)."""
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
    removed, after, timestamp = on_broker(broker, expected_gap)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp // 1000))
    assert run_script(broker.bootstrap) == (
        f"last compaction: {removed} offsets removed before offset {after} ({when} UTC)"
    )
