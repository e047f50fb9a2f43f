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

    from sluice.tools import add_tool_parsers

    add_tool_parsers(sub)

    from sluice.demo_cli import add_demo_parser

    add_demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))
