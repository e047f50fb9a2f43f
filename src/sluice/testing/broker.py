"""``EmbeddedBroker``: a real broker on a background thread, for tests and notebooks.

    with sluice.EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

It listens on a free loopback port with a temporary data directory (removed
on exit unless ``log_dir`` was given) and stops cleanly when the block ends.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from sluice.config import BrokerConfig

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker:
    """Runs one Sluice broker in-process on its own event loop thread."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        log_dir: str | Path | None = None,
        startup_timeout_s: float = 30.0,
        coordination_store: Any = None,
    ) -> None:
        """``coordination_store``: a factory of coordination-store sessions that makes
        the broker a cluster member without ZooKeeper (see EmbeddedCluster)."""
        self._own_dir = log_dir is None
        own = log_dir is None
        self.log_dir = Path(tempfile.mkdtemp(prefix="sluice-")) if own else Path(str(log_dir))
        values = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.log_dir),
            "group.initial.rebalance.delay.ms": "0",
        }
        values.update({k: str(v) for k, v in (config or {}).items()})
        self.config = BrokerConfig(values)
        self._timeout = startup_timeout_s
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._store_factory = coordination_store
        self._crash = False
        self._error: BaseException | None = None
        self.broker: Any = None

    @property
    def bootstrap_servers(self) -> str:
        host, port = self.broker.advertised[0]
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        return int(self.broker.port)

    def start(self) -> EmbeddedBroker:
        self._thread = threading.Thread(target=self._run, name="sluice-embedded", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._timeout):
            raise TimeoutError("embedded broker did not start in time")
        if self._error is not None:
            raise RuntimeError("embedded broker failed to start") from self._error
        return self

    def _run(self) -> None:
        from sluice.server.broker import Broker

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                self.broker = Broker(self.config, coordination_store=self._store_factory)
                await self.broker.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            if self._crash:
                await self.broker.crash()
            else:
                await self.broker.stop()

        asyncio.run(main())

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's event loop and return its result."""
        assert self._loop is not None

        async def invoke() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(self._timeout)

    def kill(self) -> None:
        """Stop abruptly, as kill -9 would (no controlled shutdown, no clean marker);
        the data directory is kept so that the broker can be started again."""
        self._crash = True
        own, self._own_dir = self._own_dir, False
        self.stop()
        self._own_dir = own

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(self._timeout)
        if self._own_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
