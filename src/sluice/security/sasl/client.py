"""SASL on the client side, with no I/O: the mechanisms a Sluice client (and a broker
talking to another) authenticates with, and Kafka's client settings for them.

A :class:`SaslClient` makes the client's tokens from the server's challenges
(:meth:`~SaslClient.evaluate_challenge`) until it is :attr:`~SaslClient.complete`.
:class:`SaslClientExchange` drives one over Kafka's messages: SaslHandshake v1 with
the mechanism, then SaslAuthenticate requests carrying the tokens, raising Kafka's
client exceptions' counterparts — :class:`UnsupportedSaslMechanismError` (with the
broker's mechanisms), :class:`SaslAuthenticationError` (with the broker's message).

Credentials come as Kafka's clients take them: ``sasl.jaas.config`` (PlainLoginModule
or ScramLoginModule with ``username`` / ``password``; OAuthBearerLoginModule with
``unsecuredLoginStringClaim_sub``, for an unsecured token as Kafka's
``OAuthBearerUnsecuredLoginCallbackHandler`` makes), or librdkafka's ``sasl.username`` /
``sasl.password`` — see :func:`sasl_client_factory`. SCRAM is scramp's client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from . import MECHANISMS, OAUTHBEARER, PLAIN
from .jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    JaasConfigError,
    parse_jaas_config,
)
from .oauthbearer import unsecured_jws

__all__ = [
    "SaslAuthenticationError",
    "SaslClient",
    "SaslClientExchange",
    "SaslConfigError",
    "UnsupportedSaslMechanismError",
    "sasl_client_factory",
]

UNSECURED_LIFETIME_S: Final = 3600
"""An unsecured token's lifetime (Kafka's ``unsecuredLoginLifetimeSeconds`` default)."""


class SaslConfigError(ValueError):
    """The client's SASL settings are incomplete or wrong; the message names the key."""


class SaslAuthenticationError(Exception):
    """The broker refused the credentials (SASL_AUTHENTICATION_FAILED); its message."""


class UnsupportedSaslMechanismError(Exception):
    """The broker does not serve the mechanism; the message lists what it serves."""


class SaslClient(Protocol):
    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    def evaluate_challenge(self, challenge: bytes | None) -> bytes | None:
        """The next token for the server's ``challenge`` (None: the first token); None
        when nothing more is to be sent."""


class PlainSaslClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\x00{username}\x00{password}".encode()
        self.complete = False

    def evaluate_challenge(self, challenge: bytes | None) -> bytes | None:
        if challenge is None:
            return self._token
        self.complete = True
        return None


class ScramSaslClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        import scramp  # imported on first use (it loads importlib.metadata)

        self.mechanism = mechanism
        self._client = scramp.ScramClient([mechanism], username, password)
        self._error: type[Exception] = scramp.ScramException
        self._stage = 0
        self.complete = False

    def evaluate_challenge(self, challenge: bytes | None) -> bytes | None:
        client = self._client
        try:
            if self._stage == 0:
                self._stage = 1
                return str(client.get_client_first()).encode()
            assert challenge is not None
            if self._stage == 1:
                self._stage = 2
                client.set_server_first(challenge.decode())
                return str(client.get_client_final()).encode()
            client.set_server_final(challenge.decode())  # the server proves it knew the key
        except self._error as exc:
            raise SaslAuthenticationError(f"SCRAM exchange failed: {exc}") from None
        self.complete = True
        return None


class OAuthBearerSaslClient:
    mechanism = OAUTHBEARER

    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token
        self._sent = False
        self.complete = False

    def evaluate_challenge(self, challenge: bytes | None) -> bytes | None:
        if not self._sent:
            self._sent = True
            return f"n,,\x01auth=Bearer {self._token()}\x01\x01".encode()
        if challenge:  # the server's error JSON: acknowledged, then it fails the exchange
            return b"\x01"
        self.complete = True
        return None


