"""SCRAM credentials through the Admin API (AlterUserScramCredentials and
DescribeUserScramCredentials, as confluent-kafka's AdminClient sends them): stored salted and
hashed in the data directory, used at once by SCRAM logins, refused as Kafka's controller
refuses them, and still there after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import StorageError
from tests.broker.helpers.security import PLAIN_USERS, Auth, plain_jaas, roundtrip
from tests.broker.helpers.server import Brokers

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("collect_client_garbage"),
]

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.jaas.config": plain_jaas(PLAIN_USERS),
}
CREDENTIALS_FILE = "compactlog-scram-credentials.json"


def _admin(broker: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")})


def _alter(broker: Any, *changes: Any) -> dict[str, str | None]:
    """Apply the changes; per user, None or the error's string."""
    from confluent_kafka import KafkaException

    out: dict[str, str | None] = {}
    admin = _admin(broker)  # kept until the futures are done: destroying it fails them
    for user, future in admin.alter_user_scram_credentials(list(changes)).items():
        try:
            future.result(20)
            out[user] = None
        except KafkaException as exc:
            out[user] = str(exc.args[0])
    return out


def _describe(broker: Any, users: list[str] | None = None) -> dict[str, Any]:
    from confluent_kafka import KafkaException

    admin = _admin(broker)
    if users is None:
        described = admin.describe_user_scram_credentials().result(20)
        return {
            user: sorted((c.mechanism.name, c.iterations) for c in d.scram_credential_infos)
            for user, d in described.items()
        }
    out: dict[str, Any] = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            d = future.result(20)
            out[user] = sorted((c.mechanism.name, c.iterations) for c in d.scram_credential_infos)
        except KafkaException as exc:
            out[user] = str(exc.args[0])
    return out


def _upsert(
    user: str, password: str, mechanism: str = "SCRAM_SHA_256", iterations: int = 8192
) -> Any:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism[mechanism], iterations)
    return UserScramCredentialUpsertion(user, info, password.encode())


def _delete(user: str, mechanism: str = "SCRAM_SHA_256") -> Any:
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    return UserScramCredentialDeletion(user, ScramMechanism[mechanism])


def _scram(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Auth:
    return Auth("SASL_PLAINTEXT", mechanism=mechanism, user=user, password=password)


def test_add_describe_use_delete(brokers: Brokers) -> None:
    b = brokers.start(config=CONFIG)
    assert _describe(b) == {}
    assert _alter(
        b,
        _upsert("alice", "alice-secret"),
        _upsert("bob", "bob-secret", "SCRAM_SHA_512", 4096),
    ) == {"alice": None, "bob": None}
    assert _alter(b, _upsert("alice", "alice-512", "SCRAM_SHA_512", 10000)) == {"alice": None}
    assert _describe(b) == {
        "alice": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 10000)],
        "bob": [("SCRAM_SHA_512", 4096)],
    }
    bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
    assert len(roundtrip("confluent-kafka", bootstrap, _scram("alice", "alice-secret"))) == 3
    assert (
        len(roundtrip("kafka-python", bootstrap, _scram("bob", "bob-secret", "SCRAM-SHA-512"))) == 3
    )
    # the stored file has the salted, hashed keys, never a password
    text = (Path(b.broker.data_dir) / CREDENTIALS_FILE).read_text()
    assert "alice-secret" not in text and "bob-secret" not in text
    stored = json.loads(text)["users"]["alice"]["SCRAM-SHA-256"]
    assert set(stored) == {"salt", "stored_key", "server_key", "iterations"}

    assert _alter(b, _delete("alice")) == {"alice": None}
    assert _describe(b, ["alice"]) == {"alice": [("SCRAM_SHA_512", 10000)]}
    assert _alter(b, _delete("alice", "SCRAM_SHA_512")) == {"alice": None}
    described = _describe(b, ["alice", "bob"])
    assert "Attempt to describe a user credential that does not exist: alice" in described["alice"]
    assert described["bob"] == [("SCRAM_SHA_512", 4096)]


def test_refusals_as_kafka_gives_them(brokers: Brokers) -> None:
    b = brokers.start(config=CONFIG)
    result = _alter(
        b,
        _upsert("few", "x", iterations=4095),
        _upsert("many", "x", iterations=16385),
        _delete("nobody"),
        _upsert("twice", "x"),
        _upsert("twice", "y", "SCRAM_SHA_512"),
        _upsert("good", "good-secret", iterations=4096),
    )
    assert "UNACCEPTABLE_CREDENTIAL" in str(result["few"]) and "Too few iterations" in str(
        result["few"]
    )
    assert "Too many iterations" in str(result["many"])
    assert "Attempt to delete a user credential that does not exist" in str(result["nobody"])
    assert "A user credential cannot be altered twice in the same request" in str(result["twice"])
    assert result["good"] is None
    assert _describe(b) == {"good": [("SCRAM_SHA_256", 4096)]}


def test_credentials_survive_a_restart(brokers: Brokers, tmp_path: Path) -> None:
    b = brokers.start(config=CONFIG)
    assert _alter(b, _upsert("carol", "carol-secret", "SCRAM_SHA_512")) == {"carol": None}
    data_dir = Path(b.broker.data_dir)
    brokers.stop(b)
    b = brokers.start(data_dir, config=CONFIG)
    assert _describe(b) == {"carol": [("SCRAM_SHA_512", 8192)]}
    auth = _scram("carol", "carol-secret", "SCRAM-SHA-512")
    assert len(roundtrip("aiokafka", b.bootstrap_for("SASL_PLAINTEXT"), auth)) == 3
    brokers.stop(b)
    # verify knows the file; nothing is left behind by the atomic replace
    from compactlog.storage.verify import verify_data_dir

    report = verify_data_dir(str(data_dir))
    assert not [n for n in report.notes if CREDENTIALS_FILE in str(n)]
    assert not (data_dir / (CREDENTIALS_FILE + ".tmp")).exists()
    # a damaged file stops the start instead of losing every user
    (data_dir / CREDENTIALS_FILE).write_text("{not json")
    with pytest.raises(StorageError, match=CREDENTIALS_FILE):
        brokers.start(data_dir, config=CONFIG)
