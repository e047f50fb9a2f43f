"""Real Sluice brokers for tests and notebooks: :class:`EmbeddedBroker` (one broker on a
background thread), :class:`EmbeddedCluster` (several, in this process or as processes on
a real ZooKeeper) and request controls, fault hooks that answer, delay or drop chosen
requests (:mod:`sluice.testing.control`). See ``docs/testing.md``."""

from __future__ import annotations

from sluice.testing.broker import EmbeddedBroker
from sluice.testing.cluster import EmbeddedCluster, wait_until
from sluice.testing.control import (
    Control,
    ControlResult,
    DropConnection,
    RequestControl,
    RequestControls,
    respond,
)

__all__ = [
    "Control",
    "ControlResult",
    "DropConnection",
    "EmbeddedBroker",
    "EmbeddedCluster",
    "RequestControl",
    "RequestControls",
    "respond",
    "wait_until",
]