def sasl_client_factory(
    mechanism: str,
    jaas_config: str | JaasConfig | None,
    username: str | None = None,
    password: str | None = None,
    *,
    key: str = "sasl.jaas.config",
) -> Callable[[], SaslClient]:
    """A maker of ``mechanism``'s client from Kafka's settings (``key`` names the JAAS
    setting in errors); SaslConfigError for a mechanism or credentials missing."""
    if mechanism not in MECHANISMS:
        raise SaslConfigError(
            f"sasl.mechanism {mechanism} is not supported; one of {', '.join(MECHANISMS)}"
        )
    jaas: JaasConfig | None
    try:
        jaas = parse_jaas_config(jaas_config) if isinstance(jaas_config, str) else jaas_config
    except JaasConfigError as exc:
        raise SaslConfigError(f"{key}: {exc}") from None
    options: Mapping[str, str] = jaas.options if jaas is not None else {}
    expected = {PLAIN: PLAIN_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}.get(
        mechanism, SCRAM_LOGIN_MODULE
    )
    if jaas is not None and jaas.login_module != expected:
        raise SaslConfigError(f"{key}: {mechanism} takes {expected}, not {jaas.login_module}")
    if mechanism == OAUTHBEARER:
        claims: dict[str, Any] = {
            k.removeprefix("unsecuredLoginStringClaim_"): v
            for k, v in options.items()
            if k.startswith("unsecuredLoginStringClaim_")
        }
        if "sub" not in claims:
            raise SaslConfigError(
                f"{key}: OAUTHBEARER needs OAuthBearerLoginModule with "
                "unsecuredLoginStringClaim_sub (an unsecured token)"
            )
        lifetime = int(options.get("unsecuredLoginLifetimeSeconds", UNSECURED_LIFETIME_S))

        def token() -> str:
            now = time.time()
            return unsecured_jws({**claims, "iat": now, "exp": now + lifetime})

        return lambda: OAuthBearerSaslClient(token)
    user = options.get("username", username)
    secret = options.get("password", password)
    if user is None or secret is None:
        raise SaslConfigError(
            f'{mechanism} needs a username and a password: {key} with username="..." '
            'password="..." (or sasl.username and sasl.password)'
        )
    if mechanism == PLAIN:
        return lambda: PlainSaslClient(user, secret)
    return lambda: ScramSaslClient(mechanism, user, secret)


class SaslClientExchange:
    """One authentication as Kafka's ``SaslClientAuthenticator`` runs it over requests:
    :meth:`handshake_request`, then :meth:`on_handshake`; then, while :meth:`next_token`
    gives a token, a SaslAuthenticate with it and :meth:`on_authenticate` with the
    answer. ``session_lifetime_ms`` is the broker's (KIP-368; 0: none)."""

    def __init__(self, client: SaslClient) -> None:
        self.client = client
        self._challenge: bytes | None = None
        self._started = False
        self.session_lifetime_ms = 0

    @property
    def mechanism(self) -> str:
        return self.client.mechanism

    def on_handshake(self, error_code: int, mechanisms: tuple[str, ...] | list[str]) -> None:
        if error_code == ErrorCode.unsupported_sasl_mechanism:
            raise UnsupportedSaslMechanismError(
                f"Client SASL mechanism '{self.mechanism}' not enabled in the server, "
                f"enabled mechanisms are {list(mechanisms)}"
            )
        if error_code != ErrorCode.none:
            raise SaslAuthenticationError(
                f"SaslHandshake failed with {ErrorCode(error_code).name.upper()}"
            )

    def next_token(self) -> bytes | None:
        """The next token to send; None once authenticated."""
        if self._started and self.client.complete:
            return None
        token = self.client.evaluate_challenge(self._challenge if self._started else None)
        self._started = True
        return token

    def on_authenticate(
        self, error_code: int, error_message: str | None, auth_bytes: bytes, lifetime_ms: int
    ) -> None:
        if error_code != ErrorCode.none:
            raise SaslAuthenticationError(
                error_message or f"SaslAuthenticate failed with {ErrorCode(error_code).name}"
            )
        self._challenge = bytes(auth_bytes)
        self.session_lifetime_ms = lifetime_ms
