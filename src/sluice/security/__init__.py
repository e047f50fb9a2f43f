"""Who a client is: the principal a connection authenticated as, and the listener it
came in on.

As in Kafka, every request carries a :class:`Session` (``RequestContext.session``): the
:class:`KafkaPrincipal` the connection authenticated as (``User:ANONYMOUS`` on a
PLAINTEXT listener or before a SASL exchange ends) and the listener it arrived on. The
network layer sets it once per connection and again when an authentication ends; the
authorizer and the quota manager read it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "DEFAULT_SESSION", "KafkaPrincipal", "Session"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: ``User:alice`` (type ``User``, name ``alice``)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a principal as Type:name, not {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
"""Kafka's principal for a connection that did not authenticate."""


@dataclass(frozen=True, slots=True)
class Session:
    """A connection's identity: its principal and the listener it arrived on."""

    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    """The listener's name (``listeners=INTERNAL://...`` names it INTERNAL)."""
    security_protocol: str = "PLAINTEXT"
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""


DEFAULT_SESSION = Session()
"""An unauthenticated client on a PLAINTEXT listener."""
