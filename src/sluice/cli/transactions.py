"""``sluice transactions``: list, describe, find hanging and abort transactions (like
kafka-transactions).

A *hanging* transaction is one a partition holds open (its records written, no marker)
that no transaction coordinator will ever end: the coordinator does not count the
partition in the producer's transaction, or no longer knows the producer. It holds the
partition's last stable offset back, so ``read_committed`` consumers stop there.
``find-hanging`` finds them as kafka-transactions does: the open transactions of
DescribeProducers older than ``--max-transaction-timeout`` whose producer id no
coordinator lists (ListTransactions) or whose coordinator's transaction
(DescribeTransactions) does not hold the partition. ``abort`` writes the ABORT marker
through the partition leader (WriteTxnMarkers), for the producer found at
``--start-offset`` or named by ``--producer-id``, ``--producer-epoch`` and
``--coordinator-epoch``.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    add_command_config_argument,
    command_config,
    fail,
    warner,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = ["add_parser", "format_table", "run"]

PROG = "sluice transactions"

LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADER = [
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
]  # fmt: skip
PRODUCERS_HEADER = [
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
]  # fmt: skip
HANGING_HEADER = [
    "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
    "LastTimestamp", "Duration(min)",
]  # fmt: skip

_DESCRIPTION = """\
List, describe and abort transactions, like kafka-transactions.sh:
  list                             every transactional id, from each broker
  describe --transactional-id ID   its coordinator's view of the transaction
  describe-producers --topic T --partition P [--broker-id N]
                                   the producers the partition's leader knows
  find-hanging --broker-id N | --topic T [--partition P] [--max-transaction-timeout MIN]
                                   open transactions no coordinator will end
  abort --topic T --partition P (--start-offset O |
        --producer-id I --producer-epoch E --coordinator-epoch C)
                                   write the ABORT marker of a hanging transaction
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "transactions",
        help="list, describe, find hanging and abort transactions",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    commands = parser.add_subparsers(dest="transactions_command", metavar="COMMAND")
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser("describe", help="describe an active transactional id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a partition"
    )
    producers.add_argument("--broker-id", type=int, help="ask this replica, not the leader")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="broker id to search")
    hanging.add_argument(
        "--max-transaction-timeout", type=int, default=15,
        help="maximum transaction timeout in minutes to limit the search (default 15)",
    )  # fmt: skip
    hanging.add_argument("--topic", help="topic to search (required with --partition)")
    hanging.add_argument("--partition", type=int, help="partition number")
    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (needs CLUSTER_ACTION on the cluster)"
    )
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction")
    abort.add_argument("--producer-id", type=int, help="producer id")
    abort.add_argument("--producer-epoch", type=int, help="producer epoch")
    abort.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ToolError as exc:  # a broken pipe (| head) is sluice.cli.main's
        return fail(PROG, exc)


def _check_arguments(args: argparse.Namespace) -> None:
    """kafka-transactions' checks of the commands' arguments."""
    command = args.transactions_command
    if command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise UsageError(
                "The `find-hanging` command requires either --topic or --broker-id to limit "
                "the scope of the search"
            )
        if args.partition is not None and args.topic is None:
            raise UsageError("The --partition argument requires --topic to be provided")
    if command == "abort" and args.start_offset is None:
        if args.producer_id is None:
            raise UsageError(
                "The transaction to abort must be identified either with --start-offset "
                "(for brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
                "--coordinator-epoch (for older brokers)"
            )
        for name in ("producer_epoch", "coordinator_epoch"):
            if getattr(args, name) is None:
                raise UsageError(f"Missing required argument --{name.replace('_', '-')}")


def _run(args: argparse.Namespace) -> int:
    command = args.transactions_command
    if command is None:
        raise UsageError(
            "a command is required: list, describe, describe-producers, find-hanging or abort"
        )
    _check_arguments(args)
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    admin = None
    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        _COMMANDS[command](admin, args)
    except ClientError as exc:
        what = f"transactional-id `{args.transactional_id}`" if command == "describe" else ""
        prefix = f"Failed to describe transaction state of {what}: " if what else ""
        raise ToolError(prefix + str(exc)) from exc
    finally:
        if admin is not None:
            admin.close()
    return 0


