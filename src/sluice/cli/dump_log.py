"""``sluice dump-log``: print what a segment's files hold (like kafka-dump-log).

    sluice dump-log --files 00000000000000000000.log [--print-data-log] [--deep-iteration]
    sluice dump-log --files 00000000000000000000.index,00000000000000000000.timeindex \\
        [--verify-index-only | --index-sanity-check]

A data file (``.log``) is printed batch by batch: offsets, count, position, timestamp,
size, magic, codec, CRC and whether it is valid, producer id, epoch and sequences,
transactional and control flags; with ``--deep-iteration`` one line per record too, and
with ``--print-data-log`` its key and value (UTF-8, undecodable bytes replaced). Records
are read with the one record reader of ``sluice.protocol.records``. A batch whose head is
bad (length, magic, offsets) ends the dump with its position and what is wrong; a whole
batch that fails its CRC is printed ``isvalid: false`` with what is wrong, and the dump
goes on. Either makes the exit status 1.

An index (``.index``, ``.timeindex``) is printed entry by entry and checked against the
data file of the same name: an offset index entry must point at the batch ending at its
offset, a time index entry name the largest timestamp of the batch holding its offset,
and time index timestamps must grow. ``--verify-index-only`` prints only the mismatches,
``--index-sanity-check`` only runs the broker's start-up checks of the file. Mismatches
and a failed sanity check make the exit status 1 too. Nothing is written to the files.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TextIO

from sluice.cli.arguments import ToolError, UsageError, fail
from sluice.log.errors import CorruptIndexException
from sluice.log.file_records import (
    LOG_FILE_SUFFIX,
    Corruption,
    FileRecords,
    batch_problem,
    head_problem,
)
from sluice.log.index import INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, OffsetIndex, TimeIndex
from sluice.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CompressionType,
    TimestampType,
    read_header,
)
from sluice.protocol.records.errors import CorruptRecordException
from sluice.protocol.records.reader import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    Record,
    batch_records,
    control_type,
)

__all__ = ["add_parser", "dump_file", "run"]

PROG = "sluice dump-log"
_MAX_BATCH_SIZE = 2**31 - 1
_MAX_INDEX_SIZE = 2**31 - 1  # the files are read as they are, whatever their size
_INT32_MAX = 2**31 - 1
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_MARKERS = {CONTROL_TYPE_ABORT: "ABORT", CONTROL_TYPE_COMMIT: "COMMIT"}

_DESCRIPTION = """\
Print the batches of segment data files (.log) and the entries of their indexes
(.index, .timeindex), like kafka-dump-log.sh. Corrupt batches are reported with their
position and what is wrong, and index entries are checked against the data file; either
makes the exit status 1. The files are only read: a running broker's files can be dumped."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "dump-log",
        help="print and check the batches and index entries of segment files",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--files",
        required=True,
        metavar="FILE[,FILE...]",
        help="comma-separated data and index files to dump (.log, .index, .timeindex)",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and value (implies --deep-iteration)",
    )
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print a line per record, not only per batch",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the data file; print only the mismatches",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="run the broker's start-up checks of each index file; print nothing else",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        files = [name for name in args.files.split(",") if name]
        if not files:
            raise UsageError("--files needs at least one file")
        options = DumpOptions(
            deep=args.deep_iteration or args.print_data_log,
            print_data=args.print_data_log,
            verify_only=args.verify_index_only,
            sanity_only=args.index_sanity_check,
        )
        clean = True
        for name in files:
            clean = dump_file(Path(name), options, sys.stdout) and clean
    except ToolError as exc:
        return fail(PROG, exc)
    return 0 if clean else 1


class DumpOptions(NamedTuple):
    deep: bool = False
    print_data: bool = False
    verify_only: bool = False
    sanity_only: bool = False


def dump_file(path: Path, options: DumpOptions, out: TextIO) -> bool:
    """Dump one file to ``out``; False when it is corrupt or fails a check."""
    name = path.name
    if name.endswith(LOG_FILE_SUFFIX):
        kind: Callable[[Path, DumpOptions, TextIO], bool] = _dump_data
    elif name.endswith(INDEX_FILE_SUFFIX):
        kind = _dump_offset_index
    elif name.endswith(TIME_INDEX_FILE_SUFFIX):
        kind = _dump_time_index
    else:
        out.write(f"Ignoring unknown file {path}\n")
        return True
    out.write(f"Dumping {path}\n")
    return kind(path, options, out)


def _base_offset(path: Path) -> int:
    """The base offset a segment file is named after (0 when the name holds none)."""
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


