"""Fixtures of the broker's end-to-end tests with the real clients; the helpers they use, and
that the tests import, are in tests/broker/helpers/ (one module per client, per way of starting
the broker, for the store and for the raw wire).

* ``brokers``: starts :class:`~compactlog.broker.server.BrokerThread` instances on 127.0.0.1,
  port 0, over a data directory of the test's own, and restarts one on the same directory;
  ``broker`` is the first of them. Every broker still running is stopped after the test.
* ``cli_broker``: the broker as a ``compactlog serve`` process, for the tests that kill it.
* ``collect_client_garbage``: what the Python clients leave to the garbage collector, collected
  quietly after the test.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import tests.broker.helpers.kafka_python  # noqa: F401 - quiets kafka-python's imports
from tests.broker.helpers.server import Brokers, CliBroker


@pytest.fixture
def collect_client_garbage() -> Iterator[None]:
    """After the test, collect what the Python clients left to the garbage collector, quietly.

    kafka-python 3.0 now and then leaves a socket unclosed (seen: one refused connection attempt
    per retry, and rarely a connected socket after ``close()``). Its ResourceWarning is an error
    in this suite, raised wherever the collector happens to run: usually in a later, unrelated
    test. The test_clients_* modules use this fixture so that it is raised nowhere."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    started = Brokers(tmp_path / "data")
    yield started
    started.stop_all()


@pytest.fixture
def broker(brokers: Brokers) -> Any:
    """A broker on 127.0.0.1:<free port> over ``tmp_path/data``; ``broker.bootstrap`` to connect,
    ``broker.broker.store`` is its Store (touch it from the test only while no client is busy)."""
    return brokers.start()


@pytest.fixture
def cli_broker(tmp_path: Path) -> Iterator[Callable[..., CliBroker]]:
    """``cli_broker(config)`` makes a (not yet started) ``compactlog serve`` process."""
    made: list[CliBroker] = []

    def make(
        config: Mapping[str, Any] | None = None,
        data_dir: Path | None = None,
        clock_file: Path | None = None,
    ) -> CliBroker:
        b = CliBroker(
            data_dir or tmp_path / "data",
            config or {},
            tmp_path / f"serve-{len(made)}.log",
            clock_file,
        )
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()
