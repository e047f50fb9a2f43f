"""SASL/OAUTHBEARER (RFC 7628) on the broker, as Kafka's ``OAuthBearerSaslServer``.

The client's one message is ``n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]...^A``.
The token is checked by a validator:

* :class:`UnsecuredJwsValidator` — Kafka's default for development,
  ``OAuthBearerUnsecuredValidatorCallbackHandler``: an unsigned JWS (``{"alg":"none"}``,
  no signature) whose principal claim (``unsecuredValidatorPrincipalClaimName``,
  default ``sub``) names the user, whose ``exp`` has not passed (give or take
  ``unsecuredValidatorAllowableClockSkewMs``), and whose scope claim
  (``unsecuredValidatorScopeClaimName``, default ``scope``) holds every scope of
  ``unsecuredValidatorRequiredScope``. Anyone can forge such a token: it is for tests.
* :class:`JwksValidator` — Kafka's ``OAuthBearerValidatorCallbackHandler``: a JWT
  signed by one of the keys of a JWKS (``sasl.oauthbearer.jwks.endpoint.url``, a
  ``file:`` URL here), with the expected audience and issuer when configured, ``exp``
  in the future (``sasl.oauthbearer.clock.skew.seconds``), and the principal in
  ``sasl.oauthbearer.sub.claim.name``. PyJWT (with ``cryptography``) checks the
  signature and the registered claims.

A token that fails is answered, as Kafka does, with the challenge
``{"status":"invalid_token"}``; the client acknowledges it with ``^A`` and the exchange
fails with that JSON as the message (the reason is logged by the broker, not told).
The token's ``exp`` bounds the session (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from sluice.base.clock import Clock

from . import OAUTHBEARER, SaslAuthenticationException, SaslException

__all__ = [
    "JwksValidator",
    "OAuthBearerSaslServer",
    "OAuthBearerToken",
    "TokenValidator",
    "UnsecuredJwsValidator",
    "parse_client_initial_response",
    "unsecured_jws",
]

log = logging.getLogger(__name__)

_SEP: Final = "\x01"
_INITIAL: Final = re.compile(
    r"n,(?:a=(?P<authzid>(?:[\x02-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01"
    r"(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01",
    re.DOTALL,
)
_AUTH: Final = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class TokenValidationError(Exception):
    """The token is not accepted; the message says why (logged, not told)."""

    def __init__(self, message: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A validated token: its principal, its lifetime's end and its scope."""

    value: str
    principal_name: str
    lifetime_ms: int
    """When the token expires (epoch ms)."""
    scope: frozenset[str]


class TokenValidator(Protocol):
    """Checks a token (Kafka's ``OAuthBearerValidatorCallback`` handlers)."""

    def validate(self, token: str) -> OAuthBearerToken:
        """:raises TokenValidationError: the token is not accepted."""


def parse_client_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authorization id or "", extensions) of the client's message.

    :raises SaslException: not of RFC 7628's form, or no ``auth=Bearer <token>``.
    """
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslException("Invalid OAUTHBEARER client first message: not UTF-8") from None
    match = _INITIAL.fullmatch(text)
    if match is None:
        raise SaslException("Invalid OAUTHBEARER client first message")
    authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    pairs: dict[str, str] = {}
    for item in match["kvpairs"].split(_SEP):
        if item:
            key, _, value = item.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslException("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslException("Invalid OAuth token format in the 'auth' key")
    if auth_match["scheme"].lower() != "bearer":
        raise SaslException(f"Invalid scheme in OAuth token: {auth_match['scheme']}")
    return auth_match["token"], authzid, pairs


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange with a :class:`TokenValidator`."""

    __slots__ = ("_error", "_token", "_validator")

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None  # the JSON challenge sent, awaiting ^A

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("the OAUTHBEARER exchange has not completed")
        return self._token.principal_name

    @property
    def credential_expiration_ms(self) -> int | None:
        return None if self._token is None else self._token.lifetime_ms

    @property
    def token(self) -> OAuthBearerToken | None:
        return self._token

    def evaluate_response(self, response: bytes) -> bytes:
        if response == b"\x01" and self._error is not None:
            raise SaslAuthenticationException(self._error)
        self._error = None
        token_value, authzid, _extensions = parse_client_initial_response(response)
        try:
            token = self._validator.validate(token_value)
        except TokenValidationError as exc:
            log.info("OAUTHBEARER token rejected: %s", exc)
            status = "invalid_token" if exc.scope is None else "insufficient_scope"
            error = f'{{"status":"{status}"'
            if exc.scope is not None:
                error += f', "scope":"{exc.scope}"'
            self._error = error + "}"
            return self._error.encode("utf-8")
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationException(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({token.principal_name})"
            )
        self._token = token
        return b""


# -- unsecured JWS (development) ------------------------------------------------------


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        message = f"the token's {what} is not base64url-encoded JSON: {exc}"
        raise TokenValidationError(message) from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"the token's {what} is not a JSON object")
    return value


def unsecured_jws(claims: Mapping[str, Any]) -> str:
    """An unsecured JWS of ``claims`` (``{"alg":"none"}``, empty signature), as Kafka's
    ``OAuthBearerUnsecuredLoginCallbackHandler`` makes for ``unsecuredLoginStringClaim_sub``."""

    def enc(obj: Any) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{enc({'alg': 'none'})}.{enc(dict(claims))}."


