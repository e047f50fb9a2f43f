"""Where ACLs are kept: a single node's file, a cluster's ZooKeeper (as Kafka's ZK mode).

A single node keeps every ACL in ``__sluice_acls.json`` in its first log directory,
rewritten whole on each change through a temporary file, fsynced and renamed over the
old one (:class:`FileAclStore`).

A cluster keeps them where Kafka's ZooKeeper-mode ``AclAuthorizer`` does
(:class:`ZkAclStore`), so that Kafka's tools and brokers read the same tree:

* ``/kafka-acl/<ResourceType>/<name>`` for LITERAL patterns and
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED ones, each holding
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}``; a znode is updated with its version (retried when
  another broker got there first) and deleted when its last ACL goes;
* each change is announced by a sequential ``acl_changes_`` znode under
  ``/kafka-acl-changes`` (data ``TOPIC:name``) or ``/kafka-acl-extended-changes``
  (``{"version":1,"resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}``); every
  broker watches both and re-reads the named resource. Notifications older than 15
  minutes are deleted by whichever broker processes a later one, as Kafka does.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.metastore import (
    BadVersionError,
    CoordinationStore,
    CreateMode,
    NodeExistsError,
    NoNodeError,
    ensure_path,
)
from sluice.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = [
    "ACL_CHANGES_PATH",
    "ACL_FILE",
    "EXTENDED_ACL_CHANGES_PATH",
    "FileAclStore",
    "ZkAclStore",
    "decode_entries",
    "encode_entries",
]

log = logging.getLogger(__name__)

ACL_FILE = "__sluice_acls.json"
LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Kafka's ``ZkNodeChangeNotificationListener`` default: older notifications are purged."""

_STORED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


def encode_entries(entries: frozenset[AccessControlEntry]) -> bytes:
    """Kafka's ACL znode JSON."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.camel_name,
            "operation": e.operation.camel_name,
            "host": e.host,
        }
        for e in sorted(
            entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type)
        )
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """ValueError for what is not Kafka's ACL znode JSON."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
        return frozenset(
            AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                AclOperation(AclOperation.parse(item["operation"])),
                AclPermissionType(AclPermissionType.parse(item["permissionType"])),
            )
            for item in document.get("acls", [])
        )
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not an ACL document: {exc}") from exc


def _pattern_json(pattern: ResourcePattern) -> dict[str, Any]:
    return {
        "resourceType": pattern.resource_type.camel_name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.camel_name,
    }


