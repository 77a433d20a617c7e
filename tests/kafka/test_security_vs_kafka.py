"""SCRAM users with Kafka 4.4's own kafka-configs, against Kafka 4.4 and against compactlog:
add, describe (all users and one), change iterations, delete, and the refusals, with the same
exit status and output from both brokers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.kafka.tools import BrokerPair, start_pair

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]


@pytest.fixture
def pair(kafka: Callable[..., Any], compactlog_serve: Callable[..., Any]) -> BrokerPair:
    return start_pair(kafka, compactlog_serve)


def _users(*args: str) -> tuple[str, ...]:
    return ("kafka-configs", "--entity-type", "users", *args)


def _mechanisms_sorted(text: str) -> str:
    """Kafka keeps a user's credentials in a HashMap keyed by the mechanism enum, so the order
    of the mechanisms in one line changes from one JVM run to the next: compare them sorted."""
    lines = []
    for line in sorted(text.splitlines()):
        head, sep, tail = line.partition(" are ")
        lines.append(head + sep + ", ".join(sorted(tail.split(", "))) if sep else line)
    return "\n".join(lines)


def _describe(pair: BrokerPair, *args: str) -> str:
    kafka, compactlog = pair.run(*_users("--describe", *args))
    assert (kafka.returncode, kafka.stderr) == (0, "")
    assert (compactlog.returncode, compactlog.stderr) == (0, "")
    assert _mechanisms_sorted(compactlog.stdout) == _mechanisms_sorted(kafka.stdout)
    return kafka.stdout


def test_kafka_configs_scram_users(pair: BrokerPair) -> None:
    same = pair.same
    added = same(*_users("--alter", "--entity-name", "alice", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"))  # fmt: skip
    assert added.stdout == "Completed updating config for user alice.\n"
    # Kafka's controller refuses two changes for one user in one request (both mechanisms)
    twice = same(*_users("--alter", "--entity-name", "bob", "--add-config",
                         "SCRAM-SHA-512=[password=bob-secret],SCRAM-SHA-256=[password=b]"),
                 returncode=1)  # fmt: skip
    assert "A user credential cannot be altered twice in the same request" in twice.stderr
    same(*_users("--alter", "--entity-name", "bob", "--add-config",
                 "SCRAM-SHA-512=[password=bob-secret]"))  # fmt: skip
    same(*_users("--alter", "--entity-name", "bob", "--add-config",
                 "SCRAM-SHA-256=[iterations=4096,password=b]"))  # fmt: skip
    described = _describe(pair)
    assert "user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in described
    assert "SCRAM-SHA-256=iterations=4096" in _describe(pair, "--entity-name", "bob")
    same(*_users("--describe", "--entity-name", "nobody"))
    # too few iterations, and deleting what is not there: refused by the broker
    same(*_users("--alter", "--entity-name", "carol", "--add-config",
                 "SCRAM-SHA-256=[iterations=1000,password=c]"), returncode=1)  # fmt: skip
    same(*_users("--alter", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512"),
         returncode=1)  # fmt: skip
    deleted = same(*_users("--alter", "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512"))
    assert deleted.stdout == "Completed updating config for user bob.\n"
    assert "'bob' are SCRAM-SHA-256=iterations=4096\n" in _describe(pair)
