"""A SASL listener's settings, read from the broker's configuration with Kafka's keys.

For a listener ``<l>`` (lower case in the keys, as Kafka writes them):

* ``listener.name.<l>.sasl.enabled.mechanisms`` (else ``sasl.enabled.mechanisms``): the
  mechanisms served, of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER;
* ``listener.name.<l>.<mechanism>.sasl.jaas.config``: the mechanism's login module.
  PLAIN takes its users from ``user_<name>="<password>"`` (required); SCRAM's users are
  the stored credentials (AlterUserScramCredentials); OAUTHBEARER's options configure
  the unsecured validator. ``username`` / ``password`` (PLAIN, SCRAM) are this broker's
  own credentials when it connects to others over the listener;
* ``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` (else
  ``connections.max.reauth.ms``): the session lifetime (KIP-368);
* ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` =
  Kafka's ``OAuthBearerValidatorCallbackHandler``: signed JWTs against
  ``sasl.oauthbearer.jwks.endpoint.url`` (with ``sasl.oauthbearer.expected.audience``,
  ``.expected.issuer``, ``.sub.claim.name``, ``.scope.claim.name``,
  ``.clock.skew.seconds``, each also per listener); unset: the unsecured validator.

Everything is checked at start: an unknown mechanism, a missing or malformed JAAS
configuration, an unreadable JWKS stop the broker with a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.config import BrokerConfig, ConfigError

from . import MECHANISMS, OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SaslServer
from .authenticator import SaslServerConfig
from .credential_store import ScramCredentialCache
from .jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    JaasConfigError,
    parse_jaas_config,
)
from .oauthbearer import (
    JwksValidator,
    OAuthBearerSaslServer,
    TokenValidator,
    UnsecuredJwsValidator,
    load_jwks,
)
from .plain import PlainSaslServer
from .scram import ScramSaslServer

__all__ = ["OAUTH_VALIDATOR_CLASSES", "SaslListenerSettings", "sasl_listener_settings"]

OAUTH_VALIDATOR_CLASSES: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
"""Kafka's class names (3.4+ and older) of the signed-JWT validator."""

_LOGIN_MODULES: Final = {
    PLAIN: PLAIN_LOGIN_MODULE,
    SCRAM_SHA_256: SCRAM_LOGIN_MODULE,
    SCRAM_SHA_512: SCRAM_LOGIN_MODULE,
    OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE,
}


@dataclass(frozen=True, slots=True)
class JwksSettings:
    jwks: Mapping[str, Any]
    expected_audience: tuple[str, ...]
    expected_issuer: str | None
    sub_claim_name: str
    scope_claim_name: str
    clock_skew_seconds: int


@dataclass(frozen=True, slots=True)
class SaslListenerSettings:
    """One SASL listener's mechanisms and their settings (see the module)."""

    listener_name: str
    enabled_mechanisms: tuple[str, ...]
    jaas: Mapping[str, JaasConfig] = field(default_factory=dict)
    """Mechanism -> its login module's configuration (where set)."""
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    jwks: JwksSettings | None = None
    """Set: OAUTHBEARER validates signed JWTs; None: unsecured JWS."""

    def server_config(self, credentials: ScramCredentialCache, clock: Clock) -> SaslServerConfig:
        """The authenticator's configuration: a server factory per enabled mechanism."""
        servers: dict[str, Callable[[], SaslServer]] = {}
        for mechanism in self.enabled_mechanisms:
            servers[mechanism] = self._factory(mechanism, credentials, clock)
        return SaslServerConfig(self.enabled_mechanisms, servers, dict(self.max_reauth_ms))

    def _factory(
        self, mechanism: str, credentials: ScramCredentialCache, clock: Clock
    ) -> Callable[[], SaslServer]:
        if mechanism == PLAIN:
            users = self.jaas[PLAIN].users
            return lambda: PlainSaslServer(users)
        if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
            lookup = credentials.lookup(mechanism)
            return lambda: ScramSaslServer(mechanism, lookup)
        validator: TokenValidator
        if self.jwks is not None:
            j = self.jwks
            validator = JwksValidator(
                j.jwks, clock, expected_audience=j.expected_audience,
                expected_issuer=j.expected_issuer, sub_claim_name=j.sub_claim_name,
                scope_claim_name=j.scope_claim_name, clock_skew_seconds=j.clock_skew_seconds,
            )  # fmt: skip
        else:
            jaas = self.jaas.get(OAUTHBEARER)
            validator = UnsecuredJwsValidator(jaas.options if jaas else {}, clock)
        return lambda: OAuthBearerSaslServer(validator)

    def client_credentials(self, mechanism: str) -> tuple[str, str] | None:
        """This broker's own ``username`` / ``password`` for ``mechanism`` (the JAAS
        configuration's options), for connecting to other brokers; None if unset."""
        jaas = self.jaas.get(mechanism)
        if jaas is None:
            return None
        user, password = jaas.options.get("username"), jaas.options.get("password")
        return None if user is None or password is None else (user, password)