def _open_data(path: Path) -> FileRecords:
    """The data file, opened read-only."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror or exc}") from exc
    return FileRecords(path, fd, os.fstat(fd).st_size)


# -- data files ----------------------------------------------------------------------------
class _Batch(NamedTuple):
    position: int
    header: BatchHeader  # its position is 0, in ``data``
    data: bytes  # the whole batch
    problem: str | None  # why the whole batch is not valid (its head is)


def _batches(records: FileRecords, base_offset: int) -> Iterator[_Batch | Corruption]:
    """The batches of the file, each read whole, then a :class:`Corruption` if a bad
    head ends the walk before the end of the file."""
    size = records.size
    position = 0
    min_offset = base_offset
    while position < size:
        head = records.read(position, BATCH_HEADER_SIZE)
        problem = head_problem(head, 0, position, size, min_offset)
        header = read_header(head) if problem is None else None
        if header is not None and header.last_offset - base_offset > _INT32_MAX:
            problem = f"lastOffset {header.last_offset} does not fit the segment"
        if header is None or problem is not None:
            yield Corruption(records.path, position, problem or "")
            return
        data = records.read(position, header.size_in_bytes)
        yield _Batch(position, header, data, batch_problem(data, 0, header, _MAX_BATCH_SIZE))
        min_offset = header.last_offset + 1
        position += header.size_in_bytes


def _dump_data(path: Path, options: DumpOptions, out: TextIO) -> bool:
    base_offset = _base_offset(path)
    records = _open_data(path)
    clean = True
    try:
        out.write(f"Log starting offset: {base_offset}\n")
        for batch in _batches(records, base_offset):
            if isinstance(batch, Corruption):
                out.write(
                    f"Corrupt batch at position {batch.position}: {batch.problem} "
                    f"({records.size - batch.position} bytes from there on not read)\n"
                )
                return False
            out.write(_batch_line(batch.header, batch.position, batch.problem is None))
            if batch.problem is not None:
                out.write(f"Corrupt batch at position {batch.position}: {batch.problem}\n")
                clean = False
            if options.deep:
                _write_records(batch, options.print_data, out)
    finally:
        os.close(records.fileno())
    return clean


def _batch_line(header: BatchHeader, position: int, valid: bool) -> str:
    base_sequence = header.base_sequence
    last_sequence = _sequence(base_sequence, header.last_offset_delta)
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {base_sequence} "
        f"lastSequence: {last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_bool(header.is_transactional)} "
        f"isControl: {_bool(header.is_control)} position: {position} "
        f"{_time_type(header)}: {header.max_timestamp} size: {header.size_in_bytes} "
        f"magic: {header.magic} compresscodec: {_codec(header.compression_type)} "
        f"crc: {header.crc} isvalid: {_bool(valid)}\n"
    )


def _write_records(batch: _Batch, print_data: bool, out: TextIO) -> None:
    header = batch.header
    try:
        records = batch_records(batch.data, header, check_crc=False)
    except CorruptRecordException as exc:
        out.write(f"| cannot read the records: {exc}\n")
        return
    time_type = _time_type(header)
    for record in records:
        offset = header.base_offset + record.offset_delta
        timestamp = (
            header.max_timestamp
            if header.timestamp_type is TimestampType.LOG_APPEND_TIME
            else header.base_timestamp + record.timestamp_delta
        )
        line = (
            f"| offset: {offset} {time_type}: {timestamp} "
            f"keySize: {_size(record.key)} valueSize: {_size(record.value)} "
            f"sequence: {_sequence(header.base_sequence, record.offset_delta)} "
            f"headerKeys: [{','.join(key for key, _ in record.headers)}]"
        )
        if header.is_control:
            line += _marker(record)
        elif print_data:
            if record.key is not None:
                line += f" key: {_text(record.key)}"
            line += f" payload: {_text(record.value)}"
        out.write(line + "\n")


def _marker(record: Record) -> str:
    kind = control_type(record)
    value = record.value
    if kind not in _MARKERS or value is None or len(value) < _MARKER_VALUE.size:
        return f" controlType: {kind}"
    _, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return f" endTxnMarker: {_MARKERS[kind]} coordinatorEpoch: {coordinator_epoch}"


def _time_type(header: BatchHeader) -> str:
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return "LogAppendTime"
    return "CreateTime"


def _sequence(base_sequence: int, delta: int) -> int:
    """Kafka's sequence of the record ``delta`` after the first: -1 without one, wrapping
    past the largest int32."""
    if base_sequence < 0:
        return -1
    return (base_sequence + delta) % (_INT32_MAX + 1)


def _codec(codec: int) -> str:
    try:
        return CompressionType(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "replace")


# -- indexes -------------------------------------------------------------------------------
class _Ends(NamedTuple):
    """Where each batch of a data file starts, its last offset and max timestamp, up to
    the first bad head (``walked``: where the walk ended; the file's size if at its end)."""

    positions: array[int]
    last_offsets: array[int]
    max_timestamps: array[int]
    walked: int
    size: int

    def at(self, position: int) -> int | None:
        """The index of the batch starting at ``position``."""
        i = bisect_left(self.positions, position)
        return i if i < len(self.positions) and self.positions[i] == position else None

    def holding(self, offset: int) -> int | None:
        """The index of the batch holding ``offset`` (the first ending at or after it)."""
        i = bisect_left(self.last_offsets, offset)
        return i if i < len(self.last_offsets) else None

    def unread(self, position: int) -> str | None:
        """Why nothing is known of ``position``: beyond a bad head, or the file's end."""
        if position < self.walked:
            return None
        if self.walked < self.size:
            return f"past a corrupt batch of the data file at position {self.walked}"
        return f"past the end of the data file ({self.size} bytes)"


def _batch_ends(index_path: Path) -> _Ends:
    data_path = index_path.with_name(index_path.name.split(".", 1)[0] + LOG_FILE_SUFFIX)
    if not data_path.exists():
        raise ToolError(f"cannot check {index_path}: no data file {data_path.name} beside it")
    records = _open_data(data_path)
    positions, last_offsets, max_timestamps = array("q"), array("q"), array("q")
    walked = 0
    try:
        for header in records.batch_headers():
            positions.append(header.position)
            last_offsets.append(header.last_offset)
            max_timestamps.append(header.max_timestamp)
            walked = header.end_position
    finally:
        os.close(records.fileno())
    return _Ends(positions, last_offsets, max_timestamps, walked, records.size)


def _open_index(path: Path, kind: type[OffsetIndex] | type[TimeIndex]) -> OffsetIndex | TimeIndex:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror or exc}") from exc
    return kind(path, _base_offset(path), _MAX_INDEX_SIZE, fd)


