"""``sluice acls``: add, remove and list ACLs, like kafka-acls.

    sluice acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    sluice acls --bootstrap-server localhost:9092 --add --allow-principal User:bob \\
        --producer --topic orders --transactional-id billing-
    sluice acls --bootstrap-server localhost:9092 --list --topic orders
    sluice acls --bootstrap-server localhost:9092 --remove --force --topic orders

As kafka-acls: ``--operation`` (repeatable, default All), hosts default to ``*`` when a
principal is given, ``--producer`` grants WRITE, DESCRIBE and CREATE on the topics
(and WRITE, DESCRIBE on the transactional ids), ``--consumer`` READ and DESCRIBE on the
topics and READ on the groups; ``--remove`` asks for confirmation unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    tool_command,
    warner,
)
from sluice.security import KafkaPrincipal
from sluice.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = ["add_parser", "run"]

PROG = "sluice acls"
_OPS = [op.camel_name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "acls",
        help="add, remove and list ACLs (like kafka-acls)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties file (e.g. security settings)")  # fmt: skip
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--add", dest="action", action="store_const", const="add",
                         help="add ACLs")  # fmt: skip
    actions.add_argument("--remove", dest="action", action="store_const", const="remove",
                         help="remove ACLs")  # fmt: skip
    actions.add_argument("--list", dest="action", action="store_const", const="list",
                         help="list ACLs")  # fmt: skip
    parser.add_argument("--allow-principal", metavar="TYPE:NAME", action="append", default=[],
                        help="a principal to allow (User:alice, User:*); repeatable")  # fmt: skip
    parser.add_argument("--deny-principal", metavar="TYPE:NAME", action="append", default=[],
                        help="a principal to deny; repeatable")  # fmt: skip
    parser.add_argument("--principal", metavar="TYPE:NAME", action="append", default=[],
                        help="--list: only the ACLs of this principal; repeatable")  # fmt: skip
    parser.add_argument("--allow-host", metavar="HOST", action="append", default=[],
                        help="a host the allowed principals may come from (default *)")  # fmt: skip
    parser.add_argument("--deny-host", metavar="HOST", action="append", default=[],
                        help="a host the denied principals come from (default *)")  # fmt: skip
    parser.add_argument("--operation", metavar="OP", action="append", default=[],
                        help=f"one of {', '.join(_OPS)} (default All); repeatable")  # fmt: skip
    parser.add_argument("--topic", metavar="NAME", action="append", default=[],
                        help="a topic (* for all); repeatable")  # fmt: skip
    parser.add_argument("--group", metavar="NAME", action="append", default=[],
                        help="a consumer group; repeatable")  # fmt: skip
    parser.add_argument("--transactional-id", metavar="ID", action="append", default=[],
                        help="a transactional id; repeatable")  # fmt: skip
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type", default="literal", metavar="TYPE",
        help="literal or prefixed (--add); also any or match for --list and --remove "
        "(default literal)",
    )  # fmt: skip
    parser.add_argument("--producer", action="store_true",
                        help="a producer's ACLs on --topic (and --transactional-id)")  # fmt: skip
    parser.add_argument("--consumer", action="store_true",
                        help="the ACLs a consumer needs on --topic and --group")  # fmt: skip
    parser.add_argument("--force", action="store_true", help="--remove without asking")
    parser.set_defaults(func=run, action=None)


def _pattern_type(args: argparse.Namespace) -> PatternType:
    try:
        pattern_type = PatternType(PatternType.parse(args.resource_pattern_type))
    except ValueError:
        raise UsageError(f"unknown --resource-pattern-type {args.resource_pattern_type}") from None
    allowed = {PatternType.LITERAL, PatternType.PREFIXED}
    if args.action != "add":
        allowed |= {PatternType.ANY, PatternType.MATCH}
    if pattern_type not in allowed:
        raise UsageError(f"--resource-pattern-type {args.resource_pattern_type} does not apply "
                         f"to --{args.action}")  # fmt: skip
    return pattern_type


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _operations(args: argparse.Namespace, default: AclOperation) -> list[AclOperation]:
    try:
        ops = [AclOperation(AclOperation.parse(o)) for o in args.operation]
    except ValueError as exc:
        raise UsageError(f"{exc}; one of {', '.join(_OPS)}") from None
    if AclOperation.ANY in ops or AclOperation.UNKNOWN in ops:
        raise UsageError(f"--operation: one of {', '.join(_OPS)}")
    return ops or [default]


def _principals(values: list[str]) -> list[str]:
    for value in values:
        try:
            KafkaPrincipal.parse(value)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return values


def _entries(args: argparse.Namespace, ops: list[AclOperation]) -> list[AccessControlEntry]:
    allow, deny = _principals(args.allow_principal), _principals(args.deny_principal)
    entries = []
    for principals, hosts, permission in (
        (allow, args.allow_host or ["*"], AclPermissionType.ALLOW),
        (deny, args.deny_host or ["*"], AclPermissionType.DENY),
    ):
        entries += [AccessControlEntry(p, h, op, permission)
                    for p in principals for h in hosts for op in ops]  # fmt: skip
    return entries


_PRODUCER = {
    ResourceType.TOPIC: (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
}
_CONSUMER = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.DESCRIBE),
    ResourceType.GROUP: (AclOperation.READ,),
}


def _bindings(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBinding]:
    """The bindings of --add (and of --remove with a principal)."""
    resources = _resources(args)
    if args.producer or args.consumer:
        if args.producer and not args.topic:
            raise UsageError("--producer needs --topic")
        if args.consumer and (not args.topic or not args.group):
            raise UsageError("--consumer needs --topic and --group")
        bindings: list[AclBinding] = []
        for table, wanted in ((_PRODUCER, args.producer), (_CONSUMER, args.consumer)):
            if not wanted:
                continue
            for rtype, name in resources:
                ops = list(table.get(rtype, ()))
                bindings += [AclBinding(ResourcePattern(rtype, name, pattern_type), e)
                             for e in _entries(args, ops)]  # fmt: skip
        return list(dict.fromkeys(bindings))
    return [
        AclBinding(ResourcePattern(rtype, name, pattern_type), entry)
        for rtype, name in resources
        for entry in _entries(args, _operations(args, AclOperation.ALL))
    ]


def _run(args: argparse.Namespace) -> int:
    if args.action is None:
        raise UsageError("an action is required: --add, --remove or --list")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    pattern_type = _pattern_type(args)
    if args.action != "list" and not _resources(args):
        raise UsageError(
            "a resource is required: --topic, --group, --transactional-id or --cluster"
        )
    if args.action == "add" and not (args.allow_principal or args.deny_principal):
        raise UsageError("--add needs --allow-principal or --deny-principal")
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            if args.action == "add":
                return _add(admin, args, pattern_type)
            if args.action == "remove":
                return _remove(admin, args, pattern_type)
            return _list(admin, args, pattern_type)
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc


def _by_pattern(bindings: list[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, []).append(b.entry)
    return out


def _print_acls(heading: str, pattern: object, entries: list[AccessControlEntry]) -> None:
    print(f"{heading} for resource `{pattern}`: ")
    for entry in entries:
        print(f" \t{entry} ")
    print()


def _add(admin: Admin, args: argparse.Namespace, pattern_type: PatternType) -> int:
    bindings = _bindings(args, pattern_type)
    for pattern, entries in _by_pattern(bindings).items():
        _print_acls("Adding ACLs", pattern, entries)
    admin.create_acls(bindings)
    return _list(admin, args, pattern_type)


def _filters(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBindingFilter]:
    return [  # no resource given: every ACL, as kafka-acls lists
        AclBindingFilter(ResourcePatternFilter(rtype, name, pattern_type))
        for rtype, name in _resources(args)
    ] or [AclBindingFilter()]


def _remove(admin: Admin, args: argparse.Namespace, pattern_type: PatternType) -> int:
    if args.allow_principal or args.deny_principal:
        filters = [
            AclBindingFilter(
                ResourcePatternFilter(b.pattern.resource_type, b.pattern.name, pattern_type),
                AccessControlEntryFilter(
                    b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission_type
                ),
            )
            for b in _bindings(args, PatternType.LITERAL)
        ]
    else:
        filters = _filters(args, pattern_type)
    if not args.force:
        print(f"Are you sure you want to remove the ACLs matching {len(filters)} filter(s) "
              "from the resources given? (y/n)")  # fmt: skip
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return 0
    for pattern, entries in _by_pattern(admin.delete_acls(filters)).items():
        _print_acls("Removed ACLs", pattern, entries)
    return 0


def _list(admin: Admin, args: argparse.Namespace, pattern_type: PatternType) -> int:
    principals = set(_principals(args.principal))
    found: list[AclBinding] = []
    for f in _filters(args, pattern_type):
        found += [b for b in admin.describe_acls(f) if b not in found]
    if principals:
        found = [b for b in found if b.entry.principal in principals]
    for pattern, entries in _by_pattern(found).items():
        _print_acls("Current ACLs", pattern, entries)
    return 0


run = tool_command(PROG, _run)
