"""Fixtures and helpers of the broker's end-to-end tests with the real clients.

The clients are the four of spec section 1 (kafka-python, confluent-kafka, aiokafka, Debian's
kcat), each driven the way a user would drive it: public APIs only, short timeouts, so that a
broken broker fails a test in seconds instead of hanging it.

* ``brokers``: starts :class:`~compactlog.broker.server.BrokerThread` instances on 127.0.0.1,
  port 0, over a data directory of the test's own, and restarts one on the same directory;
  ``broker`` is the first of them. Every broker still running is stopped after the test.
* ``cli_broker``: the broker as a ``compactlog serve`` process, for the tests that kill it.
* ``needs_*``: skip markers for a missing client library or tool (kcat and gawk come from Debian,
  installed by scripts/setup-env.sh when it runs as root).
* readers and producers per client, returning what they saw in one shape
  (:class:`Seen`: partition, offset, key, value) so that tests compare clients with each other
  and with the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pytest

import compactlog  # noqa: F401 - installs the cleaner

if importlib.util.find_spec("kafka") is not None:
    with warnings.catch_warnings():
        # kafka-python 3.0 builds its protocol classes at import time with
        # importlib.resources.read_text, deprecated in Python 3.11: import every part the tests
        # use here, once, so that no later import warns (warnings are errors in this suite).
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka
        import kafka.admin
        import kafka.coordinator.assignors.roundrobin
        import kafka.errors  # noqa: F401

#: Broker settings of every test broker: a new group waits 3 s for more members by default
#: (Kafka's ``group.initial.rebalance.delay.ms``); 100 ms keeps group tests short.
BROKER_CONFIG: dict[str, Any] = {"group.initial.rebalance.delay.ms": 100}

#: How long one client operation may take before the test fails instead of waiting.
CLIENT_TIMEOUT_S = 20.0

T = TypeVar("T")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "kcat")


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_kafka_python = pytest.mark.skipif(not _has_module("kafka"), reason="kafka-python missing")
needs_confluent = pytest.mark.skipif(
    not _has_module("confluent_kafka"), reason="confluent-kafka missing"
)
needs_aiokafka = pytest.mark.skipif(not _has_module("aiokafka"), reason="aiokafka missing")
needs_kcat = pytest.mark.skipif(
    shutil.which("kcat") is None,
    reason="kcat missing (scripts/setup-env.sh installs Debian's kcat when run as root)",
)
needs_gawk = pytest.mark.skipif(
    shutil.which("gawk") is None,
    reason="gawk missing (scripts/setup-env.sh installs it when run as root)",
)
INSTALLED = {
    "kafka-python": _has_module("kafka"),
    "confluent-kafka": _has_module("confluent_kafka"),
    "aiokafka": _has_module("aiokafka"),
    "kcat": shutil.which("kcat") is not None,
}
NEEDS = {
    "kafka-python": needs_kafka_python,
    "confluent-kafka": needs_confluent,
    "aiokafka": needs_aiokafka,
    "kcat": needs_kcat,
}


def client_params(clients: Iterable[str] = CLIENTS) -> list[Any]:
    """``pytest.param`` per client, each with its skip marker."""
    return [pytest.param(c, marks=NEEDS[c], id=c) for c in clients]


# --- brokers -------------------------------------------------------------------------------------
class Brokers:
    """Starts BrokerThreads over ``data_dir`` (the test's own) and stops them after the test."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.running: list[Any] = []

    def start(
        self, data_dir: Path | None = None, config: Mapping[str, Any] | None = None, **kw: Any
    ) -> Any:
        from compactlog.broker.server import BrokerThread

        thread = BrokerThread(
            data_dir or self.data_dir, config={**BROKER_CONFIG, **(config or {})}, **kw
        )
        started = thread.start()
        self.running.append(started)
        return started

    def stop(self, broker: Any) -> None:
        self.running.remove(broker)
        broker.stop()

    def restart(self, broker: Any, config: Mapping[str, Any] | None = None) -> Any:
        """Stop ``broker`` and start a new one on the same data directory (a new port)."""
        self.stop(broker)
        return self.start(Path(broker.broker.store.path), config)

    def stop_all(self) -> None:
        while self.running:
            self.stop(self.running[-1])


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


def on_broker(broker: Any, fn: Callable[[Any], T]) -> T:
    """``fn(store)`` on the broker's event loop: the store of a running broker is used from its
    loop thread only (server module docstring), so a test touches it through here."""
    store = broker.broker.store
    result: T = broker.call(lambda: fn(store))
    return result


def create_topic(
    broker: Any, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None
) -> None:
    """Create a topic through the broker's store (the admin tests create them with clients)."""
    on_broker(broker, lambda store: store.create_topic(name, partitions, dict(config or {})))


def append(
    broker: Any,
    topic: str,
    partition: int,
    records: Sequence[tuple[bytes | None, bytes | None]],
    timestamp: int | None = None,
) -> int:
    """``Store.append`` of one batch on the broker's loop; returns its first offset."""
    return on_broker(broker, lambda store: store.append(topic, partition, records, timestamp))


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = CLIENT_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class CliBroker:
    """``compactlog --data-dir DIR serve --listen 127.0.0.1:PORT`` as a child process.

    The port stays the same across restarts, so clients reconnect as to a restarted Kafka."""

    def __init__(
        self,
        data_dir: Path,
        config: Mapping[str, Any],
        log_path: Path,
        clock_file: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.config = {**BROKER_CONFIG, **config}
        #: With a file, the broker's wall clock is skewed by the milliseconds written in it
        #: (tests/broker/stepped_clock.py).
        self.clock_file = clock_file
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        exe = [os.path.join(os.path.dirname(sys.executable), "compactlog")]
        if self.clock_file is not None:
            exe = [sys.executable, "-m", "tests.broker.stepped_clock", str(self.clock_file)]
        cmd = [*exe, "--data-dir", str(self.data_dir), "serve", "--listen", self.bootstrap]
        for name, value in self.config.items():
            cmd += ["--config", f"{name}={value}"]
        return cmd

    def start(self, timeout: float = 60.0) -> CliBroker:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"compactlog serve exited with {self.proc.returncode} on start "
                    f"{self.starts}:\n{self.log_tail()}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            if time.monotonic() > deadline:
                raise AssertionError(f"compactlog serve not listening after {timeout} s")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a process crash."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, a clean stop; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self, field: str) -> int:
        """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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


# --- kcat ----------------------------------------------------------------------------------------
def kcat(
    bootstrap: str,
    *args: str,
    input: bytes | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``kcat -b bootstrap ARGS``; a hang fails the test after ``timeout`` seconds."""
    cmd = ["kcat", "-b", bootstrap, *args]
    try:
        done = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{' '.join(cmd)} did not finish in {timeout} s; stderr: {exc.stderr!r}"
        ) from None
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited with {done.returncode}; stderr: {done.stderr.decode()}"
        )
    return done


