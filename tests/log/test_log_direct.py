"""Direct I/O for follower appends (sluice.log.direct): whole blocks with O_DIRECT, the
partial blocks at either end through the page cache; the file reads back exactly as if
every byte had been written through the page cache."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.direct import BLOCK_SIZE
from sluice.log.file_records import FileRecords
from support.logs import START_MS
from support.records import build_batch, values_of

O_DIRECT = getattr(os, "O_DIRECT", 0)


def direct_supported(directory: Path) -> bool:
    probe = directory / "probe"
    probe.touch()
    try:
        os.close(os.open(probe, os.O_WRONLY | O_DIRECT))
    except (OSError, ValueError):
        return False
    finally:
        probe.unlink()
    return bool(O_DIRECT)


def payload(start: int, size: int) -> bytes:
    return bytes((start + i) * 7 % 251 for i in range(size))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.integers(0, 3 * BLOCK_SIZE),
    appends=st.lists(
        st.tuples(st.integers(0, 3 * BLOCK_SIZE + 17), st.booleans()), min_size=1, max_size=12
    ),
)
def test_direct_and_buffered_appends_read_back_as_written(
    tmp_path: Path, first: int, appends: list[tuple[int, bool]]
) -> None:
    path = tmp_path / f"{first}-{len(appends)}-{os.getpid()}.log"
    path.unlink(missing_ok=True)
    records = FileRecords.open(path)
    expected = bytearray()
    try:
        for size, direct in [(first, False), *appends]:  # followers and leaders take turns
            data = payload(len(expected), size)
            assert records.append(data, direct=direct) == size
            expected += data
            assert records.size == len(expected) == os.stat(path).st_size
        assert records.read(0, len(expected) + 10) == bytes(expected)
    finally:
        records.close()
    assert path.read_bytes() == bytes(expected)


def test_whole_blocks_go_through_an_o_direct_descriptor(tmp_path: Path) -> None:
    if not direct_supported(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT")
    records = FileRecords.open(tmp_path / "a.log")
    records.append(payload(0, 100), direct=True)  # no whole block: the page cache only
    assert records._direct is not None and records._direct._fd == -1
    records.append(payload(100, 3 * BLOCK_SIZE), direct=True)
    fd = records._direct._fd
    assert fd >= 0 and fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT
    records.close()
    assert records._direct._fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the file
    assert (tmp_path / "a.log").read_bytes() == payload(0, 100 + 3 * BLOCK_SIZE)


@pytest.mark.parametrize("refused_at", ["open", "write"])
def test_a_filesystem_refusing_o_direct_gets_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused_at: str
) -> None:
    real_open, real_pwritev = os.open, os.pwritev
    direct_fds: set[int] = set()

    def fake_open(path: object, flags: int, *args: int) -> int:
        if flags & O_DIRECT and O_DIRECT:
            if refused_at == "open":
                raise OSError(errno.EINVAL, "Invalid argument")
            fd = real_open(path, flags & ~O_DIRECT, *args)  # type: ignore[arg-type]
            direct_fds.add(fd)
            return fd
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    def fake_pwritev(fd: int, buffers: list[memoryview], offset: int) -> int:
        if fd in direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwritev(fd, buffers, offset)

    monkeypatch.setattr("sluice.log.direct._O_DIRECT", O_DIRECT or 0x4000)
    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "pwritev", fake_pwritev)
    records = FileRecords.open(tmp_path / "b.log")
    expected = payload(0, 5 * BLOCK_SIZE + 3)
    records.append(expected[:10], direct=True)
    records.append(expected[10:], direct=True)  # refused: written through the page cache
    records.append(b"tail", direct=True)  # refused for good: not tried again
    assert records._direct is not None and records._direct._fd == -2
    records.close()
    monkeypatch.undo()
    assert (tmp_path / "b.log").read_bytes() == expected + b"tail"


def test_follower_appends_with_direct_io_survive_a_reopen(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    config = LogConfig(segment_bytes=16 * 1024)
    log = Log(tmp_path / "t-0", config, clock=clock)
    base = 0
    sent: list[tuple[int, bytes | None]] = []
    for round_ in range(12):  # batches of ~5-20 KiB, rolling segments on the way
        values = [f"{round_}-{i}".encode() * 40 for i in range(8 + round_ * 4)]
        batch = build_batch(values, base_offset=base, partition_leader_epoch=1)
        log.append_as_follower(batch, direct=True)
        sent += [(base + i, v) for i, v in enumerate(values)]
        base += len(values)
    assert len(log.segments) > 1
    assert read_all(log) == sent
    log.close()
    reopened = Log(tmp_path / "t-0", config, clock=clock, had_clean_shutdown=False)
    assert reopened.log_end_offset == base
    assert read_all(reopened) == sent  # recovery scanned the direct-written segments
    reopened.close()


def read_all(log: Log) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    while len(out) < log.log_end_offset:
        out += values_of(log.read(len(out), 10**7).read())
    return out
