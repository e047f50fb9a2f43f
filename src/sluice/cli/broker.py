"""``sluice broker`` and ``sluice cluster start``: a broker process, a local cluster."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time

from sluice.config import BrokerConfig, ConfigError

__all__ = ["add_broker_parsers", "cmd_broker", "cmd_cluster_start", "setup_logging"]

log = logging.getLogger("sluice")


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def _run_broker(config: BrokerConfig) -> None:
    from sluice.server.broker import Broker
    from sluice.server.gc_policy import tune_for_serving

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def stop_on_signals() -> None:
        # From the moment clients can connect, SIGTERM / SIGINT stop the broker cleanly
        # (once it has finished starting); before that they end the process, as always.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)

    await broker.start(on_listening=stop_on_signals)
    tune_for_serving()  # once everything is built: see sluice.server.gc_policy
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
    setup_logging(args.log_level)
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


def cmd_cluster_start(args: argparse.Namespace) -> int:
    """ZooKeeper plus N broker processes on loopback until Ctrl-C / SIGTERM."""
    from sluice.testing import EmbeddedCluster

    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"sluice cluster: --override needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    if args.brokers < 1:
        print("sluice cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    cluster = EmbeddedCluster(
        args.brokers, data_dir=args.data_dir, overrides=overrides, zookeeper=True
    )
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        cluster.start_all()
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"sluice cluster: cannot start: {exc}", file=sys.stderr)
        return 1
    print(f"ZooKeeper:          {cluster.zookeeper_connect}")
    print(f"bootstrap servers:  {cluster.bootstrap_servers}")
    print(f"controller:         broker {cluster.controller_id}")
    print(f"data and logs in:   {cluster.data_dir}")
    print("Ctrl-C stops every broker (controlled shutdown) and ZooKeeper.", flush=True)
    try:
        while not stopping:
            time.sleep(0.5)  # signal handlers run in between
            for broker_id in cluster.broker_ids:
                if not stopping and not cluster.is_running(broker_id):
                    print(f"broker {broker_id} exited: see {cluster.log_path(broker_id)}")
                    stopping = True
    finally:
        print("stopping the cluster...", flush=True)
        cluster.stop()
    return 0


def add_broker_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``broker`` and ``cluster start`` on ``sub``."""
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

    cluster = sub.add_parser(
        "cluster", help="run a local cluster (ZooKeeper plus brokers) for trying things out",
        description="Local clusters on loopback, for trying Sluice's replication by hand.",
    )  # fmt: skip
    cluster_sub = cluster.add_subparsers(dest="action", required=True)
    start = cluster_sub.add_parser(
        "start", help="start ZooKeeper and N brokers; Ctrl-C stops them all",
        description=(
            "Start a ZooKeeper server (Debian's zookeeper package, on a free loopback port in "
            "the data directory) and N Sluice broker processes (ids 0..N-1, free loopback "
            "ports), print the bootstrap servers, and run until Ctrl-C or SIGTERM, which "
            "stops every broker with a controlled shutdown, then ZooKeeper."
        ),
    )  # fmt: skip
    start.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    start.add_argument(
        "--data-dir", metavar="DIR", default=None,
        help="where logs and broker output go (default: a temporary directory, removed at exit)",
    )  # fmt: skip
    start.add_argument(
        "--override", metavar="KEY=VALUE", action="append", default=[],
        help="a broker property for every broker (repeatable), e.g. min.insync.replicas=2",
    )  # fmt: skip
    start.set_defaults(func=cmd_cluster_start)