# --- what a client saw ---------------------------------------------------------------------------
class Seen(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def stored(broker: Any, topic: str) -> list[Seen]:
    """Every record of ``topic`` in the store, partition by partition, in offset order."""

    def read_all(store: Any) -> list[Seen]:
        out = []
        for p in range(store.partitions(topic)):
            start = store.log_start_offset(topic, p)
            out += [Seen(p, r.offset, r.key, r.value) for r in store.read(topic, p, start)]
        return out

    return on_broker(broker, read_all)


def end_offsets(broker: Any, topic: str) -> dict[int, int]:
    return on_broker(
        broker,
        lambda store: {p: store.log_end_offset(topic, p) for p in range(store.partitions(topic))},
    )


def stored_batches(broker: Any, topic: str, partition: int = 0) -> list[Any]:
    """The header (:class:`~compactlog.records.batch.BatchHeader`) of every stored batch."""

    def headers(store: Any) -> list[Any]:
        log = store.log(topic, partition)
        return [b.header for b in log.iter_batches(log.log_start_offset)]

    return on_broker(broker, headers)


def stored_codecs(broker: Any, topic: str, partition: int = 0) -> list[int]:
    """The compression id (attributes bits 0-2) of every stored batch of a partition."""
    return [h.attributes & 0x07 for h in stored_batches(broker, topic, partition)]


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def keyed_records(n: int, keys: int, tag: str = "") -> list[tuple[bytes, bytes]]:
    """``n`` records over ``keys`` keys; compressible values, or librdkafka sends small batches
    uncompressed when compressing would not make them smaller."""
    return [(b"key-%d" % (i % keys), (f"value-{tag}-{i}-".encode() + b"x" * 200)) for i in range(n)]


# --- producers: send, wait for every ack, return the offsets -------------------------------------
def produce(
    client: str,
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    codec: str = "none",
    partition: int | None = None,
    acks: str = "all",
    idempotent: bool | None = None,
) -> list[tuple[int, int]]:
    """Produce ``records`` with ``client``; returns (partition, offset) per record in order (kcat
    reports none: an empty list). Raises when any record is not acknowledged.

    ``idempotent``: None keeps the client's default (kafka-python 3 is idempotent by default,
    the others are not)."""
    if client == "kafka-python":
        return _kp_produce(bootstrap, topic, records, codec, partition, acks, idempotent)
    if client == "confluent-kafka":
        return _ck_produce(bootstrap, topic, records, codec, partition, acks, idempotent)
    if client == "aiokafka":
        return asyncio.run(
            _ak_produce(bootstrap, topic, records, codec, partition, acks, idempotent)
        )
    if client == "kcat":
        _kcat_produce(bootstrap, topic, records, codec, partition)
        return []
    raise ValueError(client)


def _kp_produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    extra = {} if idempotent is None else {"enable_idempotence": idempotent}
    producer = KafkaProducer(
        **extra,
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=-1 if acks == "all" else int(acks),
        linger_ms=20,
        request_timeout_ms=10_000,
        max_block_ms=10_000,
        retries=2,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=partition) for k, v in records]
        producer.flush(timeout=CLIENT_TIMEOUT_S)
        return [(m.partition, m.offset) for m in (f.get(timeout=1) for f in futures)]
    finally:
        producer.close(timeout=5)


