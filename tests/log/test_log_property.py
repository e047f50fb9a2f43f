"""Property test: the Log against an in-memory model under random operations."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.file_work import FileWork, InlineFileWork
from support.records import Rec, build_batch, decode_batches


@dataclasses.dataclass
class ModelBatch:
    first: int
    last: int
    size: int
    records: list[tuple[int, bytes, int]]  # (offset, value, timestamp)


class LogMachine(RuleBasedStateMachine):
    """Random appends / reads / rolls / truncations / reopen against a list of batches."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-log-prop-"))
        self.clock = ManualClock(1_000_000)
        self.batches: list[ModelBatch] = []
        self.start = 0
        self.counter = 0
        self.file_work: FileWork = InlineFileWork()  # where the log's file work runs

    def _open_log(self, had_clean_shutdown: bool = False) -> Log:
        return Log(
            self.tmp / "p-0", self.config, clock=self.clock,
            had_clean_shutdown=had_clean_shutdown, file_work=self.file_work,
        )  # fmt: skip

    @initialize(
        segment_bytes=st.integers(400, 2000),
        interval=st.sampled_from([0, 64, 300, 4096]),
        delete_delay=st.sampled_from([0, 100, 100]),
        recycle=st.sampled_from([False, True, True]),
    )
    def open_log(self, segment_bytes: int, interval: int, delete_delay: int, recycle: bool) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            file_delete_delay_ms=delete_delay,
            segment_recycle=recycle,
        )
        self.log = self._open_log()

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.start

    # -- operations ------------------------------------------------------------------------
    @rule(
        sizes=st.lists(st.integers(0, 60), min_size=1, max_size=4),
        jitter=st.lists(st.integers(-50, 50), min_size=4, max_size=4),
        codec=st.sampled_from([0, 0, 1, 4]),
    )
    def append(self, sizes: list[int], jitter: list[int], codec: int) -> None:
        self.clock.advance(7)
        recs = []
        for j, size in enumerate(sizes):
            self.counter += 1
            value = (b"%d:" % self.counter).ljust(size, b"x")
            recs.append(Rec(value, timestamp=self.clock.milliseconds() + jitter[j]))
        data = build_batch(recs, compression=codec)
        info = self.log.append_as_leader(data, leader_epoch=1)
        first = self.end
        assert (info.first_offset, info.last_offset) == (first, first + len(recs) - 1)
        self.batches.append(
            ModelBatch(first, info.last_offset, len(data),
                       [(first + j, r.value or b"", r.timestamp or 0) for j, r in enumerate(recs)])
        )  # fmt: skip

    @rule(
        data=st.data(),
        max_bytes=st.integers(0, 1500),
        use_hw=st.booleans(),
        min_one=st.booleans(),
    )
    def read(self, data: st.DataObject, max_bytes: int, use_hw: bool, min_one: bool) -> None:
        fetch = data.draw(st.integers(self.start, self.end), label="fetch")
        hw = data.draw(st.integers(self.start, self.end), label="hw") if use_hw else None
        info = self.log.read(fetch, max_bytes, hw, min_one)
        limit = self.end if hw is None else hw
        got = decode_batches(info.read())
        if fetch >= limit:
            assert got == []
            return
        model = [b for b in self.batches if b.last >= fetch and b.last < limit]
        if not model:  # the batch holding fetch straddles the high watermark
            assert got == []
            return
        if not got:
            assert not min_one and model[0].size > max_bytes
            return
        assert sum(fields[1] + 12 for fields, _ in got) == info.size
        assert info.size <= (max(max_bytes, model[0].size) if min_one else max_bytes)
        for (fields, records), expected in zip(got, model, strict=False):
            assert (fields[0], fields[0] + fields[6]) == (expected.first, expected.last)
            assert [(r.offset, r.value) for r in records] == [
                (o, v) for o, v, _ in expected.records
            ]
        assert len(got) <= len(model)
        if len(got) < len(model):  # stopped early: segment end or byte budget
            following = model[len(got)]
            budget = max(max_bytes, model[0].size) if min_one else max_bytes
            bases = {segment.base_offset for segment in self.log.segments}
            assert following.first in bases or info.size + following.size > budget

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.start, self.end))
        assert self.log.delete_records_before(target) == max(target, self.start)
        self.start = max(target, self.start)
        self.batches = [b for b in self.batches if b.last >= self.start]

    @rule(retention=st.integers(0, 3000))
    def retention_by_size(self, retention: int) -> None:
        self.log.update_config(dataclasses.replace(self.config, retention_bytes=retention))
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        new_start = self.log.log_start_offset
        assert self.start <= new_start <= self.end
        assert self.log.size >= min(retention, self.log.active_segment.size)
        self.start = new_start
        self.batches = [b for b in self.batches if b.last >= self.start]

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.start, self.end))
        moved = self.log.truncate_to(target)
        assert moved == (target < self.end)
        if not moved:
            return
        straddled = [b for b in self.batches if b.first < target <= b.last]
        new_end = straddled[0].first if straddled else target  # whole batches only
        self.batches = [b for b in self.batches if b.last < new_end]
        self.start = min(self.start, new_end)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.end

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def crash_with_torn_tail(self, data: st.DataObject) -> None:
        active = self.log.active_segment
        last = self.batches[-1]
        if active.size == 0 or last.first < active.base_offset:
            return
        self.log.close()
        path = active.log.path  # after the close, which gives files made ahead their names
        cut = data.draw(st.integers(1, last.size - 1), label="cut")
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size - cut)
        self.log = self._open_log()
        self.batches.pop()
        self.start = min(self.start, self.end)

    @rule()
    def expire_deleted_files(self) -> None:
        """file.delete.delay.ms passes: removed segments' files go, or one stays as the
        spare that the next roll writes into (segment.recycle)."""
        self.clock.advance(100)
        self.log.delete_pending_files()

    @rule()
    def crash(self) -> None:
        """The process dies: nothing is trimmed, flushed or checkpointed (what was written
        is in the page cache, so it all survives), and the next open recovers every segment."""
        _let_go(self.log)
        self.log = self._open_log()

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        self.log.close()
        self.log = self._open_log(had_clean_shutdown=clean)

    @rule(data=st.data())
    def timestamp_lookup(self, data: st.DataObject) -> None:
        stamps = [(o, t) for b in self.batches for o, _, t in b.records if o >= self.start]
        target = data.draw(
            st.integers(self.clock.milliseconds() - 500, self.clock.milliseconds() + 60)
        )
        found = self.log.fetch_offset_by_timestamp(target)
        expected = next(((o, t) for o, t in stamps if t >= target), None)
        if expected is None:
            assert found is None
        else:
            assert found is not None and (found.offset, found.timestamp) == expected

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def offsets_match(self) -> None:
        if hasattr(self, "log"):
            assert self.log.log_end_offset == self.end
            assert self.log.log_start_offset == self.start


def _let_go(log: Log) -> None:
    """What the death of the process does to an open log's files: closes their descriptors."""
    local = log._local
    segments = [*local.segments, *(segment for _, segment, _ in local._pending_deletes)]
    for segment in segments:
        segment.log.close_descriptor()
        segment.offset_index.close()
        segment.time_index.close()
        segment.txn_index.close_descriptor()
    if local._spare is not None:
        local._spare[0].close_descriptor()
    prepared = local._next._ready  # the next segment's files, made ahead (next_segment.py)
    if prepared is not None:
        prepared.log.close_descriptor()
        os.close(prepared.index_fd)
        os.close(prepared.time_index_fd)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(
    max_examples=int(__import__("os").environ.get("LOG_PROP_EXAMPLES", "75")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
