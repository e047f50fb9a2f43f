"""``sluice reassign-partitions``: move partitions' replicas between brokers (like
kafka-reassign-partitions)."""

from __future__ import annotations

import argparse
import collections
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    add_command_config_argument,
    command_config,
    tool_command,
    warner,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = [
    "add_parser",
    "follower_throttles",
    "format_reassignment_json",
    "leader_throttles",
    "parse_reassignment_json",
    "parse_topics_to_move_json",
    "proposed_move_map",
    "reassigning_brokers",
    "run",
]

PROG = "sluice reassign-partitions"

_DESCRIPTION = """\
Move partitions' replicas between brokers, like kafka-reassign-partitions.sh.
--generate proposes an assignment of the topics of --topics-to-move-json-file
({"topics": [{"topic": "t"}], "version": 1}) over --broker-list; --execute starts
the reassignment of --reassignment-json-file ({"version": 1, "partitions": [{"topic":
"t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}) after
printing the current assignment to keep for a rollback; --verify reports whether
each is complete; --cancel stops those still in progress; --list shows every
reassignment in progress. --execute --throttle N sets Kafka's replication throttles:
leader/follower.replication.throttled.rate = N on every broker a moving partition has
or gets a replica on, and the topics' leader.replication.throttled.replicas (the
replicas copied from) and follower.replication.throttled.replicas (the replicas being
added); --additional --execute --throttle N changes them while reassignments run.
--verify, once no reassignment is in progress, and --cancel clear the throttles of
every broker and of the file's topics, unless --preserve-throttles. The tool moves no
replica between a broker's log directories (every log_dirs entry must be "any"), so
--replica-alter-log-dirs-throttle, which throttles only such moves, is refused.
"""

_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional "
    "to override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment."
)
_VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, ALTER_LOG_DIRS_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
_BROKER, _TOPIC = 4, 2  # ConfigResource types

Assignment = dict[tuple[str, int], list[int]]
Ongoing = Mapping[tuple[str, int], tuple[list[int], list[int], list[int]]]
"""Reassignments in progress: (replicas, adding, removing) by partition."""
MoveMap = dict[str, dict[int, tuple[frozenset[int], frozenset[int]]]]
"""topic -> partition -> (sources, destinations) of each moving partition."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "reassign-partitions",
        help="move partitions' replicas between brokers",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    for action, text in (
        ("generate", "propose an assignment for --topics-to-move-json-file over --broker-list"),
        ("execute", "start the reassignment of --reassignment-json-file"),
        ("verify", "report whether the reassignment of --reassignment-json-file is complete"),
        ("cancel", "cancel the reassignments of --reassignment-json-file still in progress"),
        ("list", "list the partition reassignments in progress"),
    ):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help="for --generate")
    parser.add_argument(
        "--broker-list", metavar="1,2,...", help="the brokers to assign to (--generate)"
    )
    parser.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help="the reassignment (--execute, --verify, --cancel)",
    )
    parser.add_argument(
        "--additional",
        action="store_true",
        help="--execute even while other reassignments are in progress",
    )
    parser.add_argument(
        "--throttle",
        metavar="BYTES/S",
        help="with --execute: throttle the movement of partitions between brokers to this "
        "rate (bytes/s) on each broker concerned; with --additional, change it while a "
        "reassignment runs",
    )
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        metavar="BYTES/S",
        help="refused: the tool moves no replica between a broker's log directories",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify or --cancel: leave the broker and topic throttles as they are",
    )
    parser.set_defaults(func=run)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _names(tps: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in tps)


def parse_topics_to_move_json(text: str) -> list[str]:
    """``{"topics": [{"topic": "t"}, ...], "version": 1}``."""
    try:
        doc = json.loads(text)
        topics = [str(entry["topic"]) for entry in doc["topics"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(
            'the topics to move must read {"topics": [{"topic": "t"}], "version": 1}: '
            f"{type(exc).__name__}: {exc}"
        ) from None
    duplicates = sorted(t for t, n in collections.Counter(topics).items() if n > 1)
    if duplicates:
        raise ToolError(
            f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}"
        )
    return topics


def parse_reassignment_json(text: str) -> Assignment:
    """Kafka's reassignment file; every ``log_dirs`` entry must be "any" (moves between
    a broker's directories are ``sluice log-dirs``' business, not this tool's)."""
    try:
        doc = json.loads(text)
        entries = [
            (str(e["topic"]), int(e["partition"]), [int(r) for r in e["replicas"]],
             e.get("log_dirs"))
            for e in doc["partitions"]
        ]  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ToolError(
            'the reassignment must read {"version": 1, "partitions": [{"topic": "t", '
            f'"partition": 0, "replicas": [1, 2]}}]}}: {type(exc).__name__}: {exc}'
        ) from None
    if not entries:
        raise ToolError("Partition reassignment list cannot be empty")
    counts = collections.Counter((t, p) for t, p, _, _ in entries)
    duplicates = sorted(tp for tp, n in counts.items() if n > 1)
    if duplicates:
        raise ToolError(
            f"Partition reassignment contains duplicate topic partitions: {_names(duplicates)}"
        )
    result: Assignment = {}
    for topic, partition, replicas, log_dirs in entries:
        if not replicas:
            raise ToolError(f"Partition replica list cannot be empty: {topic}-{partition}")
        if len(set(replicas)) != len(replicas):
            raise ToolError(
                f"Partition replica lists may not contain duplicate entries: {topic}-"
                f"{partition} has {','.join(map(str, replicas))}"
            )
        if log_dirs is not None:
            if len(log_dirs) != len(replicas):
                raise ToolError(
                    f"Size of replicas list {replicas} is different from size of log dirs "
                    f"list {log_dirs} for partition {topic}-{partition}"
                )
            if any(d != "any" for d in log_dirs):
                raise ToolError(
                    f'{topic}-{partition}: log_dirs other than "any" are not supported; '
                    "move a replica between a broker's directories with AlterReplicaLogDirs"
                )
        result[(topic, partition)] = replicas
    return result


