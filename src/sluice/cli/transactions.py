"""``sluice transactions``: list and describe transactions (like kafka-transactions)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    fail,
    warner,
)

__all__ = ["add_parser", "format_table", "run"]

PROG = "sluice transactions"

LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADER = [
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
]  # fmt: skip

_DESCRIPTION = """\
List and describe transactions, like kafka-transactions.sh:
  list                             every transactional id, from each broker
  describe --transactional-id ID   its coordinator's view of the transaction
find-hanging and abort --start-offset are refused: both need DescribeProducers (the
producers with an open transaction on a partition), which Sluice's broker does not
serve; abort by --producer-id is not implemented.
"""

_NO_DESCRIBE_PRODUCERS = (
    "{command} needs the DescribeProducers API (the producers with an open transaction "
    "on each partition), which Sluice's broker does not serve"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "transactions",
        help="list and describe transactions",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--command-config", metavar="FILE", help="a properties file of admin client settings"
    )
    commands = parser.add_subparsers(dest="transactions_command", metavar="COMMAND")
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser("describe", help="describe an active transactional id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    hanging = commands.add_parser("find-hanging", help="(not served) find hanging transactions")
    hanging.add_argument("--broker-id", type=int, required=True, help="broker to search")
    hanging.add_argument("--max-transaction-timeout", type=int, help="minutes (default 15)")
    abort = commands.add_parser("abort", help="(not served) abort a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int)
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ToolError as exc:
        return fail(PROG, exc)
    except BrokenPipeError:  # e.g. piped into head: stop quietly, also at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    command = args.transactions_command
    if command is None:
        raise UsageError("a command is required: list, describe, find-hanging or abort")
    if command == "abort" and args.start_offset is None:
        raise ToolError(
            "abort with --producer-id, --producer-epoch and --coordinator-epoch is not "
            "implemented (it would write the marker with WriteTxnMarkers unchecked)"
        )
    if command in ("find-hanging", "abort"):
        raise ToolError(_NO_DESCRIBE_PRODUCERS.format(command=command))
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            if command == "list":
                rows = [
                    [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
                    for t in admin.list_transactions()
                ]
                print(format_table(LIST_HEADER, rows), end="")
            else:
                d = admin.describe_transaction(args.transactional_id)
                now = int(time.time() * 1000)
                start = "None" if d.start_time_ms is None else str(d.start_time_ms)
                duration = "None" if d.start_time_ms is None else str(now - d.start_time_ms)
                row = [
                    str(d.coordinator_id), d.transactional_id, str(d.producer_id),
                    str(d.producer_epoch), d.state, str(d.timeout_ms), start, duration,
                    ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions),
                ]  # fmt: skip
                print(format_table(DESCRIBE_HEADER, [row]), end="")
        finally:
            admin.close()
    except ClientError as exc:
        what = f"transactional-id `{args.transactional_id}`" if command == "describe" else ""
        prefix = f"Failed to describe transaction state of {what}: " if what else ""
        raise ToolError(prefix + str(exc)) from exc
    return 0


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Kafka's tool table: each cell padded to its column's width, tab-separated."""
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "".join(
        "\t".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(" ") + "\n"
        for row in table
    )
