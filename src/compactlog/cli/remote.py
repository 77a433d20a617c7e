"""The CLI's network mode: Kafka's admin, producer and consumer clients against a broker.

``--bootstrap-server HOST:PORT`` makes ``topics``, ``configs``, ``produce``, ``consume``,
``groups`` and ``delete-records`` talk to a running broker (``compactlog serve`` or any Kafka
broker) through the Kafka protocol, with confluent-kafka (librdkafka), as Kafka's own tools do;
the directory the broker holds is never opened. This module turns the clients' futures and
errors into plain values and one-line :class:`~compactlog.cli.common.CliError`\\ s; the
commands print the same lines as in local mode.

Errors: a broker's error is printed with Kafka's name for its code
(``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_CONFIG``, ...); a broker that does not answer within
``--timeout`` seconds gives exit code 5 (:data:`~compactlog.cli.common.EXIT_UNREACHABLE`).
librdkafka's own log lines are not shown (they repeat every reconnect attempt).
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import click
import confluent_kafka
import confluent_kafka.admin

from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    KAFKA_ERROR_NAMES,
    CliError,
    state,
    unknown_topic,
)

T = TypeVar("T")

# confluent-kafka's typing is partial (its admin package re-exports without declaring it): the
# CLI uses both modules untyped, through these two names.
kafka: Any = confluent_kafka
kafka_admin: Any = confluent_kafka.admin
KafkaError = kafka.KafkaError
KafkaException = kafka.KafkaException
TopicPartition = kafka.TopicPartition
OffsetSpec = kafka_admin.OffsetSpec

_ADDRESS = re.compile(r"[^\s,:]+:\d{1,5}|\[[0-9a-fA-F:.]+\]:\d{1,5}")

#: Broker errors that mean "the request was wrong" (exit 2), as the library's usage errors.
_USAGE_ERRORS = frozenset(
    {
        "INVALID_CONFIG",
        "INVALID_TOPIC_EXCEPTION",
        "INVALID_PARTITIONS",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_REQUEST",
    }
)

#: librdkafka's local errors that mean the broker was not reached in time.
_UNREACHABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError._WAIT_COORD,
    }
)

# librdkafka logs every failed connection attempt; the CLI reports one line itself instead.
_quiet = logging.getLogger("compactlog_cli_rdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def check_address(bootstrap: str) -> str:
    """``HOST:PORT[,HOST:PORT...]`` as librdkafka takes it, or a one-line usage error."""
    for part in bootstrap.split(","):
        if not _ADDRESS.fullmatch(part.strip()) or not 0 < int(part.rsplit(":", 1)[1]) < 65536:
            raise CliError(
                f"--bootstrap-server {bootstrap!r}: expected HOST:PORT (a comma list for more "
                "than one broker)",
                EXIT_USAGE,
            )
    return bootstrap


def kafka_error_name(error: Any) -> str:
    """Kafka's name for a broker's error code; librdkafka's for its local errors."""
    code = error.code()
    if code > 0 and code in KAFKA_ERROR_NAMES:
        return KAFKA_ERROR_NAMES[code]
    return str(error.name())


def cli_error(error: Any, bootstrap: str, what: str = "") -> CliError:
    """One line for a client error: unreachable broker (exit 5), bad request (2), else 3."""
    where = f"{what}: " if what else ""
    if error.code() in _UNREACHABLE:
        return CliError(
            f"{where}cannot reach the broker at {bootstrap} ({error.str()})", EXIT_UNREACHABLE
        )
    name = kafka_error_name(error)
    code = EXIT_USAGE if name in _USAGE_ERRORS else EXIT_DATA_ERROR
    message = error.str() or name
    return CliError(f"{where}{message} ({name})", code)


@dataclass(frozen=True)
class RemoteConfig:
    """A config of a topic as the broker describes it (kafka-configs' fields)."""

    name: str
    value: str | None
    is_sensitive: bool
    source: str
    synonyms: tuple[tuple[str, str, str | None], ...]  # (source, name, value)