class FileAclStore:
    """A single node's ACLs in one JSON file (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._acls = self._read()

    def _read(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """The file's ACLs; ValueError naming the file when it cannot be read as such."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        try:
            for item in json.loads(text).get("resources", []):
                pattern = ResourcePattern(
                    ResourceType(ResourceType.parse(item["resourceType"])),
                    str(item["name"]),
                    PatternType(PatternType.parse(item["patternType"])),
                )
                out[pattern] = decode_entries(json.dumps(item).encode())
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot read the ACLs in {self.path}: {exc}") from None
        return out

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        with self._lock:
            return dict(self._acls)

    def load_one(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        with self._lock:
            return self._acls.get(pattern, frozenset())

    def update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        with self._lock:
            acls = dict(self._acls)
            entries = change(acls.get(pattern, frozenset()))
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
            self._write(acls)
            self._acls = acls
            return entries

    def _write(self, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        resources = [
            {**_pattern_json(p), **json.loads(encode_entries(e))}
            for p, e in sorted(acls.items(), key=lambda kv: str(kv[0]))
        ]
        data = json.dumps({"version": 1, "resources": resources}, indent=1).encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def resource_path(pattern: ResourcePattern) -> str:
    """The znode of a pattern's ACLs."""
    kind = pattern.resource_type.camel_name
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_ACL_PATH}/{kind}/{pattern.name}"
    return f"{EXTENDED_ACL_PATH}/{pattern.pattern_type.name.lower()}/{kind}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change notification's parent path and data."""
    if pattern.pattern_type == PatternType.LITERAL:
        return ACL_CHANGES_PATH, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_ACL_CHANGES_PATH, json.dumps(event, separators=(",", ":")).encode()


def decode_change(parent: str, data: bytes) -> ResourcePattern:
    """ValueError for a notification that names no resource."""
    text = data.decode()
    if parent == ACL_CHANGES_PATH:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:name, not {text!r}")
        return ResourcePattern(ResourceType(ResourceType.parse(kind)), name, PatternType.LITERAL)
    try:
        event = json.loads(text)
        return ResourcePattern(
            ResourceType(ResourceType.parse(event["resourceType"])),
            str(event["name"]),
            PatternType(PatternType.parse(event["patternType"])),
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not an ACL change event: {text!r}") from exc


class ZkAclStore:
    """A cluster's ACLs in ZooKeeper, laid out as Kafka's (see the module)."""

    def __init__(
        self, store: CoordinationStore, wall_clock_ms: Callable[[], int] | None = None
    ) -> None:
        self.store = store
        self._now_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._seen: dict[str, set[str]] = {
            ACL_CHANGES_PATH: set(),
            EXTENDED_ACL_CHANGES_PATH: set(),
        }
        self._lock = threading.Lock()  # one notification pass at a time
        self._watches: dict[str, Callable[[object], None]] = {}
        for path in (LITERAL_ACL_PATH, f"{EXTENDED_ACL_PATH}/prefixed", *self._seen):
            ensure_path(store, path)

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        roots = ((LITERAL_ACL_PATH, PatternType.LITERAL),
                 (f"{EXTENDED_ACL_PATH}/prefixed", PatternType.PREFIXED))  # fmt: skip
        for root, pattern_type in roots:
            for kind in _STORED_TYPES:
                try:
                    names = self.store.get_children(f"{root}/{kind.camel_name}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(kind, name, pattern_type)
                    if entries := self.load_one(pattern):
                        out[pattern] = entries
        return out

    def load_one(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        try:
            data, _ = self.store.get(resource_path(pattern))
        except NoNodeError:
            return frozenset()
        try:
            return decode_entries(data)
        except ValueError:
            log.warning("ignoring unreadable ACLs in %s", resource_path(pattern))
            return frozenset()

    def update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        path = resource_path(pattern)
        while True:
            try:
                data, stat = self.store.get(path)
                current, version = decode_entries(data), stat.version
            except NoNodeError:
                current, version = frozenset(), -1
            entries = change(current)
            if entries == current:
                return entries
            try:
                if not entries:
                    self.store.delete(path, version)
                elif version < 0:
                    ensure_path(self.store, path.rpartition("/")[0])
                    self.store.create(path, encode_entries(entries))
                else:
                    self.store.set(path, encode_entries(entries), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: read again
            parent, event = encode_change(pattern)
            self.store.create(f"{parent}/{CHANGE_PREFIX}", event, CreateMode.PERSISTENT_SEQUENTIAL)
            return entries

    # -- following the other brokers' changes ------------------------------------------
    def watch(
        self,
        on_change: Callable[[ResourcePattern], None],
        on_reload: Callable[[], None],
        run: Callable[[Callable[[], None]], None],
    ) -> None:
        """Call ``on_change(pattern)`` for each change notification from now on, and
        ``on_reload()`` after a ZooKeeper session expiry; ``run`` takes the work off the
        coordination client's thread."""

        def process(parent: str) -> None:
            try:
                self._process(parent, on_change)
            except Exception:
                log.exception("processing %s failed", parent)

        for parent in self._seen:
            self._watches[parent] = functools.partial(
                lambda parent, _event: run(functools.partial(process, parent)), parent
            )
            with self._lock:
                self._seen[parent] = set(
                    self.store.get_children(parent, watch=self._watches[parent])
                )

        def new_session() -> None:
            def rearm() -> None:
                try:
                    for parent in self._seen:
                        with self._lock:
                            self._seen[parent] = set(
                                self.store.get_children(parent, watch=self._watches[parent])
                            )
                    on_reload()
                except Exception:
                    log.exception("reloading the ACLs after a new ZooKeeper session failed")

            run(rearm)

        self.store.add_session_listener(new_session)

    def _process(self, parent: str, on_change: Callable[[ResourcePattern], None]) -> None:
        with self._lock:
            children = set(self.store.get_children(parent, watch=self._watches[parent]))
            new = sorted(children - self._seen[parent])
            self._seen[parent] = children
            expired_before = self._now_ms() - CHANGE_EXPIRATION_MS
            for child in new:
                try:
                    data, _ = self.store.get(f"{parent}/{child}")
                except NoNodeError:
                    continue
                try:
                    pattern = decode_change(parent, data)
                except ValueError:
                    log.warning("ignoring ACL change %s/%s: %r", parent, child, data[:100])
                else:
                    on_change(pattern)
            for child in sorted(children)[:-1]:  # purge old ones, keeping the latest
                with contextlib.suppress(NoNodeError):
                    _, stat = self.store.get(f"{parent}/{child}")
                    if stat.ctime >= expired_before:
                        break  # sequential: the later ones are younger
                    self.store.delete(f"{parent}/{child}")
