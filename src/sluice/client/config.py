"""Client configuration with Kafka's property names (Kafka's ``ConfigDef``).

A :class:`ConfigDef` lists the keys a client accepts, each with a type, a default
and an optional validator. :meth:`ConfigDef.parse` turns a user's dict (values
may be strings, as in a ``.properties`` file, or Python values) into typed
values, and rejects unknown keys with a :class:`~.errors.ConfigException` naming
the key (and the closest known one). Consumers and admin clients define their
own ``ConfigDef`` from the shared keys here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sluice.client.errors import ConfigException
from sluice.security.ssl_engine_factory import SSL_CLIENT_CONFIGS

__all__ = [
    "COMMON_CLIENT_CONFIGS",
    "ConfigDef",
    "ConfigKey",
    "at_least",
    "between",
    "one_of",
    "parse_bootstrap_servers",
]

Validator = Callable[[str, Any], None]

BOOL, INT, STRING, LIST, CALLABLE = "bool", "int", "string", "list", "callable"


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: its type, default, validator and documentation."""

    name: str
    type: str
    default: Any
    doc: str = ""
    validator: Validator | None = None
    required: bool = False


def at_least(minimum: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigException(f"Invalid value {value} for configuration {name}: "
                                  f"Value must be at least {minimum}")  # fmt: skip

    return check


def between(low: int, high: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigException(f"Invalid value {value} for configuration {name}: "
                                  f"Value must be in [{low}, {high}]")  # fmt: skip

    return check


def one_of(*choices: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                                  f"String must be one of: {', '.join(choices)}")  # fmt: skip

    return check


def _convert(key: ConfigKey, value: Any) -> Any:
    if value is None:
        return None
    name = key.name
    if key.type == BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                              "Expected value to be either true or false")  # fmt: skip
    if key.type == INT:
        if isinstance(value, bool):
            raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                                  "Not a number")  # fmt: skip
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                                  "Not a number of type INT") from None  # fmt: skip
    if key.type == STRING:
        if isinstance(value, str):
            return value.strip()
        return str(value)
    if key.type == LIST:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        if isinstance(value, Iterable):
            return [str(item).strip() for item in value]
        raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                              "Expected a comma separated list")  # fmt: skip
    if key.type == CALLABLE:
        if not callable(value):
            raise ConfigException(f"Invalid value {value!r} for configuration {name}: "
                                  "Expected a callable")  # fmt: skip
        return value
    raise AssertionError(f"unknown config type {key.type}")  # pragma: no cover


class ConfigDef:
    """The keys one kind of client accepts."""

    def __init__(self, kind: str, keys: Iterable[ConfigKey]) -> None:
        self.kind = kind
        self.keys = {key.name: key for key in keys}

    def parse(self, props: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
        """Typed values for every key (defaults filled in) and the keys the user set.

        :raises ConfigException: an unknown key, a missing required key, a bad value.
        """
        values: dict[str, Any] = {}
        for name, raw in props.items():
            key = self.keys.get(name)
            if key is None:
                close = difflib.get_close_matches(str(name), self.keys, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigException(f"Unknown {self.kind} configuration {name!r}{hint}")
            values[name] = _convert(key, raw)
        for name, key in self.keys.items():
            if name not in values:
                if key.required:
                    raise ConfigException(
                        f'Missing required configuration "{name}" which has no default value.'
                    )
                values[name] = key.default
            if key.validator is not None:
                key.validator(name, values[name])
        return values, set(props)


def parse_bootstrap_servers(servers: list[str]) -> list[tuple[str, int]]:
    """``host:port`` strings (IPv6 as ``[::1]:9092``) to (host, port) pairs."""
    out = []
    for entry in servers:
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigException(f"Invalid url in bootstrap.servers: {entry}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigException("No resolvable bootstrap urls given in bootstrap.servers")
    return out


COMMON_CLIENT_CONFIGS: tuple[ConfigKey, ...] = (
    ConfigKey("bootstrap.servers", LIST, None, "host:port pairs to find the cluster",
              required=True),
    ConfigKey("client.id", STRING, "", "Sent with every request, for logs and quotas"),
    ConfigKey("request.timeout.ms", INT, 30_000, "Time to wait for a response",
              at_least(0)),
    ConfigKey("retry.backoff.ms", INT, 100, "Wait before retrying a failed request",
              at_least(0)),
    ConfigKey("retry.backoff.max.ms", INT, 1000, "Cap of the exponential retry backoff",
              at_least(0)),
    ConfigKey("reconnect.backoff.ms", INT, 50, "Wait before reconnecting", at_least(0)),
    ConfigKey("reconnect.backoff.max.ms", INT, 1000, "Cap of the reconnect backoff",
              at_least(0)),
    ConfigKey("socket.connection.setup.timeout.ms", INT, 10_000,
              "Time to wait for a connection to be established", at_least(0)),
    ConfigKey("metadata.max.age.ms", INT, 300_000, "Refresh metadata at least this often",
              at_least(0)),
    ConfigKey("send.buffer.bytes", INT, 131_072, "SO_SNDBUF (-1: OS default)", at_least(-1)),
    ConfigKey("receive.buffer.bytes", INT, 32_768, "SO_RCVBUF (-1: OS default)",
              at_least(-1)),
    ConfigKey("connections.max.idle.ms", INT, 540_000,
              "Accepted for compatibility; Sluice clients keep connections open",
              at_least(-1)),
    ConfigKey("security.protocol", STRING, "PLAINTEXT",
              "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    *(ConfigKey(s.name, LIST if s.type == "list" else STRING, s.default, s.doc)
      for s in SSL_CLIENT_CONFIGS),
    ConfigKey("sasl.mechanism", STRING, "GSSAPI",
              "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI is not supported)"),
    ConfigKey("sasl.jaas.config", STRING, None,
              "The login module's JAAS configuration: username and password (PLAIN, "
              "SCRAM), unsecuredLoginStringClaim_sub (OAUTHBEARER)"),
    ConfigKey("sasl.username", STRING, None, "librdkafka's name: the SASL user, without "
              "sasl.jaas.config"),
    ConfigKey("sasl.password", STRING, None, "librdkafka's name: the SASL password"),
)  # fmt: skip
"""Keys every Sluice client accepts (Kafka's CommonClientConfigs)."""
