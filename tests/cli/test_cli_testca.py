"""``compactlog make-test-ca``: the PEM files a TLS listener and its clients need."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

from click.testing import CliRunner
from cryptography import x509

from compactlog.cli.main import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["make-test-ca", *args])
    return result.exit_code, result.output


def test_a_ca_a_broker_and_clients_that_tls_accepts(tmp_path: Path) -> None:
    code, out = run(str(tmp_path), "--san", "localhost", "--client", "alice")
    assert code == 0, out
    names = {Path(line).name for line in out.splitlines()}
    assert names == {
        "ca.pem", "ca-key.pem", "broker.pem", "broker-cert.pem", "broker-key.pem",
        "client-alice.pem", "client-alice-cert.pem", "client-alice-key.pem",
    }  # fmt: skip
    assert (tmp_path / "ca-key.pem").stat().st_mode & 0o077 == 0  # keys are private
    # What a server and a client of the standard library make of them: they load and verify.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "broker.pem")
    client = ssl.create_default_context(cafile=tmp_path / "ca.pem")
    client.load_cert_chain(tmp_path / "client-alice.pem")
    cert = x509.load_pem_x509_certificate((tmp_path / "client-alice-cert.pem").read_bytes())
    assert cert.subject.rfc4514_string() == "O=compactlog test,CN=alice"


def test_a_second_run_keeps_the_ca_and_can_issue_expired_certificates(tmp_path: Path) -> None:
    assert run(str(tmp_path))[0] == 0
    ca = (tmp_path / "ca.pem").read_bytes()
    code, out = run(str(tmp_path), "--client", "old", "--expired")
    assert code == 0 and f"{tmp_path / 'ca.pem'} (kept)" in out
    assert (tmp_path / "ca.pem").read_bytes() == ca
    cert = x509.load_pem_x509_certificate((tmp_path / "client-old-cert.pem").read_bytes())
    assert cert.not_valid_after_utc < datetime.datetime.now(datetime.UTC)


def test_bad_arguments_are_one_line_usage_errors(tmp_path: Path) -> None:
    for args, said in (
        (["--days", "0"], "--days must be at least 1"),
        (["--client", "a/b"], "a name without '/' is expected"),
    ):
        code, out = run(str(tmp_path / "x"), *args)
        assert code == 2 and said in out and "Traceback" not in out