def _ck_produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": bool(idempotent),
            "compression.type": codec,
            "acks": acks,
            "linger.ms": 20,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
        }
    )
    results: list[Any] = [None] * len(records)

    def delivered(i: int) -> Callable[[Any, Any], None]:
        def report(err: Any, msg: Any) -> None:
            results[i] = err if err is not None else (msg.partition(), msg.offset())

        return report

    for i, (k, v) in enumerate(records):
        kwargs: dict[str, Any] = {"key": k, "value": v, "on_delivery": delivered(i)}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
    left = producer.flush(CLIENT_TIMEOUT_S)
    assert left == 0, f"confluent-kafka: {left} records not delivered in {CLIENT_TIMEOUT_S} s"
    for r in results:
        if not isinstance(r, tuple):
            raise KafkaException(r)
    return results


async def _ak_produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
    acks: str,
    idempotent: bool | None,
) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=bool(idempotent),
        compression_type=None if codec == "none" else codec,
        acks=-1 if acks == "all" else int(acks),
        linger_ms=20,
        request_timeout_ms=10_000,
    )
    await asyncio.wait_for(producer.start(), CLIENT_TIMEOUT_S)
    try:
        futures = [
            await producer.send(topic, key=k, value=v, partition=partition) for k, v in records
        ]
        metas = await asyncio.wait_for(asyncio.gather(*futures), CLIENT_TIMEOUT_S)
        return [(m.partition, m.offset) for m in metas]
    finally:
        await producer.stop()


def _kcat_produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    codec: str,
    partition: int | None,
) -> None:
    lines = []
    for k, v in records:
        assert k is not None and v is not None and b":" not in k and b"\n" not in v
        lines.append(k + b":" + v + b"\n")
    args = ["-P", "-t", topic, "-K:", "-z", codec, "-X", "linger.ms=20"]
    if partition is not None:
        args += ["-p", str(partition)]
    kcat(bootstrap, *args, input=b"".join(lines))


# --- readers: read until every partition's position reaches its end offset -----------------------
def read(
    client: str,
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    *,
    group: str | None = None,
    start: int | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
) -> tuple[list[Seen], dict[int, int]]:
    """Read ``topic`` from the beginning (or from offset ``start`` in every partition) until the
    position of every partition in ``ends`` reaches its end offset. ``group``: subscribe in that
    consumer group (and commit at the end) instead of assigning the partitions.

    Returns the records seen, in the order seen, and the final position per partition (for
    kcat, which has no position, the end offsets once it exited at the end of every partition).
    """
    if client == "kafka-python":
        return _kp_read(bootstrap, topic, ends, group, start, timeout)
    if client == "confluent-kafka":
        return _ck_read(bootstrap, topic, ends, group, start, timeout)
    if client == "aiokafka":
        return asyncio.run(_ak_read(bootstrap, topic, ends, group, start, timeout))
    if client == "kcat":
        return _kcat_read(bootstrap, topic, ends, group, start, timeout)
    raise ValueError(client)


def _deadline_error(client: str, positions: Mapping[int, int], ends: Mapping[int, int]) -> str:
    return f"{client}: positions {dict(positions)} never reached the end offsets {dict(ends)}"


