"""One connection's SASL state machine, as Kafka's ``SaslServerAuthenticator``, with no I/O.

On a SASL_PLAINTEXT or SASL_SSL listener a connection must authenticate before anything
else is served. The network shell hands each request (or raw token) to
:meth:`SaslServerAuthenticator.receive` until :attr:`~SaslServerAuthenticator.complete`,
and does what the returned :class:`Step` says: pass an ApiVersions request on to its
handler, send the answer given, take the principal once authenticated, or — on failure
— send the answer after ``connection.failed.authentication.delay.ms`` and close.

The states are Kafka's:

* ``INITIAL_REQUEST`` / ``HANDSHAKE_OR_VERSIONS_REQUEST``: ApiVersions (once) or
  SaslHandshake;
* ``HANDSHAKE_REQUEST``: SaslHandshake. An enabled mechanism is answered with the
  enabled list and the exchange begins; another gets UNSUPPORTED_SASL_MECHANISM with the
  list, and the connection closes;
* ``AUTHENTICATE``: after SaslHandshake v1, SaslAuthenticate requests carry the tokens
  (errors come back as SASL_AUTHENTICATION_FAILED with a message); after v0 the tokens
  come raw, each a size-prefixed frame without a request header, and so do the
  challenges (a failure can only close the connection);
* ``COMPLETE``: the session has the principal ``User:<authorization id>``.

Any other request before ``COMPLETE`` fails the authentication (Kafka's
IllegalSaslStateException): the connection is closed, without an answer.

**Re-authentication (KIP-368).** The session lasts ``connections.max.reauth.ms`` (per
mechanism: ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``), or until the
credential expires (an OAuth token's ``exp``) if sooner; SaslAuthenticate v1+ tells the
client that lifetime (``session_lifetime_ms``). A client that used v1+ re-authenticates
by sending SaslHandshake again on the same connection (:meth:`begin_reauthentication`),
with the same mechanism and to the same principal. Once the session has expired, any
request other than that SaslHandshake closes the connection
(:meth:`session_expired`), as Kafka's SocketServer does.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from kio.schema.errors import ErrorCode

from sluice.base.clock import Clock
from sluice.protocol import ApiKey, Request
from sluice.protocol.build import build
from sluice.security import KafkaPrincipal

from . import SaslAuthenticationException, SaslException, SaslServer

if TYPE_CHECKING:  # every version has the same fields
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

__all__ = ["SaslServerAuthenticator", "SaslServerConfig", "SaslState", "Step", "StepKind"]

log = logging.getLogger(__name__)

_API_VERSIONS: Final = int(ApiKey.API_VERSIONS)
_HANDSHAKE: Final = int(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE: Final = int(ApiKey.SASL_AUTHENTICATE)


class SaslState(enum.Enum):
    INITIAL_REQUEST = enum.auto()
    HANDSHAKE_OR_VERSIONS_REQUEST = enum.auto()
    HANDSHAKE_REQUEST = enum.auto()
    AUTHENTICATE = enum.auto()
    REAUTH_BAD_MECHANISM = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class StepKind(enum.Enum):
    SERVE = enum.auto()
    """Hand the request to its API handler (ApiVersions), then carry on."""
    RESPOND = enum.auto()
    """Send :attr:`Step.response` (or :attr:`Step.raw`); the exchange goes on."""
    AUTHENTICATED = enum.auto()
    """Send the answer; the connection's session now has :attr:`Step.principal`."""
    FAILED = enum.auto()
    """Send the answer (if any) after the failed-authentication delay, then close."""


@dataclass(frozen=True, slots=True)
class Step:
    """What the network shell does with a request or token during authentication."""

    kind: StepKind
    response: Any = None
    """A kio response for the request, or None."""
    raw: bytes | None = None
    """A raw challenge to send, size-prefixed (after SaslHandshake v0)."""
    principal: KafkaPrincipal | None = None
    message: str = ""
    """Why the authentication failed (for the broker's log)."""


_SERVE: Final = Step(StepKind.SERVE)


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    """A listener's SASL settings: its enabled mechanisms (in order), a factory of each
    mechanism's server, and each mechanism's ``connections.max.reauth.ms`` (0: none)."""

    enabled_mechanisms: Sequence[str]
    servers: Mapping[str, Callable[[], SaslServer]]
    max_reauth_ms: Mapping[str, int]

    def __post_init__(self) -> None:
        if not self.enabled_mechanisms:
            raise ValueError("no SASL mechanism is enabled")
        missing = [m for m in self.enabled_mechanisms if m not in self.servers]
        if missing:
            raise ValueError(f"no SASL server for mechanism(s) {', '.join(missing)}")


