"""JAAS configuration text as Kafka reads it from ``sasl.jaas.config``.

Kafka takes a login module's configuration inline, in the JAAS file syntax::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

one login module (its class name), a control flag (``required``, ``requisite``,
``sufficient`` or ``optional``) and ``key=value`` options, values quoted or bare, ended by
``;``. :func:`parse_jaas_config` reads that text into a :class:`JaasConfig`; the broker
takes the users of PLAIN from its ``user_<name>`` options and its own inter-broker
identity from ``username`` / ``password``; a client its credentials.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CONTROL_FLAGS", "JaasConfig", "JaasConfigError", "parse_jaas_config"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class JaasConfigError(ValueError):
    """``sasl.jaas.config`` cannot be parsed; the message says where."""


@dataclass(frozen=True, slots=True)
class JaasConfig:
    """One login module's entry: its class, control flag and options."""

    login_module: str
    control_flag: str = "required"
    options: dict[str, str] = field(default_factory=dict)

    @property
    def users(self) -> dict[str, str]:
        """PlainLoginModule's users: ``user_alice="secret"`` -> {"alice": "secret"}."""
        return {
            key[len("user_") :]: value
            for key, value in self.options.items()
            if key.startswith("user_") and len(key) > len("user_")
        }


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, quoted) pairs: words, quoted strings, ``=`` and ``;``."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c in "\"'":
            end = i + 1
            value: list[str] = []
            while end < n and text[end] != c:
                if text[end] == "\\" and end + 1 < n:
                    end += 1
                value.append(text[end])
                end += 1
            if end >= n:
                raise JaasConfigError(f"unterminated quoted value at position {i}")
            out.append(("".join(value), True))
            i = end + 1
        else:
            end = i
            while end < n and not text[end].isspace() and text[end] not in "=;\"'":
                end += 1
            out.append((text[i:end], False))
            i = end
    return out


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse ``sasl.jaas.config``: exactly one login module entry, ended by ``;``.

    :raises JaasConfigError: not of that form (the message names what is wrong).
    """
    tokens = _tokens(text)
    if not tokens:
        raise JaasConfigError("sasl.jaas.config is empty: expected one login module entry")
    module, quoted = tokens[0]
    if quoted or module in "=;":
        raise JaasConfigError(f"expected a login module class name, not {module!r}")
    if len(tokens) < 2 or tokens[1][0].lower() not in CONTROL_FLAGS or tokens[1][1]:
        flags = ", ".join(CONTROL_FLAGS)
        raise JaasConfigError(f"expected a control flag ({flags}) after {module}")
    flag = tokens[1][0].lower()
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i] != (";", False):
        key, key_quoted = tokens[i]
        if key_quoted or key in "=;":
            raise JaasConfigError(f"expected an option name, not {key!r}")
        if i + 2 >= len(tokens) or tokens[i + 1] != ("=", False):
            raise JaasConfigError(f"expected {key}=value in sasl.jaas.config")
        value, _ = tokens[i + 2]
        options[key] = value
        i += 3
    if i >= len(tokens):
        raise JaasConfigError("sasl.jaas.config must end with ';'")
    if i + 1 != len(tokens):
        raise JaasConfigError(
            "sasl.jaas.config must contain exactly one login module entry, ended by ';'"
        )
    return JaasConfig(module, flag, options)