#: The consumer settings of the read helpers; kafka-python and aiokafka share these names.
PY_CONSUMER_SETTINGS: dict[str, Any] = {
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "request_timeout_ms": 10_000,
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 500,
}


def _kp_read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        **PY_CONSUMER_SETTINGS,
    )
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        if group is None:
            consumer.assign(tps)
        else:
            consumer.subscribe([topic])
        if start is not None:
            assert group is None
            for tp in tps:
                consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while True:
            for tp, messages in consumer.poll(timeout_ms=100).items():
                seen += [Seen(tp.partition, m.offset, m.key, m.value) for m in messages]
            assigned = consumer.assignment()
            if {tp.partition for tp in assigned} == set(ends):
                positions = {tp.partition: consumer.position(tp) for tp in assigned}
                if all(positions[p] >= end for p, end in ends.items()):
                    break
            if time.monotonic() > deadline:
                raise AssertionError(_deadline_error("kafka-python", positions, ends))
        if group is not None:
            consumer.commit()
    finally:
        consumer.close()
    return seen, positions


def _ck_read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # The Python binding requires a group id even for assigned partitions.
            "group.id": group or f"unused-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
        }
    )
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        if group is None:
            first = OFFSET_BEGINNING if start is None else start
            consumer.assign([TopicPartition(topic, p, first) for p in ends])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while True:
            msg = consumer.poll(0.1)
            if msg is not None:
                err = msg.error()
                if err is None:
                    seen.append(Seen(msg.partition(), msg.offset(), msg.key(), msg.value()))
                    positions[msg.partition()] = msg.offset() + 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    # The end-of-partition event carries the fetch position.
                    positions[msg.partition()] = msg.offset()
                else:
                    raise KafkaException(err)
            if all(positions.get(p, -1) >= end for p, end in ends.items()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(_deadline_error("confluent-kafka", positions, ends))
        if group is not None and seen:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen, positions


async def _ak_read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        **PY_CONSUMER_SETTINGS,
    )
    await asyncio.wait_for(consumer.start(), CLIENT_TIMEOUT_S)
    seen: list[Seen] = []
    positions: dict[int, int] = {}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        if group is None:
            consumer.assign(tps)
        else:
            consumer.subscribe([topic])
        if start is not None:
            for tp in tps:
                consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while True:
            batches = await consumer.getmany(timeout_ms=100)
            for tp, messages in batches.items():
                seen += [Seen(tp.partition, m.offset, m.key, m.value) for m in messages]
            assigned = consumer.assignment()
            if {tp.partition for tp in assigned} == set(ends):
                positions = {tp.partition: await consumer.position(tp) for tp in assigned}
                if all(positions[p] >= end for p, end in ends.items()):
                    break
            if time.monotonic() > deadline:
                raise AssertionError(_deadline_error("aiokafka", positions, ends))
        if group is not None:
            await consumer.commit()
    finally:
        await consumer.stop()
    return seen, positions


def _kcat_read(
    bootstrap: str,
    topic: str,
    ends: Mapping[int, int],
    group: str | None,
    start: int | None,
    timeout: float,
) -> tuple[list[Seen], dict[int, int]]:
    if group is None:
        args = ["-C", "-t", topic, "-o", "beginning" if start is None else str(start)]
        if len(ends) == 1:
            args += ["-p", str(next(iter(ends)))]
    else:
        args = ["-G", group, "-X", "auto.offset.reset=earliest", topic]
    done = kcat(bootstrap, *args, "-e", "-q", "-J", timeout=timeout)
    seen = []
    for line in done.stdout.decode().splitlines():
        msg = json.loads(line)
        key, value = msg["key"], msg["payload"]
        seen.append(
            Seen(
                msg["partition"],
                msg["offset"],
                None if key is None else key.encode(),
                None if value is None else value.encode(),
            )
        )
    return seen, dict(ends)


