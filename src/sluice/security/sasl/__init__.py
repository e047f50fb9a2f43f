"""SASL on the broker, as Kafka's ``SaslServer`` implementations and its
``SaslServerAuthenticator`` do it, without I/O.

A mechanism's server (:mod:`.plain`, :mod:`.scram`, :mod:`.oauthbearer`) takes the
client's tokens one at a time (:meth:`SaslServer.evaluate_response`) and returns its
challenges, until it is :attr:`~SaslServer.complete` with the authorization id of the
client; a failure raises :class:`SaslAuthenticationException`, whose message the client
is told, or :class:`SaslException`, whose message is kept from the client (it may say
whether a user exists) and replaced by Kafka's generic one. The per-connection state
machine around them is :mod:`.authenticator`.
"""

from __future__ import annotations

from typing import Final, Protocol

__all__ = [
    "MECHANISMS",
    "OAUTHBEARER",
    "PLAIN",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SaslAuthenticationException",
    "SaslException",
    "SaslServer",
]

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
OAUTHBEARER: Final = "OAUTHBEARER"
MECHANISMS: Final = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
"""The mechanisms Sluice serves (Kafka's names); GSSAPI is not among them."""


class SaslException(Exception):
    """The exchange failed; the client is told only Kafka's generic message ("...due to
    invalid credentials with SASL mechanism X"), the broker logs this one."""


class SaslAuthenticationException(SaslException):
    """The exchange failed, and this message is what the client is told."""


class SaslServer(Protocol):
    """One SASL exchange of one mechanism, on the server side."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool:
        """The exchange succeeded: :attr:`authorization_id` is known."""

    @property
    def authorization_id(self) -> str:
        """Who the client is (the principal's name)."""

    @property
    def credential_expiration_ms(self) -> int | None:
        """When the credential used expires (epoch ms; an OAuth token's ``exp``), or None."""

    def evaluate_response(self, response: bytes) -> bytes:
        """The client's next token in, the server's challenge out (b"" when none).

        :raises SaslAuthenticationException: failed; the message goes to the client.
        :raises SaslException: failed; the client gets the generic message.
        """
