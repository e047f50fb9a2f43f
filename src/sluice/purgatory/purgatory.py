"""``DelayedOperationPurgatory``: delayed operations watched by key and timed out by a timer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, Protocol, TypeVar

from sluice.base.clock import Clock
from sluice.purgatory.operation import DelayedOperation
from sluice.timer import Executor, SystemTimer

__all__ = ["DelayedOperationPurgatory", "PurgatoryFactory", "Watchers"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=DelayedOperation)


class Watchers(Generic[T]):
    """The operations watching one key."""

    __slots__ = ("_lock", "_ops", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self._ops: list[T] = []
        self._lock = threading.Lock()

    def watch(self, op: T) -> None:
        with self._lock:
            self._ops.append(op)

    def count_watched(self) -> int:
        return len(self._ops)

    def is_empty(self) -> bool:
        return not self._ops

    def try_complete_watched(self) -> int:
        """Try every watching operation; drop the completed ones; return how many completed now."""
        with self._lock:
            snapshot = list(self._ops)
        completed = 0
        for op in snapshot:
            if not op.is_completed and op.safe_try_complete():
                completed += 1
        self.purge_completed()
        return completed

    def force_complete_watched(self) -> int:
        """Complete every watching operation now; drop them; return how many this call
        completed (those another caller completed first are not counted)."""
        with self._lock:
            snapshot = list(self._ops)
        completed = sum(1 for op in snapshot if op.force_complete())
        self.purge_completed()
        return completed

    def cancel(self) -> list[T]:
        """Stop watching; cancel every operation's timeout; return the operations."""
        with self._lock:
            ops, self._ops = self._ops, []
        for op in ops:
            op.cancel()
        return ops

    def purge_completed(self) -> int:
        with self._lock:
            before = len(self._ops)
            self._ops = [op for op in self._ops if not op.is_completed]
            return before - len(self._ops)


def _watch_keys(keys: Iterable[Hashable]) -> list[Hashable]:
    key_list = list(keys)
    if not key_list:
        raise ValueError("a delayed operation needs at least one watch key")
    return key_list


class _WatcherList(Generic[T]):
    """One shard of the key -> watchers map, with its own lock."""

    __slots__ = ("lock", "watchers_by_key")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers_by_key: dict[Hashable, Watchers[T]] = {}


