"""The controller's event queue: FIFO, one thread, preemption, delayed events."""

from __future__ import annotations

import threading

from sluice.base.clock import SYSTEM_CLOCK, ManualClock
from sluice.controller import ControllerEvent, ControllerEventManager
from sluice.controller.events import BrokerChange, ControlledShutdown, Expire, TopicChange


class Numbered(ControllerEvent):
    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


class Recorder:
    def __init__(self) -> None:
        self.processed: list[ControllerEvent] = []
        self.preempted: list[ControllerEvent] = []
        self.threads: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    def process(self, event: ControllerEvent) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.threads.add(threading.current_thread().name)
        self.processed.append(event)
        with self.lock:
            self.in_flight -= 1

    def preempt(self, event: ControllerEvent) -> None:
        self.preempted.append(event)


def test_events_from_many_threads_are_processed_in_order_on_one_thread() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(1, recorder, SYSTEM_CLOCK, thread_name="ctl-1")
    manager.start()
    per_thread = 200
    queued = []

    def producer(base: int) -> None:
        for i in range(per_thread):
            queued.append(manager.put(Numbered(base + i)))

    threads = [threading.Thread(target=producer, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(q.await_processing(10) for q in queued)
    manager.close()
    numbers = [e.n for e in recorder.processed if isinstance(e, Numbered)]
    assert len(numbers) == 4 * per_thread
    for k in range(4):  # each producer's events keep their order
        mine = [n for n in numbers if k * 1000 <= n < (k + 1) * 1000]
        assert mine == sorted(mine)
    assert recorder.threads == {"ctl-1"}
    assert recorder.max_in_flight == 1


def test_clear_and_put_preempts_everything_queued() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(1, recorder, ManualClock())
    first, second = manager.put(BrokerChange()), manager.put(TopicChange())
    expire = manager.clear_and_put(Expire())
    assert first.await_processing(0) and second.await_processing(0)
    assert [type(e) for e in recorder.preempted] == [BrokerChange, TopicChange]
    assert manager.process_pending() == 1
    assert expire.await_processing(0)
    assert [type(e) for e in recorder.processed] == [Expire]


def test_delayed_events_run_when_due_on_the_manual_clock() -> None:
    clock = ManualClock(0)
    recorder = Recorder()
    manager = ControllerEventManager(1, recorder, clock)
    manager.schedule("task", Numbered(1), 5_000)
    manager.schedule("other", Numbered(2), 1_000)
    manager.schedule("task", Numbered(3), 3_000)  # replaces the first "task"
    assert manager.scheduled() == [(1_000, "other"), (3_000, "task")]
    assert manager.process_pending() == 0
    clock.advance(1_000)
    assert manager.process_pending() == 1
    manager.cancel("task")
    clock.advance(10_000)
    assert manager.process_pending() == 0
    assert [e.n for e in recorder.processed if isinstance(e, Numbered)] == [2]


def test_delayed_events_run_on_the_thread_with_the_real_clock() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(1, recorder, SYSTEM_CLOCK)
    manager.start()
    done = threading.Event()

    class Marker(ControllerEvent):
        __slots__ = ()

    original = recorder.process

    def process(event: ControllerEvent) -> None:
        original(event)
        if isinstance(event, Marker):
            done.set()

    recorder.process = process  # type: ignore[method-assign]
    manager.schedule("soon", Marker(), 20)
    assert done.wait(10)
    manager.close()


def test_closing_preempts_waiting_requests() -> None:
    answers: list[object] = []
    recorder = Recorder()
    manager = ControllerEventManager(1, recorder, ManualClock())
    manager.put(ControlledShutdown(2, -1, answers.append))
    manager.start()
    manager.close()
    assert len(recorder.processed) + len(recorder.preempted) == 1
