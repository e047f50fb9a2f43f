"""Where the recent readers of one log are, so that the log can free the page-cache pages
of segments every one of them has read.

Why: a segment that every reader has fetched past is only read again by a reader that
arrives later or falls back; until retention removes it, its pages hold memory that new
appends must then take from elsewhere. On the benchmark VM, whose freed memory goes back
to its host, taking new page-cache pages cost the appends several times the CPU of
reusing pages just freed (docs/performance.md, change 16). Freeing the pages of read
segments keeps the page cache at the log's read tail, and the appends reuse them. It is
a setting, off by default (``segment.drop.read.pages``; docs/log.md).

A reader is whatever the caller names one: the fetch path uses the follower's broker id,
or the consumer's connection. A reader not seen for ``idle_ms`` no longer counts, so a
consumer that stopped fetching holds pages for that long and no longer.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["NO_OFFSET_DUE", "READER_IDLE_MS", "LogReaders"]

READER_IDLE_MS = 300_000
"""How long a reader that stopped fetching still holds pages: Kafka's default
``max.poll.interval.ms``, the longest a consumer in a group may go between polls."""

NO_OFFSET_DUE = 2**63
"""The due offset when no segment waits for its readers."""
_PRUNE_AT = 64  # readers in the table before a new one makes it drop the idle ones


class LogReaders:
    """Each reader's last fetch offset and when it fetched, and the offset at which a
    release is next due (set by the log: the upper bound of its oldest inactive segment
    whose pages are still held)."""

    __slots__ = ("_at", "_idle_ms", "due")

    def __init__(self, idle_ms: int = READER_IDLE_MS) -> None:
        self._at: dict[Hashable, tuple[int, int]] = {}
        self._idle_ms = idle_ms
        self.due = NO_OFFSET_DUE

    def saw(self, reader: Hashable, offset: int, now_ms: int) -> bool:
        """Record that ``reader`` fetched from ``offset``; True when that offset reaches
        the due offset, so that the log should check :meth:`floor`."""
        at = self._at
        if len(at) >= _PRUNE_AT and reader not in at:
            self._forget_idle(now_ms)  # connections come and go: bound the table
        at[reader] = (offset, now_ms)
        return offset >= self.due

    def floor(self, now_ms: int) -> int | None:
        """The lowest offset any reader seen in the last ``idle_ms`` fetched from last
        (every offset below it was read by all of them); None when there is none. Readers
        idle for longer are forgotten."""
        self._forget_idle(now_ms)
        return min((offset for offset, _ in self._at.values()), default=None)

    def _forget_idle(self, now_ms: int) -> None:
        at = self._at
        oldest = now_ms - self._idle_ms
        for reader in [r for r, (_, seen) in at.items() if seen < oldest]:
            del at[reader]

    def forget(self) -> None:
        """Forget every reader (the log was truncated: their offsets may name records
        that are gone)."""
        self._at.clear()
        self.due = NO_OFFSET_DUE

    def __len__(self) -> int:
        return len(self._at)
