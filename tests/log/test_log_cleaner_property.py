"""Property test: compaction against a dict model (the latest value per key).

Random appends (keys from a small set, values or tombstones, every codec), rolls, clock
advances, whole passes, single cleaner steps interleaved with everything else, and reopens.
After every operation the log must describe exactly the model's table, keep every record at
its original offset, keep the latest record of every live key, hold each key at most once
below the cleaner checkpoint, and keep a tombstone at least ``delete.retention.ms`` after the
first cleaning that saw it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sluice.base.clock import ManualClock
from sluice.log import Log
from sluice.log.cleaner.files import read_cleaner_checkpoint
from sluice.log.cleaner.log_cleaner import CompactionConfig, LogCleaner
from support.cleaner import kv_batch, latest_view, open_log, read_batches

KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
values = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
records = st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=6)


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-cleaner-prop-"))
        self.clock = ManualClock(1_000_000)
        self.written: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> key, value, ts
        self.latest: dict[bytes, int] = {}  # key -> offset of its latest record
        self.horizons: dict[int, int] = {}  # tombstone offset -> delete horizon seen on disk

    @initialize(
        segment_bytes=st.integers(300, 1500),
        retention=st.sampled_from([0, 1000, 5000]),
        slice_bytes=st.sampled_from([64, 400, 1 << 20]),
        max_map_entries=st.sampled_from([2, 4, 1000]),
    )
    def setup(
        self, segment_bytes: int, retention: int, slice_bytes: int, max_map_entries: int
    ) -> None:
        self.segment_bytes = segment_bytes
        self.retention = retention
        self.log = self._open()
        config = CompactionConfig(delete_retention_ms=retention, min_cleanable_dirty_ratio=0)
        self.cleaner = LogCleaner(
            lambda: [self.log], config_for=lambda _: config, clock=self.clock,
            slice_bytes=slice_bytes, max_map_entries=max_map_entries,
        )  # fmt: skip

    def _open(self) -> Log:
        return open_log(self.tmp / "t-0", self.clock, segment_bytes=self.segment_bytes)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.cleaner.abort()
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- operations ------------------------------------------------------------------------
    @rule(pairs=records, codec=st.sampled_from([0, 0, 1, 2, 3, 4]))
    def append(self, pairs: list[tuple[bytes, bytes | None]], codec: int) -> None:
        info = self.log.append_as_leader(kv_batch(list(pairs), self.clock, codec), 0)
        for i, (key, value) in enumerate(pairs):
            self.written[info.first_offset + i] = (key, value, self.clock.milliseconds())
            self.latest[key] = info.first_offset + i

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.integers(0, 3000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def clean_pass(self) -> None:
        self.cleaner.abort()
        self.cleaner.clean_log(self.log)

    @rule(steps=st.integers(1, 6))
    def cleaner_steps(self, steps: int) -> None:
        for _ in range(steps):
            self.cleaner.step()
            # One pass may end (giving a tombstone its horizon) and the next remove the
            # tombstone within these steps: note each horizon when it reaches the disk.
            self._note_horizons()

    def _note_horizons(self) -> None:
        for fields, batch in read_batches(self.log):
            if fields[5] & 0x40:
                for record in batch:
                    if record.value is None:
                        self.horizons.setdefault(record.offset, fields[7])

    @rule()
    def reopen(self) -> None:
        self.cleaner.abort()
        self.log.close()
        self.log = self._open()

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def matches_the_model(self) -> None:
        log = self.log
        end = max(self.written, default=-1) + 1
        assert log.log_end_offset == end and log.log_start_offset == 0
        self._note_horizons()
        seen = [
            (record.offset, record.key, record.value)
            for _, batch in read_batches(log)
            for record in batch
        ]
        offsets = [offset for offset, _, _ in seen]
        assert offsets == sorted(set(offsets))
        for offset, key, value in seen:
            assert self.written[offset][:2] == (key, value)
        table = {k: v for k, o in self.latest.items() if (v := self.written[o][1]) is not None}
        assert latest_view(seen) == table
        present = set(offsets)
        for key, offset in self.latest.items():
            if self.written[offset][1] is not None:
                assert offset in present, f"latest value of {key!r} lost"
            elif offset not in present and self.retention > 0:
                # A removed tombstone: its horizon was on disk and has passed.
                horizon = self.horizons.get(offset)
                assert horizon is not None and horizon <= self.clock.milliseconds()
                assert horizon >= self.written[offset][2] + self.retention
        checkpoint = read_cleaner_checkpoint(log.dir) or 0
        clean_keys = [key for offset, key, _ in seen if offset < checkpoint]
        assert len(clean_keys) == len(set(clean_keys))


TestCompaction = CompactionMachine.TestCase
TestCompaction.settings = settings(
    max_examples=int(os.environ.get("CLEANER_PROP_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
