"""``EmbeddedBroker``: a real broker on a background thread, for tests and notebooks.

    with sluice.EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

It listens on a free loopback port with a temporary data directory (removed
on exit unless ``log_dir`` was given) and stops cleanly when the block ends.
:meth:`EmbeddedBroker.control` registers fault hooks on its requests
(:mod:`sluice.testing.control`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from sluice.config import BrokerConfig
from sluice.testing.control import Control, RequestControl, RequestControls

if TYPE_CHECKING:
    from sluice.metastore.store import CoordinationStore
    from sluice.server.broker import Broker

__all__ = ["EmbeddedBroker"]

T = TypeVar("T")


class EmbeddedBroker:
    """Runs one Sluice broker in-process on its own event loop thread."""

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        log_dir: str | Path | None = None,
        startup_timeout_s: float = 30.0,
        coordination_store: Callable[[], CoordinationStore] | None = None,
        controls: RequestControls | None = None,
    ) -> None:
        """``coordination_store``: a factory of coordination-store sessions that makes
        the broker a cluster member without ZooKeeper (see EmbeddedCluster).
        ``controls``: the request controls to apply (EmbeddedCluster keeps one set per
        broker id across restarts); a new, empty set by default."""
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
        self.controls = controls if controls is not None else RequestControls(startup_timeout_s)
        self.broker: Broker | None = None

    @property
    def bootstrap_servers(self) -> str:
        endpoint = self._started().advertised[0]
        return f"{endpoint.host}:{endpoint.port}"

    @property
    def port(self) -> int:
        return self._started().port

    def _started(self) -> Broker:
        if self.broker is None:
            raise RuntimeError("the embedded broker has not been started")
        return self.broker

    def control(self, api_key: int, fn: Control, *, keep: bool = False) -> RequestControl:
        """Register a control function for requests of ``api_key`` (see
        :mod:`sluice.testing.control`): it answers, delays or drops a request, or returns
        None to let the broker answer; used up once it acts unless ``keep``."""
        return self.controls.add(api_key, fn, keep=keep)

    def start(self) -> EmbeddedBroker:
        """Start the broker (again, after :meth:`kill` or :meth:`stop` with ``log_dir``
        given, on the same data directory and controls) and wait until it serves."""
        self._ready.clear()
        self._error = None
        self._crash = False
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
                broker = self.broker = Broker(self.config, coordination_store=self._store_factory)
                await broker.start()
                self.controls.attach(broker.handlers)
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            self.controls.detach()
            if self._crash:
                await broker.crash()
            else:
                await broker.stop()

        asyncio.run(main())

    def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the broker's event loop and return its result."""
        assert self._loop is not None

        async def invoke() -> T:
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
