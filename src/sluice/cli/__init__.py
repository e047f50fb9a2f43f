"""The ``sluice`` command line: the broker, a local cluster, Kafka-style tools, the demo,
the benchmarks and the chaos check, one module per command.

``sluice broker`` builds only its own parser (``tools=False``), so a broker process
imports none of the tools, Spark or the benchmarks.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from sluice import __version__
from sluice.cli.broker import add_broker_parsers

__all__ = ["build_parser", "main"]


def build_parser(tools: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``tools=False`` leaves out the tool, demo and bench
    subcommands (and their imports), for ``sluice broker``, which needs none of them."""
    parser = argparse.ArgumentParser(
        prog="sluice", description="Sluice: a Kafka-wire-compatible streaming platform."
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_broker_parsers(sub)
    if not tools:
        return parser

    from sluice.cli import (
        acls,
        bench,
        certs,
        chaos,
        cluster,
        configs,
        console_consumer,
        console_producer,
        consumer_groups,
        demo,
        dump_log,
        get_offsets,
        leader_election,
        log_dirs,
        reassign_partitions,
        topics,
        transactions,
    )

    cluster.add_parser(sub)
    topics.add_parser(sub)
    configs.add_parser(sub)
    console_producer.add_parser(sub)
    console_consumer.add_parser(sub)
    consumer_groups.add_parser(sub)
    acls.add_parser(sub)
    dump_log.add_parser(sub)
    log_dirs.add_parser(sub)
    get_offsets.add_parser(sub)
    leader_election.add_parser(sub)
    reassign_partitions.add_parser(sub)
    demo.add_demo_parser(sub)
    bench.add_bench_parser(sub)
    chaos.add_parser(sub)
    certs.add_parser(sub)
    transactions.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["broker"]:
        args, unknown = build_parser(tools=False).parse_known_args(argv)
        if unknown:  # the whole command line's usage and error, as for any command
            args = build_parser().parse_args(argv)
    else:
        args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into a reader that stopped (| head): end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nor a second error when flushing at exit
        return 0
