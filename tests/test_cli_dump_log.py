"""``sluice dump-log`` on good and corrupt segment files, run in-process through
``sluice.cli.main``: batches, records, index entries, and the exit status when
something is wrong."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from sluice.base.clock import ManualClock
from sluice.cli import main
from sluice.log import Log, LogConfig
from support.logs import START_MS
from support.records import Rec, build_batch

BATCH_LINE = re.compile(
    r"^baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: (?P<count>\d+) "
    r"baseSequence: (?P<seq>-?\d+) lastSequence: (?P<lastseq>-?\d+) producerId: (?P<pid>-?\d+) "
    r"producerEpoch: (?P<epoch>-?\d+) partitionLeaderEpoch: (?P<ple>-?\d+) "
    r"isTransactional: (?P<txn>true|false) isControl: (?P<control>true|false) "
    r"position: (?P<position>\d+) CreateTime: (?P<time>-?\d+) size: (?P<size>\d+) magic: 2 "
    r"compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+) isvalid: (?P<valid>true|false)$"
)


def _dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["dump-log", *args])
    return code, capsys.readouterr().out.splitlines()


def _log(directory: Path) -> Path:
    """A log of two segments: offsets 0..5 in three batches (one gzip-compressed, one
    from an idempotent producer), then a transaction and its COMMIT marker; an active
    segment holding one batch. Returns the first segment's data file."""
    clock = ManualClock(START_MS)
    config = LogConfig(segment_bytes=2000, index_interval_bytes=1, segment_prepare_next=False)
    log = Log(directory / "t-0", config, clock=clock)
    stamp = clock.milliseconds()
    log.append_as_leader(build_batch([Rec(b"a", key=b"k", timestamp=stamp), Rec(b"b")]), 0)
    log.append_as_leader(build_batch([Rec(b"c" * 300)], compression=1), 0)
    log.append_as_leader(
        build_batch([Rec(b"d"), Rec(b"e")], producer_id=7, producer_epoch=0, base_sequence=0), 0
    )
    log.append_as_leader(
        build_batch([Rec(b"f")], producer_id=8, producer_epoch=0, base_sequence=0,
                    transactional=True), 0,
    )  # fmt: skip
    marker = Rec(struct.pack(">hi", 0, 3), key=struct.pack(">hh", 0, 1))  # COMMIT, epoch 3
    from sluice.log.append import AppendOrigin

    log.append_as_leader(
        build_batch([marker], producer_id=8, producer_epoch=0, transactional=True, control=True),
        0, AppendOrigin.COORDINATOR,
    )  # fmt: skip
    while log.number_of_segments < 2:
        log.append_as_leader(build_batch([Rec(b"x" * 500)]), 0)
    log.close()
    return sorted((directory / "t-0").glob("*.log"))[0]


def test_a_good_segment_and_its_indexes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _log(tmp_path)
    code, lines = _dump(capsys, "--files", str(data))
    assert code == 0 and lines[:2] == [f"Dumping {data}", "Log starting offset: 0"]
    batches = [m.groupdict() for m in map(BATCH_LINE.match, lines[2:]) if m]
    assert len(batches) == len(lines) - 2  # nothing but batch lines without --deep-iteration
    assert [(b["base"], b["last"], b["count"]) for b in batches[:5]] == [
        ("0", "1", "2"), ("2", "2", "1"), ("3", "4", "2"), ("5", "5", "1"), ("6", "6", "1"),
    ]  # fmt: skip
    assert {b["valid"] for b in batches} == {"true"}
    assert [b["codec"] for b in batches[:2]] == ["none", "gzip"]
    assert (batches[2]["pid"], batches[2]["seq"], batches[2]["lastseq"]) == ("7", "0", "1")
    assert (batches[4]["txn"], batches[4]["control"]) == ("true", "true")
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [sum(sizes[:i]) for i in range(len(sizes))]
    assert positions[-1] + sizes[-1] == data.stat().st_size

    code, lines = _dump(capsys, "--files", str(data), "--print-data-log")
    assert code == 0
    assert lines[3].startswith("| offset: 0 CreateTime: ") and lines[3].endswith(
        "keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: k payload: a"
    )
    assert lines[4].endswith("keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: b")
    assert lines[6].endswith("payload: " + "c" * 300)  # decompressed
    assert lines[8].endswith("sequence: 0 headerKeys: [] payload: d")
    assert any(line.endswith("endTxnMarker: COMMIT coordinatorEpoch: 3") for line in lines)
    code, deep = _dump(capsys, "--files", str(data), "--deep-iteration")
    assert code == 0 and len(deep) == len(lines) and "payload" not in deep[3]

    index, time_index = data.with_suffix(".index"), data.with_suffix(".timeindex")
    code, lines = _dump(capsys, "--files", f"{index},{time_index}")
    assert code == 0 and lines[0] == f"Dumping {index}"
    entries = [line for line in lines if line.startswith("offset: ")]
    assert entries and all(re.fullmatch(r"offset: \d+ position: \d+", e) for e in entries)
    assert any(re.fullmatch(r"timestamp: \d+ offset: \d+", line) for line in lines)
    code, lines = _dump(capsys, "--files", f"{index},{time_index}", "--verify-index-only")
    assert code == 0 and lines == [f"Dumping {index}", f"Dumping {time_index}"]
    code, lines = _dump(capsys, "--files", f"{index},{time_index}", "--index-sanity-check")
    assert code == 0 and lines[1] == f"{index} passed sanity check."


