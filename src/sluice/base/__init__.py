"""What every layer of Sluice shares: the topic-partition pair and the clocks."""

from sluice.base.clock import Clock, ManualClock, MonotonicClock, wall_clock_ms
from sluice.base.topic_partition import TopicPartition

__all__ = ["Clock", "ManualClock", "MonotonicClock", "TopicPartition", "wall_clock_ms"]
