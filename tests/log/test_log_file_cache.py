"""The file cache (sluice.log.file_cache) and the segment files opened through it: each
opened on first use, at most ``capacity`` descriptors open, an evicted file opened again
by its path with its data intact; indexes created by their first entry (Kafka's
LazyIndex); a log on a cache of three descriptors against the log's model."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from test_log_property import LogMachine

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig, LogManager
from sluice.log.errors import KafkaStorageException
from sluice.log.file_cache import FileCache, default_capacity
from sluice.log.file_records import FileRecords
from sluice.log.index import OffsetIndex, TimeIndex
from sluice.log.segment import LogSegment
from support.logs import START_MS
from support.records import Rec, build_batch, values_of


def open_in(directory: Path) -> int:
    """Descriptors of this process open on files under ``directory``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{directory}/"):
            count += 1
    return count


def _records(tmp_path: Path, count: int, cache: FileCache) -> list[FileRecords]:
    files = []
    for i in range(count):
        records = FileRecords.open(tmp_path / f"{i:020d}.log", cache)
        records.append(b"%06d" % i)
        files.append(records)
    return files


# -- the cache ---------------------------------------------------------------------------
def test_at_most_capacity_descriptors_and_evicted_files_reopen(tmp_path: Path) -> None:
    cache = FileCache(3)
    files = _records(tmp_path, 10, cache)
    assert len(cache) == 3 and open_in(tmp_path) == 3
    assert cache.evictions == 7
    for i, records in enumerate(files):  # each opened again by its path, data intact
        assert records.read(0, 6) == b"%06d" % i
        assert open_in(tmp_path) <= 3
    files[0].append(b"more")
    assert files[0].read(0, 10) == b"000000more" and files[0].size == 10
    for records in files:
        records.close()
    assert len(cache) == 0 and open_in(tmp_path) == 0


def test_a_used_file_gets_a_second_chance(tmp_path: Path) -> None:
    cache = FileCache(2)
    first, second, third = _records(tmp_path, 3, cache)
    # The third one's opening passed over all three (clearing their flags) and closed
    # the least recently opened.
    assert not first.is_open and second.is_open and third.is_open
    second.fileno()  # used since: a second chance
    fourth = FileRecords.open(tmp_path / "fourth.log", cache)
    fourth.append(b"4")
    assert second.is_open and not third.is_open and fourth.is_open


def test_pinned_files_stay_open(tmp_path: Path) -> None:
    cache = FileCache(1)
    first = FileRecords.open(tmp_path / "a.log", cache)
    first.append(b"a")
    first.pinned = True
    later = _records(tmp_path, 3, cache)
    assert first.is_open  # over the capacity rather than closed while pinned
    assert sum(records.is_open for records in later) == 1
    first.pinned = False
    later[0].read(0, 1)
    assert not first.is_open


def test_files_opened_on_another_thread_are_not_tracked(tmp_path: Path) -> None:
    cache = FileCache(1)
    made: list[FileRecords] = []
    thread = threading.Thread(target=lambda: made.extend(_records(tmp_path, 3, cache)))
    thread.start()
    thread.join()
    assert len(cache) == 0 and all(records.is_open for records in made)
    for records in made:
        records.release()  # handed over closed: the owner's uses open them, tracked
    assert [records.read(0, 6) for records in made] == [b"%06d" % i for i in range(3)]
    assert len(cache) == 1 and open_in(tmp_path) == 1


def test_a_closed_file_does_not_open_again(tmp_path: Path) -> None:
    (records,) = _records(tmp_path, 1, FileCache(4))
    records.close()
    with pytest.raises(KafkaStorageException, match="is closed"):
        records.fileno()


def test_the_default_capacity_leaves_a_quarter_of_the_limit() -> None:
    assert default_capacity(20_000) == 15_000
    assert default_capacity(1024) == 768
    assert default_capacity(100) == 16


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    capacity=st.integers(1, 4),
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "read", "release", "close"]), st.integers(0, 7)),
        max_size=60,
    ),
)
def test_any_use_keeps_the_bound_and_the_data(
    tmp_path_factory: pytest.TempPathFactory, capacity: int, steps: list[tuple[str, int]]
) -> None:
    directory = tmp_path_factory.mktemp("cache")
    cache = FileCache(capacity)
    files = [FileRecords.open(directory / f"{i}.log", cache) for i in range(8)]
    model = [b""] * 8
    closed: set[int] = set()
    for action, i in steps:
        if i in closed:
            continue
        if action == "append":
            files[i].append(b"%d," % len(model[i]))
            model[i] += b"%d," % len(model[i])
        elif action == "read":
            assert files[i].read(0, files[i].size) == model[i]
        elif action == "release":
            files[i].release()
        else:
            files[i].close()
            closed.add(i)
        assert len(cache) <= capacity and open_in(directory) == len(cache)
        assert sum(f.is_open for f in files) == len(cache)
    for i, records in enumerate(files):
        if i not in closed:
            assert records.read(0, records.size) == model[i]
            records.close()
    assert open_in(directory) == 0


