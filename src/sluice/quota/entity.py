"""Quota entities and their configs as Kafka stores them, and the checks and filters of
AlterClientQuotas and DescribeClientQuotas (Kafka's ``ZkAdminManager``).

A quota applies to a user, a client id, or a (user, client id) pair, each named or the
default (``<default>``, Kafka's ``ConfigEntityName.Default``). Stored, an entity is a
path under ``/config`` — ``users/<user>``, ``clients/<client-id>``,
``users/<user>/clients/<client-id>`` — whose names are *sanitized* as Kafka's
``Sanitizer`` does (URL-encoded, ``*`` as ``%2A``, a space as ``%20``), so any principal or
client id is a valid znode name and ``<default>`` can never be one. Its config is a flat
``key -> value`` text map; other keys (a user's SCRAM credentials) live beside the quota
keys and are kept as they are.

Plain functions over plain data: no I/O.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLIENT_ID",
    "DEFAULT",
    "IP",
    "QUOTA_CONFIGS",
    "USER",
    "ClientQuotaEntity",
    "FilterComponent",
    "InvalidRequest",
    "UnsupportedEntityType",
    "alter_entity_config",
    "desanitize",
    "describe_quotas",
    "parse_entity",
    "quota_values",
    "sanitize",
]

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
"""Kafka's entity types (``ClientQuotaEntity.USER``, ``CLIENT_ID``, ``IP``)."""

DEFAULT: Final = "<default>"
"""The stored name of a default entity (Kafka's ``ConfigEntityName.Default``)."""

QUOTA_CONFIGS: Final[Mapping[str, str]] = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
"""The client quota keys and their types (Kafka's ``QuotaConfigs``)."""

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2
"""DescribeClientQuotas' match types: an exact name, the default, any named entity."""


class InvalidRequest(ValueError):
    """INVALID_REQUEST, with Kafka's message."""


