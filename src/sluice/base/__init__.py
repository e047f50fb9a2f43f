"""What every layer of Sluice shares: the topic-partition pair and the clock."""

from sluice.base.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock
from sluice.base.topic_partition import TopicPartition

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock", "TopicPartition"]
