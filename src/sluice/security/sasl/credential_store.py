"""Users' SCRAM credentials: the broker's cache, where they are kept, and Kafka's rules
for AlterUserScramCredentials and DescribeUserScramCredentials.

:class:`ScramCredentialCache` (Kafka's ``CredentialCache``) is what an exchange reads:
user -> mechanism -> :class:`~.scram.ScramCredential`, in memory. A store keeps it
durable and fills it: :class:`FileScramCredentialStore` for a single node (one JSON file
in the first log dir, ``__sluice_scram_credentials.json``, replaced atomically on every
change) and, in a cluster, the ZooKeeper store of :mod:`sluice.server.zk_scram_credentials`
(``/config/users/<user>`` as Kafka writes it, announced under ``/config/changes``). Each
user's entry is Kafka's user config: ``{"SCRAM-SHA-256": "salt=...,stored_key=...,
server_key=...,iterations=..."}``; the file holds ``{"version": 1, "users": {<user>:
<config>}}``.

:func:`plan_alterations` and :func:`describe` apply Kafka's checks (empty user names,
unknown mechanisms, iteration bounds, a credential altered twice, deleting one that does
not exist) and answer with Kafka's error codes and messages, with no I/O.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kio.schema.errors import ErrorCode

from .scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    mechanism_from_type,
)

__all__ = [
    "CREDENTIALS_FILE",
    "AlterResult",
    "FileScramCredentialStore",
    "ScramCredentialCache",
    "ScramCredentialStore",
    "UserChanges",
    "credentials_from_config",
    "describe",
    "plan_alterations",
]

CREDENTIALS_FILE: Final = "__sluice_scram_credentials.json"

UserCredentials = dict[str, ScramCredential]
"""One user's credentials, by mechanism."""
UserChanges = dict[str, dict[str, "ScramCredential | None"]]
"""user -> mechanism -> the new credential, or None to delete it."""


def credentials_from_config(config: Mapping[str, str]) -> UserCredentials:
    """The SCRAM credentials of a user config (other keys, such as quotas, are skipped);
    a malformed value raises ValueError."""
    return {
        mechanism: ScramCredential.from_string(config[mechanism])
        for mechanism in SCRAM_MECHANISMS
        if mechanism in config
    }


class ScramCredentialCache:
    """Every user's credentials, as the SCRAM exchanges read them (Kafka's
    ``CredentialCache``). Updated on the event loop (or under the GIL by a single
    writer): a lookup is one dictionary read."""

    __slots__ = ("_users",)

    def __init__(self) -> None:
        self._users: dict[str, UserCredentials] = {}

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        found = self._users.get(user)
        return None if found is None else found.get(mechanism)

    def lookup(self, mechanism: str) -> _Lookup:
        """A ``user -> credential`` function for one mechanism's SCRAM server."""
        return _Lookup(self, mechanism)

    def user(self, user: str) -> UserCredentials:
        return dict(self._users.get(user, {}))

    def users(self) -> dict[str, UserCredentials]:
        return {user: dict(creds) for user, creds in self._users.items()}

    def set_user(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        """Replace a user's credentials (none: the user has none left)."""
        if credentials:
            self._users[user] = dict(credentials)
        else:
            self._users.pop(user, None)

    def apply(self, changes: UserChanges) -> None:
        for user, by_mechanism in changes.items():
            current = self.user(user)
            for mechanism, credential in by_mechanism.items():
                if credential is None:
                    current.pop(mechanism, None)
                else:
                    current[mechanism] = credential
            self.set_user(user, current)


class _Lookup:
    __slots__ = ("_cache", "_mechanism")

    def __init__(self, cache: ScramCredentialCache, mechanism: str) -> None:
        self._cache = cache
        self._mechanism = mechanism

    def __call__(self, user: str) -> ScramCredential | None:
        return self._cache.credential(self._mechanism, user)


class ScramCredentialStore(Protocol):
    """Where credentials are kept: it fills :attr:`cache` and persists changes."""

    @property
    def cache(self) -> ScramCredentialCache: ...

    def persist(self, changes: UserChanges) -> None:
        """Write ``changes`` durably (blocking: call it off the event loop), then apply
        them to the cache. OSError (or the coordination store's errors) if not written."""


class FileScramCredentialStore:
    """A single node's credentials, in one JSON file replaced atomically (temporary file,
    fsync, rename, directory fsync)."""

    __slots__ = ("_lock", "cache", "path")

    def __init__(self, directory: Path) -> None:
        self.path = directory / CREDENTIALS_FILE
        self.cache = ScramCredentialCache()
        self._lock = threading.Lock()
        for user, config in self._read().items():
            self.cache.set_user(user, credentials_from_config(config))

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"{self.path} is not valid JSON: {exc}") from None
        users = data.get("users") if isinstance(data, dict) else None
        if not isinstance(users, dict):
            raise ValueError(f"{self.path} holds no 'users' object")
        return {str(u): {str(k): str(v) for k, v in c.items()} for u, c in users.items()}

    def persist(self, changes: UserChanges) -> None:
        from sluice.log.checkpoint import write_atomically

        with self._lock:
            users = self._read()
            for user, by_mechanism in changes.items():
                config = users.setdefault(user, {})
                for mechanism, credential in by_mechanism.items():
                    if credential is None:
                        config.pop(mechanism, None)
                    else:
                        config[mechanism] = credential.to_string()
                if not config:
                    del users[user]
            data = json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True)
            write_atomically(self.path, data.encode("utf-8"))
            self.cache.apply(changes)