def _scope_of(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise TokenValidationError(f"the scope claim {name!r} is neither a string nor a list of them")


def _check_times(claims: Mapping[str, Any], now_ms: int, skew_ms: int) -> int:
    """The token's expiry (epoch ms), checked against now."""
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise TokenValidationError("the token has no numeric 'exp' (expiration time) claim")
    exp_ms = int(exp * 1000)
    if now_ms - skew_ms >= exp_ms:
        raise TokenValidationError(
            f"the token expired: 'exp' {exp_ms} ms is not after now ({now_ms} ms, "
            f"allowing {skew_ms} ms of clock skew)"
        )
    iat = claims.get("iat")
    if iat is not None:
        if isinstance(iat, bool) or not isinstance(iat, int | float):
            raise TokenValidationError("the token's 'iat' claim is not a number")
        if exp_ms <= int(iat * 1000):
            raise TokenValidationError("the token's 'exp' is not after its 'iat'")
    return exp_ms


class UnsecuredJwsValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``, from its JAAS options."""

    __slots__ = ("_clock", "_principal_claim", "_required_scope", "_scope_claim", "_skew_ms")

    def __init__(self, options: Mapping[str, str], clock: Clock) -> None:
        self._clock = clock
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        required = options.get("unsecuredValidatorRequiredScope", "")
        self._required_scope = frozenset(s for s in re.split(r"[ ,]+", required) if s)
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            self._skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"invalid unsecuredValidatorAllowableClockSkewMs {skew!r}: not an integer"
            ) from None
        if self._skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError("an unsecured JWS has three dot-separated parts")
        header = _b64url_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenValidationError("an unsecured JWS must have 'alg' none in its header")
        if parts[2]:
            raise TokenValidationError("an unsecured JWS must have an empty signature")
        claims = _b64url_json(parts[1], "payload")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(
                f"the token has no string principal claim {self._principal_claim!r}"
            )
        exp_ms = _check_times(claims, self._clock.milliseconds(), self._skew_ms)
        scope = _scope_of(claims, self._scope_claim)
        missing = self._required_scope - scope
        if missing:
            raise TokenValidationError(
                f"the token's scope lacks {sorted(missing)}", scope=" ".join(sorted(missing))
            )
        return OAuthBearerToken(token, principal, exp_ms, scope)


# -- signed JWTs against a JWKS ---------------------------------------------------------

_ASYMMETRIC: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def load_jwks(url: str) -> dict[str, Any]:
    """The JWKS of ``sasl.oauthbearer.jwks.endpoint.url`` (``file:`` URLs).

    :raises ValueError: another scheme, or the file is not a JWKS.
    """
    if not url.startswith("file:"):
        raise ValueError(
            f"sasl.oauthbearer.jwks.endpoint.url {url!r}: only file: URLs are supported"
        )
    path = Path(url.removeprefix("file://") if url.startswith("file://") else url[5:])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the JWKS at {url}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError(f"the file at {url} is not a JWKS (no 'keys' list)")
    return data


class JwksValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler``: signed JWTs, keys from a JWKS."""

    __slots__ = ("_audience", "_clock", "_issuer", "_keys", "_scope_claim", "_skew_s",
                 "_sub_claim")  # fmt: skip

    def __init__(
        self,
        jwks: Mapping[str, Any],
        clock: Clock,
        *,
        expected_audience: Iterable[str] = (),
        expected_issuer: str | None = None,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_seconds: int = 30,
    ) -> None:
        import jwt

        self._keys: dict[str | None, Any] = {}
        for jwk in jwt.PyJWKSet.from_dict(dict(jwks)).keys:
            if jwk.key_id in self._keys:
                raise ValueError(f"the JWKS holds two keys with kid {jwk.key_id!r}")
            self._keys[jwk.key_id] = jwk
        self._clock = clock
        self._audience = list(expected_audience)
        self._issuer = expected_issuer
        self._sub_claim = sub_claim_name
        self._scope_claim = scope_claim_name
        self._skew_s = clock_skew_seconds

    def validate(self, token: str) -> OAuthBearerToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"not a JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in _ASYMMETRIC:
            raise TokenValidationError(f"the JWT's algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        jwk = self._keys.get(kid)
        if jwk is None and kid is None and len(self._keys) == 1:
            jwk = next(iter(self._keys.values()))
        if jwk is None:
            raise TokenValidationError(f"no key in the JWKS has kid {kid!r}")
        now_s = self._clock.milliseconds() / 1000
        try:
            claims = jwt.decode(
                token, jwk.key, algorithms=[alg],
                audience=self._audience or None, issuer=self._issuer,
                leeway=self._skew_s,
                options={"require": ["exp"], "verify_aud": bool(self._audience),
                         "verify_iat": False, "verify_nbf": False, "verify_exp": False},
            )  # fmt: skip
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"the JWT is not valid: {exc}") from None
        # exp and nbf against the broker's clock rather than PyJWT's reading of the system's
        exp_ms = _check_times(claims, int(now_s * 1000), self._skew_s * 1000)
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf - self._skew_s > now_s:
            raise TokenValidationError("the JWT is not valid yet ('nbf')")
        principal = claims.get(self._sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"the JWT has no string claim {self._sub_claim!r}")
        return OAuthBearerToken(token, principal, exp_ms, _scope_of(claims, self._scope_claim))
