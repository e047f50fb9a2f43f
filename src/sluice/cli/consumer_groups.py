"""``sluice consumer-groups``: list, describe and delete consumer groups (like
kafka-consumer-groups)."""

from __future__ import annotations

import argparse
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
    from sluice.cli.tool_types import GroupDescription

__all__ = ["add_parser", "format_description", "run"]

PROG = "sluice consumer-groups"
HEADER = (
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
    "CONSUMER-ID", "HOST", "CLIENT-ID",
)  # fmt: skip

_DESCRIPTION = """\
List, describe and delete consumer groups, like kafka-consumer-groups.sh.
--describe prints one row per partition with the group's committed offset, the
log end offset and the lag ("-" where unknown), and the member that owns it.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "consumer-groups",
        help="list, describe and delete consumer groups",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    actions = parser.add_argument_group("actions (choose one)")
    for name, text in (
        ("list", "list every consumer group"),
        ("describe", "show the group's offsets, lag and members (needs --group)"),
        ("delete", "delete the group (needs --group; it must have no members)"),
    ):
        actions.add_argument(f"--{name}", dest=name, action="store_true", help=text)
    parser.add_argument("--group", metavar="NAME", help="the consumer group")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="a properties file of admin client settings",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ToolError as exc:
        return fail(PROG, exc)


def _run(args: argparse.Namespace) -> int:
    chosen = [a for a in ("list", "describe", "delete") if getattr(args, a)]
    if not chosen:
        raise UsageError("an action is required: --list, --describe or --delete")
    if len(chosen) > 1:
        raise UsageError(f"choose one action, not {' and '.join('--' + a for a in chosen)}")
    action = chosen[0]
    if action != "list" and not args.group:
        raise UsageError(f"--group is required with --{action}")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    config = read_properties_file(args.command_config) if args.command_config else {}
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            if action == "list":
                for group in admin.list_groups():
                    print(group)
            elif action == "describe":
                description = admin.describe_group(args.group)
                if description.state == "Dead" and not description.partitions:
                    raise ToolError(f"Consumer group '{args.group}' does not exist.")
                if not description.members:
                    print(f"\nConsumer group '{args.group}' has no active members.\n")
                print(format_description(description), end="")
            else:
                admin.delete_group(args.group)
                print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0


def format_description(description: GroupDescription) -> str:
    """The --describe table: a header and one row per partition, columns aligned."""
    rows = [list(HEADER)]
    for p in description.partitions:
        member = p.member
        rows.append([
            description.group,
            p.topic,
            str(p.partition),
            "-" if p.current_offset is None else str(p.current_offset),
            "-" if p.log_end_offset is None else str(p.log_end_offset),
            "-" if p.lag is None else str(p.lag),
            member.member_id if member is not None else "-",
            member.host if member is not None else "-",
            member.client_id if member is not None else "-",
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "".join(
        " ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )
