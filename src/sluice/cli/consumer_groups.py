"""``sluice consumer-groups``: list, describe, delete consumer groups and reset their
offsets (like kafka-consumer-groups)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    fail,
    warner,
)
from sluice.cli.offset_reset import (
    MODES,
    ResetError,
    ResetSpec,
    parse_datetime,
    parse_duration,
    parse_topic_scope,
    plan,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin
    from sluice.cli.tool_types import GroupDescription

__all__ = ["add_parser", "format_description", "format_members", "format_state", "run"]

PROG = "sluice consumer-groups"
HEADER = (
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
    "CONSUMER-ID", "HOST", "CLIENT-ID",
)  # fmt: skip

_DESCRIPTION = """\
List, describe and delete consumer groups, like kafka-consumer-groups.sh.
--describe prints one row per partition with the group's committed offset, the
log end offset and the lag ("-" where unknown), and the member that owns it
(--offsets, the default); --members one row per member (--verbose adds its
assignment); --state the group's coordinator, strategy, state and size.
--reset-offsets plans new committed offsets for the partitions chosen by --topic
or --all-topics and prints them; --execute commits them, which the group accepts
only while it has no active members.
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        ("reset_offsets", "plan or (--execute) commit new offsets for the group"),
    ):
        flag = "--" + name.replace("_", "-")
        actions.add_argument(flag, dest=name, action="store_true", help=text)
    describe = parser.add_argument_group("--describe options")
    describe.add_argument("--offsets", action="store_true", help="partitions and lag (default)")
    describe.add_argument("--members", action="store_true", help="one row per member")
    describe.add_argument("--state", action="store_true", help="the group's state")
    describe.add_argument(
        "--verbose", action="store_true", help="with --members: each member's assignment"
    )
    reset = parser.add_argument_group("--reset-offsets options")
    for mode, takes_value in MODES.items():
        if takes_value:
            reset.add_argument(f"--{mode}", metavar=_MODE_METAVAR[mode], help=_MODE_HELP[mode])
        else:
            reset.add_argument(f"--{mode}", action="store_true", help=_MODE_HELP[mode])
    reset.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,...]",
        help="reset this topic's partitions (all, or those listed); repeatable",
    )
    reset.add_argument(
        "--all-topics", action="store_true", help="reset every topic the group has offsets for"
    )
    reset.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    reset.add_argument("--execute", action="store_true", help="commit the planned offsets")
    parser.add_argument("--group", metavar="NAME", help="the consumer group")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="a properties file of admin client settings",
    )
    parser.set_defaults(func=run)


_MODE_METAVAR = {
    "to-offset": "OFFSET",
    "shift-by": "N",
    "to-datetime": "YYYY-MM-DDTHH:mm:SS.sss",
    "by-duration": "PnDTnHnMnS",
}
_MODE_HELP = {
    "to-earliest": "reset to each partition's earliest offset",
    "to-latest": "reset to each partition's log end offset",
    "to-current": "reset to the committed offset (the log end where none)",
    "to-offset": "reset to this offset (kept inside the log)",
    "shift-by": "move the committed offset by N (negative: back)",
    "to-datetime": "reset to the first record at or after this time (zone optional, "
    "e.g. Z or +01:00; local time without)",
    "by-duration": "reset to the first record at or after now minus this ISO-8601 duration",
}
_NO_EXECUTE = (
    "WARN: No action will be performed as the --execute option is missing. "
    "Add --dry-run to keep this behaviour without the warning."
)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ToolError as exc:
        return fail(PROG, exc)
    except BrokenPipeError:  # e.g. piped into head: stop quietly, also at exit
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _run(args: argparse.Namespace) -> int:
    chosen = [a for a in ("list", "describe", "delete", "reset_offsets") if getattr(args, a)]
    if not chosen:
        raise UsageError("an action is required: --list, --describe, --delete or --reset-offsets")
    if len(chosen) > 1:
        flags = " and ".join("--" + a.replace("_", "-") for a in chosen)
        raise UsageError(f"choose one action, not {flags}")
    action = chosen[0]
    views = [v for v in ("offsets", "members", "state") if getattr(args, v)]
    if views and action != "describe":
        raise UsageError(f"--{views[0]} is an option of --describe")
    if len(views) > 1:
        raise UsageError("choose one of --offsets, --members and --state")
    if args.verbose and views != ["members"]:
        raise UsageError("--verbose goes with --describe --members")
    spec = _reset_spec(args) if action == "reset_offsets" else None
    if spec is None and (args.topic or args.all_topics or args.dry_run or args.execute):
        raise UsageError("--topic, --all-topics, --dry-run and --execute go with --reset-offsets")
    action = action.replace("_", "-")
    if action != "list" and not args.group:
        raise UsageError(f"--group is required with --{action}")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    config = command_config(args)
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
                if args.state:
                    print(format_state(description), end="")
                    return 0
                if not description.members:
                    print(f"\nConsumer group '{args.group}' has no active members.\n")
                if args.members:
                    print(format_members(description, args.verbose), end="")
                else:
                    print(format_description(description), end="")
            elif action == "reset-offsets":
                assert spec is not None
                _reset(admin, args, spec)
            else:
                admin.delete_group(args.group)
                print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0


