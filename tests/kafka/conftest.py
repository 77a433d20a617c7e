"""Fixtures of the ``kafka`` tier: Apache Kafka itself as the oracle (tests/kafka/harness.py),
and ``compactlog serve`` beside it.

Every test here is marked ``kafka``. Where Java or Kafka's jars are missing the whole tier is
left out of the run (deselected), and the run says why in one line at its end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers.server import CliBroker
from tests.kafka.harness import KafkaBroker, unavailable

_REASON = unavailable()


_SKIPPED = pytest.StashKey[int]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Where Kafka cannot run, leave the tier out (its modules' own brokers would fail first)
    and say why once, at the end of the run."""
    if _REASON is None:
        return
    tier = [item for item in items if "kafka" in item.keywords]
    if tier:
        config.hook.pytest_deselected(items=tier)
        items[:] = [item for item in items if "kafka" not in item.keywords]
        config.stash[_SKIPPED] = len(tier)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED, 0)
    if skipped:
        terminalreporter.write_line(f"kafka tier skipped ({skipped} tests): {_REASON}")


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[Callable[..., KafkaBroker]]:
    """``kafka(data_dir=None, config=None, start=True)`` makes a real Kafka broker in the
    test's directory; every one still running afterwards is killed."""
    made: list[KafkaBroker] = []

    def make(
        data_dir: Path | None = None,
        config: dict[str, Any] | None = None,
        start: bool = True,
        **kwargs: Any,
    ) -> KafkaBroker:
        broker = KafkaBroker(tmp_path / f"kafka-{len(made)}", data_dir, config, **kwargs)
        made.append(broker)
        if start:
            broker.start()
        return broker

    yield make
    for broker in made:
        broker.kill()


@pytest.fixture
def compactlog_serve(tmp_path: Path) -> Iterator[Callable[..., CliBroker]]:
    """``compactlog_serve(config=None, data_dir=None)`` makes a (not yet started) ``compactlog
    serve`` process on a free port; every one still running afterwards is stopped."""
    made: list[CliBroker] = []

    def make(config: dict[str, Any] | None = None, data_dir: Path | None = None) -> CliBroker:
        broker = CliBroker(
            data_dir or tmp_path / f"compactlog-{len(made)}",
            config or {},
            tmp_path / f"compactlog-{len(made)}.log",
        )
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.stop()
