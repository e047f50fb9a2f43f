"""``sluice leader-election``: preferred or unclean leader elections (like
kafka-leader-election)."""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    tool_command,
    warner,
)

__all__ = ["add_parser", "exception_name", "parse_json_partitions", "run"]

PROG = "sluice leader-election"

_DESCRIPTION = """\
Ask the controller to elect leaders, like kafka-leader-election.sh. PREFERRED makes
each partition's first replica its leader when it is alive and in the ISR; UNCLEAN
elects a live replica outside the ISR for a partition without a leader (records it
lacks are lost). The partitions are one (--topic and --partition), those of a JSON
file ({"partitions": [{"topic": "t", "partition": 0}, ...]}, --path-to-json-file) or
all of them (--all-topic-partitions). Prints the partitions elected and those whose
leader already fitted; any partition that could not be elected makes it exit 1.
"""

_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "leader-election",
        help="elect preferred or unclean partition leaders",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--admin.config",
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help="a properties file of admin client settings",
    )
    parser.add_argument(
        "--election-type", metavar="PREFERRED|UNCLEAN", help="the kind of election (required)"
    )
    parser.add_argument("--topic", help="the topic of the partition to elect a leader for")
    parser.add_argument(
        "--partition", type=int, help="the partition to elect a leader for (with --topic)"
    )
    parser.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="elect leaders for every partition of every topic",
    )
    parser.add_argument(
        "--path-to-json-file", metavar="FILE", help="a JSON file naming the partitions"
    )
    parser.set_defaults(func=run)


def exception_name(code: str) -> str:
    """The Java exception class Kafka names for an error code (``ELECTION_NOT_NEEDED``
    -> ``org.apache.kafka.common.errors.ElectionNotNeededException``)."""
    camel = "".join(word.capitalize() for word in code.lower().split("_"))
    return f"org.apache.kafka.common.errors.{camel}Exception"


def parse_json_partitions(text: str, source: str) -> list[tuple[str, int]]:
    """``{"partitions": [{"topic": ..., "partition": ...}, ...]}``; duplicates are an error."""
    try:
        doc = json.loads(text)
        entries = doc["partitions"]
        found = [(str(e["topic"]), int(e["partition"])) for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(
            f"{source} is not a partition list "
            '({"partitions": [{"topic": "t", "partition": 0}, ...]}): '
            f"{type(exc).__name__}: {exc}"
        ) from None
    counts = collections.Counter(found)
    duplicates = sorted(tp for tp, n in counts.items() if n > 1)
    if duplicates:
        names = ", ".join(f"{t}-{p}" for t, p in duplicates)
        raise ToolError(f"Replica election data contains duplicate partitions: {names}")
    return found


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    chosen = [
        flag
        for flag, given in (
            ("--all-topic-partitions", args.all_topic_partitions),
            ("--topic", args.topic is not None),
            ("--path-to-json-file", args.path_to_json_file is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise UsageError(
            "One and only one of the following options is required: "
            "--all-topic-partitions, --topic, --path-to-json-file"
        )
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition requires --topic")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise UsageError("--topic requires --partition")
        return [(args.topic, args.partition)]
    try:
        text = Path(args.path_to_json_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {args.path_to_json_file}: {exc.strerror or exc}") from exc
    return parse_json_partitions(text, args.path_to_json_file)


def _run(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    if args.election_type is None:
        raise UsageError("--election-type is required")
    kind = args.election_type.upper()
    if kind not in _TYPES:
        raise UsageError(f"--election-type must be PREFERRED or UNCLEAN, not {args.election_type}")
    partitions = _partitions(args)
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            results = admin.elect_leaders(_TYPES[kind], partitions)
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc

    def names(tps: list[tuple[str, int]]) -> str:
        return ", ".join(f"{t}-{p}" for t, p in tps)

    ordered = sorted(results)
    elected = [tp for tp in ordered if results[tp][0] is None]
    noop = [tp for tp in ordered if results[tp][0] == "ELECTION_NOT_NEEDED"]
    failed = [tp for tp in ordered if results[tp][0] not in (None, "ELECTION_NOT_NEEDED")]
    if elected:
        print(f"Successfully completed leader election ({kind}) for partitions {names(elected)}")
    if noop:
        print(f"Valid replica already elected for partitions {names(noop)}")
    for tp in failed:
        code, message = results[tp]
        error = exception_name(code or "UNKNOWN_SERVER_ERROR")
        print(
            f"Error completing leader election ({kind}) for partition: {names([tp])}: "
            f"{error}{': ' + message if message else ''}"
        )
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0


run = tool_command(PROG, _run)
