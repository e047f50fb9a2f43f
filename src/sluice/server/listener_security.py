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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.config import BrokerConfig, ConfigError
from sluice.controller.model import Broker, EndPoint
from sluice.security import ANONYMOUS, Session
from sluice.security.sasl.listener_config import SaslListenerSettings, sasl_listener_settings

if TYPE_CHECKING:
    from sluice.server.inter_broker import BrokerConnection

__all__ = [
    "PLAINTEXT_SECURITY",
    "InterBrokerListener",
    "ListenerSecurity",
    "authenticates",
    "inter_broker_listener",
    "listener_security",
]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's name and security protocol, and the session its connections start
    with."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    sasl: SaslListenerSettings | None = None
    """SASL_PLAINTEXT and SASL_SSL: the listener's mechanisms and their settings."""

    @property
    def initial_session(self) -> Session:
        """A connection's identity before any authentication: anonymous, on this listener."""
        return Session(ANONYMOUS, self.listener_name, self.security_protocol)

    @property
    def authenticates(self) -> bool:
        """Whether a client must prove who it is on this listener."""
        return authenticates(self.security_protocol)

    @property
    def description(self) -> str:
        """How the ready line describes the listener's clients."""
        return "authenticated" if self.authenticates else "unauthenticated"


def authenticates(security_protocol: str) -> bool:
    """Whether a listener of this protocol authenticates its clients."""
    return security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT_SECURITY = ListenerSecurity()
"""A PLAINTEXT listener's, for servers built without a broker configuration."""


def listener_security(config: BrokerConfig, endpoint: EndPoint) -> ListenerSecurity:
    """The security of the listener ``endpoint`` (from ``config.listener_endpoints``);
    ConfigError for a protocol this broker cannot serve."""
    protocol = endpoint.security_protocol
    if protocol == "SASL_PLAINTEXT":
        settings = sasl_listener_settings(config, endpoint.listener_name)
        return ListenerSecurity(endpoint.listener_name, protocol, settings)
    if protocol != "PLAINTEXT":
        raise ConfigError(
            f"listener {endpoint.connection_string}: security protocol {protocol} is not "
            "supported by this broker"
        )
    return ListenerSecurity(endpoint.listener_name, protocol)


@dataclass(frozen=True, slots=True)
class InterBrokerListener:
    """How this broker reaches the others (replica fetchers, the controller's requests,
    controlled shutdown, transaction markers): through their endpoints on
    ``inter.broker.listener.name``, with that listener's security protocol."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

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
            endpoint.host, endpoint.port, client_id, loopback_congestion=loopback_congestion
        )


def inter_broker_listener(config: BrokerConfig) -> InterBrokerListener:
    """The inter-broker listener's name and security, from ``config``."""
    name = config.inter_broker_listener_name
    return InterBrokerListener(name, config.inter_broker_security_protocol)