def format_reassignment_json(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """Kafka's compact reassignment JSON, partitions sorted by topic and partition."""
    doc = {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(replicas),
             "log_dirs": ["any"] * len(replicas)}
            for (t, p), replicas in sorted(assignment.items())
        ],
    }  # fmt: skip
    return json.dumps(doc, separators=(",", ":"))


def _broker_list(text: str | None) -> list[int]:
    if not text:
        raise UsageError("--generate requires --broker-list")
    try:
        brokers = [int(item) for item in text.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list must be comma-separated broker ids: {text!r}") from None
    duplicates = sorted(b for b, n in collections.Counter(brokers).items() if n > 1)
    if duplicates:
        raise UsageError(
            f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}"
        )
    return brokers


def _throttle(text: str | None, flag: str) -> int | None:
    """A throttle in bytes/s: a whole number, at least 0."""
    if text is None:
        return None
    if re.fullmatch(r"-?[0-9]+", text) is None:
        raise UsageError(f"{flag} must be a whole number of bytes per second, not {text!r}")
    value = int(text)
    if value < 0:
        raise UsageError(f"{flag} must be at least 0 bytes per second, not {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    actions = [a for a in ("generate", "execute", "verify", "cancel", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: "
            "--generate, --execute, --verify, --cancel or --list"
        )
    action = actions[0]
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    throttle = _throttle(args.throttle, "--throttle")
    if throttle is not None and action != "execute":
        raise UsageError("--throttle is only for --execute")
    if args.replica_alter_log_dirs_throttle is not None:
        raise UsageError(
            "--replica-alter-log-dirs-throttle throttles moves between a broker's log "
            'directories, and this tool makes none (every log_dirs entry must be "any"); '
            f"set {ALTER_LOG_DIRS_RATE} with sluice configs"
        )
    if args.preserve_throttles and action not in ("verify", "cancel"):
        raise UsageError("--preserve-throttles is only for --verify and --cancel")
    if action == "generate":
        if not args.topics_to_move_json_file:
            raise UsageError("--generate requires --topics-to-move-json-file")
        brokers = _broker_list(args.broker_list)
        topics = parse_topics_to_move_json(_read(args.topics_to_move_json_file))
    elif action != "list":
        if not args.reassignment_json_file:
            raise UsageError(f"--{action} requires --reassignment-json-file")
        target = parse_reassignment_json(_read(args.reassignment_json_file))
    if args.additional and action != "execute":
        raise UsageError("--additional is only for --execute")
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            if action == "generate":
                _generate(admin, topics, brokers)
            elif action == "execute":
                _execute(admin, target, args.additional, throttle)
            elif action == "verify":
                _verify(admin, target, args.preserve_throttles)
            elif action == "cancel":
                _cancel(admin, target, args.preserve_throttles)
            else:
                _list(admin)
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0