class UnsupportedEntityType(ValueError):
    """UNSUPPORTED_VERSION: an entity type Kafka does not know."""


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoded (Java's ``URLEncoder``, which keeps
    letters, digits, ``.``, ``-``, ``_`` and ``*``), then ``*`` and ``+`` (a space) encoded."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E").replace("*", "%2A")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize``."""
    return urllib.parse.unquote(name)


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """A quota entity as stored: sanitized names or :data:`DEFAULT`; None where the
    entity has no such part."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client id or both")

    @property
    def path(self) -> str:
        """The path under ``/config``: ``users/u``, ``clients/c`` or ``users/u/clients/c``."""
        if self.user is None:
            return f"clients/{self.client_id}"
        if self.client_id is None:
            return f"users/{self.user}"
        return f"users/{self.user}/clients/{self.client_id}"

    @classmethod
    def from_path(cls, path: str) -> ClientQuotaEntity | None:
        """The entity of a path under ``/config`` (None: not a quota entity's)."""
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(user=parts[1])
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(client_id=parts[1])
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and all(parts):
            return cls(user=parts[1], client_id=parts[3])
        return None

    def components(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default), as the wire carries them."""
        out: list[tuple[str, str | None]] = []
        if self.user is not None:
            out.append((USER, _wire(self.user)))
        if self.client_id is not None:
            out.append((CLIENT_ID, _wire(self.client_id)))
        return out

    def __str__(self) -> str:
        parts = []
        for kind, name in self.components():
            parts.append(f"{kind}={DEFAULT if name is None else name}")
        return ", ".join(parts)


def _wire(stored: str) -> str | None:
    return None if stored == DEFAULT else desanitize(stored)


def parse_entity(components: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
    """The entity an AlterClientQuotas entry names, checked as Kafka checks it.

    :raises InvalidRequest: empty, an empty name, an unknown type, an IP entity (which
        Sluice does not serve) or an IP mixed with a user or client id.
    """
    user: str | None = None
    client_id: str | None = None
    ip = False
    seen = False
    for entity_type, name in components:
        seen = True
        stored = DEFAULT if name is None else sanitize(name)
        if entity_type == USER:
            user = stored
        elif entity_type == CLIENT_ID:
            client_id = stored
        elif entity_type == IP:
            ip = True
        else:
            raise InvalidRequest(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise InvalidRequest(f"Empty {entity_type} not supported")
    if not seen:
        raise InvalidRequest("Invalid empty client quota entity")
    if ip and (user is not None or client_id is not None):
        raise InvalidRequest(
            "Invalid quota entity combination, IP entity should not be used with "
            "user/client ID entity."
        )
    if ip:
        raise InvalidRequest("IP connection rate quotas are not supported by this broker")
    return ClientQuotaEntity(user, client_id)


def alter_entity_config(
    config: Mapping[str, str], ops: Iterable[tuple[str, float, bool]]
) -> dict[str, str]:
    """``config`` with AlterClientQuotas' ``(key, value, remove)`` ops applied, as
    Kafka's ``ZkAdminManager.alterClientQuotas`` applies them.

    :raises InvalidRequest: an unknown key, a LONG key given a fraction, a value that is
        not a finite positive number.
    """
    props = dict(config)
    for key, value, remove in ops:
        if remove:
            props.pop(key, None)
            continue
        kind = QUOTA_CONFIGS.get(key)
        if kind is None:
            raise InvalidRequest(f"Invalid configuration key {key}")
        if not math.isfinite(value) or value <= 0:
            raise InvalidRequest(f"Configuration {key} must be a positive number, not {value}")
        if kind == "DOUBLE":
            props[key] = repr(float(value))
        else:
            epsilon = 1e-6
            whole = int(value + epsilon)
            if abs(whole - value) > epsilon:
                raise InvalidRequest(f"Configuration {key} must be a {kind} value")
            props[key] = str(whole)
    return props


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a stored config, as numbers (others, and unreadable values,
    left out)."""
    out: dict[str, float] = {}
    for key, raw in config.items():
        if key in QUOTA_CONFIGS:
            try:
                out[key] = float(raw)
            except ValueError:
                continue
    return out


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One DescribeClientQuotas filter component."""

    entity_type: str
    match_type: int
    match: str | None


def _check_filter(
    components: Iterable[FilterComponent],
) -> tuple[FilterComponent | None, FilterComponent | None, FilterComponent | None]:
    user = client = ip = None
    for c in components:
        if c.entity_type == USER:
            if user is not None:
                raise InvalidRequest("Duplicate user filter component entity type")
            user = c
        elif c.entity_type == CLIENT_ID:
            if client is not None:
                raise InvalidRequest("Duplicate client filter component entity type")
            client = c
        elif c.entity_type == IP:
            if ip is not None:
                raise InvalidRequest("Duplicate ip filter component entity type")
            ip = c
        elif not c.entity_type:
            raise InvalidRequest("Unexpected empty filter component entity type")
        else:
            raise UnsupportedEntityType(f"Custom entity type '{c.entity_type}' not supported")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidRequest(f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise InvalidRequest(f"An exact match of {c.entity_type} needs a name")
    if ip is not None and (user is not None or client is not None):
        raise InvalidRequest(
            "Invalid entity filter component combination, IP filter component should not "
            "be used with user or clientId filter component."
        )
    return user, client, ip


def _matches(component: FilterComponent | None, stored: str | None, strict: bool) -> bool:
    if component is None:
        return stored is None or not strict
    if stored is None:
        return False
    if component.match_type == MATCH_SPECIFIED:
        return True
    if component.match_type == MATCH_DEFAULT:
        return stored == DEFAULT
    return stored != DEFAULT and desanitize(stored) == component.match


def describe_quotas(
    configs: Mapping[ClientQuotaEntity, Mapping[str, str]],
    components: Iterable[FilterComponent],
    strict: bool,
) -> dict[ClientQuotaEntity, dict[str, float]]:
    """The quotas of the entities ``components`` match (Kafka's
    ``ZkAdminManager.describeClientQuotas``): a component matches an exact name, the
    default or any named entity of its type; an entity type without a component matches
    anything unless ``strict``, then only entities without that part. Entities with no
    quota key are left out.

    :raises InvalidRequest: duplicate or empty types, a bad match type, IP mixed with
        user or client id.
    :raises UnsupportedEntityType: an unknown entity type.
    """
    user, client, ip = _check_filter(list(components))
    if ip is not None:
        return {}  # Sluice stores no IP quotas
    out: dict[ClientQuotaEntity, dict[str, float]] = {}
    for entity, config in sorted(configs.items(), key=lambda item: item[0].path):
        values = quota_values(config)
        if not values:
            continue
        if _matches(user, entity.user, strict) and _matches(client, entity.client_id, strict):
            out[entity] = values
    return out
