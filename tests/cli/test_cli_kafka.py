"""The CLI's network mode against Apache Kafka itself, and its local mode on the log directory
Kafka leaves behind: the same output for the same data where both can know it.

Marked ``kafka``; skipped where Java or Kafka's jars are missing (tests/kafka/harness.py).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import check_one_line_failure
from click.testing import CliRunner, Result

from compactlog.cli.main import main
from tests.kafka.harness import KafkaBroker, unavailable

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def kafka_broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    broker = KafkaBroker(tmp_path / "kafka").start()
    try:
        yield broker
    finally:
        broker.kill()


def test_network_mode_works_against_kafka_and_reads_as_its_log_dir(
    kafka_broker: KafkaBroker,
) -> None:
    run = CliRunner().invoke

    def net(*args: str, input: str | None = None) -> Result:
        return run(main, ["--bootstrap-server", kafka_broker.bootstrap, *args], input=input)

    def local(*args: str) -> Result:
        return run(main, ["--data-dir", str(kafka_broker.data_dir), *args])

    ts = str(time.time_ns() // 1_000_000)
    ok(net("topics", "create", "apples", "--partitions", "2", "--config",
           "cleanup.policy=compact,delete"))  # fmt: skip
    ok(net("produce", "apples", "-K", "=", "-H", "h=1", "--timestamp", ts,
           input="a=1\nb=2\nc=3\na=4\n"))  # fmt: skip
    assert "apples\n" in ok(net("topics", "list")).stdout
    line = check_one_line_failure(net("consume", "aples"), [3])
    assert "did you mean 'apples'?" in line
    line = check_one_line_failure(net("topics", "create", "apples"), [3])
    assert line.endswith("(TOPIC_ALREADY_EXISTS)")
    kcat = subprocess.run(
        ["kcat", "-b", kafka_broker.bootstrap, "-C", "-J", "-t", "apples", "-o", "beginning",
         "-e", "-q"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert ok(net("consume", "apples", "-J")).stdout_bytes == kcat
    ok(net("configs", "alter", "apples", "--add-config", "min.cleanable.dirty.ratio=0.2"))
    deadline = time.monotonic() + 30  # a KRaft broker learns the change from its controller
    while "min.cleanable.dirty.ratio=0.2" not in ok(net("topics", "describe", "apples")).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    configs = ok(net("configs", "describe", "apples")).stdout
    assert "  min.cleanable.dirty.ratio=0.2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" in (
        configs
    )
    result = ok(net("delete-records", "apples", "-p", "0", "--offset", "1"))
    assert result.stdout.endswith("partition: apples-0\tlow_watermark: 1\n")
    described = ok(net("topics", "describe", "apples")).stdout
    consumed = ok(net("consume", "apples", "-J")).stdout_bytes
    assert ok(net("groups", "list")).exit_code == 0
    kafka_broker.stop()

    # Kafka's own log directory, read-only: the topic, its ID, configs, offsets and records.
    assert ok(local("consume", "apples", "-J")).stdout_bytes == consumed
    assert ok(local("topics", "describe", "apples")).stdout == described
