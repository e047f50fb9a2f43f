"""SASL/PLAIN (RFC 4616) on the broker, as Kafka's ``PlainSaslServer``.

The client sends one token, ``[authzid] NUL authcid NUL passwd``; the broker checks the
password against the users of its JAAS configuration (``user_<name>="<password>"``
options of ``PlainLoginModule``), in constant time, and answers with Kafka's messages.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from . import PLAIN, SaslAuthenticationException

__all__ = ["PlainSaslServer"]


class PlainSaslServer:
    """One PLAIN exchange against a fixed table of users and passwords."""

    __slots__ = ("_authorization_id", "_users")

    mechanism = PLAIN
    credential_expiration_ms = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("the PLAIN exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationException("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationException(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationException("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationException("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared even for an unknown user, so that the time taken does not tell.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\x00" + password).encode(), password.encode()
        )
        if expected is None or not matches:
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._authorization_id = username
        return b""