def sasl_listener_settings(config: BrokerConfig, listener_name: str) -> SaslListenerSettings:
    """The SASL settings of ``listener_name``; ConfigError for anything wrong."""
    prefix = f"listener.name.{listener_name.lower()}."
    overrides = config.listener_overrides(listener_name)
    enabled = tuple(config.for_listener(listener_name, "sasl.enabled.mechanisms") or ())
    key = f"{prefix}sasl.enabled.mechanisms"
    if not enabled:
        raise ConfigError(f"{key}: no SASL mechanism is enabled on listener {listener_name}")
    for mechanism in enabled:
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"{key} (or sasl.enabled.mechanisms): mechanism {mechanism} is not supported "
                f"on listener {listener_name}; one of {', '.join(MECHANISMS)}"
            )
    jaas: dict[str, JaasConfig] = {}
    reauth: dict[str, int] = {}
    for mechanism in enabled:
        lower = mechanism.lower()
        text = overrides.get(f"{lower}.sasl.jaas.config")
        if text is not None:
            try:
                parsed = parse_jaas_config(text)
            except JaasConfigError as exc:
                raise ConfigError(f"{prefix}{lower}.sasl.jaas.config: {exc}") from None
            if parsed.login_module != _LOGIN_MODULES[mechanism]:
                raise ConfigError(
                    f"{prefix}{lower}.sasl.jaas.config: {mechanism} takes "
                    f"{_LOGIN_MODULES[mechanism]}, not {parsed.login_module}"
                )
            jaas[mechanism] = parsed
        elif mechanism == PLAIN:
            raise ConfigError(
                f"{prefix}plain.sasl.jaas.config must be set: PLAIN's users are its "
                'user_<name>="<password>" options'
            )
        own = overrides.get(f"{lower}.connections.max.reauth.ms")
        reauth[mechanism] = int(own if own is not None else config["connections.max.reauth.ms"])
    handler = overrides.get("oauthbearer.sasl.server.callback.handler.class")
    jwks = None
    if handler is not None:
        if handler not in OAUTH_VALIDATOR_CLASSES:
            raise ConfigError(
                f"{prefix}oauthbearer.sasl.server.callback.handler.class: {handler} is not "
                f"supported; {OAUTH_VALIDATOR_CLASSES[0]} or unset"
            )
        jwks = _jwks_settings(config, listener_name)
    return SaslListenerSettings(listener_name, enabled, jaas, reauth, jwks)


def _jwks_settings(config: BrokerConfig, listener: str) -> JwksSettings:
    def get(key: str) -> Any:
        return config.for_listener(listener, key)

    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError(
            "sasl.oauthbearer.jwks.endpoint.url must be set for OAuthBearerValidatorCallbackHandler"
        )
    try:
        jwks = load_jwks(str(url))
        JwksValidator(jwks, SYSTEM_CLOCK)  # the keys parse
    except Exception as exc:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {exc}") from None
    return JwksSettings(
        jwks, tuple(get("sasl.oauthbearer.expected.audience") or ()),
        get("sasl.oauthbearer.expected.issuer"), get("sasl.oauthbearer.sub.claim.name"),
        get("sasl.oauthbearer.scope.claim.name"), int(get("sasl.oauthbearer.clock.skew.seconds")),
    )  # fmt: skip