def _overwrite(path: Path, position: int, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, position)
    finally:
        os.close(fd)


def test_a_batch_failing_its_crc_is_reported_and_the_dump_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _log(tmp_path)
    code, good = _dump(capsys, "--files", str(data))
    second = BATCH_LINE.match(good[3])
    assert second is not None
    position, size = int(second["position"]), int(second["size"])
    _overwrite(data, position + size - 5, b"\xff")
    code, lines = _dump(capsys, "--files", str(data), "--print-data-log")
    assert code == 1
    bad = [i for i, line in enumerate(lines) if line.endswith("isvalid: false")]
    assert len(bad) == 1
    match = BATCH_LINE.match(lines[bad[0]])
    assert match is not None and match["position"] == str(position)
    assert re.fullmatch(
        rf"Corrupt batch at position {position}: CRC \d+ stored, \d+ computed", lines[bad[0] + 1]
    )
    assert sum(1 for line in lines if BATCH_LINE.match(line)) == len(good) - 2  # all of them


def test_a_bad_batch_length_ends_the_dump_with_where_and_what(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _log(tmp_path)
    _, good = _dump(capsys, "--files", str(data))
    third = BATCH_LINE.match(good[4])
    assert third is not None
    position = int(third["position"])
    _overwrite(data, position + 8, struct.pack(">i", 10**6))
    code, lines = _dump(capsys, "--files", str(data))
    assert code == 1
    assert lines[2:4] == good[2:4]  # the batches before it
    remaining = data.stat().st_size - position
    assert lines[4] == (
        f"Corrupt batch at position {position}: batchLength 1000000 runs past the end of the "
        f"records ({remaining - 12} bytes follow) ({remaining} bytes from there on not read)"
    )
    assert len(lines) == 5
    index = data.with_suffix(".index")
    code, lines = _dump(capsys, "--files", str(index), "--verify-index-only")
    assert code == 1 and lines[1] == f"Mismatches in :{index.resolve()}"
    assert f"is past a corrupt batch of the data file at position {position}" in lines[2]


def test_index_mismatches_and_a_failed_sanity_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _log(tmp_path)
    index, time_index = data.with_suffix(".index"), data.with_suffix(".timeindex")
    _, before = _dump(capsys, "--files", str(index))
    first = int(before[1].split()[1])  # "offset: N position: P", N its batch's last offset
    raw = bytearray(index.read_bytes())
    raw[0:4] = struct.pack(">i", 5)  # the first entry's relative offset (base offset 0)
    index.write_bytes(bytes(raw))
    code, lines = _dump(capsys, "--files", str(index))
    assert code == 1 and first != 5
    assert lines[-2:] == [
        f"Mismatches in :{index.resolve()}",
        f"  Index offset: 5, log offset: {first}",
    ]
    stamps = bytearray(time_index.read_bytes())
    stamps[0:8] = struct.pack(">q", 12345)
    time_index.write_bytes(bytes(stamps))
    code, lines = _dump(capsys, "--files", str(time_index), "--verify-index-only")
    assert code == 1 and lines[1] == f"Found timestamp mismatch in :{time_index.resolve()}"
    assert lines[2].startswith("  Index timestamp: 12345, log timestamp: ")
    index.write_bytes(bytes(raw) + b"\x01\x02\x03")  # not whole entries
    code, lines = _dump(capsys, "--files", str(index), "--index-sanity-check")
    assert code == 1 and lines[1].startswith(f"{index} failed sanity check: ")


def test_unknown_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    code, lines = _dump(capsys, "--files", str(other))
    assert code == 0 and lines == [f"Ignoring unknown file {other}"]
    code = main(["dump-log", "--files", str(tmp_path / "00000000000000000000.log")])
    captured = capsys.readouterr()
    assert code == 1 and "sluice dump-log: error: cannot open" in captured.err
