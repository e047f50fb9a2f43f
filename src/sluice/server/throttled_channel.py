"""Muting throttled connections for their throttle time, on the hierarchical timer (Kafka's
``ThrottledChannel`` in its quota managers' delay queue), and the request quota.

When an answer carries a throttle time, the network layer sends it at once and mutes the
connection: it reads and handles nothing more until the throttle ends (KIP-219; Kafka
delays the answer itself for the request versions before KIP-219, Sluice mutes those
connections the same way). :class:`ThrottledChannels` schedules the end of each throttle
on a :class:`~sluice.timer.SystemTimer` whose reaper thread hands expirations to the event
loop — one timer entry per throttle, no task or sleep per request.

It also measures the request quota (``request_percentage``): the network layer reports
the time each request's handler took, and gets back the throttle that time calls for.
Requests Kafka exempts from the request quota are not reported: ApiVersions, the SASL
handshake and authentication, and the inter-broker requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Final

from sluice.base.clock import Clock
from sluice.protocol import ApiKey, Request
from sluice.security import Session
from sluice.server.client_quotas import ClientQuotas
from sluice.timer import FunctionTask, SystemTimer

__all__ = ["REQUEST_QUOTA_EXEMPT", "ThrottledChannels"]

REQUEST_QUOTA_EXEMPT: Final = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.WRITE_TXN_MARKERS,
    }
)
"""APIs whose handler time counts against no request quota (Kafka's
``sendResponseExemptThrottle``; follower fetches are exempt as well)."""

_REAPER_WAIT_MS = 200


class ThrottledChannels:
    """Throttle ends on the timer, and the request quota (see the module)."""

    def __init__(self, quotas: ClientQuotas, clock: Clock, broker_id: int = 0) -> None:
        self.quotas = quotas
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer = SystemTimer(
            f"throttled-channels-{broker_id}", clock=clock, executor=self._on_loop
        )
        self._reaper: threading.Thread | None = None
        self._name = f"ThrottledChannelReaper-{broker_id}"

    @property
    def active(self) -> bool:
        """Whether any client quota is configured (otherwise no answer is looked at)."""
        return self.quotas.managers.active

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reaper = threading.Thread(target=self._reap, name=self._name, daemon=True)
        self._reaper.start()

    def stop(self) -> None:
        self._timer.shutdown()
        if self._reaper is not None:
            self._reaper.join(timeout=5)

    def throttle(self, ms: int, on_end: Callable[[], None]) -> FunctionTask:
        """Call ``on_end`` on the event loop ``ms`` from now."""
        task = FunctionTask(ms, on_end)
        self._timer.add(task)
        return task

    def request_throttle_ms(self, request: Request, session: Session, nanos: int) -> int:
        """Record ``nanos`` of ``request``'s handler time for its client (unless its API
        is exempt, or it is a follower's fetch); the throttle it calls for."""
        manager = self.quotas.managers.request
        api_key = request.header.api_key
        if not manager.quotas_enabled or api_key in REQUEST_QUOTA_EXEMPT:
            return 0
        if api_key == ApiKey.FETCH and getattr(request.body, "replica_id", -1) >= 0:
            return 0
        name, client_id = session.principal.name, request.header.client_id
        now = self._clock.hi_res_clock_ms()
        ms = manager.record_nanos_and_get_throttle_time_ms(name, client_id, nanos, now)
        if ms:
            manager.record_throttle(name, client_id, ms, now)
        return ms

    def _on_loop(self, fn: Callable[[], None]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(fn)

    def _reap(self) -> None:
        timer = self._timer
        while not timer.is_shutdown:
            timer.advance_clock(_REAPER_WAIT_MS)
