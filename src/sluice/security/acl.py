"""ACL bindings and filters, with Kafka's names, codes and matching rules.

An :class:`AclBinding` is a :class:`ResourcePattern` (what: a resource type, a name and
a pattern type) and an :class:`AccessControlEntry` (who, from where, may or may not do
what). The wire codes of the enums are Kafka's (``org.apache.kafka.common.acl`` and
``...resource``), and so are the names ZooKeeper's ACL znodes use (``Topic``, ``Read``,
``Allow``).

Filters (:class:`AclBindingFilter`) select bindings for DescribeAcls and DeleteAcls with
Kafka's semantics: ``ANY`` and a null field match anything; the pattern type ``MATCH``
selects every pattern that would apply to the named resource (the literal name, the
literal wildcard ``*`` and every prefix of it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sluice.security import KafkaPrincipal

__all__ = [
    "ANY_FILTER",
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "InvalidAclError",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "to_32_bit_field",
]

WILDCARD_RESOURCE = "*"
"""A literal resource name matching every resource of its type."""
WILDCARD_PRINCIPAL = "User:*"
"""An ACL principal matching every principal."""
WILDCARD_HOST = "*"
"""An ACL host matching every client address."""
CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""


class InvalidAclError(ValueError):
    """An ACL binding or filter Kafka refuses (INVALID_REQUEST on the wire)."""


def _camel(name: str) -> str:
    """``CLUSTER_ACTION`` -> ``ClusterAction``: how Kafka names enums in ZooKeeper JSON."""
    return "".join(part.capitalize() for part in name.split("_"))


class _KafkaEnum(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> _KafkaEnum:
        """The member of a wire code; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def parse(cls, text: str) -> _KafkaEnum:
        """From Kafka's spellings: ``READ``, ``Read``, ``read``, ``ClusterAction``,
        ``cluster-action``; ValueError otherwise."""
        key = text.strip().replace("-", "").replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")

    @property
    def camel_name(self) -> str:
        return _camel(self.name)


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_Op = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    ResourceType.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE),
    ResourceType.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                           _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_Op.DESCRIBE, _Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (_Op.DESCRIBE,),
    ResourceType.USER: (_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS),
}  # fmt: skip
"""The operations each resource type has, as Kafka's ``AclEntry.supportedOperations``:
the bits an ``authorized_operations`` field can hold."""


def to_32_bit_field(operations: set[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``op.code`` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource type with a literal name (``*``: all of that type) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def validate(self) -> None:
        """InvalidAclError unless a binding may hold this pattern (Kafka's checks)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAclError(f"invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"invalid pattern type {self.pattern_type.name}")
        if not self.name:
            raise InvalidAclError("Invalid empty resource name")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (a ``Type:name`` principal, ``User:*`` for all), from which host (``*`` for
    all), which operation, allowed or denied."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name})"
        )

    def validate(self) -> None:
        """InvalidAclError unless a binding may hold this entry."""
        try:
            KafkaPrincipal.parse(self.principal)
        except ValueError as exc:
            raise InvalidAclError(str(exc)) from None
        if not self.host:
            raise InvalidAclError("Invalid empty host")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAclError(f"invalid operation {self.operation.name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAclError(f"invalid permission type {self.permission_type.name}")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        self.pattern.validate()
        self.entry.validate()


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns: ``ANY`` type, a null name and ``ANY`` pattern type match
    everything; ``MATCH`` matches the patterns that apply to the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource named self.name
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def unknown_field(self) -> str | None:
        """What makes the filter unusable (an UNKNOWN value), or None."""
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches entries: null principal or host and ``ANY`` operation or permission match
    every entry; otherwise the values must be equal."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation not in (AclOperation.ANY, entry.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, entry.permission_type)

    def unknown_field(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN."
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def validate(self) -> None:
        """InvalidAclError for a filter with an UNKNOWN element, as Kafka refuses it."""
        problem = self.pattern.unknown_field() or self.entry.unknown_field()
        if problem is not None:
            raise InvalidAclError(f"The filter contains UNKNOWN elements: {problem}")


ANY_FILTER = AclBindingFilter()
"""Matches every binding."""
