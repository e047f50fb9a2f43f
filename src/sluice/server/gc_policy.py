"""The broker process's garbage-collector policy: no full collections over the startup heap.

CPython's cyclic collector periodically walks every tracked object; a full (generation 2)
pass over a started broker's heap (modules, kio's message classes, the logs' and
coordinators' state) takes tens of milliseconds, during which no request is served.
Everything alive once the broker is serving lives as long as the process, so
:func:`tune_for_serving` moves it to the permanent generation (``gc.freeze``) where no
pass looks at it again, and makes young collections rarer.
Cycles created later are still found and freed. Only the ``sluice broker`` process
applies it: an embedded broker leaves its host process's collector alone.
"""

from __future__ import annotations

import gc

__all__ = ["SERVING_THRESHOLDS", "tune_for_serving"]

SERVING_THRESHOLDS = (10_000, 20, 20)
"""Allocations before a young collection, and young passes per older pass (CPython's
defaults are 700, 10, 10): fewer, slightly larger young passes; each still stays far
below a millisecond."""


def tune_for_serving() -> None:
    """Freeze the startup heap out of future collections and apply the serving thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_THRESHOLDS)
