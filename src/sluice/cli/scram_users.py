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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    UsageError,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = ["SCRAM_MECHANISMS", "alter_credentials", "describe_credentials"]

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
    lines = []
    for user, credentials in admin.describe_user_scram_credentials(users).items():
        listed = ", ".join(f"{m}=iterations={i}" for m, i in credentials)
        lines.append(f"SCRAM credential configs for user-principal '{user}' are {listed}")
    return lines
