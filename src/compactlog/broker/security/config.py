"""The security settings, by Kafka's names, and the listener each applies to.

Kafka lets most of them be set for one listener with the prefix ``listener.name.<name>.``
(the listener name in lower case): ``listener.name.sasl_ssl.ssl.keystore.location`` applies to
the listener SASL_SSL only and wins over ``ssl.keystore.location``. SASL login modules are
configured per listener and mechanism:
``listener.name.<name>.<mechanism>.sasl.jaas.config`` (``plain``, ``scram-sha-256``), with
``listener.name.<name>.sasl.jaas.config`` and ``sasl.jaas.config`` as fallbacks here.

``compactlog.allow.plaintext.without.authorizer`` is compactlog's own: see
:meth:`SecuritySettings.check_safe_exposure`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from compactlog.broker.security.listeners import DEFAULT_PROTOCOL_MAP, Listener, resolve_listeners
from compactlog.errors import ConfigError

__all__ = [
    "ALLOW_PLAINTEXT_SETTING",
    "DEFAULT_FAILED_AUTHENTICATION_DELAY_MS",
    "DEFAULT_SASL_MECHANISMS",
    "IMPLEMENTED_MECHANISMS",
    "LISTENER_SETTINGS",
    "SECURITY_SETTINGS",
    "SecuritySettings",
    "is_security_setting",
]

#: The SASL mechanisms compactlog implements. Kafka's default ``sasl.enabled.mechanisms`` is
#: GSSAPI (Kerberos), which compactlog does not implement; its default is these three.
IMPLEMENTED_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Mechanisms Kafka knows that compactlog refuses in ``sasl.enabled.mechanisms`` (a client
#: asking for one gets UNSUPPORTED_SASL_MECHANISM).
_KNOWN_UNIMPLEMENTED: Final = ("GSSAPI", "OAUTHBEARER")
DEFAULT_SASL_MECHANISMS: Final = ",".join(IMPLEMENTED_MECHANISMS)
#: Kafka's ``connection.failed.authentication.delay.ms`` default.
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS: Final = 100
ALLOW_PLAINTEXT_SETTING: Final = "compactlog.allow.plaintext.without.authorizer"

#: Settings that may be given per listener, and their defaults (None: unset).
LISTENER_SETTINGS: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "ssl.keystore.type": "JKS",
        "ssl.keystore.location": None,
        "ssl.keystore.password": None,
        "ssl.keystore.certificate.chain": None,
        "ssl.keystore.key": None,
        "ssl.key.password": None,
        "ssl.truststore.type": "JKS",
        "ssl.truststore.location": None,
        "ssl.truststore.password": None,
        "ssl.truststore.certificates": None,
        "ssl.client.auth": "none",
        "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
        "ssl.protocol": "TLSv1.3",
        "ssl.cipher.suites": "",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.principal.mapping.rules": "DEFAULT",
        "sasl.enabled.mechanisms": DEFAULT_SASL_MECHANISMS,
        "sasl.jaas.config": None,
        "connections.max.reauth.ms": "0",
    }
)
#: Settings of the whole broker (no per-listener form), and their defaults.
_BROKER_WIDE: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "listeners": None,
        "advertised.listeners": None,
        "listener.security.protocol.map": DEFAULT_PROTOCOL_MAP,
        "inter.broker.listener.name": None,
        "security.inter.broker.protocol": "PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "connection.failed.authentication.delay.ms": str(DEFAULT_FAILED_AUTHENTICATION_DELAY_MS),
        "authorizer.class.name": "",
        ALLOW_PLAINTEXT_SETTING: "false",
    }
)
SECURITY_SETTINGS: Final[Mapping[str, str | None]] = MappingProxyType(
    {**LISTENER_SETTINGS, **_BROKER_WIDE}
)
_PREFIX_RE: Final = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")
_MECHANISM_JAAS_RE: Final = re.compile(
    r"^(plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.sasl\.jaas\.config$"
)


def is_security_setting(name: str) -> bool:
    """Whether ``name`` is one of the settings this module owns."""
    if name in SECURITY_SETTINGS:
        return True
    match = _PREFIX_RE.match(name)
    return match is not None and (
        match.group(2) in LISTENER_SETTINGS or _MECHANISM_JAAS_RE.match(match.group(2)) is not None
    )


def _text(raw: object) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (list, tuple)):
        return ",".join(str(item) for item in raw)
    return str(raw)


def _boolean(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Expected value to be either true "
            "or false"
        )
    return lowered == "true"


def _long(name: str, value: str, minimum: int = 0) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type LONG"
        ) from None
    if number < minimum:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Value must be at least {minimum}"
        )
    return number


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class SecuritySettings:
    """The validated security settings; :meth:`from_mapping` builds it."""

    values: Mapping[str, str] = field(default_factory=dict)
    #: The listeners of ``listeners`` (empty: the broker's ``listen`` argument decides).
    listeners: tuple[Listener, ...] = ()
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
    authorizer_class_name: str = ""
    allow_plaintext_without_authorizer: bool = False

    @classmethod
    def from_mapping(cls, config: Mapping[str, object]) -> SecuritySettings:
        values = {name: _text(raw) for name, raw in config.items()}
        for name in values:
            if not is_security_setting(name):
                raise ConfigError(f"Unknown broker config name: {name}")

        def get(name: str) -> str | None:
            return values.get(name, _BROKER_WIDE.get(name))

        listeners_text = get("listeners")
        listeners: tuple[Listener, ...] = ()
        if listeners_text:
            listeners = resolve_listeners(
                listeners_text,
                get("advertised.listeners"),
                get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP,
            )
        elif get("advertised.listeners"):
            raise ConfigError("advertised.listeners is set but listeners is not")
        settings = cls(
            values=MappingProxyType(values),
            listeners=listeners,
            failed_authentication_delay_ms=_long(
                "connection.failed.authentication.delay.ms",
                get("connection.failed.authentication.delay.ms") or "0",
            ),
            authorizer_class_name=(get("authorizer.class.name") or "").strip(),
            allow_plaintext_without_authorizer=_boolean(
                ALLOW_PLAINTEXT_SETTING, get(ALLOW_PLAINTEXT_SETTING) or "false"
            ),
        )
        for name in values:
            match = _PREFIX_RE.match(name)
            if (
                match is not None
                and listeners
                and match.group(1).upper() not in {item.name for item in listeners}
            ):
                raise ConfigError(
                    f"{name}: no listener is named {match.group(1).upper()} in listeners"
                )
        for listener in listeners:
            settings.validate_listener(listener)
        return settings

    def for_listener(self, listener: str, name: str) -> str | None:
        """The value of ``name`` on ``listener``: the prefixed setting, else the plain one, else
        the default."""
        prefixed = f"listener.name.{listener.lower()}.{name}"
        if prefixed in self.values:
            return self.values[prefixed]
        if name in self.values:
            return self.values[name]
        return LISTENER_SETTINGS.get(name)

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """The JAAS configuration for ``mechanism`` on ``listener`` (see the module docstring)."""
        prefix = f"listener.name.{listener.lower()}."
        for name in (f"{prefix}{mechanism.lower()}.sasl.jaas.config", f"{prefix}sasl.jaas.config"):
            if name in self.values:
                return self.values[name]
        return self.values.get("sasl.jaas.config")

    def sasl_mechanisms(self, listener: str) -> tuple[str, ...]:
        text = self.for_listener(listener, "sasl.enabled.mechanisms") or ""
        return tuple(m.strip().upper() for m in text.split(",") if m.strip())

    def reauth_ms(self, listener: str) -> int:
        return _long(
            "connections.max.reauth.ms",
            self.for_listener(listener, "connections.max.reauth.ms") or "0",
        )

    def validate_listener(self, listener: Listener) -> None:
        """Check what ``listener`` needs: its mechanisms, its re-authentication setting (the TLS
        material is checked when its context is built, at start)."""
        self.reauth_ms(listener.name)
        if not listener.uses_sasl:
            return
        mechanisms = self.sasl_mechanisms(listener.name)
        if not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {listener.name} is empty")
        for mechanism in mechanisms:
            if mechanism in _KNOWN_UNIMPLEMENTED:
                raise ConfigError(
                    f"sasl.enabled.mechanisms of listener {listener.name}: {mechanism} is not "
                    f"implemented by compactlog (it implements {', '.join(IMPLEMENTED_MECHANISMS)})"
                )
            if mechanism not in IMPLEMENTED_MECHANISMS:
                raise ConfigError(
                    f"sasl.enabled.mechanisms of listener {listener.name}: unknown mechanism "
                    f"{mechanism!r} (compactlog implements {', '.join(IMPLEMENTED_MECHANISMS)})"
                )

    def check_safe_exposure(self, listeners: tuple[Listener, ...]) -> None:
        """Refuse a PLAINTEXT listener on an address other than loopback while no authorizer
        is configured: anyone on the network could read and delete every topic."""
        if self.authorizer_class_name or self.allow_plaintext_without_authorizer:
            return
        for listener in listeners:
            if listener.protocol == "PLAINTEXT" and not _is_loopback(listener.host):
                shown = f"[{listener.host}]" if ":" in listener.host else listener.host
                raise ConfigError(
                    f"refusing to start: the PLAINTEXT listener {listener.name} binds "
                    f"{shown or 'every interface'}:{listener.port}, where anyone on the network "
                    "could read, write and delete every topic, and no authorizer is configured "
                    f"(authorizer.class.name); set {ALLOW_PLAINTEXT_SETTING}=true to allow it, "
                    "or use a TLS or SASL listener, or bind 127.0.0.1"
                )