class Remote:
    """The clients of one command against ``bootstrap``; :meth:`close` ends them."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.bootstrap = check_address(bootstrap)
        self.timeout = timeout
        self._admin: Any = None
        self._consumers: list[Any] = []
        self._fail_fast_when_refused()

    def _fail_fast_when_refused(self) -> None:
        """Exit 5 at once when every bootstrap address refuses the connection; librdkafka
        would retry it until --timeout (anything else is left to librdkafka)."""
        reasons = []
        for part in self.bootstrap.split(","):
            host, port = part.strip().rsplit(":", 1)
            try:
                with socket.create_connection((host.strip("[]"), int(port)), min(self.timeout, 2)):
                    return
            except ConnectionRefusedError as exc:
                reasons.append(exc.strerror or "connection refused")
            except OSError:
                return  # a timeout or a name to resolve: librdkafka says what it finds
        raise CliError(
            f"cannot reach the broker at {self.bootstrap} ({reasons[0].lower()})", EXIT_UNREACHABLE
        )

    def config(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "logger": _quiet,
            "socket.connection.setup.timeout.ms": int(self.timeout * 1000),
            **extra,
        }

    def close(self) -> None:
        for consumer in self._consumers:
            consumer.close()
        self._consumers.clear()

    # --- plumbing -------------------------------------------------------------------------
    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = kafka_admin.AdminClient(self.config())
        return self._admin

    def result(self, future: Future[T], what: str = "") -> T:
        try:
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            raise cli_error(exc.args[0], self.bootstrap, what) from exc
        except TimeoutError as exc:
            raise CliError(
                f"{what + ': ' if what else ''}no answer from the broker at {self.bootstrap} "
                f"within {self.timeout:g} s",
                EXIT_UNREACHABLE,
            ) from exc

    def metadata(self, topic: str) -> Any:
        """librdkafka's metadata of one topic (its partitions and their leaders)."""
        try:
            return self.admin.list_topics(topic, timeout=self.timeout)
        except KafkaException as exc:
            raise cli_error(exc.args[0], self.bootstrap) from exc

    # --- topics ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """Topic names (internal ones such as __consumer_offsets too, as the store lists
        them) with their partition counts, by one all-topics Metadata request."""
        try:
            listed = self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise cli_error(exc.args[0], self.bootstrap) from exc
        return {
            name: len(meta.partitions)
            for name, meta in sorted(listed.topics.items())
            if meta.error is None
        }

    def partitions(self, topic: str) -> int:
        known = self.topics()
        if topic not in known:
            raise unknown_topic(topic, known)
        return known[topic]

    def topic_id(self, topic: str) -> str:
        described = self.admin.describe_topics(kafka.TopicCollection([topic]))
        description = self.result(described[topic], topic)
        # Kafka prints topic IDs in URL-safe base64; librdkafka's text uses the standard alphabet.
        return str(description.topic_id).replace("+", "-").replace("/", "_")

    def create_topic(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        new = kafka_admin.NewTopic(topic, num_partitions=partitions, config=dict(configs))
        futures = self.admin.create_topics([new], request_timeout=self.timeout)
        self.result(futures[topic])

    def delete_topic(self, topic: str) -> None:
        self.partitions(topic)  # the "did you mean" error for an unknown topic
        futures = self.admin.delete_topics([topic], request_timeout=self.timeout)
        self.result(futures[topic])

    def offsets(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """(log start offset, log end offset) of each partition (ListOffsets)."""
        chosen = list(partitions)
        starts = self.list_offsets(topic, chosen, OffsetSpec.earliest())
        ends = self.list_offsets(topic, chosen, OffsetSpec.latest())
        return {p: (starts[p], ends[p]) for p in chosen}

    def list_offsets(self, topic: str, partitions: Iterable[int], spec: Any) -> dict[int, int]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        if not request:
            return {}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout)
        return {tp.partition: self.result(f, topic).offset for tp, f in futures.items()}

    # --- configs --------------------------------------------------------------------------
    def describe_configs(self, topic: str) -> list[RemoteConfig]:
        self.partitions(topic)
        resource = kafka_admin.ConfigResource(kafka_admin.ResourceType.TOPIC, topic)
        futures = self.admin.describe_configs([resource], request_timeout=self.timeout)
        entries: dict[str, Any] = self.result(next(iter(futures.values())), topic)
        described = []
        for name, entry in entries.items():
            synonyms = tuple(
                (_source_name(s.source), s.name, s.value) for s in entry.synonyms.values()
            )
            described.append(
                RemoteConfig(
                    name, entry.value, entry.is_sensitive, _source_name(entry.source), synonyms
                )
            )
        return described

    def overrides(self, topic: str) -> dict[str, str]:
        return {
            c.name: c.value or ""
            for c in self.describe_configs(topic)
            if c.source == "DYNAMIC_TOPIC_CONFIG"
        }

    def alter_configs(self, topic: str, set: Mapping[str, str], delete: Sequence[str]) -> None:
        self.partitions(topic)
        entries = [
            kafka_admin.ConfigEntry(
                name, value, incremental_operation=kafka_admin.AlterConfigOpType.SET
            )
            for name, value in set.items()
        ] + [
            kafka_admin.ConfigEntry(
                name, None, incremental_operation=kafka_admin.AlterConfigOpType.DELETE
            )
            for name in delete
        ]
        resource = kafka_admin.ConfigResource(
            kafka_admin.ResourceType.TOPIC, topic, incremental_configs=entries
        )
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout)
        self.result(next(iter(futures.values())), topic)

    # --- records --------------------------------------------------------------------------
    def producer(self, **extra: Any) -> Any:
        return kafka.Producer(self.config(**extra))

    def consumer(self, **extra: Any) -> Any:
        consumer = kafka.Consumer(
            self.config(
                **{
                    "group.id": "compactlog-cli",  # never joined: partitions are assigned
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_uncommitted",  # as the store's read
                    **extra,
                }
            )
        )
        self._consumers.append(consumer)
        return consumer

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords; returns the new log start offset (the low watermark)."""
        if not 0 <= partition < self.partitions(topic):
            raise CliError(
                f"topic {topic!r} has no partition {partition} (UNKNOWN_TOPIC_OR_PARTITION)",
                EXIT_DATA_ERROR,
            )
        futures = self.admin.delete_records(
            [TopicPartition(topic, partition, offset)], request_timeout=self.timeout
        )
        deleted = self.result(next(iter(futures.values())), f"{topic}-{partition}")
        return int(deleted.low_watermark)


def _source_name(source: Any) -> str:
    """Kafka's name of a config source (librdkafka gives the number)."""
    try:
        return str(kafka_admin.ConfigSource(int(source)).name)
    except (ValueError, TypeError):
        return str(getattr(source, "name", source))


def remote_of(ctx: click.Context) -> Remote | None:
    """The network mode's clients when ``--bootstrap-server`` was given (closed when the
    command ends), else None; neither option given is a usage error."""
    st = state(ctx)
    st.require_target()
    if not st.bootstrap_server:
        return None
    remote = Remote(st.bootstrap_server, st.timeout)
    ctx.call_on_close(remote.close)
    return remote
