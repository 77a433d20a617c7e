"""TLS and SASL for the broker's security tests: a test CA made by scripts/make-test-ca.py, the
broker settings of each listener kind, and one round trip (produce, then read back) per real
client with its own security options.

The CA is made once per session (``test_ca`` fixture); nothing is checked in or downloaded.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.broker.helpers.clients import CLIENT_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "make-test-ca.py"
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def make_ca(directory: Path, *args: str) -> Path:
    """Run scripts/make-test-ca.py into ``directory``; returns it."""
    subprocess.run(
        [sys.executable, str(SCRIPT), str(directory), *args],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return directory


def plain_jaas(users: dict[str, str]) -> str:
    options = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {options};"


def tls_settings(ca: Path, client_auth: str = "none") -> dict[str, str]:
    """The broker's PEM keystore and truststore settings from a test CA."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca / "broker.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca / "ca.pem"),
        "ssl.client.auth": client_auth,
    }


def all_listeners(ca: Path, **extra: Any) -> dict[str, Any]:
    """Four listeners, one per security protocol, all on ephemeral loopback ports."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
        "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **tls_settings(ca, "requested"),
        "sasl.jaas.config": plain_jaas(PLAIN_USERS),
        **extra,
    }


def add_scram_user(broker: Any, user: str, password: str, iterations: int = 4096) -> None:
    """Store a SCRAM-SHA-256 and a SCRAM-SHA-512 credential for ``user`` on a running
    BrokerThread (as AlterUserScramCredentials would)."""
    from compactlog.broker.security.scram import MECHANISMS

    def add() -> None:
        scram = broker.broker.ctx.scram
        scram.apply(
            [],
            [
                (user, name, mechanism.credential_for(password, iterations))
                for name, mechanism in MECHANISMS.items()
            ],
        )

    broker.call(add)


class Auth:
    """What a client needs: security protocol, CA, optional client certificate, SASL login."""

    def __init__(
        self,
        protocol: str,
        ca: Path | None = None,
        cert: str | None = None,
        mechanism: str | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        self.protocol = protocol
        self.ca = ca
        self.cert = cert  # a client name of the test CA (client-NAME-*.pem)
        self.mechanism = mechanism
        self.user = user
        self.password = password

    def __repr__(self) -> str:
        return f"{self.protocol}/{self.mechanism or self.cert or '-'}"

    def confluent(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security.protocol": self.protocol}
        if self.ca is not None:
            conf["ssl.ca.location"] = str(self.ca / "ca.pem")
            if self.cert:
                conf["ssl.certificate.location"] = str(self.ca / f"client-{self.cert}-cert.pem")
                conf["ssl.key.location"] = str(self.ca / f"client-{self.cert}-key.pem")
        if self.mechanism:
            conf.update(
                {
                    "sasl.mechanisms": self.mechanism,
                    "sasl.username": self.user,
                    "sasl.password": self.password,
                }
            )
        return conf

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ca is not None:
            conf["ssl_cafile"] = str(self.ca / "ca.pem")
            conf["ssl_check_hostname"] = True
            if self.cert:
                conf["ssl_certfile"] = str(self.ca / f"client-{self.cert}-cert.pem")
                conf["ssl_keyfile"] = str(self.ca / f"client-{self.cert}-key.pem")
        if self.mechanism:
            conf.update(
                {
                    "sasl_mechanism": self.mechanism,
                    "sasl_plain_username": self.user,
                    "sasl_plain_password": self.password,
                }
            )
        return conf

    def aiokafka(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ca is not None:
            from aiokafka.helpers import create_ssl_context

            conf["ssl_context"] = create_ssl_context(
                cafile=str(self.ca / "ca.pem"),
                certfile=str(self.ca / f"client-{self.cert}-cert.pem") if self.cert else None,
                keyfile=str(self.ca / f"client-{self.cert}-key.pem") if self.cert else None,
            )
        if self.mechanism:
            conf.update(
                {
                    "sasl_mechanism": self.mechanism,
                    "sasl_plain_username": self.user,
                    "sasl_plain_password": self.password,
                }
            )
        return conf

    def kcat(self) -> list[str]:
        args: list[str] = []
        for key, value in self.confluent().items():
            args += ["-X", f"{key}={value}"]
        return args


def roundtrip(client: str, bootstrap: str, auth: Auth) -> list[bytes]:
    """Produce three records to a new topic with ``client`` and read them back with it; returns
    the values read."""
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    values = [f"{client}-{auth!r}-{i}".encode() for i in range(3)]
    if client == "confluent-kafka":
        return _confluent(bootstrap, auth, topic, values)
    if client == "kafka-python":
        return _kafka_python(bootstrap, auth, topic, values)
    if client == "aiokafka":
        return asyncio.run(_aiokafka(bootstrap, auth, topic, values))
    if client == "kcat":
        return _kcat(bootstrap, auth, topic, values)
    raise ValueError(client)


def _confluent(bootstrap: str, auth: Auth, topic: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, KafkaException, Producer

    base = {"bootstrap.servers": bootstrap, **auth.confluent()}
    producer = Producer({**base, "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000)})
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    if any(errors):
        raise KafkaException(next(e for e in errors if e))
    consumer = Consumer({**base, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        import time

        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(seen) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            seen.append(msg.value())
        return seen
    finally:
        consumer.close()


def _kafka_python(bootstrap: str, auth: Auth, topic: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    conf = auth.kafka_python()
    producer = KafkaProducer(bootstrap_servers=bootstrap, **conf)
    try:
        for value in values:
            producer.send(topic, value).get(timeout=CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(CLIENT_TIMEOUT_S * 1000),
        **conf,
    )
    try:
        seen: list[bytes] = []
        for msg in consumer:
            seen.append(msg.value)
            if len(seen) == len(values):
                break
        return seen
    finally:
        consumer.close()


async def _aiokafka(bootstrap: str, auth: Auth, topic: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    conf = auth.aiokafka()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **conf)
    await producer.start()
    try:
        for value in values:
            await asyncio.wait_for(producer.send_and_wait(topic, value), CLIENT_TIMEOUT_S)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **conf
    )
    await consumer.start()
    try:
        seen: list[bytes] = []
        while len(seen) < len(values):
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), CLIENT_TIMEOUT_S)
            for records in batch.values():
                seen.extend(r.value for r in records if r.value is not None)
        return seen
    finally:
        await consumer.stop()


def _kcat(bootstrap: str, auth: Auth, topic: str, values: list[bytes]) -> list[bytes]:
    from tests.broker.helpers.kcat import kcat

    args = auth.kcat()
    kcat(bootstrap, "-P", "-t", topic, *args, input=b"".join(v + b"\n" for v in values))
    done = kcat(
        bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(len(values)), *args
    )
    return done.stdout.splitlines()
