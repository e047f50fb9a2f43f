"""``sluice get-offsets``: partitions' offsets for a time (like kafka-get-offsets)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    add_command_config_argument,
    command_config,
    fail,
    warner,
)

__all__ = ["TopicPartitionFilter", "add_parser", "parse_time", "parse_topic_partitions", "run"]

PROG = "sluice get-offsets"

_DESCRIPTION = """\
Print partitions' offsets, like kafka-get-offsets.sh: one "topic:partition:offset"
line per partition, sorted by topic and partition. --time picks the offset: latest
(the log end offset, the default), earliest (the log start offset), max-timestamp
(the offset of the record with the highest timestamp) or a timestamp in ms (the
first offset whose record's timestamp is at or after it). A partition the broker
has no such offset for (a timestamp after every record) is left out; one whose
leader is unknown is reported on stderr and skipped.
"""

_TOPIC_PARTITIONS_HELP = """\
comma-separated topic-partition patterns, each TOPIC_REGEX[:PARTITIONS] where
PARTITIONS is a number, a range N-M (N inclusive, M exclusive), N- (from N) or
-M (below M); an empty topic regex matches every topic, no PARTITIONS every
partition. Cannot be used with --topic or --partitions"""

# Kafka's pattern: an optional topic regex, then ":" and a partition, a range or nothing.
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")

_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}
_SPECS: dict[int, str | int] = {-1: "latest", -2: "earliest", -3: -3}


@dataclass(frozen=True)
class _Rule:
    topic: re.Pattern[str]
    lower: int  # inclusive
    upper: int | None  # exclusive; None: no bound

    def matches(self, topic: str, partition: int) -> bool:
        if not self.topic.fullmatch(topic):
            return False
        return partition >= self.lower and (self.upper is None or partition < self.upper)


@dataclass(frozen=True)
class TopicPartitionFilter:
    """Which topic-partitions to report: any of the rules matches."""

    rules: tuple[_Rule, ...]
    partitions: frozenset[int] | None = None  # --partitions: only these ids

    def matches(self, topic: str, partition: int) -> bool:
        if self.partitions is not None and partition not in self.partitions:
            return False
        return any(rule.matches(topic, partition) for rule in self.rules)


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text or ".*")
    except re.error as exc:
        raise UsageError(f"invalid topic regex {text!r}: {exc}") from None


def parse_topic_partitions(text: str) -> TopicPartitionFilter:
    """A --topic-partitions value: ``t1:1,t2:0-3,t3,t4:5-,t5:-3,:0``."""
    rules = []
    for spec in text.split(","):
        match = _RULE.fullmatch(spec)
        if match is None:
            raise UsageError(f"Invalid topic-partition rule: {spec}")
        topic, single, lower, upper = match.groups()
        if single:
            rules.append(_Rule(_regex(topic), int(single), int(single) + 1))
        elif lower or upper:
            rules.append(_Rule(_regex(topic), int(lower or 0), int(upper) if upper else None))
        elif single is not None or lower is not None:  # "t:" or "t:-": no partition given
            raise UsageError(f"Invalid topic-partition rule: {spec}")
        else:
            rules.append(_Rule(_regex(topic), 0, None))
    return TopicPartitionFilter(tuple(rules))


def _partition_ids(text: str) -> frozenset[int]:
    try:
        ids = frozenset(int(item) for item in text.split(","))
    except ValueError:
        raise UsageError(
            f"--partitions must be a comma-separated list of partition ids: {text!r}"
        ) from None
    if any(i < 0 for i in ids):
        raise UsageError(f"--partitions must not be negative: {text!r}")
    return ids


def parse_time(text: str) -> str | int:
    """A --time value as the admin client's offset spec."""
    value = _TIMES.get(text.strip().lower())
    if value is None:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < -3:
            raise UsageError(
                f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / "
                "-3 or max-timestamp, or a specified long format timestamp"
            )
    return _SPECS.get(value, value)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "get-offsets",
        help="print partitions' offsets for a time",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    parser.add_argument(
        "--topic",
        metavar="REGEX",
        help="the topics to get offsets for, a regular expression (default: every topic)",
    )
    parser.add_argument(
        "--partitions",
        metavar="0,1,...",
        help="comma-separated partition ids (default: every partition)",
    )
    parser.add_argument("--topic-partitions", metavar="PATTERN,...", help=_TOPIC_PARTITIONS_HELP)
    parser.add_argument(
        "--time",
        default="latest",
        metavar="TIME",
        help="earliest (-2), latest (-1, the default), max-timestamp (-3) or a timestamp in ms",
    )
    parser.add_argument(
        "--exclude-internal-topics",
        action="store_true",
        help="leave out internal topics such as __consumer_offsets",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        code = _run(args, print)
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at exit
        return code
    except ToolError as exc:
        return fail(PROG, exc)
    except BrokenPipeError:  # e.g. piped into head: stop quietly, also at exit
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0


def _filter(args: argparse.Namespace) -> TopicPartitionFilter:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        return parse_topic_partitions(args.topic_partitions)
    ids = None if args.partitions is None else _partition_ids(args.partitions)
    return TopicPartitionFilter((_Rule(_regex(args.topic or ""), 0, None),), ids)


def _run(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    wanted = _filter(args)
    spec = parse_time(args.time)
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    warn = warner(PROG)
    try:
        admin = Admin(args.bootstrap_server, config, warn)
        try:
            described = admin.describe_topics(sorted(admin.list_topics()))
            chosen: list[tuple[str, int]] = []
            for topic in described:
                if topic.is_internal and args.exclude_internal_topics:
                    continue
                for p in topic.partitions:
                    if not wanted.matches(topic.name, p.partition):
                        continue
                    if p.leader < 0:
                        print(
                            f"Skip getting offsets for topic-partition {topic.name}:"
                            f"{p.partition} due to error: the partition has no leader",
                            file=sys.stderr,
                        )
                        continue
                    chosen.append((topic.name, p.partition))
            if not chosen:
                raise ToolError("Could not match any topic-partitions with the specified filters")
            offsets = admin.list_offsets(chosen, spec)
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    for (topic_name, partition), offset in sorted(offsets.items()):
        if offset is not None:
            out(f"{topic_name}:{partition}:{offset}")
    return 0
