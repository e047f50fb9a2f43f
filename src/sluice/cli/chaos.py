"""``sluice chaos``: a Jepsen-style fault-injection check of a 3-broker cluster.

It starts ZooKeeper and the brokers as processes, wired through a fault-injecting proxy,
and runs one round per fault: idempotent ``acks=all`` producers and a consumer run while
the fault is injected and healed over and over; every partition is then read back and
the history checked for lost acknowledged writes, duplicates, reordering, reads that
vanished and offsets that changed. It prints a table per fault and exits 1 on any
violation (or a round that could not run), 2 on bad arguments or missing prerequisites.
docs/chaos.md describes the faults, the proxy and what is not covered.
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["add_parser", "cmd_chaos"]

PROG = "sluice chaos"

FAULT_NAMES = (
    "kill", "stop", "controller", "zookeeper", "partition", "zk-partition", "corrupt",
    "disk-full",
)  # fmt: skip
"""The faults of ``sluice.testing.chaos.faults.FAULTS`` (a test keeps them in step), named
here so that building the command line imports none of the chaos machinery."""


def _faults(text: str) -> list[str]:
    if text == "all":
        return list(FAULT_NAMES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [n for n in names if n not in FAULT_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown fault(s) {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(FAULT_NAMES)} or all"
        )
    return names


def _range(text: str) -> tuple[float, float]:
    low, sep, high = text.partition(":")
    try:
        bounds = (float(low), float(high if sep else low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SECONDS or MIN:MAX, got {text!r}") from None
    if bounds[0] < 0 or bounds[1] < bounds[0]:
        raise argparse.ArgumentTypeError(f"expected 0 <= MIN <= MAX, got {text!r}")
    return bounds


def _missing_prerequisite() -> str | None:
    from sluice.metastore.zk_server import find_java, find_zookeeper_classpath

    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install confluent-kafka)"
    if find_zookeeper_classpath() is None or find_java() is None:
        return (
            "ZooKeeper or Java not found: install Debian's 'zookeeper' package "
            "(scripts/setup.sh does it) or set SLUICE_ZOOKEEPER_CLASSPATH"
        )
    return None


def cmd_chaos(args: argparse.Namespace) -> int:
    from sluice.testing.chaos import ChaosConfig, format_report, run_chaos

    if args.brokers < 3 or args.partitions < 1 or args.writers < 1 or args.rate <= 0:
        print(f"{PROG}: error: --brokers must be >= 3 (replication factor 3), --partitions "
              "and --writers >= 1, --rate > 0", file=sys.stderr)  # fmt: skip
        return 2
    missing = _missing_prerequisite()
    if missing is not None:
        print(f"{PROG}: error: {missing}", file=sys.stderr)
        return 2
    # The run's own ZooKeeper session warns on every lost connection while a fault is on.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    config = ChaosConfig(
        faults=args.faults, duration_s=args.duration, seed=args.seed, brokers=args.brokers,
        partitions=args.partitions, writers=args.writers, rate_per_s=args.rate,
        hold_s=args.hold, quiet_s=args.quiet, disk_mb=args.disk_mb, keep_data=args.keep_data,
    )  # fmt: skip

    def say(line: str) -> None:
        if not args.quiet_progress:
            print(line, flush=True)

    reports = run_chaos(config, say)
    print()
    print(format_report(reports), flush=True)
    return 1 if any(r.failed for r in reports) else 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = sub.add_parser(
        "chaos",
        help="inject faults into a local 3-broker cluster and check for lost or changed data",
        description=(
            "Start ZooKeeper and N broker processes on loopback, every broker-to-broker and "
            "broker-to-ZooKeeper connection through a fault-injecting proxy, and run one "
            "round per fault: idempotent acks=all producers write numbered values and a "
            "consumer tails every partition while the fault is injected and healed over and "
            "over; then every partition is read back and the history is checked for lost "
            "acknowledged writes, duplicates, reordering within a partition, reads of data "
            "that later vanished and offsets whose value changed. Prints a table per fault; "
            "exit status 1 on any violation. Faults: " + ", ".join(FAULT_NAMES) + "."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    chaos.add_argument("--faults", type=_faults, default="all", metavar="F[,F...]",
                       help="faults to run, in order, or 'all'")  # fmt: skip
    chaos.add_argument("--duration", type=float, default=20.0, metavar="SECONDS",
                       help="how long each fault's round injects faults")  # fmt: skip
    chaos.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    chaos.add_argument("--brokers", type=int, default=3, help="number of brokers")
    chaos.add_argument("--partitions", type=int, default=6, help="partitions of each topic")
    chaos.add_argument("--writers", type=int, default=2, help="producers per round")
    chaos.add_argument("--rate", type=float, default=100.0,
                       help="values each producer sends per second")  # fmt: skip
    chaos.add_argument("--hold", type=_range, default="2:8", metavar="MIN:MAX",
                       help="seconds a fault is held")  # fmt: skip
    chaos.add_argument("--quiet", type=_range, default="1:3", metavar="MIN:MAX",
                       help="seconds without a fault before each injection")  # fmt: skip
    chaos.add_argument("--disk-mb", type=int, default=None, metavar="MB",
                       help="size of each broker's own tmpfs for disk-full (needs root; "
                            "default 256 when disk-full runs)")  # fmt: skip
    chaos.add_argument("--keep-data", action="store_true",
                       help="keep the cluster's data directory and broker logs")  # fmt: skip
    chaos.add_argument("--no-progress", dest="quiet_progress", action="store_true",
                       help="print only the report, not each fault as it happens")  # fmt: skip
    chaos.set_defaults(func=cmd_chaos)
