"""``AclAuthorizer``: Kafka's ACL authorizer, sans I/O.

The authorizer holds every ACL in memory (Kafka's ``aclCache``) and decides, for a
principal connecting from a host, whether an operation on a resource is allowed, with
Kafka's rules:

* a super user (``super.users``, semicolon-separated principals) may do anything;
* the ACLs that apply to a resource are those of its literal name, of the literal
  wildcard ``*`` of its type, and of every PREFIXED pattern its name starts with;
* if none applies, the operation is allowed only when ``allow.everyone.if.no.acl.found``
  is true;
* otherwise a matching DENY (principal or ``User:*``, host or ``*``, the operation or
  ALL) refuses it, whatever else allows it;
* otherwise a matching ALLOW is needed, where an ALLOW of READ, WRITE, DELETE or ALTER
  also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS, and ALL
  allows every operation.

:meth:`AclAuthorizer.authorize_by_resource_type` answers whether a principal may do an
operation on *some* resource of a type (Kafka's ``authorizeByResourceType``, KIP-679:
IDEMPOTENT_WRITE is implied by WRITE on any topic).

Decisions are cached per (principal, host, operation, resource) until the ACLs next
change, so that the produce and fetch paths cost one dictionary lookup per topic. The
ACLs change through :meth:`create_acls` and :meth:`delete_acls` (written through the
:class:`AclStore` first), or when the store reports another broker's change
(:meth:`apply_change`). Readers on the event loop and writers on other threads share
no lock: a change builds a new index and swaps it in, then drops the decision cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from sluice.security import KafkaPrincipal
from sluice.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    to_32_bit_field,
)

__all__ = [
    "ACL_AUTHORIZER",
    "AUTHORIZER_CLASS_NAMES",
    "STANDARD_AUTHORIZER",
    "AclAuthorizer",
    "AclStore",
    "Acls",
    "parse_super_users",
]

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASS_NAMES = (ACL_AUTHORIZER, STANDARD_AUTHORIZER)
"""The ``authorizer.class.name`` values Sluice serves; both are this authorizer."""

Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]
"""Every resource pattern with ACLs, and its entries."""

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
         AclOperation.ALTER, AclOperation.ALL}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL}
    ),
}  # fmt: skip
"""The ALLOWed operations that allow an operation, where more than itself and ALL."""

_CACHE_MAX = 100_000
"""Decisions kept before the cache starts again (a bound on memory, not a tuning)."""


def parse_super_users(text: str) -> frozenset[KafkaPrincipal]:
    """``super.users``: ``User:admin;User:ops`` (ValueError for an entry that is no
    ``Type:name``)."""
    return frozenset(KafkaPrincipal.parse(item.strip()) for item in text.split(";") if item.strip())


class AclStore(Protocol):
    """Where the ACLs live: a single node's file, a cluster's ZooKeeper."""

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every stored pattern with its entries."""
        ...

    def load_one(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """One pattern's stored entries (empty if none)."""
        ...

    def update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Replace ``pattern``'s stored entries by ``change(current)`` atomically (and
        announce it to the other brokers); return what is stored now. Blocking."""
        ...


@dataclass(frozen=True, slots=True)
class _Index:
    """The ACLs as the decisions read them; replaced whole on each change."""

    acls: dict[ResourcePattern, frozenset[AccessControlEntry]]
    literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]]
    prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]]

    @classmethod
    def of(cls, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> _Index:
        literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        for pattern, entries in acls.items():
            if pattern.pattern_type == PatternType.LITERAL:
                literal[(pattern.resource_type, pattern.name)] = entries
            else:
                prefixed.setdefault(pattern.resource_type, {})[pattern.name] = entries
        return cls(acls, literal, prefixed)

    def matching(
        self, resource_type: ResourceType, name: str
    ) -> list[frozenset[AccessControlEntry]]:
        """The entries of every pattern that applies to the resource."""
        found: list[frozenset[AccessControlEntry]] = []
        literal = self.literal
        if (entries := literal.get((resource_type, name))) is not None:
            found.append(entries)
        if name != WILDCARD_RESOURCE and (
            (entries := literal.get((resource_type, WILDCARD_RESOURCE))) is not None
        ):
            found.append(entries)
        prefixes = self.prefixed.get(resource_type)
        if prefixes:
            for end in range(1, len(name) + 1):
                if (entries := prefixes.get(name[:end])) is not None:
                    found.append(entries)
        return found


def _applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (
        host,
        WILDCARD_HOST,
    )


class AclAuthorizer:
    """The ACLs and the decisions (see the module)."""

    __slots__ = ("_allow_everyone", "_cache", "_index", "_store", "_super_users", "_write_lock")

    def __init__(
        self,
        store: AclStore,
        *,
        super_users: Iterable[KafkaPrincipal] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._store = store
        self._super_users = frozenset(super_users)
        self._allow_everyone = allow_everyone_if_no_acl_found
        self._index = _Index.of({})
        self._cache: dict[tuple[KafkaPrincipal, str, AclOperation, ResourceType, str], bool] = {}
        self._write_lock = threading.Lock()

    def load(self) -> None:
        """Read every ACL from the store (blocking)."""
        acls = {p: e for p, e in self._store.load().items() if e}
        with self._write_lock:
            self._swap(_Index.of(acls))

    # -- decisions ---------------------------------------------------------------------
    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the
        resource (a literal name)."""
        key = (principal, host, operation, resource_type, name)
        cache = self._cache  # before the index: a change swaps the index first
        decision = cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[key] = decision
        return decision

    def _decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self._super_users:
            return True
        matching = self._index.matching(resource_type, name)
        if not any(matching):
            return self._allow_everyone
        who = str(principal)
        deny, allow = AclPermissionType.DENY, AclPermissionType.ALLOW
        denying = (operation, AclOperation.ALL)
        for entries in matching:
            for e in entries:
                if e.permission_type == deny and e.operation in denying and _applies(e, who, host):
                    return False
        allowing = _IMPLIED_BY.get(operation) or frozenset(denying)
        return any(
            e.permission_type == allow and e.operation in allowing and _applies(e, who, host)
            for entries in matching
            for e in entries
        )

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether some resource of ``resource_type`` allows ``operation`` (Kafka's
        ``Authorizer.authorizeByResourceType``): an ALLOW literal or prefix that no DENY
        of the same name or of a shorter prefix overrides; a DENY of ``*`` refuses all."""
        # As Kafka: a name no ACL can have, so that super users and the no-ACL rule apply
        # whatever DENY exists.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        who = str(principal)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for pattern, entries in self._index.acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if e.operation not in (operation, AclOperation.ALL) or not _applies(e, who, host):
                    continue
                literal = pattern.pattern_type == PatternType.LITERAL
                if e.permission_type == AclPermissionType.DENY:
                    if literal and pattern.name == WILDCARD_RESOURCE:
                        return False
                    (deny_literal if literal else deny_prefixed).add(pattern.name)
                elif e.permission_type == AclPermissionType.ALLOW:
                    allow.append((pattern.pattern_type, pattern.name))
        if (PatternType.LITERAL, WILDCARD_RESOURCE) in allow:
            return True
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The ``authorized_operations`` bit field: the resource type's operations this
        principal may do on the resource."""
        return to_32_bit_field(
            {
                op
                for op in SUPPORTED_OPERATIONS[resource_type]
                if self.authorize(principal, host, op, resource_type, name)
            }
        )

    # -- the ACLs ------------------------------------------------------------------------
    def acls(self, filter_: AclBindingFilter) -> list[AclBinding]:
        """The bindings the filter matches."""
        return [
            AclBinding(pattern, entry)
            for pattern, entries in self._index.acls.items()
            if filter_.pattern.matches(pattern)
            for entry in sorted(entries, key=_entry_order)
            if filter_.entry.matches(entry)
        ]

    def create_acls(self, bindings: list[AclBinding]) -> list[Exception | None]:
        """Add the bindings (blocking: written to the store first); per binding None or
        the error (InvalidAclError for one Kafka refuses)."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            try:
                binding.validate()
            except InvalidAclError as exc:
                results[i] = exc
                continue
            by_pattern.setdefault(binding.pattern, []).append(i)
        with self._write_lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    stored = self._store.update(pattern, new.union)
                except Exception as exc:  # the store failed: these bindings are not added
                    for i in indexes:
                        results[i] = exc
                    continue
                self._apply(pattern, stored)
        return results

    def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[list[tuple[AclBinding, Exception | None]]]:
        """Remove the bindings each filter matches (blocking); per filter, the bindings it
        deleted, each with None or the store's error. A binding that several filters
        match is reported under the first, as Kafka does."""
        owner: dict[AclBinding, int] = {}
        failed: dict[AclBinding, Exception] = {}
        with self._write_lock:
            for pattern in list(self._index.acls):
                applicable = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
                if not applicable:
                    continue
                deleting: list[AclBinding] = []

                def change(
                    current: frozenset[AccessControlEntry],
                    pattern: ResourcePattern = pattern,
                    applicable: list[tuple[int, AclBindingFilter]] = applicable,
                    deleting: list[AclBinding] = deleting,
                ) -> frozenset[AccessControlEntry]:
                    deleting.clear()
                    keep = set(current)
                    for entry in current:
                        for i, f in applicable:
                            if f.entry.matches(entry):
                                binding = AclBinding(pattern, entry)
                                owner.setdefault(binding, i)
                                deleting.append(binding)
                                keep.discard(entry)
                                break
                    return frozenset(keep)

                try:
                    stored = self._store.update(pattern, change)
                except Exception as exc:
                    for binding in deleting:
                        failed.setdefault(binding, exc)
                    continue
                self._apply(pattern, stored)
        results: list[list[tuple[AclBinding, Exception | None]]] = [[] for _ in filters]
        for binding, i in owner.items():
            results[i].append((binding, failed.get(binding)))
        return results

    def apply_change(self, pattern: ResourcePattern) -> None:
        """Another broker changed ``pattern``'s ACLs: read them from the store."""
        stored = self._store.load_one(pattern)
        with self._write_lock:
            self._apply(pattern, stored)

    def reload(self) -> None:
        """Read every ACL again (a new ZooKeeper session may have missed changes)."""
        self.load()

    def _apply(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Under the write lock: ``pattern`` now has ``entries``."""
        acls = dict(self._index.acls)
        if entries:
            acls[pattern] = entries
        else:
            acls.pop(pattern, None)
        self._swap(_Index.of(acls))

    def _swap(self, index: _Index) -> None:
        self._index = index
        self._cache = {}

    @property
    def acl_count(self) -> int:
        return sum(len(e) for e in self._index.acls.values())


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, int(entry.operation), int(entry.permission_type))