def _reset_spec(args: argparse.Namespace) -> ResetSpec:
    modes = [m for m in MODES if getattr(args, m.replace("-", "_")) not in (None, False)]
    if len(modes) != 1:
        listed = ", ".join("--" + m for m in MODES)
        raise UsageError(f"--reset-offsets needs exactly one of {listed}")
    if bool(args.topic) == bool(args.all_topics):
        raise UsageError("--reset-offsets needs one scope: --all-topics or --topic")
    if args.dry_run and args.execute:
        raise UsageError("choose --dry-run or --execute, not both")
    mode = modes[0]
    raw = getattr(args, mode.replace("-", "_"))
    try:
        if mode in ("to-offset", "shift-by"):
            try:
                return ResetSpec(mode, int(raw))
            except ValueError:
                raise UsageError(f"--{mode} takes an integer, not '{raw}'") from None
        if mode == "to-datetime":
            return ResetSpec(mode, parse_datetime(raw))
        if mode == "by-duration":
            import time

            return ResetSpec(mode, int(time.time() * 1000) - parse_duration(raw))
        for topic in args.topic:
            parse_topic_scope(topic)
    except ResetError as exc:
        raise UsageError(str(exc)) from None
    return ResetSpec(mode)


def _reset(admin: Admin, args: argparse.Namespace, spec: ResetSpec) -> None:
    description = admin.describe_group(args.group)
    if description.state not in ("Empty", "Dead"):
        raise ToolError(
            f"Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {description.state}."
        )
    committed = {
        (p.topic, p.partition): p.current_offset
        for p in description.partitions
        if p.current_offset is not None
    }
    try:
        scopes = [parse_topic_scope(t) for t in args.topic]
    except ResetError as exc:
        raise UsageError(str(exc)) from None
    if args.all_topics:
        partitions = sorted(committed)
    else:
        whole = sorted({t for t, ps in scopes if ps is None})
        known = {t.name: [p.partition for p in t.partitions] for t in admin.describe_topics(whole)}
        wanted: set[tuple[str, int]] = set()
        for topic, ps in scopes:
            wanted.update((topic, p) for p in (known[topic] if ps is None else ps))
        partitions = sorted(wanted)
    if partitions:
        earliest = _offsets(admin, partitions, "earliest")
        latest = _offsets(admin, partitions, "latest")
        by_time = None
        if spec.mode in ("to-datetime", "by-duration"):
            assert spec.value is not None
            by_time = admin.partition_offsets(partitions, spec.value)
        try:
            planned = plan(spec, partitions, committed, earliest, latest, by_time, _warn)
        except ResetError as exc:
            raise ToolError(str(exc)) from None
    else:
        planned = {}
    if args.execute:
        admin.alter_group_offsets(args.group, planned)
    elif not args.dry_run:
        print(_NO_EXECUTE, file=sys.stderr)
    print()
    print(format_plan(args.group, planned), end="")


def _offsets(
    admin: Admin, partitions: list[tuple[str, int]], spec: str
) -> dict[tuple[str, int], int]:
    found = admin.partition_offsets(partitions, spec)
    missing = [tp for tp in partitions if found.get(tp) is None]
    if missing:
        topic, partition = missing[0]
        raise ToolError(f"no {spec} offset for partition {topic}-{partition}")
    return {tp: int(offset) for tp, offset in found.items() if offset is not None}


def _warn(message: str) -> None:
    print(f"WARN: {message}", file=sys.stderr)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        " ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def format_plan(group: str, planned: dict[tuple[str, int], int]) -> str:
    """The --reset-offsets table: GROUP TOPIC PARTITION NEW-OFFSET."""
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, t, str(p), str(o)] for (t, p), o in sorted(planned.items())]
    return _table(rows)


def format_members(description: GroupDescription, verbose: bool = False) -> str:
    """The --members table; ``verbose`` adds each member's instance id and assignment."""
    header = ["GROUP", "CONSUMER-ID"]
    header += ["GROUP-INSTANCE-ID"] if verbose else []
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    header += ["ASSIGNMENT"] if verbose else []
    rows = [header]
    for m in description.members:
        row = [description.group, m.member_id]
        row += [m.group_instance_id or "-"] if verbose else []
        row += [m.host, m.client_id, str(len(m.assignment))]
        row += [_assignment(m.assignment)] if verbose else []
        rows.append(row)
    return _table(rows)


def _assignment(assignment: list[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(assignment):
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return "-"
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items())


def format_state(description: GroupDescription) -> str:
    """The --state table: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS."""
    coordinator = "-"
    if description.coordinator is not None:
        host, port, node = description.coordinator
        coordinator = f"{host}:{port} ({node})"
    rows = [
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [
            description.group,
            coordinator,
            description.protocol or "-",
            description.state,
            str(len(description.members)),
        ],
    ]
    return _table(rows)


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
    return _table(rows)
