"""What a listener's security protocol asks of its connections.

Each listener (``listeners=NAME://host:port``) has a security protocol from
``listener.security.protocol.map``; :func:`listener_security` turns a listener and the
broker's configuration into a :class:`ListenerSecurity`, which its
:class:`~sluice.server.network.KafkaServer` applies to every connection: the
:class:`~sluice.security.Session` a connection starts with names the listener and its
protocol, with the principal ``User:ANONYMOUS`` until something authenticates it.

As Kafka's ``ChannelBuilders`` choose a channel builder per security protocol, this is
the one place that decides per protocol. A protocol the broker cannot serve stops the
broker at start with a :class:`~sluice.config.ConfigError` naming the listener.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.config import BrokerConfig, ConfigError
from sluice.controller.model import Broker, EndPoint
from sluice.security import ANONYMOUS, KafkaPrincipal, Session
from sluice.security.sasl.client import SaslClient, SaslConfigError, sasl_client_factory
from sluice.security.sasl.listener_config import SaslListenerSettings, sasl_listener_settings
from sluice.security.ssl_engine_factory import SslConfigError, SslEngineFactory
from sluice.security.ssl_principal_mapper import SslPrincipalMapper, distinguished_name

if TYPE_CHECKING:
    from sluice.server.inter_broker import BrokerConnection

TLS_SHUTDOWN_TIMEOUT_S = 2.0
"""How long a closing TLS connection waits for the client to answer its close_notify
before the socket is dropped (Kafka does not wait at all; asyncio's default is 30 s,
which a silent client would add to every stop)."""

__all__ = [
    "PLAINTEXT_SECURITY",
    "TLS_SHUTDOWN_TIMEOUT_S",
    "InterBrokerListener",
    "ListenerSecurity",
    "authenticates",
    "inter_broker_listener",
    "listener_security",
]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's name and security protocol, its TLS context (SSL) and how a client
    certificate names its principal."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    """Set for SSL (and SASL_SSL) listeners: connections are TLS from the first byte."""
    principal_mapper: SslPrincipalMapper | None = None
    """``ssl.principal.mapping.rules``, for the principal of a client certificate."""
    handshake_timeout_s: float = 30.0
    """The longest a TLS handshake may take; the connection is closed after."""
    shutdown_timeout_s: float = TLS_SHUTDOWN_TIMEOUT_S
    """How long a closing TLS connection waits for the client's close_notify."""
    sasl: SaslListenerSettings | None = None
    """SASL_PLAINTEXT and SASL_SSL: the listener's mechanisms and their settings."""

    @property
    def initial_session(self) -> Session:
        """A connection's identity before any authentication: anonymous, on this listener."""
        return Session(ANONYMOUS, self.listener_name, self.security_protocol)

    def tls_session(self, peer_certificate: bytes | None) -> Session:
        """The session of a connection whose TLS handshake ended on an SSL listener:
        ``User:<mapped distinguished name>`` when the client presented a certificate
        (``peer_certificate``, DER), else anonymous. NoMatchingRule when no mapping rule
        applies."""
        if peer_certificate is None:
            return self.initial_session
        mapper = self.principal_mapper or SslPrincipalMapper()
        name = mapper.name(distinguished_name(peer_certificate))
        return Session(KafkaPrincipal("User", name), self.listener_name, self.security_protocol)

    @property
    def authenticates(self) -> bool:
        """Whether a client must prove who it is on this listener (SASL, or TLS with
        ``ssl.client.auth=required``)."""
        if authenticates(self.security_protocol):
            return True
        context = self.ssl_context
        return context is not None and context.verify_mode == ssl.CERT_REQUIRED

    @property
    def description(self) -> str:
        """How the ready line describes the listener's clients."""
        context = self.ssl_context
        if self.sasl is not None:  # "SASL PLAIN/SCRAM-SHA-512", "TLS, SASL PLAIN"
            mechanisms = "/".join(self.sasl.enabled_mechanisms)
            return f"{'TLS, ' if context is not None else ''}SASL {mechanisms}"
        if context is None:
            return "authenticated" if self.authenticates else "unauthenticated"
        if context.verify_mode == ssl.CERT_REQUIRED:
            return "TLS, client certificates required"
        if context.verify_mode == ssl.CERT_OPTIONAL:
            return "TLS, client certificates requested, else unauthenticated"
        return "TLS, unauthenticated"


def authenticates(security_protocol: str) -> bool:
    """Whether a listener of this protocol authenticates every client by itself."""
    return security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT_SECURITY = ListenerSecurity()
"""A PLAINTEXT listener's, for servers built without a broker configuration."""


