"""``sluice demo``'s command line; Spark and the demo load only when it runs."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from sluice.cli.broker import add_logging_arguments

__all__ = ["INTERRUPTED", "add_demo_parser", "cmd_demo", "find_java"]

INTERRUPTED = 130
"""The exit status after Ctrl-C, as a shell reports a process SIGINT ended (128 + 2)."""

JAVA_HINT = (
    "Spark needs a Java runtime (17 or 21). On Debian or Ubuntu: "
    "apt-get install openjdk-17-jre-headless (scripts/run-main.sh does it); elsewhere "
    "install Java 17 and put its java on PATH or set JAVA_HOME."
)


def find_java() -> str | None:
    """The java Spark's launcher would run: ``$JAVA_HOME/bin/java`` when JAVA_HOME is
    set, else the one on PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return str(java) if os.access(java, os.X_OK) else None
    return shutil.which("java")


def cmd_demo(args: argparse.Namespace) -> int:
    """The end-to-end pipeline; Spark is imported only here, so other commands start fast."""
    from sluice.demo import DemoConfig, run_demo

    if args.events < 1 or args.rate < 0 or args.window < 1 or args.watermark < 0:
        print("sluice demo: --events and --window must be >= 1, --rate and --watermark >= 0",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.cluster and args.bootstrap_server:
        print("sluice demo: --cluster starts its own brokers; drop --bootstrap-server",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.minutes < 1 or args.partitions < 1:
        print("sluice demo: --minutes and --partitions must be >= 1", file=sys.stderr)
        return 2
    from sluice.cli.log_format import setup_logging

    setup_logging(args.log_level, args.log_format)
    config = DemoConfig(
        events=args.events, rate=args.rate, window_s=args.window, watermark_s=args.watermark,
        minutes=args.minutes, partitions=args.partitions, output_dir=Path(args.output_dir),
        bootstrap_server=args.bootstrap_server, seed=args.seed, cluster=args.cluster,
    )  # fmt: skip
    if find_java() is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get(
            "JAVA_HOME") else "no java on PATH"  # fmt: skip
        print(f"sluice demo: {where}. {JAVA_HINT}", file=sys.stderr)
        return 1
    try:
        result = run_demo(config)
    except KeyboardInterrupt:
        print("\nsluice demo: interrupted; Spark and the broker are stopped", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:
        if _java_gateway_failed(exc):
            print(f"sluice demo: Spark's Java process did not start. {JAVA_HINT}",
                  file=sys.stderr)  # fmt: skip
            return 1
        raise
    return 0 if result.matches else 1


def _java_gateway_failed(exc: BaseException) -> bool:
    """PySpark's error when the JVM it launched exited before answering."""
    error_class = getattr(exc, "getCondition", getattr(exc, "getErrorClass", None))
    return callable(error_class) and error_class() == "JAVA_GATEWAY_EXITED"


def add_demo_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="run the end-to-end Spark pipeline demo",
        description=(
            "Start an embedded broker (or use --bootstrap-server), produce an online shop's "
            "clickstream through Sluice's producer, aggregate it with Spark Structured "
            "Streaming (views, purchases, revenue and conversion per product per event-time "
            "window, with a watermark), write the results to a topic and to Parquet, read the "
            "topic back, print a summary, check it against plain Python and draw a PNG chart. "
            "Exits 0 when the check passes."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument("--events", type=int, default=20_000, help="clickstream events to produce")
    demo.add_argument(
        "--rate", type=float, default=2_000.0, help="events per second (0: as fast as possible)"
    )
    demo.add_argument("--window", type=int, default=60, metavar="SECONDS",
                      help="event-time window length")  # fmt: skip
    demo.add_argument("--watermark", type=int, default=90, metavar="SECONDS",
                      help="how late an event may arrive; the generator's are up to 45 s late, "
                           "so a smaller value drops some and the check fails")  # fmt: skip
    demo.add_argument("--minutes", type=int, default=10,
                      help="event-time span the events cover, in minutes")  # fmt: skip
    demo.add_argument("--partitions", type=int, default=3, help="partitions of the clicks topic")
    demo.add_argument("--output-dir", default="demo-output", metavar="DIR",
                      help="where the Parquet files, checkpoints and chart go")  # fmt: skip
    demo.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help="use this cluster instead of an embedded broker")  # fmt: skip
    demo.add_argument("--cluster", action="store_true",
                      help="run on 3 broker processes (ZooKeeper, replication factor 3) and a "
                           "Spark standalone master with 2 workers, all local processes "
                           "stopped at exit; default: an embedded broker and local[2]")  # fmt: skip
    demo.add_argument("--seed", type=int, default=7, help="random seed of the generator")
    add_logging_arguments(demo, default_level="WARNING")
    demo.set_defaults(func=cmd_demo)
