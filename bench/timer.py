"""Timer benchmark: Sluice's hierarchical timing wheel beside asyncio and a plain heapq timer.

Prints, for several counts of pending timers, add+cancel and add+expire
operations per second for each timer and the ratios; bytes of memory per
pending timer; and, on the real clock, how late Sluice's timer fires tasks.
Figures only: nothing here asserts a time.

    python bench/timer.py [--pending 1000,100000,1000000] [--ops 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import itertools
import random
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from sluice.base.clock import SYSTEM_CLOCK, ManualClock
from sluice.timer import FunctionTask, SystemTimer

FAR_MIN_MS, FAR_MAX_MS = 1_000, 60_000  # pending timers: request-timeout-like delays


def noop() -> None:
    pass


class HeapTimer:
    """The textbook timer: a heap of [deadline, seq, callback] with lazy cancellation."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.heap: list[list[Any]] = []
        self.seq = itertools.count()
        self.cancelled = 0

    def add(self, delay_ms: float, fn: Callable[[], None]) -> list[Any]:
        entry = [self.now() + delay_ms, next(self.seq), fn]
        heapq.heappush(self.heap, entry)
        return entry

    def cancel(self, entry: list[Any]) -> None:
        if entry[2] is not None:
            entry[2] = None
            self.cancelled += 1
            if self.cancelled > 64 and self.cancelled * 2 > len(self.heap):
                self.heap = [e for e in self.heap if e[2] is not None]
                heapq.heapify(self.heap)
                self.cancelled = 0

    def expire(self) -> int:
        now, heap, n = self.now(), self.heap, 0
        while heap and heap[0][0] <= now:
            fn = heapq.heappop(heap)[2]
            if fn is not None:
                fn()
                n += 1
            else:
                self.cancelled -= 1
        return n


# -- add + cancel ---------------------------------------------------------------
def delays(n: int, lo: int, hi: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(lo, hi) for _ in range(n)]


def sluice_add_cancel(pending: int, ops: int) -> float:
    timer = SystemTimer(clock=SYSTEM_CLOCK)
    for d in delays(pending, FAR_MIN_MS, FAR_MAX_MS, 1):
        timer.add(FunctionTask(d, noop))
    work = delays(ops, FAR_MIN_MS, FAR_MAX_MS, 2)
    add = timer.add
    gc.collect()
    start = time.perf_counter()
    for d in work:
        task = FunctionTask(d, noop)
        add(task)
        task.cancel()
    elapsed = time.perf_counter() - start
    assert timer.size() == pending
    return ops / elapsed


def run_once_nonblocking(loop: asyncio.AbstractEventLoop) -> None:
    """One pass of asyncio's loop: move due timers to the ready queue and run them.

    A callback queued first makes the selector poll with a zero timeout
    instead of sleeping until the next timer.
    """
    loop.call_soon(noop)
    loop._run_once()  # type: ignore[attr-defined]


def asyncio_add_cancel(pending: int, ops: int) -> float:
    loop = asyncio.new_event_loop()
    try:
        for d in delays(pending, FAR_MIN_MS, FAR_MAX_MS, 1):
            loop.call_later(d / 1000, noop)
        work = [d / 1000 for d in delays(ops, FAR_MIN_MS, FAR_MAX_MS, 2)]
        call_later = loop.call_later
        gc.collect()
        start = time.perf_counter()
        for i, d in enumerate(work):
            call_later(d, noop).cancel()
            if i % 1024 == 1023:
                run_once_nonblocking(loop)  # lets asyncio drop cancelled handles
        elapsed = time.perf_counter() - start
        return ops / elapsed
    finally:
        loop.close()


def heapq_add_cancel(pending: int, ops: int) -> float:
    timer = HeapTimer(lambda: time.monotonic_ns() / 1e6)
    for d in delays(pending, FAR_MIN_MS, FAR_MAX_MS, 1):
        timer.add(d, noop)
    work = delays(ops, FAR_MIN_MS, FAR_MAX_MS, 2)
    add, cancel = timer.add, timer.cancel
    gc.collect()
    start = time.perf_counter()
    for d in work:
        cancel(add(d, noop))
    return ops / (time.perf_counter() - start)


# -- add + expire (manual clocks, so only the timers' own work is timed) ----------
SHORT_MAX_MS = 1_000


def sluice_add_expire(pending: int, ops: int) -> float:
    clock = ManualClock(0)
    timer = SystemTimer(clock=clock)
    for d in delays(pending, FAR_MIN_MS * 100, FAR_MAX_MS * 100, 1):
        timer.add(FunctionTask(d, noop))
    work = delays(ops, 1, SHORT_MAX_MS, 3)
    gc.collect()
    start = time.perf_counter()
    add = timer.add
    for d in work:
        add(FunctionTask(d, noop))
    clock.set(SHORT_MAX_MS)
    while timer.advance_clock(0):
        pass
    elapsed = time.perf_counter() - start
    assert timer.size() == pending
    return ops / elapsed


def asyncio_add_expire(pending: int, ops: int) -> float:
    loop = asyncio.new_event_loop()
    now = [0.0]
    loop.time = lambda: now[0]  # type: ignore[method-assign]
    try:
        for d in delays(pending, FAR_MIN_MS * 100, FAR_MAX_MS * 100, 1):
            loop.call_later(d / 1000, noop)
        work = [d / 1000 for d in delays(ops, 1, SHORT_MAX_MS, 3)]
        gc.collect()
        start = time.perf_counter()
        call_later = loop.call_later
        for d in work:
            call_later(d, noop)
        now[0] = SHORT_MAX_MS / 1000
        while len(loop._scheduled) > pending:  # type: ignore[attr-defined]
            run_once_nonblocking(loop)
        elapsed = time.perf_counter() - start
        return ops / elapsed
    finally:
        loop.close()


