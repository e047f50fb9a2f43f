"""Users' SCRAM credentials from the command line, as kafka-configs manages them.

    sluice configs --bootstrap-server localhost:9092 --command-config admin.properties \\
        --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=pw],SCRAM-SHA-512=[password=pw]'
    sluice configs --bootstrap-server localhost:9092 --describe --entity-type users \\
        --entity-name alice
    sluice configs --bootstrap-server localhost:9092 --alter --entity-type users \\
        --entity-name alice --delete-config SCRAM-SHA-512

:func:`alter_credentials` and :func:`describe_credentials` are what a ``users`` entity's
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` configs do (AlterUserScramCredentials and
DescribeUserScramCredentials; the password is salted and iterated by the client, 4096
iterations unless ``iterations=`` says); ``sluice configs`` (:mod:`sluice.cli.configs`)
calls them for a ``users`` entity's SCRAM configs.

Brokers that authenticate to each other with SCRAM need their own credentials before
any of them is up, so, as kafka-configs does for this case, ``--zookeeper`` writes
users' credentials straight into a cluster's ZooKeeper (``/config/users/<user>`` and a
``/config/changes`` notification, :mod:`sluice.server.zk_scram_credentials`) instead of
going through a broker: :func:`alter_credentials_in_zookeeper` and
:func:`describe_credentials_in_zookeeper`. Here the tool salts and iterates the
password and derives the keys itself, as a broker would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin
    from sluice.metastore.zookeeper import ZooKeeperStore

__all__ = [
    "SCRAM_MECHANISMS",
    "alter_credentials",
    "alter_credentials_in_zookeeper",
    "describe_credentials",
    "describe_credentials_in_zookeeper",
]

PROG = "sluice configs"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096


def _credential(mechanism: str, value: str) -> tuple[str, int]:
    """``iterations=8192,password=secret`` (or ``password=secret``) -> (password,
    iterations)."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        key, sep, val = part.partition("=")
        if not sep:
            raise UsageError(f"Invalid {mechanism} value: expected [iterations=N,]password=...")
        fields[key.strip()] = val
    if "password" not in fields or set(fields) - {"password", "iterations"}:
        raise UsageError(f"Invalid {mechanism} value: expected [iterations=N,]password=...")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"Invalid {mechanism} iterations: {fields['iterations']}") from None
    return fields["password"], iterations


def alter_credentials(
    admin: Admin, user: str, add: Mapping[str, str], delete: Sequence[str]
) -> str:
    """Set (``add``: mechanism -> ``[iterations=N,]password=...``) and delete users'
    SCRAM credentials; the line to print."""
    unknown = [k for k in (*add, *delete) if k not in SCRAM_MECHANISMS]
    if unknown:
        raise UsageError(
            f"{', '.join(unknown)}: a user's configs here are {', '.join(SCRAM_MECHANISMS)}"
        )
    upsertions = {m: _credential(m, v) for m, v in add.items()}
    admin.alter_user_scram_credentials(user, upsertions, list(delete))
    return f"Completed updating config for user {user}."


def describe_credentials(admin: Admin, users: Sequence[str] | None) -> list[str]:
    """kafka-configs' lines: ``SCRAM credential configs for user-principal 'alice' are
    SCRAM-SHA-256=iterations=8192``."""
    return _describe_lines(admin.describe_user_scram_credentials(users))


def _describe_lines(found: Mapping[str, Sequence[tuple[str, int]]]) -> list[str]:
    lines = []
    for user, credentials in found.items():
        listed = ", ".join(f"{m}=iterations={i}" for m, i in credentials)
        lines.append(f"SCRAM credential configs for user-principal '{user}' are {listed}")
    return lines


def _zookeeper(connect: str) -> ZooKeeperStore:
    from sluice.metastore.errors import ConnectionLossError
    from sluice.metastore.zookeeper import ZooKeeperStore

    try:
        return ZooKeeperStore(connect, session_timeout_ms=30_000, connection_timeout_ms=15_000)
    except ConnectionLossError as exc:
        raise ToolError(str(exc)) from exc


def alter_credentials_in_zookeeper(
    connect: str, user: str, add: Mapping[str, str], delete: Sequence[str]
) -> str:
    """As :func:`alter_credentials`, written into the ZooKeeper at ``connect`` (Kafka's
    ``zookeeper.connect``) with no broker involved; the line to print."""
    from sluice.security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
    from sluice.server.zk_scram_credentials import ZkScramCredentialStore

    unknown = [k for k in (*add, *delete) if k not in SCRAM_MECHANISMS]
    if unknown:
        raise UsageError(
            f"{', '.join(unknown)}: with --zookeeper a user's configs are "
            f"{', '.join(SCRAM_MECHANISMS)}"
        )
    changes: dict[str, ScramCredential | None] = dict.fromkeys(delete)
    for mechanism, value in add.items():
        password, iterations = _credential(mechanism, value)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise UsageError(
                f"Invalid {mechanism} iterations {iterations}: from {MIN_ITERATIONS} to "
                f"{MAX_ITERATIONS}"
            )
        changes[mechanism] = ScramCredential.from_password(mechanism, password, iterations)
    store = _zookeeper(connect)
    try:
        ZkScramCredentialStore(store).persist({user: changes})
    finally:
        store.close()
    return f"Completed updating config for user {user}."


def describe_credentials_in_zookeeper(connect: str, users: Sequence[str] | None) -> list[str]:
    """As :func:`describe_credentials`, read from the ZooKeeper at ``connect``."""
    from sluice.server.zk_scram_credentials import ZkScramCredentialStore

    store = _zookeeper(connect)
    try:
        credentials = ZkScramCredentialStore(store)
        credentials.load()
    finally:
        store.close()
    found = {
        user: [(m, creds[m].iterations) for m in SCRAM_MECHANISMS if m in creds]
        for user, creds in sorted(credentials.cache.users().items())
        if users is None or user in users
    }
    return _describe_lines(found)