# -- Kafka's rules for the admin APIs ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AlterResult:
    user: str
    error_code: ErrorCode
    error_message: str | None = None


_EMPTY_USER: Final = "Username must not be empty"
_UNKNOWN_MECHANISM: Final = "Unknown SCRAM mechanism"


def plan_alterations(
    upsertions: Sequence[Upsertion],
    deletions: Sequence[Deletion],
    existing: ScramCredentialCache,
) -> tuple[list[AlterResult], UserChanges]:
    """Kafka's checks of an AlterUserScramCredentials request: the failed users' results
    and the changes to persist for the others (whose success the caller reports)."""
    failed: dict[str, AlterResult] = {}

    def fail(user: str, code: ErrorCode, message: str) -> None:
        failed.setdefault(user, AlterResult(user, code, message))

    for d in deletions:
        if not d.name:
            fail(d.name, ErrorCode.unacceptable_credential, _EMPTY_USER)
        elif mechanism_from_type(d.mechanism) is None:
            fail(d.name, ErrorCode.unsupported_sasl_mechanism, _UNKNOWN_MECHANISM)
    for u in upsertions:
        if not u.name:
            fail(u.name, ErrorCode.unacceptable_credential, _EMPTY_USER)
        elif mechanism_from_type(u.mechanism) is None:
            fail(u.name, ErrorCode.unsupported_sasl_mechanism, _UNKNOWN_MECHANISM)
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.unacceptable_credential, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.unacceptable_credential, "Too many iterations")
    seen: set[tuple[str, int]] = set()
    for name, mechanism in [(u.name, u.mechanism) for u in upsertions] + [
        (d.name, d.mechanism) for d in deletions
    ]:
        if name in failed:
            continue
        if (name, mechanism) in seen:
            fail(
                name, ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )  # fmt: skip
        seen.add((name, mechanism))
    for d in deletions:
        mech = mechanism_from_type(d.mechanism)
        if d.name not in failed and mech and existing.credential(mech, d.name) is None:
            fail(
                d.name, ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )  # fmt: skip
    changes: UserChanges = {}
    for d in deletions:
        mech = mechanism_from_type(d.mechanism)
        if d.name not in failed and mech is not None:
            changes.setdefault(d.name, {})[mech] = None
    for u in upsertions:
        mech = mechanism_from_type(u.mechanism)
        if u.name not in failed and mech is not None:
            changes.setdefault(u.name, {})[mech] = ScramCredential.from_salted_password(
                mech, u.salt, u.salted_password, u.iterations
            )
    return list(failed.values()), changes


@dataclass(frozen=True, slots=True)
class DescribeResult:
    user: str
    error_code: ErrorCode
    error_message: str | None
    credentials: tuple[tuple[str, int], ...]
    """(mechanism, iterations) pairs."""


def describe(cache: ScramCredentialCache, users: Iterable[str] | None) -> list[DescribeResult]:
    """Kafka's DescribeUserScramCredentials: every user with a credential (sorted) when
    ``users`` is None or empty, else each named user once, in request order."""

    def infos(creds: Mapping[str, ScramCredential]) -> tuple[tuple[str, int], ...]:
        return tuple((m, creds[m].iterations) for m in SCRAM_MECHANISMS if m in creds)

    named = list(users or ())
    if not named:
        return [
            DescribeResult(user, ErrorCode.none, None, infos(creds))
            for user, creds in sorted(cache.users().items())
            if creds
        ]
    out: list[DescribeResult] = []
    counts: dict[str, int] = {}
    for user in named:
        counts[user] = counts.get(user, 0) + 1
    for user in dict.fromkeys(named):
        if not user:
            out.append(DescribeResult(user, ErrorCode.resource_not_found, _EMPTY_USER, ()))
        elif counts[user] > 1:
            out.append(
                DescribeResult(
                    user, ErrorCode.duplicate_resource,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}", (),
                )
            )  # fmt: skip
        elif creds := cache.user(user):
            out.append(DescribeResult(user, ErrorCode.none, None, infos(creds)))
        else:
            out.append(
                DescribeResult(
                    user, ErrorCode.resource_not_found,
                    f"Attempt to describe a user credential that does not exist: {user}", (),
                )
            )  # fmt: skip
    return out