class DelayedOperationPurgatory(Generic[T]):
    """Holds delayed operations until an event completes them or their timeout expires.

    Operations are watched under one or more keys (a topic-partition, a group,
    ...); ``check_and_complete(key)`` is called when something happens to a key.
    Watcher lists are sharded to reduce contention. A reaper advances the
    timer and purges completed operations from the watcher lists once
    (estimated watched - delayed) exceeds ``purge_interval``.
    """

    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        broker_id: int = 0,
        purge_interval: int = 1000,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
        shards: int = 512,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        self.timer = (
            timer
            if timer is not None
            else SystemTimer(executor_name=f"executor-{name}", clock=clock, executor=executor)
        )
        self._shards: list[_WatcherList[T]] = [_WatcherList() for _ in range(shards)]
        self._estimated_lock = threading.Lock()
        self._estimated_total = 0
        self._running = True
        self._reaper: threading.Thread | None = None
        if reaper_enabled:
            self._reaper = threading.Thread(
                target=self._reap, name=f"ExpirationReaper-{broker_id}-{name}", daemon=True
            )
            self._reaper.start()

    def _shard(self, key: Hashable) -> _WatcherList[T]:
        return self._shards[hash(key) % len(self._shards)]

    # -- watching -----------------------------------------------------------
    def try_complete_else_watch(self, op: T, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if possible, else watch it on every key and time it out.

        Returns True when the operation completed (by this call or a racing one)
        before it was put on the timer.
        """
        key_list = _watch_keys(keys)
        if op.safe_try_complete_or_else(lambda: self._watch_all(op, key_list)) or op.is_completed:
            return True
        if self.timer_enabled:
            self.timer.add(op)
            if op.is_completed:  # completed between the check and the add
                op.cancel()
        return False

    def watch(self, op: T, keys: Iterable[Hashable]) -> None:
        """Watch ``op`` on every key and time it out, without trying it first: for a
        caller that has just seen it cannot complete and is the only thread that calls
        :meth:`check_and_complete` on those keys (the broker's event loop), so no trigger
        can fall between that look and the watch (what the second try of
        :meth:`try_complete_else_watch` is for)."""
        self._watch_all(op, _watch_keys(keys))
        if self.timer_enabled:
            self.timer.add(op)

    def _watch_all(self, op: T, keys: list[Hashable]) -> None:
        for key in keys:
            if op.is_completed:  # completed meanwhile: stop watching early
                return
            self._watch_for(key, op)
        with self._estimated_lock:
            self._estimated_total += 1

    def _watch_for(self, key: Hashable, op: T) -> None:
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
            if watchers is None:
                watchers = shard.watchers_by_key[key] = Watchers(key)
            watchers.watch(op)

    def _remove_key_if_empty(self, key: Hashable, watchers: Watchers[T]) -> None:
        shard = self._shard(key)
        with shard.lock:
            if shard.watchers_by_key.get(key) is watchers and watchers.is_empty():
                del shard.watchers_by_key[key]

    def check_and_complete(self, key: Hashable) -> int:
        """An event happened on ``key``: try its watching operations; return how many completed."""
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
        if watchers is None:
            return 0
        completed = watchers.try_complete_watched()
        if watchers.is_empty():
            self._remove_key_if_empty(key, watchers)
        return completed

    def complete_all(self) -> int:
        """Complete every watched operation now, as its timeout would (``on_complete``
        runs; ``on_expiration`` does not): for a broker that stops serving and answers
        what waits instead of holding it to its timeout. Returns how many completed."""
        return self._each_watchers(Watchers.force_complete_watched)

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: its operations' timeouts are cancelled (not completed)."""
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.pop(key, None)
        return watchers.cancel() if watchers is not None else []

    # -- counters -----------------------------------------------------------
    @property
    def watched(self) -> int:
        """Watch registrations held, counting an operation once per key (Kafka's NumWatched)."""
        total = 0
        for shard in self._shards:
            with shard.lock:
                total += sum(w.count_watched() for w in shard.watchers_by_key.values())
        return total

    @property
    def delayed(self) -> int:
        """Operations waiting on the timer (Kafka's NumDelayedOperations)."""
        return self.timer.size()

    def watched_keys(self) -> int:
        return sum(len(shard.watchers_by_key) for shard in self._shards)

    # -- expiry and purging ----------------------------------------------------
    def purge_completed(self) -> int:
        """Drop completed operations from every watcher list; return how many entries went."""
        return self._each_watchers(Watchers.purge_completed)

    def _each_watchers(self, action: Callable[[Watchers[T]], int]) -> int:
        """``action`` on every key's watchers (each shard's map read under its lock, the
        action run outside it), keys left with no operations removed; the sum of its
        results."""
        total = 0
        for shard in self._shards:
            with shard.lock:
                items = list(shard.watchers_by_key.items())
            for key, watchers in items:
                total += action(watchers)
                if watchers.is_empty():
                    self._remove_key_if_empty(key, watchers)
        return total

    def advance_clock(self, timeout_ms: int) -> int:
        """Expire due operations, then purge when completed-but-watched ones pile up.

        Returns the number of watch entries purged (0 when no purge ran).
        """
        self.timer.advance_clock(timeout_ms)
        delayed = self.delayed
        with self._estimated_lock:
            if self._estimated_total - delayed <= self.purge_interval:
                return 0
            # More may complete during the purge: the estimate errs high, never low.
            self._estimated_total = delayed
        purged = self.purge_completed()
        log.debug("purgatory %s purged %d completed operations", self.name, purged)
        return purged

    def _reap(self) -> None:
        while self._running:
            try:
                self.advance_clock(200)
            except Exception:
                log.exception("purgatory %s reaper failed", self.name)

    def shutdown(self) -> None:
        """Stop the reaper and the timer; operations still waiting never complete."""
        self._running = False
        self.timer.shutdown()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join()


class PurgatoryFactory(Protocol):
    """Makes a broker's named purgatories (as Kafka's ``DelayedOperationPurgatory.apply``
    does): all on the broker's clock, their expirations run where the broker wants them.
    The replica manager and the coordinators take one instead of building their own."""

    def __call__(self, name: str, purge_interval: int) -> DelayedOperationPurgatory[T]: ...
