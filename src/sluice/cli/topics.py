"""``sluice topics``: create, list, describe, alter and delete topics (like kafka-topics).

Both spellings work, and may be mixed with options in any order:

    sluice topics create --bootstrap-server localhost:9092 --topic t --partitions 3
    sluice topics --bootstrap-server localhost:9092 --create --topic t --partitions 3
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    parse_assignments,
    tool_command,
    warner,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = ["add_parser", "run"]

PROG = "sluice topics"
ACTIONS = ("create", "list", "describe", "alter", "delete")

_ACTION_HELP = {
    "create": "create a topic",
    "list": "list the topics, one name a line",
    "describe": "show partitions, leaders, replicas and non-default configs",
    "alter": "add partitions and/or change config overrides",
    "delete": "delete a topic",
}
_DESCRIPTION = """\
Create, list, describe, alter and delete topics, like kafka-topics.sh.

The action is a subcommand (sluice topics create ...) or, as in kafka-topics,
a flag (sluice topics --create ...); options may come before or after it.
`sluice topics ACTION --help` lists the options of one action.
--topic is an exact topic name (not a regular expression)."""


# option -> (argparse keywords, {action: help}); "*" is the help in `sluice topics --help`.
_OPTIONS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "--topic": (
        {"metavar": "NAME"},
        {
            "*": "the topic (required to create, alter and delete); list and describe "
            "without it show every topic",
            "create": "the topic to create (required)",
            "list": "list only this topic (nothing if it does not exist)",
            "describe": "describe only this topic (default: every topic)",
            "alter": "the topic to alter (required)",
            "delete": "the topic to delete (required)",
        },
    ),
    "--partitions": (
        {"type": int, "metavar": "N"},
        {
            "*": "create: the partition count (default: the broker's num.partitions); "
            "alter: the new, larger partition count",
            "create": "the partition count (default: the broker's num.partitions)",
            "alter": "the new partition count; it can only grow",
        },
    ),
    "--replication-factor": (
        {"type": int, "metavar": "R"},
        {"create": "replicas per partition (default: the broker's default.replication.factor)"},
    ),
    "--config": (
        {"action": "append", "metavar": "KEY=VALUE"},
        {
            "*": "create/alter: set a topic config override, e.g. retention.ms=60000 (repeatable)",
            "create": "a topic config override, e.g. retention.ms=60000 (repeatable)",
            "alter": "set a topic config override, e.g. retention.ms=60000 (repeatable)",
        },
    ),
    "--delete-config": (
        {"action": "append", "metavar": "KEY"},
        {"alter": "remove a topic config override (repeatable)"},
    ),
    "--if-not-exists": (
        {"action": "store_true"},
        {"create": "succeed quietly if the topic already exists"},
    ),
    "--if-exists": (
        {"action": "store_true"},
        {a: "succeed quietly if the topic does not exist" for a in ("describe", "alter", "delete")},
    ),
    "--exclude-internal": (
        {"action": "store_true"},
        {"list": "leave out internal topics", "describe": "leave out internal topics"},
    ),
}


def _add_options(parser: argparse.ArgumentParser, action: str | None) -> None:
    """The options of ``action`` (all of them for None). Subcommand parsers use
    SUPPRESS defaults so they never overwrite a value given before the subcommand."""
    default: dict[str, Any] = {} if action is None else {"default": argparse.SUPPRESS}
    add_bootstrap_argument(parser, **default)
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        **default,
        help="client properties file (e.g. security settings) for the admin client",
    )
    for option, (kwargs, helps) in _OPTIONS.items():
        if action is None:
            scope = ", ".join(a for a in ACTIONS if a in helps)
            text = helps.get("*") or f"{scope}: {next(iter(helps.values()))}"
        elif action in helps:
            text = helps[action]
        else:
            continue
        parser.add_argument(option, **kwargs, **default, help=text)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags = parser.add_mutually_exclusive_group()
    for action in ACTIONS:
        flags.add_argument(
            f"--{action}",
            dest="topics_flag",
            action="store_const",
            const=action,
            help=_ACTION_HELP[action],
        )
    _add_options(parser, None)
    parser.set_defaults(func=run, topics_action=None)
    actions = parser.add_subparsers(dest="topics_action", metavar="ACTION", title="actions")
    for action in ACTIONS:
        child = actions.add_parser(
            action,
            help=_ACTION_HELP[action],
            description=f"{_ACTION_HELP[action].capitalize()} "
            f"(same as `sluice topics --{action}`).",
        )
        _add_options(child, action)
        child.set_defaults(func=run)


def _action(args: argparse.Namespace) -> str:
    sub, flag = args.topics_action, args.topics_flag
    if sub and flag and sub != flag:
        raise UsageError(f"both '{sub}' and '--{flag}' given; choose one action")
    action: str | None = sub or flag
    if action is None:
        raise UsageError("an action is required: " + ", ".join(ACTIONS))
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    needs_topic = action in ("create", "alter", "delete")
    if needs_topic and not args.topic:
        raise UsageError(f"--topic is required to {action} a topic")
    if action == "create":
        for name, value in (
            ("--partitions", args.partitions),
            ("--replication-factor", args.replication_factor),
        ):
            if value is not None and value < 1:
                raise UsageError(f"{name} must be at least 1")
    if action == "alter" and args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("alter needs --partitions, --config or --delete-config")
    unused = {
        "--partitions": args.partitions is not None and action not in ("create", "alter"),
        "--replication-factor": args.replication_factor is not None and action != "create",
        "--config": bool(args.config) and action not in ("create", "alter"),
        "--delete-config": bool(args.delete_config) and action != "alter",
    }
    for option, misplaced in unused.items():
        if misplaced:
            raise UsageError(f"{option} does not apply to {action}")
    args.config_map = parse_assignments(args.config or [], "--config")
    return action


def _run(args: argparse.Namespace) -> int:
    action = _action(args)
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        return int(_ACTIONS[action](admin, args))
    except ClientError as exc:
        raise ToolError(str(exc)) from exc


def _existing(admin: Admin, args: argparse.Namespace, must_exist: bool = True) -> list[str]:
    """The named topic if it exists (else an error, or nothing with --if-exists or
    without ``must_exist``); every topic when no name is given."""
    topics: list[str] = admin.list_topics()
    if args.exclude_internal:
        topics = [t for t in topics if not t.startswith("__")]
    if not args.topic:
        return topics
    if args.topic in topics:
        return [args.topic]
    if args.if_exists or not must_exist:
        return []
    raise ToolError(f"Topic '{args.topic}' does not exist as expected")


def _create(admin: Admin, args: argparse.Namespace) -> int:
    from sluice.cli.tool_clients import ClientError

    try:
        admin.create_topic(args.topic, args.partitions, args.replication_factor, args.config_map)
    except ClientError as exc:
        if exc.code == "TOPIC_ALREADY_EXISTS":
            if args.if_not_exists:
                return 0
            raise ToolError(f"Topic '{args.topic}' already exists.") from exc
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _list(admin: Admin, args: argparse.Namespace) -> int:
    for name in _existing(admin, args, must_exist=False):  # like kafka-topics: no error
        print(name)
    return 0


def _describe(admin: Admin, args: argparse.Namespace) -> int:
    from sluice.cli.tool_clients import ClientError

    for topic in admin.describe_topics(_existing(admin, args)):
        try:
            configs = admin.topic_configs(topic.name)
        except ClientError as exc:
            if exc.code != "_UNSUPPORTED_FEATURE":
                raise
            configs = {}  # a broker without DescribeConfigs: nothing to show
        replication = len(topic.partitions[0].replicas) if topic.partitions else 0
        print(
            f"Topic: {topic.name}\tTopicId: {topic.topic_id}\t"
            f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication}\t"
            f"Configs: {','.join(f'{k}={v}' for k, v in configs.items())}"
        )
        for p in topic.partitions:
            leader = p.leader if p.leader >= 0 else "none"
            print(
                f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
    return 0


def _alter(admin: Admin, args: argparse.Namespace) -> int:
    if not _existing(admin, args):
        return 0
    configs = args.config_map
    if args.partitions is not None:
        (topic,) = admin.describe_topics([args.topic])
        current = len(topic.partitions)
        if args.partitions <= current:
            raise ToolError(
                f"The number of partitions for a topic can only be increased. Topic "
                f"{args.topic} currently has {current} partitions, {args.partitions} would "
                "not be an increase."
            )
        admin.create_partitions(args.topic, args.partitions)
    if configs or args.delete_config:
        admin.alter_topic_configs(args.topic, configs, args.delete_config or [])
    print(f"Altered topic {args.topic}.")
    return 0


def _delete(admin: Admin, args: argparse.Namespace) -> int:
    if not _existing(admin, args):
        return 0
    admin.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}.")
    return 0


_ACTIONS = {
    "create": _create,
    "list": _list,
    "describe": _describe,
    "alter": _alter,
    "delete": _delete,
}


run = tool_command(PROG, _run)
