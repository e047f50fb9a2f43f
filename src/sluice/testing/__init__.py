"""Real Sluice brokers for tests and notebooks: :class:`EmbeddedBroker` (one broker on a
background thread) and :class:`EmbeddedCluster` (several, in this process or as processes
on a real ZooKeeper). See ``docs/testing.md``."""

from __future__ import annotations

from sluice.testing.broker import EmbeddedBroker
from sluice.testing.cluster import EmbeddedCluster, wait_until

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "wait_until"]
