"""Property test: the log state machine of test_log_property with every append written by a
writer (sluice.log.writer), whose writes and callbacks run only when a rule says so.

The model keeps the appended batches in two lists: those a reader can see, and those
assigned offsets whose write (or its callback) is still pending. Reads, retention and
DeleteRecords see only the first; a roll, a flush, truncation, a timestamp lookup and
closing wait for the writes; a crash keeps what was written and loses the rest."""

from __future__ import annotations

import test_log_property
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from test_log_property import LogMachine, ModelBatch

from sluice.log import LogAppendInfo
from sluice.log.writer import ManualLogWriter


class WriteBehindLogMachine(LogMachine):
    def __init__(self) -> None:
        super().__init__()
        self.writer = ManualLogWriter()
        self.pending: list[ModelBatch] = []  # assigned, not yet readable
        self.written = 0  # how many of ``pending`` the writer has written
        self.told = 0  # on_written calls

    def append_batch(self, data: bytes) -> LogAppendInfo:
        active = self.log.active_segment
        info = self.log.append_as_leader(data, 1, writer=self.writer, on_written=self._told)
        if self.log.active_segment is not active:  # a roll waits for the writes before it
            self._all_written()
        return info

    def _told(self) -> None:
        self.told += 1

    @property
    def assigned_end(self) -> int:
        return self.pending[-1].last + 1 if self.pending else self.end

    def assigned(self, batch: ModelBatch) -> None:
        self.pending.append(batch)

    def _all_written(self) -> None:
        """What a log operation that waits for the writes makes readable."""
        self.batches.extend(self.pending)
        self.pending, self.written = [], 0

    # -- the writer --------------------------------------------------------------------------
    @rule(count=st.integers(1, 3))
    def write(self, count: int) -> None:
        self.written += self.writer.run(count)

    @rule()
    def deliver(self) -> None:
        told = self.told
        self.writer.deliver()
        if self.written:
            assert self.told > told
        self.batches.extend(self.pending[: self.written])
        del self.pending[: self.written]
        self.written = 0

    # -- operations that wait for the writes -------------------------------------------------
    @rule()
    def roll(self) -> None:
        self._all_written()
        super().roll()

    @rule()
    def flush(self) -> None:
        self._all_written()
        super().flush()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        self._all_written()
        if self.batches:
            super().truncate(data)

    @rule(data=st.data())
    def crash_with_torn_tail(self, data: st.DataObject) -> None:
        self._all_written()
        self.log._local.drain()  # it looks at the active segment before closing the log
        if self.batches:
            super().crash_with_torn_tail(data)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        self._all_written()
        super().reopen(clean)

    @rule(data=st.data())
    def timestamp_lookup(self, data: st.DataObject) -> None:
        self._all_written()
        super().timestamp_lookup(data)

    @rule()
    def crash(self) -> None:
        """The process dies: what the writer wrote is in the file, the rest is lost."""
        self.writer.drop()
        self.writer.posted.clear()
        self.batches.extend(self.pending[: self.written])
        self.pending, self.written = [], 0
        super().crash()

    @invariant()
    def assigned_offsets_match(self) -> None:
        if hasattr(self, "log"):
            assert self.log._local.next_offset == self.assigned_end


TestWriteBehindLogMachine = WriteBehindLogMachine.TestCase
TestWriteBehindLogMachine.settings = test_log_property.TestLogMachine.settings