# -- lazy files ------------------------------------------------------------------------------
def test_an_index_file_is_created_by_its_first_entry(tmp_path: Path) -> None:
    cache = FileCache(8)
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 1024, cache=cache)
    assert index.entries == 0 and index.lookup(150).position == 0
    index.rename_to(tmp_path / "renamed.index")  # nothing to rename yet
    assert not index.is_open and list(tmp_path.iterdir()) == []
    index.append(120, 4096)
    assert index.is_open and (tmp_path / "renamed.index").stat().st_size == 8
    index.release()
    assert index.lookup(150) == (120, 4096)  # the entries stay loaded: no descriptor
    assert not index.is_open
    index.close()
    again = OffsetIndex(tmp_path / "renamed.index", 100, 1024, cache=cache)
    assert again.entries == 1 and not again.is_open
    assert again.lookup(150) == (120, 4096) and again.is_open
    again.close()
    absent = TimeIndex(tmp_path / "none.timeindex", 0, 1200, cache=cache, absent=True)
    assert absent.entries == 0 and absent.last_entry() == (-1, 0)


def test_a_new_segment_creates_its_files_when_written(tmp_path: Path) -> None:
    cache = FileCache(8)
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=50, cache=cache)
    assert list(tmp_path.iterdir()) == [] and len(cache) == 0
    assert segment.read(0, 100) is None and segment.read_next_offset() == 0
    assert list(tmp_path.iterdir()) == []  # reading an empty segment creates nothing
    for offset in range(0, 6, 2):
        batch = build_batch([Rec(b"v%d" % offset), Rec(b"w")], base_offset=offset)
        segment.append(offset + 1, START_MS, batch)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".index", ".log", ".timeindex"]
    assert segment.log.take_created() and not segment.log.take_created()
    segment.release_files()
    assert len(cache) == 0
    info = segment.read(2, 1000)
    assert info is not None and values_of(info.read())[0] == (2, b"v2")
    segment.close()
    assert len(cache) == 0


def test_a_loaded_log_opens_nothing_until_used(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    config = LogConfig(segment_bytes=300)
    log = Log(tmp_path / "t-0", config, clock=clock)
    for i in range(12):
        log.append_as_leader(build_batch([Rec(b"value-%02d" % i)]), 0)
    assert log.number_of_segments > 2
    log.flush()
    log.close()
    cache = FileCache(3)
    reopened = Log(tmp_path / "t-0", config, clock=clock, had_clean_shutdown=True, file_cache=cache)
    assert len(cache) == 0 and open_in(tmp_path) == 0
    values = []
    offset = 0
    while offset < reopened.log_end_offset:
        records = values_of(reopened.read(offset, 10_000).read())
        values += [value for _, value in records]
        offset = records[-1][0] + 1
        assert open_in(tmp_path) <= 3
    assert values == [b"value-%02d" % i for i in range(12)]
    reopened.close()
    assert open_in(tmp_path) == 0


def test_a_failed_creation_leaves_no_directory(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, file_cache=FileCache(8))
    planned = manager.new_log_dirs("t", range(6))
    planned[4].write_bytes(b"")  # a file where the directory goes: its creation fails
    with pytest.raises(KafkaStorageException, match="ENOTDIR"):
        manager.create_logs(planned, manager.default_config)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t-")) == ["t-4"]
    assert len(manager) == 0
    assert manager.live_log_dirs == []  # an I/O error takes the directory offline
    manager.shutdown()
    planned[4].unlink()
    manager = LogManager(tmp_path, file_cache=FileCache(8))  # online again after a restart
    logs = manager.create_logs(manager.new_log_dirs("t", range(6)), manager.default_config)
    assert sorted(logs) == list(range(6))
    assert open_in(tmp_path) == 1  # the directory's lock alone: a new log opens nothing
    for partition, log in logs.items():
        manager.add_log("t", partition, log)
    manager.shutdown()


# -- a log on three descriptors --------------------------------------------------------------
class SmallCacheLogMachine(LogMachine):
    """The log's model test with its files on a cache of three descriptors: every
    operation works through evictions, and no more than three stay open."""

    CAPACITY = 3

    def __init__(self) -> None:
        super().__init__()
        self.cache = FileCache(self.CAPACITY)

    def _open_log(self, had_clean_shutdown: bool = False) -> Log:
        return Log(
            self.tmp / "p-0", self.config, clock=self.clock,
            had_clean_shutdown=had_clean_shutdown, file_work=self.file_work,
            file_cache=self.cache,
        )  # fmt: skip

    @invariant()
    def descriptors_stay_within_the_capacity(self) -> None:
        assert len(self.cache) <= self.CAPACITY
        assert open_in(self.tmp) <= self.CAPACITY

    @rule()
    def release_everything(self) -> None:
        """The cache closes every file (another log's files took the descriptors)."""
        if hasattr(self, "log"):
            for segment in self.log.segments:
                segment.release_files()


TestSmallCacheLogMachine = SmallCacheLogMachine.TestCase
TestSmallCacheLogMachine.settings = settings(
    max_examples=int(os.environ.get("LOG_PROP_EXAMPLES", "50")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