def heapq_add_expire(pending: int, ops: int) -> float:
    now = [0.0]
    timer = HeapTimer(lambda: now[0])
    for d in delays(pending, FAR_MIN_MS * 100, FAR_MAX_MS * 100, 1):
        timer.add(d, noop)
    work = delays(ops, 1, SHORT_MAX_MS, 3)
    gc.collect()
    start = time.perf_counter()
    add = timer.add
    for d in work:
        add(d, noop)
    now[0] = SHORT_MAX_MS
    fired = timer.expire()
    elapsed = time.perf_counter() - start
    assert fired == ops
    return ops / elapsed


# -- memory ----------------------------------------------------------------------
def bytes_per_pending(make: Callable[[int], object], n: int = 100_000) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keep = make(n)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del keep
    return (after - before) / n


def mem_sluice(n: int) -> object:
    timer = SystemTimer(clock=ManualClock(0))
    for d in delays(n, FAR_MIN_MS, FAR_MAX_MS, 1):
        timer.add(FunctionTask(d, noop))
    return timer


def mem_asyncio(n: int) -> object:
    loop = asyncio.new_event_loop()
    for d in delays(n, FAR_MIN_MS, FAR_MAX_MS, 1):
        loop.call_later(d / 1000, noop)
    return loop


def mem_heapq(n: int) -> object:
    timer = HeapTimer(lambda: 0.0)
    for d in delays(n, FAR_MIN_MS, FAR_MAX_MS, 1):
        timer.add(d, noop)
    return timer


# -- lateness on the real clock ------------------------------------------------------
def lateness(n: int, max_delay_ms: int) -> list[float]:
    clock = SYSTEM_CLOCK
    timer = SystemTimer(clock=clock)
    late: list[float] = []
    done = threading.Event()
    remaining = [n]

    def make(deadline_ms: int) -> Callable[[], None]:
        def fire() -> None:
            late.append(time.monotonic_ns() / 1e6 - deadline_ms)
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

        return fire

    def reaper() -> None:
        while not done.is_set():
            timer.advance_clock(200)

    thread = threading.Thread(target=reaper, daemon=True)
    thread.start()
    for d in delays(n, 1, max_delay_ms, 4):
        timer.add(FunctionTask(d, make(clock.hi_res_clock_ms() + d)))
    done.wait(timeout=max_delay_ms / 1000 + 30)
    timer.shutdown()
    thread.join()
    return late


def interleaved(
    fns: tuple[Callable[[int, int], float], ...], pending: int, ops: int, repeat: int
) -> list[float]:
    """Median rate of each timer, measured in turns so machine noise hits all alike."""
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            runs[i].append(fn(pending, ops))
    return [statistics.median(r) for r in runs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pending", default="1000,100000,1000000", help="pending timer counts")
    ap.add_argument("--ops", type=int, default=200_000, help="operations timed per measurement")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is shown")
    ap.add_argument("--lateness-tasks", type=int, default=20_000)
    args = ap.parse_args(argv)
    pendings = [int(p) for p in args.pending.split(",")]

    print(f"Sluice timer benchmark (Python {sys.version.split()[0]}; median of {args.repeat})")
    rows = [
        ("add+cancel", sluice_add_cancel, asyncio_add_cancel, heapq_add_cancel),
        ("add+expire", sluice_add_expire, asyncio_add_expire, heapq_add_expire),
    ]
    own_rate: dict[tuple[str, int], float] = {}
    header = f"{'operation':<11}{'pending':>10}{'sluice op/s':>14}{'asyncio op/s':>14}"
    header += f"{'heapq op/s':>13}{'vs asyncio':>12}{'vs heapq':>10}"
    print(header)
    for name, ours, aio, hq in rows:
        for pending in pendings:
            s, a, h = interleaved((ours, aio, hq), pending, args.ops, args.repeat)
            own_rate[(name, pending)] = s
            print(
                f"{name:<11}{pending:>10,}{s:>14,.0f}{a:>14,.0f}{h:>13,.0f}"
                f"{s / a:>11.2f}x{s / h:>9.2f}x",
                flush=True,
            )
    lo, hi = min(pendings), max(pendings)
    for name, *_ in rows:
        ratio = own_rate[(name, hi)] / own_rate[(name, lo)]
        print(f"sluice {name} rate at {hi:,} pending / at {lo:,} pending: {ratio:.2f}")

    print("memory per pending timer (tracemalloc, 100,000 timers, shared callback):")
    for label, fn in (("sluice", mem_sluice), ("asyncio", mem_asyncio), ("heapq", mem_heapq)):
        print(f"  {label:<8}{bytes_per_pending(fn):8.0f} bytes")

    late = sorted(lateness(args.lateness_tasks, 1000))
    q = statistics.quantiles(late, n=100)
    print(
        f"lateness on the real clock ({len(late):,} tasks, delays 1-1000 ms, reaper thread): "
        f"p50 {q[49]:.3f} ms, p99 {q[98]:.3f} ms, max {late[-1]:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
