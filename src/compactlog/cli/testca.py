"""``compactlog make-test-ca``: a test certificate authority and certificates for a broker's TLS
listeners, as PEM files (the tests make theirs with it; ``scripts/make-test-ca.py`` is the same
command for a checkout without the package installed).

Writes into DIRECTORY:

  ca.pem, ca-key.pem          the CA's certificate and key (the truststore of clients and of a
                              broker that checks client certificates)
  broker.pem                  the broker's key and certificate chain in one file, for
                              ssl.keystore.type=PEM and ssl.keystore.location
  broker-cert.pem, broker-key.pem
                              the same, apart (ssl.keystore.certificate.chain / ssl.keystore.key,
                              or a client's ssl.certificate.location / ssl.key.location)
  client-NAME.pem, client-NAME-cert.pem, client-NAME-key.pem
                              per --client NAME: a client certificate with subject CN=NAME

A DIRECTORY that already holds ca.pem and ca-key.pem keeps its CA: the new certificates are
issued by it (to add clients, or an expired certificate the broker otherwise trusts). For tests
only: the keys are not encrypted (unless --key-password); nothing here protects real data.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

import click
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["make_test_ca", "make_test_ca_command"]


def _name(common_name: str, organization: str | None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    days: int,
    not_before: datetime.datetime,
    ca: bool = False,
    sans: list[str] | None = None,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    if sans:
        names: list[x509.GeneralName] = []
        for san in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                names.append(x509.DNSName(san))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(directory: Path, name: str, data: bytes, private: bool, written: list[str]) -> None:
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    written.append(str(path))


def make_test_ca(
    directory: Path,
    sans: list[str],
    clients: list[str],
    organization: str = "compactlog test",
    days: int = 30,
    expired: bool = False,
    key_password: str | None = None,
) -> None:
    """Write the CA (or keep the one in ``directory``), a broker certificate for ``sans`` and a
    client certificate per name of ``clients``; prints each file written."""
    if days < 1:
        raise click.UsageError("--days must be at least 1")
    sans = sans or ["localhost", "127.0.0.1"]
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    leaf_start = now - datetime.timedelta(days=days + 2) if expired else now
    written: list[str] = []

    if (directory / "ca.pem").exists() and (directory / "ca-key.pem").exists():
        ca = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
        loaded = serialization.load_pem_private_key((directory / "ca-key.pem").read_bytes(), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise click.UsageError(
                f"{directory / 'ca-key.pem'} is not an EC key made by this command"
            )
        ca_key, ca_name = loaded, ca.subject
        click.echo(f"{directory / 'ca.pem'} (kept)")
    else:
        ca_key = _key()
        ca_name = _name("compactlog test CA", organization)
        ca_start = now - datetime.timedelta(days=days + 3)
        ca = _issue(
            ca_name, ca_key, ca_name, ca_key, days=days + 3650, not_before=ca_start, ca=True
        )
        _write(directory, "ca.pem", _pem_cert(ca), False, written)
        _write(directory, "ca-key.pem", _pem_key(ca_key, None), True, written)

    def leaf(
        stem: str, common_name: str, leaf_sans: list[str] | None, usage: x509.ObjectIdentifier
    ) -> None:
        key = _key()
        cert = _issue(
            _name(common_name, organization),
            key,
            ca_name,
            ca_key,
            days=days,
            not_before=leaf_start,
            sans=leaf_sans,
            usage=[usage],
        )
        key_pem, cert_pem = _pem_key(key, key_password), _pem_cert(cert)
        _write(directory, f"{stem}.pem", key_pem + cert_pem + _pem_cert(ca), True, written)
        _write(directory, f"{stem}-cert.pem", cert_pem + _pem_cert(ca), False, written)
        _write(directory, f"{stem}-key.pem", key_pem, True, written)

    leaf("broker", sans[0], sans, ExtendedKeyUsageOID.SERVER_AUTH)
    for client in clients:
        if not client or "/" in client:
            raise click.UsageError(f"--client {client!r}: a name without '/' is expected")
        leaf(f"client-{client}", client, None, ExtendedKeyUsageOID.CLIENT_AUTH)
    for path in written:
        click.echo(path)


@click.command("make-test-ca")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--san",
    "sans",
    multiple=True,
    metavar="NAME_OR_IP",
    help="A subject alternative name of the broker certificate; repeatable "
    "(default: localhost and 127.0.0.1).",
)
@click.option(
    "--client",
    "clients",
    multiple=True,
    metavar="NAME",
    help="Also make a client certificate with subject CN=NAME; repeatable.",
)
@click.option(
    "--organization", default="compactlog test", show_default=True, help="O= of every subject."
)
@click.option("--days", type=int, default=30, show_default=True, help="Validity in days.")
@click.option(
    "--expired",
    is_flag=True,
    help="Make every leaf certificate already expired (for refusal tests).",
)
@click.option(
    "--key-password",
    default=None,
    help="Encrypt the broker's and the clients' keys (PKCS#8) with this.",
)
def make_test_ca_command(
    directory: Path, sans: tuple[str, ...], clients: tuple[str, ...], organization: str,
    days: int, expired: bool, key_password: str | None,
) -> None:  # fmt: skip
    """Make a test CA and PEM certificates for a broker's TLS listeners (tests and trials only).

    Writes ca.pem (the truststore), broker.pem (key and chain for ssl.keystore.location) and
    per --client NAME a client certificate with subject CN=NAME, into DIRECTORY; a CA already
    there is kept and issues the new certificates.

    \b
    Example:
      compactlog make-test-ca tls --san localhost --san 127.0.0.1 --client alice

    Exit codes: 0 success, 2 bad option.
    """
    make_test_ca(directory, list(sans), list(clients), organization, days, expired, key_password)
