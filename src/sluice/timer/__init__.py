"""Kafka's hierarchical timing wheel: ``SystemTimer`` over ``TimingWheel`` buckets.

See DESIGN.md section 2. Add and cancel are O(1); the clock jumps from one
bucket expiration to the next, taken from a delay queue.
"""

from sluice.timer.system_timer import DelayQueue, Executor, SystemTimer, run_inline
from sluice.timer.task import FunctionTask, TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList
from sluice.timer.wheel import BucketQueue, TimingWheel

__all__ = [
    "BucketQueue",
    "DelayQueue",
    "Executor",
    "FunctionTask",
    "SystemTimer",
    "TaskCounter",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "run_inline",
]
