"""The broker process's garbage-collector policy: no full collections over long-lived objects.

CPython's cyclic collector periodically walks every tracked object; a full (generation 2)
pass over a started broker's heap (modules, kio's message classes, the logs' and
coordinators' state) takes tens of milliseconds, and about a second over the logs and
partitions of 20,000 partitions, during which no request is served. What a broker makes
to last lives as long as the process (or its topic), so it is moved to the permanent
generation (``gc.freeze``), where no pass looks at it again: the startup heap by
:func:`tune_for_serving`, which also makes young collections rarer, and the logs and
partitions of a start or of a large topic's creation by :func:`freeze_long_lived` as soon
as they are made. Frozen objects are still freed when their last reference goes (a
deleted topic's); only a cycle that dies frozen stays. Cycles created later are still
found and freed. Only the ``sluice broker`` process applies it (:func:`serving_process`):
an embedded broker leaves its host process's collector alone, but for :func:`paused`,
which restores it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = [
    "SERVING_THRESHOLDS",
    "freeze_long_lived",
    "paused",
    "serving_process",
    "tune_for_serving",
]

SERVING_THRESHOLDS = (10_000, 20, 20)
"""Allocations before a young collection, and young passes per older pass (CPython's
defaults are 700, 10, 10): fewer, slightly larger young passes; each still stays far
below a millisecond."""

_serving = False


def serving_process() -> None:
    """This process is a broker's (``sluice broker``): :func:`freeze_long_lived` applies."""
    global _serving
    _serving = True


def tune_for_serving() -> None:
    """Freeze the startup heap out of future collections and apply the serving thresholds
    (after a collection, which the logs frozen at start do not cost)."""
    serving_process()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_THRESHOLDS)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection while a broker makes many long-lived objects at once (its logs at
    start): each pass would walk what is made so far, over and over. The collector is
    enabled again after, if it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_long_lived() -> None:
    """In a serving process, move what is alive to the permanent generation after a
    youngest-generation pass (thousands of objects, a millisecond or so): the logs and
    partitions just loaded or created, made to last. Elsewhere, nothing."""
    if _serving:
        gc.collect(0)
        gc.freeze()
