"""Every real client over every listener kind: SSL (with and without a client certificate),
SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. One broker with four
listeners serves the whole module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.helpers.clients import client_params
from tests.broker.helpers.security import Auth, add_scram_user, all_listeners, make_ca, roundtrip
from tests.broker.helpers.server import BROKER_CONFIG

pytestmark = [pytest.mark.broker, pytest.mark.usefixtures("collect_client_garbage")]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca(tmp_path_factory.mktemp("ca"), "--client", "alice")


@pytest.fixture(scope="module")
def secure_broker(ca: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from compactlog.broker.server import BrokerThread

    broker = BrokerThread(
        tmp_path_factory.mktemp("data"), config={**BROKER_CONFIG, **all_listeners(ca)}
    ).start()
    add_scram_user(broker, "carol", "carol-secret")
    yield broker
    broker.stop()


def _auths(ca: Path) -> dict[str, tuple[str, Auth]]:
    return {
        "ssl": ("SSL", Auth("SSL", ca)),
        "mtls": ("SSL", Auth("SSL", ca, cert="alice")),
        "plain": (
            "SASL_PLAINTEXT",
            Auth("SASL_PLAINTEXT", mechanism="PLAIN", user="alice", password="alice-secret"),
        ),
        "scram256": (
            "SASL_PLAINTEXT",
            Auth(
                "SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user="carol", password="carol-secret"
            ),
        ),
        "scram512": (
            "SASL_PLAINTEXT",
            Auth(
                "SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", user="carol", password="carol-secret"
            ),
        ),
        "ssl-plain": (
            "SASL_SSL",
            Auth("SASL_SSL", ca, mechanism="PLAIN", user="bob", password="bob-secret"),
        ),
        "ssl-scram512": (
            "SASL_SSL",
            Auth("SASL_SSL", ca, mechanism="SCRAM-SHA-512", user="carol", password="carol-secret"),
        ),
    }


@pytest.mark.parametrize(
    "kind", ["ssl", "mtls", "plain", "scram256", "scram512", "ssl-plain", "ssl-scram512"]
)
@pytest.mark.parametrize("client", client_params())
def test_client_round_trip(secure_broker: Any, ca: Path, client: str, kind: str) -> None:
    listener, auth = _auths(ca)[kind]
    seen = roundtrip(client, secure_broker.bootstrap_for(listener), auth)
    assert len(seen) == 3 and all(value.startswith(client.encode()) for value in seen), seen