def _list(admin: Admin, _args: argparse.Namespace) -> None:
    rows = [
        [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
        for t in admin.list_transactions()
    ]
    print(format_table(LIST_HEADER, rows), end="")


def _describe(admin: Admin, args: argparse.Namespace) -> None:
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


def _describe_producers(admin: Admin, args: argparse.Namespace) -> None:
    from sluice.cli.tool_clients import ClientError

    tp = (args.topic, args.partition)
    try:
        states = admin.describe_producers([tp], args.broker_id)[tp]
    except ClientError as exc:
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise ToolError(
            f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}: {exc}"
        ) from exc
    rows = [
        [str(s.producer_id), str(s.producer_epoch),
         str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
         str(s.last_sequence), str(s.last_timestamp),
         "None" if s.current_transaction_start_offset is None
         else str(s.current_transaction_start_offset)]
        for s in states
    ]  # fmt: skip
    print(format_table(PRODUCERS_HEADER, rows), end="")


def _find_hanging(admin: Admin, args: argparse.Namespace) -> None:
    partitions = _partitions_to_search(admin, args)
    max_timeout_ms = args.max_transaction_timeout * 60_000
    now = int(time.time() * 1000)
    candidates = [
        (tp, state)
        for tp, states in admin.describe_producers(partitions, args.broker_id).items()
        for state in states
        if state.current_transaction_start_offset is not None
        and now - state.last_timestamp > max_timeout_ms
    ]
    hanging = []
    if candidates:
        producer_ids = {state.producer_id for _, state in candidates}
        listed = {
            t.producer_id: t.transactional_id
            for t in admin.list_transactions()
            if t.producer_id in producer_ids
        }
        held = {txn_id: _held_partitions(admin, txn_id) for txn_id in set(listed.values())}
        for tp, state in candidates:
            found = listed.get(state.producer_id)
            partitions_held = None if found is None else held[found]
            if partitions_held is None or tp not in partitions_held:
                hanging.append((tp, state))
    rows = [
        [tp[0], str(tp[1]), str(s.producer_id), str(s.producer_epoch),
         str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
         str(s.current_transaction_start_offset), str(s.last_timestamp),
         str((now - s.last_timestamp) // 60_000)]
        for tp, s in hanging
    ]  # fmt: skip
    print(format_table(HANGING_HEADER, rows), end="")


def _held_partitions(admin: Admin, transactional_id: str) -> set[tuple[str, int]] | None:
    """The partitions the coordinator counts in the transaction (None: it does not know
    the transactional id)."""
    from sluice.cli.tool_clients import ClientError

    try:
        description = admin.describe_transaction(transactional_id)
    except ClientError as exc:
        if exc.code == "TRANSACTIONAL_ID_NOT_FOUND":
            return None
        raise
    return {(tp.topic, tp.partition) for tp in description.partitions}


def _partitions_to_search(admin: Admin, args: argparse.Namespace) -> list[tuple[str, int]]:
    """The partitions named, or those of the topic (every topic) with a replica on
    ``--broker-id``."""
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else sorted(admin.list_topics())
    return [
        (t.name, p.partition)
        for t in admin.describe_topics(topics)
        for p in t.partitions
        if args.broker_id is None or args.broker_id in p.replicas
    ]


def _abort(admin: Admin, args: argparse.Namespace) -> None:
    from sluice.cli.tool_clients import ClientError

    tp = (args.topic, args.partition)
    if args.start_offset is None:
        # a producer that never had a marker reports coordinator epoch -1: 0 is at most
        # any coordinator epoch, as kafka-transactions uses
        spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        try:
            states = admin.describe_producers([tp])[tp]
        except ClientError as exc:
            raise ToolError(
                f"Failed to validate producer state for partition {tp[0]}-{tp[1]}: {exc}"
            ) from exc
        found = [s for s in states if s.current_transaction_start_offset == args.start_offset]
        if not found:
            raise ToolError(
                f"Could not find any open transactions starting at offset {args.start_offset} "
                f"on partition {tp[0]}-{tp[1]}"
            )
        state = found[0]
        spec = (state.producer_id, state.producer_epoch, state.coordinator_epoch or 0)
    try:
        admin.abort_transaction(tp, *spec)
    except ClientError as exc:
        raise ToolError(
            f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp[0]}-{tp[1]}, "
            f"producerId={spec[0]}, producerEpoch={spec[1]}, coordinatorEpoch={spec[2]}): {exc}"
        ) from exc


_COMMANDS = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "find-hanging": _find_hanging,
    "abort": _abort,
}


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Kafka's tool table: each cell padded to its column's width, tab-separated."""
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "".join(
        "\t".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(" ") + "\n"
        for row in table
    )