def _current(admin: Admin, partitions: Sequence[tuple[str, int]]) -> Assignment:
    """Each partition's replicas now; an unknown partition is an error."""
    topics = sorted({t for t, _ in partitions})
    from sluice.cli.tool_clients import ClientError

    try:
        described = {t.name: t for t in admin.describe_topics(topics)}
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    out: Assignment = {}
    for topic, partition in partitions:
        found = [p for p in described[topic].partitions if p.partition == partition]
        if not found:
            raise ToolError(f"Unable to find partition: {topic}-{partition}")
        out[(topic, partition)] = list(found[0].replicas)
    return out


def _generate(admin: Admin, topics: list[str], brokers: list[int]) -> None:
    from sluice.controller.admin_zk_client import assign_replicas_to_brokers

    existing = set(admin.broker_ids())
    missing = sorted(b for b in brokers if b not in existing)
    if missing:
        raise ToolError(f"The following brokers do not exist: {','.join(map(str, missing))}")
    current: Assignment = {}
    proposed: Assignment = {}
    for topic in admin.describe_topics(topics):
        replication = len(topic.partitions[0].replicas) if topic.partitions else 0
        for p in topic.partitions:
            current[(topic.name, p.partition)] = list(p.replicas)
        if replication > len(brokers):
            raise ToolError(
                f"Replication factor: {replication} larger than available brokers: {len(brokers)}."
            )
        if topic.partitions:
            spread = assign_replicas_to_brokers(brokers, len(topic.partitions), replication)
            for partition, replicas in spread.items():
                proposed[(topic.name, partition)] = replicas
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


def proposed_move_map(ongoing: Ongoing, proposed: Assignment, current: Assignment) -> MoveMap:
    """Every moving partition's sources and destinations, as Kafka's
    calculateProposedMoveMap: the reassignments in progress (sources: their replicas but
    the adding ones; destinations: the adding ones), then each proposed partition
    (sources: those of its reassignment in progress, else its current replicas;
    destinations: its proposed replicas that are not sources)."""
    moves: MoveMap = {}
    for (topic, partition), (replicas, adding, _) in ongoing.items():
        moves.setdefault(topic, {})[partition] = (
            frozenset(replicas) - frozenset(adding),
            frozenset(adding),
        )
    for (topic, partition), replicas in proposed.items():
        by_partition = moves.setdefault(topic, {})
        if partition in by_partition:
            sources = by_partition[partition][0]
        else:
            sources = frozenset(current[(topic, partition)])
        by_partition[partition] = (sources, frozenset(replicas) - sources)
    return moves


def _throttled_replicas(by_partition: Mapping[int, frozenset[int]]) -> str:
    # Kafka sorts the "partition:broker" entries as strings (a TreeSet).
    return ",".join(sorted(f"{p}:{b}" for p, brokers in by_partition.items() for b in brokers))


def leader_throttles(moves: MoveMap) -> dict[str, str]:
    """Each topic's leader.replication.throttled.replicas: the moves' sources."""
    return {
        topic: _throttled_replicas({p: src for p, (src, _) in parts.items()})
        for topic, parts in moves.items()
    }


def follower_throttles(moves: MoveMap) -> dict[str, str]:
    """Each topic's follower.replication.throttled.replicas: the moves' destinations."""
    return {
        topic: _throttled_replicas({p: dst - src for p, (src, dst) in parts.items()})
        for topic, parts in moves.items()
    }


def reassigning_brokers(moves: MoveMap) -> list[int]:
    """Every broker that is a source or a destination of a move."""
    return sorted({b for parts in moves.values() for s, d in parts.values() for b in s | d})


