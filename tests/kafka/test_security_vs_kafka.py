"""SCRAM users with Kafka 4.4's own kafka-configs, against Kafka 4.4 and against compactlog:
add, describe (all users and one), change iterations, delete, and the refusals, with the same
exit status and output from both brokers; and what a Java client prints when its SASL login is
refused (wrong password, unknown user, a mechanism the broker does not enable), against a Kafka
4.4 broker with the same SASL_PLAINTEXT listener and PLAIN users."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.harness import run_tool
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


# --- refusals a Java client sees, against Kafka 4.4 configured the same way ----------------------
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)
LOGINS = {
    "plain-ok": ("PLAIN", PLAIN_JAAS.split(" required", maxsplit=1)[0], "alice", "alice-secret"),
    "plain-wrong": ("PLAIN", PLAIN_JAAS.split(" required", maxsplit=1)[0], "alice", "wrong"),
    "plain-unknown": ("PLAIN", PLAIN_JAAS.split(" required", maxsplit=1)[0], "nobody", "x"),
    "scram-unknown": (
        "SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule", "nobody", "x"
    ),
    "oauthbearer": (
        "OAUTHBEARER", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        "", "",
    ),
}  # fmt: skip


def _login_file(path: Path, mechanism: str, module: str, user: str, password: str) -> Path:
    if mechanism == "OAUTHBEARER":
        jaas = f'{module} required unsecuredLoginStringClaim_sub="alice";'
    else:
        jaas = f'{module} required username="{user}" password="{password}";'
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config={jaas}\n"
        "request.timeout.ms=10000\ndefault.api.timeout.ms=15000\n"
    )
    return path


def test_sasl_refusals_match_kafka(kafka: Callable[..., Any], tmp_path: Path) -> None:
    from compactlog.broker.server import BrokerThread
    from tests.kafka.harness import free_port

    real = kafka(start=False)
    sasl_port = free_port()
    real.config.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{real.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{real.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{real.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            # Kafka needs a login module per enabled mechanism (SCRAM's has no options)
            **{
                f"listener.name.sasl_plaintext.{m}.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
                for m in ("scram-sha-256", "scram-sha-512")
            },
        }
    )
    real.start()
    ours = BrokerThread(
        tmp_path / "compactlog",
        config={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        },
    ).start()
    try:
        targets = {
            "kafka": f"127.0.0.1:{sasl_port}",
            "compactlog": ours.bootstrap_for("SASL_PLAINTEXT"),
        }
        for name, login in LOGINS.items():
            config = _login_file(tmp_path / f"{name}.properties", *login)
            outcomes = {}
            for broker, bootstrap in targets.items():
                done = run_tool(
                    "kafka-topics", "--bootstrap-server", bootstrap, "--list",
                    "--command-config", str(config), timeout=120,
                )  # fmt: skip
                text = (done.stdout + done.stderr).replace(bootstrap, "<bootstrap>")
                # log lines carry their time; stack frames are the tool's, not the broker's
                text = re.sub(r"^\[[^\]]+\] ", "", text, flags=re.M)
                first = [line for line in text.splitlines() if not line.startswith("\tat ")]
                outcomes[broker] = (done.returncode, first[:3])
            assert outcomes["compactlog"] == outcomes["kafka"], (name, outcomes)
            if name == "plain-wrong":
                assert "Invalid username or password" in "".join(outcomes["kafka"][1])
    finally:
        ours.stop()
