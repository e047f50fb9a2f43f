"""Sluice: a Kafka-wire-compatible streaming platform written in Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["EmbeddedBroker", "EmbeddedCluster", "__version__"]

if TYPE_CHECKING:
    from sluice.testing import EmbeddedBroker, EmbeddedCluster


def __getattr__(name: str) -> Any:
    # Lazy, so that `import sluice.timer` stays light.
    if name == "EmbeddedBroker":
        from sluice.testing import EmbeddedBroker

        return EmbeddedBroker
    if name == "EmbeddedCluster":
        from sluice.testing import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