def by_partition(records: Iterable[Seen]) -> dict[int, list[Seen]]:
    out: dict[int, list[Seen]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


# --- the raw wire, for the robustness tests (R15-R18): requests no client would send ------------
# Request header v1 (api_key, api_version, correlation_id, client_id) and response header v0
# (correlation_id) are all the non-flexible versions need (spec 2.2); bodies are written by hand
# with struct so that these tests depend on neither the broker's codec nor a client's internals.
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | bytes | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode() if isinstance(s, str) else s
    return i16(len(raw)) + raw


def array(items: Sequence[bytes] | None) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = i16(api_key) + i16(version) + i32(correlation_id) + string("raw-wire") + body
    return i32(len(payload)) + payload


class Reader:
    """Reads the big-endian fields of a response body; a short body raises ``struct.error``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode(errors="replace")

    def array(self, item: Callable[[Reader], Any]) -> list[Any]:
        return [item(self) for _ in range(max(self.i32(), 0))]


class Closed(Exception):
    """The broker closed the connection."""


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame from ``sock`` (without its size); :class:`Closed` if it ends."""

    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise Closed(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Wire:
    """One raw TCP connection to the broker."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: bytes) -> int:
        correlation_id = self.next_id
        self.next_id += 1
        self.sock.sendall(request_frame(api_key, version, correlation_id, body))
        return correlation_id

    def recv(self) -> tuple[int, bytes]:
        """The next response: (correlation id, body)."""
        frame = recv_frame(self.sock)
        return struct.unpack_from(">i", frame)[0], frame[4:]

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        correlation_id = self.send(api_key, version, body)
        got, response = self.recv()
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response


PRODUCE, METADATA, CREATE_TOPICS, API_VERSIONS = 0, 3, 19, 18


def produce_body(
    partitions: Mapping[tuple[str | bytes, int], bytes], acks: int = -1, timeout_ms: int = 10_000
) -> bytes:
    """Produce v3-v7: one records blob per (topic, partition)."""
    topics: dict[str | bytes, list[bytes]] = {}
    for (topic, partition), records in partitions.items():
        topics.setdefault(topic, []).append(i32(partition) + i32(len(records)) + records)
    return (
        string(None)
        + i16(acks)
        + i32(timeout_ms)
        + array([string(t) + array(ps) for t, ps in topics.items()])
    )


def parse_produce_response(body: bytes) -> dict[tuple[str | None, int], tuple[int, int]]:
    """Produce v5-v7 response: (topic, partition) -> (error code, base offset)."""
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            partition, error, base_offset = r.i32(), r.i16(), r.i64()
            r.i64()  # log append time
            r.i64()  # log start offset
            out[(topic, partition)] = (error, base_offset)
    return out


def metadata_body(topics: Sequence[str | bytes] | None, auto_create: bool) -> bytes:
    """Metadata v4."""
    return array(None if topics is None else [string(t) for t in topics]) + i8(int(auto_create))


def parse_metadata_topic_errors(body: bytes) -> dict[str | None, int]:
    """Metadata v4 response: topic -> error code."""
    r = Reader(body)
    r.i32()  # throttle
    r.array(lambda b: (b.i32(), b.string(), b.i32(), b.string()))
    r.string()  # cluster id
    r.i32()  # controller
    out = {}
    for _ in range(r.i32()):
        error, name = r.i16(), r.string()
        r.i8()  # internal
        r.array(lambda p: (p.i16(), p.i32(), p.i32(), p.array(Reader.i32), p.array(Reader.i32)))
        out[name] = error
    return out


def create_topics_body(
    topics: Sequence[tuple[str | bytes, int]], configs: Mapping[str, str] | None = None
) -> bytes:
    """CreateTopics v2/v3: (name, partitions) each, replication factor 1."""
    entries = [
        string(name)
        + i32(partitions)
        + i16(1)
        + array([])
        + array([string(k) + string(v) for k, v in (configs or {}).items()])
        for name, partitions in topics
    ]
    return array(entries) + i32(10_000) + i8(0)


def parse_create_topics_response(body: bytes) -> dict[str | None, int]:
    """CreateTopics v2/v3 response: name -> error code."""
    r = Reader(body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name, error = r.string(), r.i16()
        r.string()  # message
        out[name] = error
    return out


# A record batch written by hand, so that any field can be wrong.
NOW_MS = 1_700_000_000_000


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    *,
    headers: int = 0,
    length: int | None = None,
) -> bytes:
    body = (
        i8(0)
        + varint(0)  # timestamp delta
        + varint(offset_delta)
        + (varint(-1) if key is None else varint(len(key)) + key)
        + (varint(-1) if value is None else varint(len(value)) + value)
        + varint(headers)
    )
    return varint(len(body) if length is None else length) + body


def batch(
    records: bytes, count: int, last_offset_delta: int, *, attributes: int = 0, magic: int = 2
) -> bytes:
    after_length = (
        i32(-1)  # partition leader epoch
        + i8(magic)
        + struct.pack(">I", 0)  # crc, set below
        + i16(attributes)
        + i32(last_offset_delta)
        + i64(NOW_MS)
        + i64(NOW_MS)
        + i64(-1)  # producer id
        + i16(-1)
        + i32(-1)
        + i32(count)
        + records
    )
    return fix_crc(i64(0) + i32(len(after_length)) + after_length)


def good_batch(n: int = 2) -> bytes:
    return batch(b"".join(record(i, b"k%d" % i, b"v%d" % i) for i in range(n)), n, n - 1)


# Byte positions in a v2 record batch (spec 2.4).
BATCH_LENGTH_AT, MAGIC_AT, CRC_AT, ATTRIBUTES_AT, COUNT_AT, RECORDS_AT = 8, 16, 17, 21, 57, 61


def fix_crc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC-32C of a batch (over attributes .. end) after editing it."""
    import crc32c

    out = bytearray(batch)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)


def log_end_offset(broker: Any, topic: str, partition: int = 0) -> int:
    return on_broker(broker, lambda store: store.log_end_offset(topic, partition))


def log_start_offset(broker: Any, topic: str, partition: int = 0) -> int:
    return on_broker(broker, lambda store: store.log_start_offset(topic, partition))


def topics(broker: Any) -> list[str]:
    return on_broker(broker, lambda store: store.topics())


# --- a broker in a forked child, for the kill tests ----------------------------------------------
# A "zygote" process imports compactlog and starts and stops one broker, once, then forks a broker
# per request: a restart then costs the store's recovery (milliseconds), not an interpreter start
# and the first start's lazy loading (about a second together), so R1 can restart it 200 times.
_ZYGOTE = r"""
import asyncio, json, os, signal, sys, tempfile
from compactlog.broker.server import Broker

async def serve(data_dir, port, config, warm_up=False):
    broker = Broker(data_dir, listen=("127.0.0.1", port), config=config)
    await broker.start()
    if warm_up:
        broker.store.create_topic("warm", 1)
        broker.store.append("warm", 0, [(b"k", b"v")])
        list(broker.store.read("warm", 0))
        await broker.stop()
        return
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(broker.stop()))
    await broker.serve_forever()

with tempfile.TemporaryDirectory() as warm:
    asyncio.run(serve(warm, 0, {}, warm_up=True))
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a killed broker is reaped at once
print("ready", flush=True)
for line in sys.stdin:
    data_dir, port, config = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.run(serve(data_dir, port, config))
        finally:
            os._exit(0)
    print(pid, flush=True)
"""


class ForkedBroker:
    """The broker as a process forked from a warmed-up zygote (see above); the same port across
    restarts, as :class:`CliBroker`."""

    def __init__(self, data_dir: Path, config: Mapping[str, Any]) -> None:
        self.data_dir = data_dir
        self.config = {**BROKER_CONFIG, **config}
        self.port = free_port()
        self.pid: int | None = None
        self.zygote = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.zygote.stdout is not None
        ready = self.zygote.stdout.readline()
        assert ready == b"ready\n", f"the zygote did not start: {ready!r}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def start(self, timeout: float = 60.0) -> ForkedBroker:
        assert not self.alive(), "already running"
        assert self.zygote.stdin is not None and self.zygote.stdout is not None
        request = [str(self.data_dir), self.port, self.config]
        self.zygote.stdin.write(json.dumps(request).encode() + b"\n")
        self.zygote.stdin.flush()
        self.pid = int(self.zygote.stdout.readline())
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise AssertionError("the forked broker exited while starting")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            if time.monotonic() > deadline:
                raise AssertionError(f"the forked broker was not listening after {timeout} s")
            time.sleep(0.005)

    def _signal_and_wait(self, sig: int, timeout: float) -> None:
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
        wait_until(lambda: not self.alive(), f"broker pid {self.pid} to exit", timeout)

    def kill(self) -> None:
        """SIGKILL, as a process crash."""
        self._signal_and_wait(signal.SIGKILL, 30)

    def terminate(self) -> None:
        """SIGTERM: a clean stop."""
        self._signal_and_wait(signal.SIGTERM, 60)

    def stop(self) -> None:
        """Stop the broker (cleanly when it can) and the zygote."""
        if self.alive():
            try:
                self.terminate()
            except AssertionError:
                self.kill()
        if self.zygote.poll() is None:
            assert self.zygote.stdin is not None
            self.zygote.stdin.close()
            self.zygote.wait(30)
        if self.zygote.stdout is not None:
            self.zygote.stdout.close()
