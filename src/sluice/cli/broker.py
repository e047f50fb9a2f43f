"""``sluice broker``: a broker process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING

from sluice.cli.log_format import LOG_FORMATS, LOG_LEVELS, log_level, setup_logging
from sluice.config import BrokerConfig, ConfigError
from sluice.log.errors import KafkaStorageException

if TYPE_CHECKING:
    from sluice.server.broker import Broker

__all__ = [
    "DEV_SETTINGS",
    "add_broker_parsers",
    "add_logging_arguments",
    "broker_config",
    "cmd_broker",
    "setup_logging",
]

log = logging.getLogger("sluice")

DEV_METRICS_PORT = 9404
"""``--dev``'s metrics port (the Prometheus JMX exporter's usual port)."""
DEV_CONSOLE_PORT = 8080
"""``--dev``'s web console port."""
DEV_SETTINGS: dict[str, str] = {
    "metrics.port": str(DEV_METRICS_PORT),
    "console.port": str(DEV_CONSOLE_PORT),
}
"""What ``--dev`` turns on, before the config file and ``--override`` (which win)."""


def dev_urls(broker: Broker) -> list[str]:
    """What ``--dev`` prints once the broker serves: the URLs of what it turned on."""
    urls = []
    if broker.metrics_endpoint is not None:
        urls.append(f"metrics: {broker.metrics_endpoint.url}")
    if broker.console is not None:
        urls.append(f"console: {broker.console.url}")
    return urls


async def _run_broker(config: BrokerConfig, dev: bool = False) -> None:
    from sluice.server.broker import Broker
    from sluice.server.gc_policy import serving_process, tune_for_serving

    serving_process()
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def stop_on_signals() -> None:
        # From the moment clients can connect, SIGTERM / SIGINT stop the broker cleanly
        # (once it has finished starting); before that they end the process, as always.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)

    await broker.start(on_listening=stop_on_signals)
    if dev:
        for line in dev_urls(broker):
            print(line, flush=True)
    tune_for_serving()  # once everything is built: see sluice.server.gc_policy
    await stopping.wait()
    log.info("shutting down broker %d", broker.broker_id)
    await broker.stop()


def _skip_test_only_imports() -> None:
    """kio registers hypothesis strategies for its types whenever hypothesis is importable,
    which costs half a second; a broker process never needs them."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def broker_config(path: str | None, overrides: list[str], *, dev: bool = False) -> BrokerConfig:
    """The config file, then the overrides; with ``dev``, :data:`DEV_SETTINGS` for the
    keys neither sets."""
    config = BrokerConfig.from_properties(path, overrides)
    if not dev:
        return config
    extra = [f"{key}={value}" for key, value in DEV_SETTINGS.items() if not config.is_set(key)]
    return BrokerConfig.from_properties(path, [*extra, *overrides])


def cmd_broker(args: argparse.Namespace) -> int:
    _skip_test_only_imports()
    try:
        config = broker_config(args.config, args.override, dev=args.dev)
    except (ConfigError, OSError) as exc:
        print(f"sluice broker: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level, args.log_format)
    if config.ignored_keys:
        log.warning(
            "these Kafka broker configs have no effect in Sluice and are ignored: %s "
            "(docs/broker.md, Configuration files)",
            ", ".join(config.ignored_keys),
        )
    # asyncio's own loop, not uvloop: fetches use loop.sendfile, which uvloop lacks.
    try:
        asyncio.run(_run_broker(config, dev=args.dev))
    except ConfigError as exc:
        print(f"sluice broker: {exc}", file=sys.stderr)
        return 2
    except (OSError, KafkaStorageException) as exc:  # no log dir could be loaded
        print(f"sluice broker: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def add_broker_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``broker`` on ``sub``."""
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
    add_logging_arguments(broker, default_level="INFO")
    broker.add_argument(
        "--dev", action="store_true",
        help=f"development mode: the metrics endpoint on port {DEV_METRICS_PORT} "
        "(metrics.port; the config file and --override still win), its URL printed",
    )  # fmt: skip
    broker.set_defaults(func=cmd_broker)


def add_logging_arguments(parser: argparse.ArgumentParser, default_level: str) -> None:
    """``--log-level`` and ``--log-format``, checked by argparse."""
    parser.add_argument(
        "--log-level", type=log_level, choices=LOG_LEVELS, default=default_level,
        help="the least level logged (the request log, logger sluice.request, is at DEBUG)",
    )  # fmt: skip
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text",
        help="text lines, or one JSON object per line (ts, level, logger, message, ids)",
    )  # fmt: skip