def _set_throttles(admin: Admin, moves: MoveMap, throttle: int) -> None:
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    for topic in sorted(moves):
        admin.alter_configs(
            _TOPIC, topic, {LEADER_REPLICAS: leaders[topic], FOLLOWER_REPLICAS: followers[topic]},
            (),
        )  # fmt: skip
    rate = str(throttle)
    for broker in reassigning_brokers(moves):
        admin.alter_configs(_BROKER, str(broker), {LEADER_RATE: rate, FOLLOWER_RATE: rate}, ())
    print(f"The inter-broker throttle limit was set to {throttle} B/s")


def _clear_throttles(admin: Admin, target: Assignment) -> None:
    """Kafka's clearAllThrottles: the broker-level throttles of every live broker and
    every broker the file names, the topic-level ones of the file's topics."""
    brokers = sorted(set(admin.broker_ids()) | {b for r in target.values() for b in r})
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}")
    for broker in brokers:
        admin.alter_configs(_BROKER, str(broker), {}, BROKER_LEVEL_THROTTLES)
    topics = sorted({t for t, _ in target})
    plural = "" if len(topics) == 1 else "s"
    print(f"Clearing topic-level throttles on topic{plural} {','.join(topics)}")
    for topic in topics:
        admin.alter_configs(_TOPIC, topic, {}, TOPIC_LEVEL_THROTTLES)


def _execute(admin: Admin, proposed: Assignment, additional: bool, throttle: int | None) -> None:
    ongoing = admin.list_partition_reassignments(None)
    if ongoing and not additional:
        raise ToolError(_EXISTING)
    current = _current(admin, sorted(proposed))
    existing = set(admin.broker_ids())
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - existing)
    if unknown:
        raise ToolError(
            "The proposed assignment contains non-existent brokerIDs: "
            + ",".join(map(str, unknown))
        )
    print(
        "Current partition replica assignment\n\n"
        f"{format_reassignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if throttle is not None:
        print(_VERIFY_WARNING)
        _set_throttles(admin, proposed_move_map(ongoing, proposed, current), throttle)
    _alter(admin, proposed, "Error reassigning partition(s)")
    plural = "" if len(proposed) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {_names(sorted(proposed))}")


def _alter(admin: Admin, targets: Mapping[tuple[str, int], list[int] | None], failed: str) -> None:
    """AlterPartitionReassignments (None cancels); ToolError naming each refused one."""
    results = admin.alter_partition_reassignments(targets)
    errors = sorted(tp for tp, (code, _) in results.items() if code is not None)
    if errors:
        lines = [f"{t}-{p}: {results[(t, p)][1] or results[(t, p)][0]}" for t, p in errors]
        raise ToolError(f"{failed}:\n" + "\n".join(lines))


def _verify(admin: Admin, target: Assignment, preserve_throttles: bool) -> None:
    ongoing = admin.list_partition_reassignments(None)
    current = _current(admin, sorted(tp for tp in target if tp not in ongoing))
    print("Status of partition reassignment:")
    for tp in sorted(target):
        name = f"{tp[0]}-{tp[1]}"
        if tp in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
        elif current[tp] == target[tp]:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{','.join(map(str, current[tp]))} rather than "
                f"{','.join(map(str, target[tp]))}."
            )
    # As Kafka: only once no reassignment at all is in progress, since the throttles of
    # another one may be the same configs.
    if not ongoing and not preserve_throttles:
        _clear_throttles(admin, target)


def _cancel(admin: Admin, target: Assignment, preserve_throttles: bool) -> None:
    ongoing = admin.list_partition_reassignments(sorted(target))
    active = sorted(tp for tp in target if tp in ongoing)
    if not active:
        print("None of the specified partition reassignments are active.")
    else:
        _alter(admin, dict.fromkeys(active), "Error cancelling partition reassignment(s)")
        plural = "" if len(active) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {_names(active)}")
    if not preserve_throttles:
        _clear_throttles(admin, target)


def _list(admin: Admin) -> None:
    ongoing = admin.list_partition_reassignments(None)
    if not ongoing:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for (topic, partition), (replicas, adding, removing) in sorted(ongoing.items()):
        print(
            f"{topic}-{partition}: replicas: {','.join(map(str, replicas))}. "
            f"adding: {','.join(map(str, adding))}. removing: {','.join(map(str, removing))}."
        )


run = tool_command(PROG, _run)
