"""The table of a log's recent readers (sluice.log.readers.LogReaders), against a model."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.log.readers import NO_OFFSET_DUE, READER_IDLE_MS, LogReaders

IDLE_MS = 1_000


def test_the_floor_is_the_slowest_recent_reader() -> None:
    readers = LogReaders(idle_ms=IDLE_MS)
    assert readers.floor(0) is None
    readers.saw("a", 40, now_ms=0)
    readers.saw("b", 10, now_ms=0)
    assert readers.floor(0) == 10
    readers.saw("b", 55, now_ms=500)  # b caught up; a is now the slowest
    assert readers.floor(500) == 40


def test_a_reader_idle_for_longer_than_the_limit_no_longer_counts() -> None:
    readers = LogReaders(idle_ms=IDLE_MS)
    readers.saw("slow", 3, now_ms=0)
    readers.saw("fast", 90, now_ms=IDLE_MS)
    assert readers.floor(IDLE_MS) == 3  # idle exactly the limit: still counts
    assert readers.floor(IDLE_MS + 1) == 90
    assert len(readers) == 1  # and forgotten


def test_saw_says_when_the_due_offset_is_reached() -> None:
    readers = LogReaders()
    assert not readers.saw("a", 10**12, now_ms=0)  # nothing due
    readers.due = 100
    assert not readers.saw("a", 99, now_ms=0)
    assert readers.saw("a", 100, now_ms=0)
    readers.forget()
    assert readers.due == NO_OFFSET_DUE
    assert readers.floor(0) is None


def test_the_default_idle_limit_is_kafkas_max_poll_interval() -> None:
    assert READER_IDLE_MS == 300_000


class ReadersMachine(RuleBasedStateMachine):
    """Readers fetch at moving offsets while time passes; the floor is always the lowest
    offset of the readers seen within the idle limit, and the table stays bounded."""

    def __init__(self) -> None:
        super().__init__()
        self.readers = LogReaders(idle_ms=IDLE_MS)
        self.model: dict[int, tuple[int, int]] = {}
        self.now = 0

    def live(self) -> dict[int, tuple[int, int]]:
        return {r: v for r, v in self.model.items() if v[1] >= self.now - IDLE_MS}

    @rule(reader=st.integers(-200, 5), offset=st.integers(0, 1000), due=st.integers(0, 1000))
    def fetch(self, reader: int, offset: int, due: int) -> None:
        self.readers.due = due
        assert self.readers.saw(reader, offset, self.now) == (offset >= due)
        self.model[reader] = (offset, self.now)
        assert len(self.readers) <= max(64, len(self.live()))

    @rule(ms=st.integers(0, 2 * IDLE_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def truncated(self) -> None:
        self.readers.forget()
        self.model.clear()

    @invariant()
    def floor_is_the_slowest_live_reader(self) -> None:
        live = self.live()
        expected = min((offset for offset, _ in live.values()), default=None)
        assert self.readers.floor(self.now) == expected
        assert len(self.readers) == len(live)  # floor() forgot the idle ones


TestReaders = ReadersMachine.TestCase