def _sanity(path: Path, check: Callable[[], None], out: TextIO) -> bool:
    try:
        check()
    except CorruptIndexException as exc:
        out.write(f"{path} failed sanity check: {exc}\n")
        return False
    out.write(f"{path} passed sanity check.\n")
    return True


def _dump_offset_index(path: Path, options: DumpOptions, out: TextIO) -> bool:
    index = _open_index(path, OffsetIndex)
    assert isinstance(index, OffsetIndex)
    try:
        if options.sanity_only:
            data_path = path.with_name(path.name.split(".", 1)[0] + LOG_FILE_SUFFIX)
            size = data_path.stat().st_size if data_path.exists() else 0
            return _sanity(path, lambda: index.sanity_check(size), out)
        ends = _batch_ends(path)
        mismatches: list[str] = []
        for i in range(index.entries):
            entry = index.entry(i)
            batch = ends.at(entry.position)
            unread = ends.unread(entry.position)
            if unread is not None:
                mismatches.append(f"  Index offset: {entry.offset}, position {entry.position} "
                                  f"is {unread}")  # fmt: skip
            elif batch is None:
                mismatches.append(
                    f"  Index offset: {entry.offset}, no batch starts at position {entry.position}"
                )
            elif ends.last_offsets[batch] != entry.offset:
                mismatches.append(
                    f"  Index offset: {entry.offset}, log offset: {ends.last_offsets[batch]}"
                )
            if not options.verify_only:
                out.write(f"offset: {entry.offset} position: {entry.position}\n")
    finally:
        index.close()
    if mismatches:
        out.write(f"Mismatches in :{path.resolve()}\n" + "\n".join(mismatches) + "\n")
    return not mismatches


def _dump_time_index(path: Path, options: DumpOptions, out: TextIO) -> bool:
    index = _open_index(path, TimeIndex)
    assert isinstance(index, TimeIndex)
    try:
        if options.sanity_only:
            return _sanity(path, index.sanity_check, out)
        ends = _batch_ends(path)
        mismatches: list[str] = []
        out_of_order: list[str] = []
        previous = -1
        for i in range(index.entries):
            entry = index.entry(i)
            batch = ends.holding(entry.offset)
            if batch is None and ends.walked < ends.size:
                mismatches.append(
                    f"  Index timestamp: {entry.timestamp}, offset {entry.offset} is past a "
                    f"corrupt batch of the data file at position {ends.walked}"
                )
            else:
                logged = -1 if batch is None else ends.max_timestamps[batch]
                if logged != entry.timestamp:
                    mismatches.append(
                        f"  Index timestamp: {entry.timestamp}, log timestamp: {logged}"
                    )
            if i > 0 and entry.timestamp <= previous:
                out_of_order.append(
                    f"  Index timestamp: {entry.timestamp}, "
                    f"Previously indexed timestamp: {previous}"
                )
            previous = entry.timestamp
            if not options.verify_only:
                out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
    finally:
        index.close()
    where = path.resolve()
    if mismatches:
        out.write(f"Found timestamp mismatch in :{where}\n" + "\n".join(mismatches) + "\n")
    if out_of_order:
        out.write(f"Found out of order timestamp in :{where}\n" + "\n".join(out_of_order) + "\n")
    return not (mismatches or out_of_order)
