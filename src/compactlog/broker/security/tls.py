"""A listener's TLS context from PEM material, as Kafka's ``ssl.*`` settings give it, and the
principal of a client certificate.

Key and certificate chain: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM
file holding the private key and the chain) or inline ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``; an encrypted PKCS#8 key is opened with ``ssl.key.password``.
Trusted CAs (to check client certificates): ``ssl.truststore.type=PEM`` with
``ssl.truststore.location`` or inline ``ssl.truststore.certificates``. JKS and PKCS12 stores
are refused with a message saying how to convert them. ``ssl.client.auth`` (none, requested,
required) and ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3) mean what they mean in Kafka.

The principal of a client that presented a certificate is ``User:`` and the certificate's
subject in RFC 2253 form (Kafka's ``DefaultKafkaPrincipalBuilder`` with the rules ``DEFAULT``);
without one it is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from typing import Final

from compactlog.broker.security.config import SecuritySettings
from compactlog.errors import ConfigError

__all__ = ["ANONYMOUS", "certificate_principal", "server_context"]

ANONYMOUS: Final = "User:ANONYMOUS"
_PROTOCOLS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_Get = Callable[[str], "str | None"]
_PEM_RE: Final = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 re-wrapped, so that a value given on one line (as Kafka's
    properties files allow) loads like a file."""
    blocks = []
    for kind, body in _PEM_RE.findall(text):
        headers, b64 = "", body
        if "Proc-Type:" in body:  # a legacy encrypted key: keep its headers' lines
            head, _, b64 = body.strip().partition("\n\n")
            headers = head.strip() + "\n\n"
        compact = "".join(b64.split())
        lines = [compact[i : i + 64] for i in range(0, len(compact), 64)]
        blocks.append(
            f"-----BEGIN {kind}-----\n{headers}" + "\n".join(lines) + f"\n-----END {kind}-----\n"
        )
    return "".join(blocks)


def _setting(settings: SecuritySettings, listener: str, name: str) -> str | None:
    value = settings.for_listener(listener, name)
    return value if value else None


def server_context(settings: SecuritySettings, listener: str) -> ssl.SSLContext:
    """The server-side context of ``listener``; a ConfigError names what is missing or wrong."""

    def get(name: str) -> str | None:
        return _setting(settings, listener, name)

    where = f"listener {listener}"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p.strip() for p in (get("ssl.enabled.protocols") or "").split(",") if p.strip()]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise ConfigError(
            f"ssl.enabled.protocols of {where}: {', '.join(unknown) or 'none given'} "
            f"(compactlog speaks {', '.join(_PROTOCOLS)})"
        )
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            context.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
        except ssl.SSLError as exc:
            raise ConfigError(f"ssl.cipher.suites of {where}: {exc}") from exc
    rules = (get("ssl.principal.mapping.rules") or "DEFAULT").strip()
    if rules != "DEFAULT":
        raise ConfigError(
            f"ssl.principal.mapping.rules of {where}: only DEFAULT is implemented (the "
            f"principal is User: and the certificate subject), not {rules!r}"
        )
    _load_keystore(context, get, where)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(
            f"Invalid value {client_auth} for configuration ssl.client.auth of {where}: "
            "expected one of required, requested, none"
        )
    context.verify_mode = _CLIENT_AUTH[client_auth]
    _load_truststore(context, get, where, client_auth != "none")
    return context


def _load_keystore(context: ssl.SSLContext, get: _Get, where: str) -> None:
    """Kafka's checks (``DefaultSslEngineFactory.createKeystore``), in its order and words,
    then the PEM material; other store types are refused with how to convert them."""
    kind = (get("ssl.keystore.type") or "JKS").upper()
    location, password = get("ssl.keystore.location"), get("ssl.keystore.password")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    problem = None
    if key is not None:
        if kind != "PEM":
            problem = (
                f"SSL private key can be specified only for PEM, but key store type is {kind}."
            )
        elif chain is None:
            problem = "SSL private key is specified, but certificate chain is not specified."
        elif location is not None:
            problem = "Both SSL key store location and separate private key are specified."
    elif chain is not None:
        problem = "SSL certificate chain is specified, but private key is not specified"
    elif location is None:
        problem = (
            "it uses TLS but has no key: set ssl.keystore.type=PEM and ssl.keystore.location (a "
            "PEM file with the key and the certificate chain), or ssl.keystore.certificate.chain "
            "and ssl.keystore.key"
        )
    elif kind != "PEM":
        problem = (
            f"ssl.keystore.type is {kind}: compactlog reads PEM only (set ssl.keystore.type=PEM; "
            "convert a JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12 -nodes)"
        )
    if problem is None and password is not None:
        problem = (
            "SSL key store password cannot be specified with PEM format, only key password may "
            "be specified."
        )
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    key_password = get("ssl.key.password")
    try:
        if location is not None:
            if not os.path.isfile(location):
                raise ConfigError(f"ssl.keystore.location of {where}: no such file {location}")
            context.load_cert_chain(location, password=key_password)
        else:
            assert chain is not None and key is not None
            _load_inline_chain(context, normalize_pem(chain), normalize_pem(key), key_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"the key or certificate chain of {where} cannot be loaded ({exc.reason or exc}): "
            "expected PEM with the private key (encrypted PKCS#8 needs ssl.key.password) and "
            "its certificate chain"
        ) from exc


def _load_inline_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the inline PEM goes through a private temporary
    file (mode 0600 in a 0700 directory) that is removed at once."""
    with tempfile.TemporaryDirectory(prefix="compactlog-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key + chain)
        try:
            context.load_cert_chain(path, password=password)
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)


def _load_truststore(context: ssl.SSLContext, get: _Get, where: str, needed: bool) -> None:
    """Kafka's checks (``createTruststore``), then the PEM certificates."""
    kind = (get("ssl.truststore.type") or "JKS").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    password = get("ssl.truststore.password")
    problem = None
    if inline is not None:
        if kind != "PEM":
            problem = (
                f"SSL trust store certs can be specified only for PEM, but trust store type is "
                f"{kind}."
            )
        elif location is not None:
            problem = "Both SSL trust store location and separate trust certificates are specified."
    elif location is None:
        if password is not None:
            problem = "SSL trust store is not specified, but trust store password is specified."
        elif needed:
            problem = (
                "it asks for client certificates (ssl.client.auth) but has no truststore: set "
                "ssl.truststore.type=PEM and ssl.truststore.location or "
                "ssl.truststore.certificates"
            )
        else:
            return
    elif kind != "PEM":
        problem = (
            f"ssl.truststore.type is {kind}: compactlog reads PEM only (set "
            "ssl.truststore.type=PEM)"
        )
    if problem is None and password is not None:
        problem = "SSL trust store password cannot be specified for PEM format."
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    try:
        if location is not None:
            if not os.path.isfile(location):
                raise ConfigError(f"ssl.truststore.location of {where}: no such file {location}")
            context.load_verify_locations(cafile=location)
        else:
            assert inline is not None
            context.load_verify_locations(cadata=normalize_pem(inline))
    except ssl.SSLError as exc:
        raise ConfigError(
            f"the truststore of {where} cannot be loaded ({exc.reason or exc}): expected PEM "
            "certificates"
        ) from exc


def certificate_principal(der: bytes | None) -> str:
    """``User:`` and the subject of the DER certificate in RFC 2253 form; ANONYMOUS without one."""
    if not der:
        return ANONYMOUS
    from cryptography import x509  # noqa: PLC0415 - only clients with certificates need it

    subject = x509.load_der_x509_certificate(der).subject
    return "User:" + subject.rfc4514_string()
