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
iterations unless ``iterations=`` says). :func:`add_parser` also serves them as ``sluice
configs`` for ``--entity-type users``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    fail,
    read_properties_file,
    warner,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = [
    "SCRAM_MECHANISMS",
    "add_parser",
    "alter_credentials",
    "describe_credentials",
    "parse_add_config",
    "run",
]

PROG = "sluice configs"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config``: ``k1=v1,k2=[v2,v3]`` (commas inside brackets
    belong to the value, whose brackets are dropped)."""
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    out: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                "Invalid entity config: all configs to be added must be in the format "
                '"key=val" or "key=[val1,val2]".'
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


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


# -- the command line (entity type users) ----------------------------------------------------


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "configs",
        help="describe and alter users' SCRAM credentials",
        description="Describe and alter users' SCRAM credentials, like kafka-configs.sh "
        "with --entity-type users.",
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--command-config", metavar="FILE",
        help="client properties file (e.g. security settings) for the admin client",
    )  # fmt: skip
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the user's credentials")
    actions.add_argument("--alter", action="store_true", help="change the user's credentials")
    parser.add_argument("--entity-type", choices=["users"], required=True, help="users")
    parser.add_argument("--entity-name", metavar="USER", help="the user (all: leave it out)")
    parser.add_argument(
        "--add-config", metavar="CONFIGS",
        help="SCRAM-SHA-256=[iterations=8192,password=...],SCRAM-SHA-512=[password=...]",
    )  # fmt: skip
    parser.add_argument(
        "--delete-config", action="append", default=[], metavar="MECHANISMS",
        help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (comma-separated)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ToolError as exc:
        return fail(PROG, exc)


def _run(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    delete = [m.strip() for item in args.delete_config for m in item.split(",") if m.strip()]
    if args.alter and not args.entity_name:
        raise UsageError("--alter needs --entity-name")
    if args.alter and not (args.add_config or delete):
        raise UsageError("--alter needs --add-config or --delete-config")
    if args.describe and (args.add_config or delete):
        raise UsageError("--add-config and --delete-config apply to --alter")
    config = read_properties_file(args.command_config) if args.command_config else {}
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        if args.alter:
            add = parse_add_config(args.add_config or "")
            print(alter_credentials(admin, args.entity_name, add, delete))
        else:
            users = [args.entity_name] if args.entity_name else None
            for line in describe_credentials(admin, users):
                print(line)
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0
