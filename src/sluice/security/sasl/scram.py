"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker, and the
credentials as Kafka stores them.

A user's credential for a mechanism is Kafka's ``ScramCredential``: a salt, an
iteration count, the ``StoredKey`` and the ``ServerKey`` (never the password). Kafka
writes it as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(:meth:`ScramCredential.to_string` / :meth:`ScramCredential.from_string`), the value of
the mechanism's key in ``/config/users/<user>``. The exchange itself is the ``scramp``
library's server (:class:`ScramSaslServer` wraps it with Kafka's messages); the keys
are HMACs and hashes from Python's ``hashlib`` / ``hmac``, as RFC 5802 defines them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from . import SCRAM_SHA_256, SCRAM_SHA_512, SaslAuthenticationException, SaslException

__all__ = [
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "CredentialLookup",
    "ScramCredential",
    "ScramSaslServer",
    "mechanism_from_type",
    "mechanism_type",
]

MIN_ITERATIONS: Final = 4096
"""Kafka's minimum iteration count for both mechanisms."""
MAX_ITERATIONS: Final = 16384
"""Kafka's maximum (AlterUserScramCredentials refuses more)."""

_HASHES: Final = {SCRAM_SHA_256: hashlib.sha256, SCRAM_SHA_512: hashlib.sha512}
SCRAM_MECHANISMS: Final = tuple(_HASHES)

_TYPES: Final = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
"""The mechanism's number in AlterUserScramCredentials / DescribeUserScramCredentials
(Kafka's ``ScramMechanism.type()``; 0 is UNKNOWN)."""


def mechanism_type(mechanism: str) -> int:
    return _TYPES[mechanism]


def mechanism_from_type(number: int) -> str | None:
    """The mechanism of a wire number, or None for UNKNOWN or any other."""
    for name, value in _TYPES.items():
        if value == number:
            return name
    return None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """From ``SaltedPassword = Hi(password, salt, i)`` (what AlterUserScramCredentials
        carries): ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``, ``ServerKey =
        HMAC(SaltedPassword, "Server Key")``."""
        digest = _HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        stored_key = digest(client_key).digest()
        server_key = hmac.new(salted_password, b"Server Key", digest).digest()
        return cls(bytes(salt), stored_key, server_key, iterations)

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """A new credential for ``password`` (a random 32-byte salt unless given)."""
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = salted_password(mechanism, password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_string(self) -> str:
        """Kafka's form: ``salt=...,stored_key=...,server_key=...,iterations=...``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """Parse Kafka's form; ValueError if a field is missing, extra or malformed."""
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep or key in fields:
                raise ValueError(f"Credentials not valid: {text}")
            fields[key] = value
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        try:
            decode = base64.b64decode
            return cls(
                decode(fields["salt"], validate=True),
                decode(fields["stored_key"], validate=True),
                decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (binascii.Error, ValueError):
            raise ValueError(f"Credentials not valid: {text}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(Normalize(password), salt, i)``: PBKDF2 with the mechanism's HMAC."""
    name = _HASHES[mechanism]().name
    return hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)


CredentialLookup = Callable[[str], "ScramCredential | None"]
"""A user name -> their credential for the mechanism, or None (Kafka's CredentialCache)."""


class _UnknownUser(Exception):
    pass


def _username(client_first_bare: str) -> str:
    """The ``n=`` attribute of a client-first-message-bare, unescaped (RFC 5802)."""
    first = client_first_bare.partition(",")[0]
    return first[2:].replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    """One SCRAM exchange: client-first, server-first, client-final, server-final."""

    __slots__ = ("_authorization_id", "_credential", "_credentials", "_error", "_server",
                 "_stage", "mechanism")  # fmt: skip

    credential_expiration_ms = None

    def __init__(self, mechanism: str, credentials: CredentialLookup) -> None:
        if mechanism not in _HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        import scramp  # imported on first use: it loads asn1crypto and importlib.metadata

        self.mechanism = mechanism
        self._credentials = credentials
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._error: type[Exception] = scramp.ScramException
        self._stage = 0  # 0: client-first expected, 1: client-final, 2: done
        self._authorization_id: str | None = None
        self._credential: ScramCredential | None = None

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._credential
        if credential is None:  # looked up before the exchange started: cannot be
            raise _UnknownUser(username)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    @property
    def complete(self) -> bool:
        return self._stage == 2

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None or self._stage != 2:
            raise RuntimeError("the SCRAM exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslException("Invalid SCRAM message: not UTF-8") from None
        if self._stage == 0:
            return self._client_first(text)
        if self._stage == 1:
            return self._client_final(text)
        raise SaslException("Unexpected SCRAM message after the exchange completed")

    def _client_first(self, text: str) -> bytes:
        _gs2, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        username = _username(bare)
        credential = self._credentials(username) if username else None
        if credential is None:
            raise SaslException("Authentication failed: Invalid user credentials")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslException(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism}"
            )
        self._credential = credential
        server = self._server
        try:
            server.set_client_first(text)
        except self._error as exc:
            raise SaslException(f"Invalid SCRAM client first message: {exc}") from None
        if authzid.startswith("a=") and authzid[2:] != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._authorization_id = username
        self._stage = 1
        return str(server.get_server_first()).encode("utf-8")

    def _client_final(self, text: str) -> bytes:
        server = self._server
        try:
            server.set_client_final(text)
            final = server.get_server_final()
        except self._error as exc:
            message = f"Authentication failed: Invalid client final message: {exc}"
            raise SaslException(message) from None
        self._stage = 2
        return str(final).encode("utf-8")
