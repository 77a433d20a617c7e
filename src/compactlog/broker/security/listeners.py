"""Kafka's listener model: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

A listener is ``NAME://HOST:PORT``: NAME is mapped to one of the four security protocols by
``listener.security.protocol.map`` (Kafka's default maps each protocol's own name to itself, so
``SASL_SSL://0.0.0.0:9093`` needs no map), an empty HOST binds every interface, ``[::1]`` is an
IPv6 address, and port 0 takes any free port. ``advertised.listeners`` gives, per listener name,
the address that Metadata, FindCoordinator and DescribeCluster hand to the clients that came in
on that listener; a listener missing from it advertises its own address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from compactlog.errors import ConfigError

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SECURITY_PROTOCOLS",
    "Listener",
    "parse_endpoints",
    "parse_protocol_map",
    "resolve_listeners",
]

#: Kafka's security protocols.
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Kafka's default ``listener.security.protocol.map``: every protocol's name maps to itself.
DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

_ENDPOINT_RE: Final = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]+\]|[^:\[\]/]*):(\d+)$")


@dataclass(frozen=True)
class Listener:
    """One listener: its name, security protocol, bind address and advertised address (port 0
    in ``advertised_port``: the bound port)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL`` pairs separated by commas; a bad pair or protocol is a ConfigError."""
    mapping: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {text!r} for configuration listener.security.protocol.map: "
                f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in mapping:
            raise ConfigError(
                f"listener.security.protocol.map: listener name {name} is mapped twice"
            )
        mapping[name] = protocol
    return mapping


def parse_endpoints(text: str, setting: str) -> list[tuple[str, str, int]]:
    """``NAME://HOST:PORT`` items separated by commas, as (NAME, HOST, PORT); names are upper
    case (Kafka's ListenerName normalises them). A malformed item, a port out of range or a
    name given twice is a ConfigError naming ``setting``."""
    endpoints: list[tuple[str, str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        match = _ENDPOINT_RE.match(item)
        if match is None:
            raise ConfigError(
                f"Invalid value {text!r} for configuration {setting}: {item!r} is not "
                "NAME://HOST:PORT (e.g. PLAINTEXT://127.0.0.1:9092, SASL_SSL://[::1]:9093)"
            )
        name, host, port_text = match.groups()
        port = int(port_text)
        if port > 65535:
            raise ConfigError(f"{setting}: the port of {item!r} is above 65535")
        name = name.upper()
        if any(name == seen for seen, _, _ in endpoints):
            raise ConfigError(f"{setting}: listener name {name} is given twice in {text!r}")
        endpoints.append((name, host.removeprefix("[").removesuffix("]"), port))
    if not endpoints:
        raise ConfigError(f"{setting} is empty: name at least one listener")
    return endpoints


def resolve_listeners(
    listeners: str, advertised: str | None, protocol_map: str
) -> tuple[Listener, ...]:
    """The listeners of the settings, each with its protocol and advertised address."""
    mapping = parse_protocol_map(protocol_map)
    bound = parse_endpoints(listeners, "listeners")
    ports = [port for _, _, port in bound if port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"listeners: two listeners share a port in {listeners!r}")
    told: dict[str, tuple[str, int]] = {}
    if advertised:
        for name, host, port in parse_endpoints(advertised, "advertised.listeners"):
            if name not in {n for n, _, _ in bound}:
                raise ConfigError(
                    f"advertised.listeners: listener {name} is not one of listeners ({listeners})"
                )
            if host in ("0.0.0.0", "::"):
                raise ConfigError(
                    f"advertised.listeners cannot use the nonroutable meta-address {host}. "
                    "Use a routable IP address."
                )
            told[name] = (host, port)
    result = []
    for name, host, port in bound:
        protocol = mapping.get(name)
        if protocol is None:
            raise ConfigError(
                f"listeners: no security protocol defined for listener {name} (add "
                f"{name}:<PROTOCOL> to listener.security.protocol.map, whose value is "
                f"{protocol_map!r})"
            )
        ad_host, ad_port = told.get(name, (host, 0 if name not in told else port))
        result.append(Listener(name, protocol, host, port, ad_host, ad_port))
    return tuple(result)
