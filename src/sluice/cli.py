"""The ``sluice`` command line: the broker and Kafka-style tools."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from sluice import __version__
from sluice.config import BrokerConfig, ConfigError

__all__ = ["main"]

log = logging.getLogger("sluice")


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def _run_broker(config: BrokerConfig) -> None:
    from sluice.server.broker import Broker

    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    log.info("shutting down broker %d", broker.broker_id)
    await broker.stop()


def _skip_test_only_imports() -> None:
    """kio registers hypothesis strategies for its types whenever hypothesis is importable,
    which costs half a second; a broker process never needs them."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def cmd_broker(args: argparse.Namespace) -> int:
    _skip_test_only_imports()
    try:
        config = BrokerConfig.from_properties(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"sluice broker: {exc}", file=sys.stderr)
        return 2
    _setup_logging(args.log_level)
    # asyncio's own loop, not uvloop: fetches use loop.sendfile, which uvloop lacks.
    try:
        asyncio.run(_run_broker(config))
    except ConfigError as exc:
        print(f"sluice broker: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sluice broker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The end-to-end pipeline; Spark is imported only here, so other commands start fast."""
    from pathlib import Path

    from sluice.demo import DemoConfig, run_demo

    if args.events < 1 or args.rate < 0 or args.window < 1 or args.watermark < 0:
        print("sluice demo: --events and --window must be >= 1, --rate and --watermark >= 0",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.minutes < 1 or args.partitions < 1:
        print("sluice demo: --minutes and --partitions must be >= 1", file=sys.stderr)
        return 2
    _setup_logging(args.log_level)
    config = DemoConfig(
        events=args.events, rate=args.rate, window_s=args.window, watermark_s=args.watermark,
        minutes=args.minutes, partitions=args.partitions, output_dir=Path(args.output_dir),
        bootstrap_server=args.bootstrap_server, seed=args.seed,
    )  # fmt: skip
    result = run_demo(config)
    return 0 if result.matches else 1


def _add_demo_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    demo.add_argument("--seed", type=int, default=7, help="random seed of the generator")
    demo.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    demo.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice", description="Sluice: a Kafka-wire-compatible streaming platform."
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser(
        "broker",
        help="run a broker",
        description="Run a Sluice broker (defaults: PLAINTEXT://127.0.0.1:9092, ./sluice-data).",
    )
    broker.add_argument("--config", metavar="FILE", help="server.properties-style file")
    broker.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="set a property by its Kafka name (repeatable), e.g. log.dirs=/tmp/data",
    )  # fmt: skip
    broker.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    broker.set_defaults(func=cmd_broker)
    _add_demo_parser(sub)

    from sluice.tools import add_tool_parsers

    add_tool_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
