"""A client's ``security.protocol``, TLS and SASL settings, with the Java client's names.

``security.protocol`` is ``PLAINTEXT`` (the default), ``SSL``, ``SASL_PLAINTEXT`` or
``SASL_SSL``. With SASL each connection authenticates after ApiVersions with
``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and the
credentials of ``sasl.jaas.config`` (or librdkafka's ``sasl.username`` /
``sasl.password``), see :mod:`sluice.security.sasl.client`. With SSL the client
connects with TLS made from the ``ssl.*`` settings (:data:`SSL_CLIENT_CONFIGS`:
``ssl.truststore.location``, ``ssl.keystore.location``, ``ssl.key.password``,
``ssl.endpoint.identification.algorithm``, ... as Kafka's clients read them; see
:mod:`sluice.security.ssl_engine_factory`). The producer, the consumer and the admin
client accept these keys and hand :attr:`ClientSecurity.ssl_context` to their network
clients.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sluice.client.errors import ConfigException
from sluice.security.sasl.client import SaslClient, SaslConfigError, sasl_client_factory
from sluice.security.ssl_engine_factory import SSL_CLIENT_CONFIGS, SslConfigError, SslEngineFactory

__all__ = ["SECURITY_CONFIG_DEFAULTS", "ClientSecurity"]

SECURITY_CONFIG_DEFAULTS: dict[str, Any] = {
    "security.protocol": "PLAINTEXT",
    **{s.name: s.default for s in SSL_CLIENT_CONFIGS},
    "sasl.mechanism": "GSSAPI",
    "sasl.jaas.config": None,
    "sasl.username": None,
    "sasl.password": None,
}
"""The security keys every Sluice client accepts, with their defaults."""

_LISTS = frozenset(s.name for s in SSL_CLIENT_CONFIGS if s.type == "list")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ClientSecurity:
    """How a client's connections are secured."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: Callable[[], SaslClient] | None = None
    """SASL_PLAINTEXT, SASL_SSL: makes the client of ``sasl.mechanism`` each new
    connection authenticates with."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity:
        """From a client's settings (strings as in a properties file, or Python values);
        ConfigException naming the key for a bad one."""
        protocol = str(config.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in _PROTOCOLS:
            raise ConfigException(
                f"Invalid value {protocol} for configuration security.protocol: Sluice's "
                f"clients speak {', '.join(_PROTOCOLS)}"
            )
        if protocol == "PLAINTEXT":
            return cls()

        def value(key: str) -> Any:
            raw = config.get(key, SECURITY_CONFIG_DEFAULTS.get(key))
            if key in _LISTS and isinstance(raw, str):
                return [item.strip() for item in raw.split(",") if item.strip()]
            if isinstance(raw, str):
                return raw.strip()
            return raw

        sasl = None
        if protocol.startswith("SASL_"):
            try:
                sasl = sasl_client_factory(
                    str(value("sasl.mechanism")), value("sasl.jaas.config"),
                    value("sasl.username"), value("sasl.password"),
                )  # fmt: skip
            except SaslConfigError as exc:
                raise ConfigException(str(exc)) from None
            if protocol == "SASL_PLAINTEXT":
                return cls(protocol, None, sasl)
        try:
            return cls(protocol, SslEngineFactory(value).client_context(), sasl)
        except SslConfigError as exc:
            raise ConfigException(str(exc)) from None