def listener_security(config: BrokerConfig, endpoint: EndPoint) -> ListenerSecurity:
    """The security of the listener ``endpoint`` (from ``config.listener_endpoints``):
    an SSL listener's TLS context from its ``ssl.*`` settings (``listener.name.<l>.ssl.*``
    first). ConfigError for a protocol this broker cannot serve or bad TLS settings."""
    protocol = endpoint.security_protocol
    name = endpoint.listener_name
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(
            f"listener {endpoint.connection_string}: security protocol {protocol} is not "
            "supported by this broker"
        )
    if protocol == "PLAINTEXT":
        return ListenerSecurity(name, protocol)
    # SASL authenticates over the requests (sluice.security.sasl): its settings, checked now
    sasl = sasl_listener_settings(config, name) if protocol.startswith("SASL_") else None
    if protocol == "SASL_PLAINTEXT":
        return ListenerSecurity(name, protocol, sasl=sasl)
    try:  # SSL, SASL_SSL: TLS from the first byte
        context = _ssl_factory(config, name).server_context()
        mapper = SslPrincipalMapper(config.for_listener(name, "ssl.principal.mapping.rules"))
    except (SslConfigError, ValueError) as exc:
        raise ConfigError(f"listener {endpoint.connection_string}: {exc}") from None
    timeout_ms = config["socket.request.read.timeout.ms"]
    return ListenerSecurity(
        name, protocol, context, mapper, timeout_ms / 1000 if timeout_ms > 0 else 30.0,
        sasl=sasl,
    )  # fmt: skip


def _ssl_factory(config: BrokerConfig, listener_name: str) -> SslEngineFactory:
    try:
        return SslEngineFactory(lambda key: config.for_listener(listener_name, key))
    except SslConfigError as exc:
        raise ConfigError(f"listener {listener_name}: {exc}") from None


@dataclass(frozen=True, slots=True)
class InterBrokerListener:
    """How this broker reaches the others (replica fetchers, the controller's requests,
    controlled shutdown, transaction markers): through their endpoints on
    ``inter.broker.listener.name``, with that listener's security protocol (TLS with the
    listener's ``ssl.*`` settings, this broker's keystore as its client certificate)."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: Callable[[], SaslClient] | None = None
    """SASL_PLAINTEXT, SASL_SSL: the client of ``sasl.mechanism.inter.broker.protocol``,
    with this broker's credentials (the listener's JAAS ``username`` / ``password``)."""

    def endpoint(self, broker: Broker) -> EndPoint | None:
        """``broker``'s endpoint on the inter-broker listener (None: it has none)."""
        return broker.endpoint(self.listener_name)

    def named(self, broker: Broker) -> Broker:
        """A live leader of a LeaderAndIsr request, which (as Kafka's) carries only the
        leader's inter-broker host and port: that endpoint under this listener's name."""
        if broker.endpoint(self.listener_name) is not None or len(broker.endpoints) != 1:
            return broker
        endpoint = dataclasses.replace(
            broker.endpoints[0],
            listener_name=self.listener_name,
            security_protocol=self.security_protocol,
        )
        return Broker(broker.id, (endpoint,), broker.rack)

    def connection(
        self, endpoint: EndPoint, client_id: str, loopback_congestion: str = ""
    ) -> BrokerConnection:
        """A connection (opened on first use) to another broker's ``endpoint``."""
        from sluice.server.inter_broker import BrokerConnection

        return BrokerConnection(
            endpoint.host, endpoint.port, client_id, loopback_congestion=loopback_congestion,
            ssl_context=self.ssl_context, sasl=self.sasl,
        )  # fmt: skip


def inter_broker_listener(config: BrokerConfig) -> InterBrokerListener:
    """The inter-broker listener's name and security, from ``config``; ConfigError for a
    protocol the broker cannot speak to other brokers."""
    name = config.inter_broker_listener_name
    protocol = config.inter_broker_security_protocol
    if protocol == "PLAINTEXT":
        return InterBrokerListener(name, protocol)
    sasl = _inter_broker_sasl(config, name) if protocol.startswith("SASL_") else None
    if protocol == "SASL_PLAINTEXT":
        return InterBrokerListener(name, protocol, sasl=sasl)
    try:
        context = _ssl_factory(config, name).client_context()
    except SslConfigError as exc:
        raise ConfigError(f"inter-broker listener {name}: {exc}") from None
    return InterBrokerListener(name, protocol, context, sasl)


def _inter_broker_sasl(config: BrokerConfig, name: str) -> Callable[[], SaslClient]:
    """The client of ``sasl.mechanism.inter.broker.protocol`` on listener ``name``."""
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    settings = sasl_listener_settings(config, name)
    if mechanism not in settings.enabled_mechanisms:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol {mechanism} must be enabled on the "
            f"inter-broker listener {name} (enabled: {', '.join(settings.enabled_mechanisms)})"
        )
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    try:
        return sasl_client_factory(mechanism, settings.jaas.get(mechanism), key=key)
    except SaslConfigError as exc:
        raise ConfigError(f"inter-broker SASL: {exc}") from None
