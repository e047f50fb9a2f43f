"""``sluice log-dirs``: describe brokers' log directories (like kafka-log-dirs)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

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
    from sluice.cli.tool_types import LogDirInfo

__all__ = ["add_parser", "format_as_json", "run"]

PROG = "sluice log-dirs"

_DESCRIPTION = """\
Describe the log directories of brokers, like kafka-log-dirs.sh: for each broker,
each directory of its log.dirs with its error (the Java exception class name Kafka
prints, null when online) and its partition logs, each with its size in bytes, its
offset lag and whether it is the future log of a move between directories
(AlterReplicaLogDirs). The result is printed as one line of JSON, as Kafka does.
"""

# The Java exception classes kafka-log-dirs names for a directory's error.
_EXCEPTIONS = {
    "KAFKA_STORAGE_ERROR": "org.apache.kafka.common.errors.KafkaStorageException",
    "CLUSTER_AUTHORIZATION_FAILED": "org.apache.kafka.common.errors.ClusterAuthorizationException",
}
_UNKNOWN = "org.apache.kafka.common.errors.UnknownServerException"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "log-dirs",
        help="describe brokers' log directories",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--describe", action="store_true", help="describe the log directories (required)"
    )
    parser.add_argument(
        "--broker-list",
        metavar="0,1,...",
        help="the brokers to query (default: every broker of the cluster)",
    )
    parser.add_argument(
        "--topic-list",
        metavar="TOPIC,...",
        help="only the partitions of these topics (default: every topic)",
    )
    add_command_config_argument(parser)
    parser.set_defaults(func=run)


def _ids(text: str | None, what: str) -> list[int] | None:
    if text is None or not text.strip():
        return None
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of broker ids: {text!r}") from None


def _run(args: argparse.Namespace) -> int:
    if not args.describe:
        raise UsageError("Command must include option '--describe'")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    wanted = _ids(args.broker_list, "--broker-list")
    topics = [t for t in (args.topic_list or "").split(",") if t]
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            existing = sorted(admin.broker_ids())
            brokers = existing if wanted is None else wanted
            missing = [b for b in brokers if b not in existing]
            if missing:
                raise ToolError(
                    "ERROR: The given brokers do not exist from --broker-list: "
                    f"{','.join(map(str, missing))}. Current existent brokers: "
                    f"{','.join(map(str, existing))}"
                )
            print("Querying brokers for log directories information")
            found = admin.describe_log_dirs(brokers)
            print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
            print(format_as_json(found, topics))
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0


def format_as_json(found: dict[int, list[LogDirInfo]], topics: list[str]) -> str:
    """kafka-log-dirs' JSON: version 1, each broker's directories and partitions (those of
    ``topics`` only, when given)."""
    doc: dict[str, Any] = {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": d.path,
                        "error": None if d.error is None else _EXCEPTIONS.get(d.error, _UNKNOWN),
                        "partitions": [
                            {
                                "partition": f"{r.topic}-{r.partition}",
                                "size": r.size,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            }
                            for r in d.replicas
                            if not topics or r.topic in topics
                        ],
                    }
                    for d in dirs
                ],
            }
            for broker, dirs in found.items()
        ],
    }
    return json.dumps(doc, separators=(",", ":"))


run = tool_command(PROG, _run)