class SaslServerAuthenticator:
    """One connection's authentication (see the module)."""

    __slots__ = (
        "_clock",
        "_config",
        "_expires_ns",
        "_previous_mechanism",
        "_principal",
        "_server",
        "client_supports_reauthentication",
        "mechanism",
        "raw_tokens",
        "reauthentications",
        "state",
    )  # fmt: skip

    def __init__(self, config: SaslServerConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self.state = SaslState.INITIAL_REQUEST
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self.raw_tokens = False
        """Tokens come as raw frames (after SaslHandshake v0): the shell hands them to
        :meth:`receive_token`."""
        self._principal: KafkaPrincipal | None = None
        self._expires_ns: int | None = None  # when the session expires (monotonic ns)
        self._previous_mechanism: str | None = None  # while re-authenticating
        self.client_supports_reauthentication = False
        """The client used SaslAuthenticate v1 or later (KIP-368)."""
        self.reauthentications = 0
        """Re-authentications that succeeded on this connection."""

    # -- state ---------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def principal(self) -> KafkaPrincipal | None:
        return self._principal

    @property
    def reauthenticating(self) -> bool:
        return self._previous_mechanism is not None

    @property
    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def session_expired(self) -> bool:
        """The authenticated session has outlived its lifetime (KIP-368): the connection
        must re-authenticate before any other request, or be closed."""
        expires = self._expires_ns
        return expires is not None and self._clock.nanoseconds() >= expires

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake arrived on an authenticated connection: start re-authenticating
        if the client can (it used SaslAuthenticate v1+); False: it is an ordinary
        request (answered ILLEGAL_SASL_STATE by its API handler)."""
        if not self.complete or not self.client_supports_reauthentication:
            return False
        self._previous_mechanism = self.mechanism
        self._server = None
        self.raw_tokens = False
        self.state = SaslState.HANDSHAKE_REQUEST
        return True

    # -- input ---------------------------------------------------------------------------
    def receive(self, request: Request) -> Step:
        """A request arrived while not :attr:`complete`."""
        key = request.header.api_key
        state = self.state
        if state in (SaslState.INITIAL_REQUEST, SaslState.HANDSHAKE_OR_VERSIONS_REQUEST):
            if key == _API_VERSIONS:
                self.state = SaslState.HANDSHAKE_REQUEST
                return _SERVE
            if key == _HANDSHAKE:
                return self._handshake(request)
        elif state is SaslState.HANDSHAKE_REQUEST:
            if key == _HANDSHAKE:
                return self._handshake(request)
        elif state is SaslState.AUTHENTICATE and not self.raw_tokens:
            if key == _AUTHENTICATE:
                return self._authenticate(request)
        elif state is SaslState.REAUTH_BAD_MECHANISM and key == _AUTHENTICATE:
            message = (
                f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._previous_mechanism}'"
            )
            return self._fail(message, self._authenticate_error(request, message))
        return self.fail_unexpected(key)

    def fail_unexpected(self, api_key: int) -> Step:
        """A request other than the exchange's arrived before authentication completed
        (Kafka's IllegalSaslStateException): the authentication fails, with no answer."""
        phase = "SASL authentication" if self.state is SaslState.AUTHENTICATE else "SASL handshake"
        try:
            name = ApiKey(api_key).name
        except ValueError:
            name = str(api_key)
        return self._fail(f"Unexpected Kafka request of type {name} during {phase}.")

    def receive_token(self, token: bytes) -> Step:
        """A raw token arrived (:attr:`raw_tokens`): the next step of the exchange."""
        server = self._server
        if server is None or self.state is not SaslState.AUTHENTICATE:
            return self._fail("Unexpected SASL token")
        try:
            challenge = server.evaluate_response(token)
            if server.complete:
                principal = self._check_principal(server)
                self._session_lifetime_ms(server)
                return self._succeed(principal, raw=challenge)
        except SaslException as exc:
            return self._fail(str(exc))
        return Step(StepKind.RESPOND, raw=challenge)

    # -- the steps -----------------------------------------------------------------------
    def _handshake(self, request: Request) -> Step:
        body = cast("SaslHandshakeRequest", request.body)
        mechanism = body.mechanism
        enabled = list(self._config.enabled_mechanisms)
        if mechanism not in enabled:
            response = build(
                request.response_type, error_code=ErrorCode.unsupported_sasl_mechanism,
                mechanisms=enabled,
            )  # fmt: skip
            return self._fail(f"Unsupported SASL mechanism {mechanism}", response)
        response = build(request.response_type, error_code=ErrorCode.none, mechanisms=enabled)
        self.raw_tokens = request.header.api_version == 0
        self.mechanism = mechanism
        if self.reauthenticating and mechanism != self._previous_mechanism:
            self.state = SaslState.REAUTH_BAD_MECHANISM
        else:
            self._server = self._config.servers[mechanism]()
            self.state = SaslState.AUTHENTICATE
        return Step(StepKind.RESPOND, response)

    def _authenticate(self, request: Request) -> Step:
        server = self._server
        assert server is not None
        if request.header.api_version > 0:
            self.client_supports_reauthentication = True
        auth_bytes = cast("SaslAuthenticateRequest", request.body).auth_bytes
        try:
            challenge = server.evaluate_response(bytes(auth_bytes))
            if not server.complete:
                return Step(StepKind.RESPOND, self._authenticate_ok(request, challenge, 0))
            principal = self._check_principal(server)
        except SaslAuthenticationException as exc:
            return self._fail(str(exc), self._authenticate_error(request, str(exc)))
        except SaslException as exc:
            message = (
                f"Authentication failed during {self._text} due to invalid credentials with "
                f"SASL mechanism {self.mechanism}"
            )
            return self._fail(f"{message}: {exc}", self._authenticate_error(request, message))
        lifetime = self._session_lifetime_ms(server)
        return self._succeed(principal, self._authenticate_ok(request, challenge, lifetime))

    def _check_principal(self, server: SaslServer) -> KafkaPrincipal:
        principal = KafkaPrincipal("User", server.authorization_id)
        previous = self._principal
        if self.reauthenticating and previous is not None and previous != principal:
            raise SaslAuthenticationException(
                "Cannot change principals during re-authentication from "
                f"{previous.principal_type}.{previous.name}: "
                f"{principal.principal_type}.{principal.name}"
            )
        return principal

    def _session_lifetime_ms(self, server: SaslServer) -> int:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``: the session's
        lifetime, from ``connections.max.reauth.ms`` and the credential's expiry; sets
        when the session expires (none if neither applies)."""
        max_reauth = self._config.max_reauth_ms.get(server.mechanism, 0)
        credential_expiry = server.credential_expiration_ms
        clock = self._clock
        if credential_expiry is None and max_reauth <= 0:
            self._expires_ns = None
            return 0
        now_ms = clock.milliseconds()
        if credential_expiry is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = credential_expiry - now_ms
        else:
            lifetime = min(credential_expiry - now_ms, max_reauth)
        lifetime = max(lifetime, 0)
        self._expires_ns = clock.nanoseconds() + lifetime * 1_000_000
        return lifetime

    def _succeed(
        self, principal: KafkaPrincipal, response: Any = None, raw: bytes | None = None
    ) -> Step:
        if self.reauthenticating:
            self.reauthentications += 1
        self._principal = principal
        self._previous_mechanism = None
        self.raw_tokens = False
        self.state = SaslState.COMPLETE
        return Step(StepKind.AUTHENTICATED, response, raw, principal)

    def _fail(self, message: str, response: Any = None) -> Step:
        self.state = SaslState.FAILED
        self._server = None
        return Step(StepKind.FAILED, response, message=message)

    @staticmethod
    def _authenticate_ok(request: Request, challenge: bytes, lifetime_ms: int) -> Any:
        return build(
            request.response_type, error_code=ErrorCode.none, error_message=None,
            auth_bytes=challenge, session_lifetime=lifetime_ms,
        )  # fmt: skip

    @staticmethod
    def _authenticate_error(request: Request, message: str) -> Any:
        return build(
            request.response_type, error_code=ErrorCode.sasl_authentication_failed,
            error_message=message, auth_bytes=b"", session_lifetime=0,
        )  # fmt: skip
