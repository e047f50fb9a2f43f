"""The chaos checker on recorded histories, no cluster: each anomaly kind on a hand-made
history, and, as properties, a history a correct cluster could produce is clean while
each kind of damage to it is found."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from sluice.testing.chaos import History, Write, check, decode_value, encode_value
from sluice.testing.chaos.checker import describe_offsets
from sluice.testing.chaos.report import FaultReport, format_report, format_table


def _log(history: History, partition: int, writes: list[Write], *, acked: bool = True) -> None:
    """Append ``writes`` to ``partition``'s log at consecutive offsets: sent, acknowledged
    (or failed) and read back finally."""
    start = sum(1 for r in history.reads if r.final and r.partition == partition)
    for offset, write in enumerate(writes, start):
        history.record_sent(write)
        if acked:
            history.record_ack(write, offset)
        else:
            history.record_failure(write, "timed out")
        history.record_read("final", partition, offset, encode_value(write, 40), final=True)
    history.final_read_complete[partition] = True


def _history(*writes: Write) -> History:
    history = History()
    for p in sorted({w.partition for w in writes}):
        _log(history, p, [w for w in writes if w.partition == p])
    return history


def test_values_say_which_write_they_are() -> None:
    write = Write(3, 1, 17)
    assert encode_value(write) == b"3:1:17:"
    assert len(encode_value(write, 100)) == 100
    assert decode_value(encode_value(write, 100)) == write
    for bad in (b"", b"garbage", b"1:2", b"1:x:3:", b"1:2:3:..x", b"-1:2:3:"):
        assert decode_value(bad) is None


def test_describe_offsets_folds_runs() -> None:
    assert describe_offsets([9, 3, 4, 5, 5, 11, 12]) == "3-5, 9, 11-12"
    assert describe_offsets([]) == ""


def test_a_clean_history_has_no_anomalies() -> None:
    writes = [Write(0, p, s) for s in range(5) for p in range(2)]
    history = _history(*writes)
    history.record_read("tail", 0, 2, encode_value(Write(0, 0, 2)), final=False)
    result = check(history)
    assert result.ok and result.acked == 10 and result.failed == 0
    assert result.final_records == 10


def test_a_lost_acknowledged_write() -> None:
    history = _history(Write(0, 0, 0), Write(0, 0, 1))
    history.record_sent(Write(0, 0, 2))
    history.record_ack(Write(0, 0, 2), 2)  # acknowledged, never read back
    result = check(history)
    assert result.count("lost") == 1
    assert result.of_kind("lost")[0].offsets == (2,)
    assert "0:0:2 acknowledged at 2" in result.of_kind("lost")[0].detail


def test_a_failed_write_may_be_missing_but_not_twice() -> None:
    history = _history(Write(0, 0, 0))
    history.record_sent(Write(0, 0, 1))
    history.record_failure(Write(0, 0, 1), "timed out")
    assert check(history).ok and check(history).failed == 1
    _log(history, 0, [Write(0, 0, 1), Write(0, 0, 1)], acked=False)  # appended twice
    result = check(history)
    assert result.count("duplicated") == 1 and result.count("lost") == 0


def test_duplicates_count_each_extra_copy() -> None:
    history = History()
    w = Write(1, 0, 0)
    _log(history, 0, [w, w, w], acked=False)
    history.record_ack(w, 0)
    result = check(history)
    assert result.count("duplicated") == 2
    assert "offsets 0-2" in result.of_kind("duplicated")[0].detail


def test_reordering_within_a_writer_and_partition() -> None:
    history = History()
    a, b = Write(0, 0, 0), Write(0, 0, 1)
    _log(history, 0, [b, a], acked=False)
    history.record_ack(a, 1)
    history.record_ack(b, 0)
    result = check(history)
    assert result.count("reordered") == 1
    # Two writers interleaving is not reordering.
    other = _history(Write(0, 0, 0), Write(1, 0, 0), Write(0, 0, 1), Write(1, 0, 1))
    assert check(other).ok


def test_acknowledged_offsets_going_backwards_are_reordering() -> None:
    history = History()
    a, b = Write(0, 0, 0), Write(0, 0, 1)
    _log(history, 0, [a, b], acked=False)
    history.record_ack(a, 5)
    history.record_ack(b, 4)  # and neither is where its acknowledgement said
    result = check(history)
    assert result.count("reordered") == 1
    assert result.count("changed") == 2


def test_a_read_that_vanished() -> None:
    history = _history(Write(0, 0, 0))
    gone = Write(0, 0, 1)
    history.record_sent(gone)
    history.record_failure(gone, "timed out")  # not acknowledged, but a consumer saw it
    history.record_read("tail", 0, 1, encode_value(gone), final=False)
    result = check(history)
    assert result.count("vanished") == 1 and result.count("lost") == 0
    assert "0:0:1 read at 1 by tail" in result.of_kind("vanished")[0].detail


def test_an_offset_whose_value_changed() -> None:
    history = _history(Write(0, 0, 0), Write(0, 0, 1))
    ghost = Write(1, 0, 0)
    history.record_sent(ghost)
    history.record_read("tail", 0, 1, encode_value(ghost), final=False)  # offset 1 was ghost
    result = check(history)
    assert result.count("changed") == 1 and result.count("vanished") == 1
    assert "offset 1: saw 0:0:1, 1:0:0; final log has 0:0:1" in result.of_kind("changed")[0].detail


def test_a_write_that_moved_to_another_offset() -> None:
    history = History()
    w = Write(0, 0, 0)
    _log(history, 0, [Write(0, 0, 5), w], acked=False)
    history.record_ack(w, 0)  # acknowledged at 0, found at 1
    result = check(history)
    assert result.count("changed") == 1
    assert "now at 1" in result.of_kind("changed")[0].detail


def test_bad_reads() -> None:
    history = _history(Write(0, 0, 0))
    history.record_read("final", 0, 1, None, final=True)  # a checksum error
    history.record_read("final", 0, 2, b"not a value", final=True)
    history.record_read("final", 0, 3, encode_value(Write(7, 0, 0)), final=True)  # never sent
    history.record_read("tail", 0, 4, encode_value(Write(0, 1, 0)), final=False)  # other partition
    history.final_read_complete[1] = False
    result = check(history)
    assert result.count("bad read") == 5
    assert result.final_records == 4


@dataclass
class _Plan:
    """A cluster's correct behaviour: per partition, writes interleaved from several
    writers in their own order; some failed (and may or may not be in the log)."""

    logs: dict[int, list[tuple[Write, bool, bool]]]  # (write, acked, in the log)


@st.composite
def plans(draw: st.DrawFn) -> _Plan:
    partitions = draw(st.integers(1, 3))
    writers = draw(st.integers(1, 3))
    logs: dict[int, list[tuple[Write, bool, bool]]] = {}
    for p in range(partitions):
        counts = [draw(st.integers(0, 6)) for _ in range(writers)]
        queues = [[Write(w, p, s) for s in range(n)] for w, n in enumerate(counts)]
        order = draw(st.permutations([w for w, n in enumerate(counts) for _ in range(n)]))
        entries = []
        for w in order:
            write = queues[w].pop(0)
            acked = draw(st.booleans()) or draw(st.booleans())
            entries.append((write, acked, acked or draw(st.booleans())))
        logs[p] = entries
    return _Plan(logs)


def _record(plan: _Plan, tail_every: int = 2) -> History:
    history = History()
    for p, entries in plan.logs.items():
        offset = 0
        for n, (write, acked, stored) in enumerate(entries):
            history.record_sent(write)
            if not stored:
                history.record_failure(write, "timed out")
                continue
            if acked:
                history.record_ack(write, offset)
            else:
                history.record_failure(write, "timed out")
            if n % tail_every == 0:
                history.record_read("tail", p, offset, encode_value(write), final=False)
            history.record_read("final", p, offset, encode_value(write, 30), final=True)
            offset += 1
        history.final_read_complete[p] = True
    return history


@given(plans())
def test_a_correct_cluster_passes(plan: _Plan) -> None:
    result = check(_record(plan))
    assert result.ok, result.anomalies
    acked = sum(1 for entries in plan.logs.values() for _, a, _ in entries if a)
    assert result.acked == acked


@given(plans(), st.data())
def test_losing_an_acknowledged_write_is_found(plan: _Plan, data: st.DataObject) -> None:
    history = _record(plan)
    acked = [a.write for a in history.acks]
    if not acked:
        return
    victim = data.draw(st.sampled_from(acked))
    history.reads = [r for r in history.reads if not (r.final and decode_value(r.value or b"")
                                                      == victim)]  # fmt: skip
    result = check(history)
    assert result.count("lost") == 1
    read_live = any(not r.final and decode_value(r.value or b"") == victim for r in history.reads)
    assert result.count("vanished") == int(read_live)


@given(plans(), st.data())
def test_duplicating_a_record_is_found(plan: _Plan, data: st.DataObject) -> None:
    history = _record(plan)
    finals = [r for r in history.reads if r.final]
    if not finals:
        return
    copied = data.draw(st.sampled_from(finals))
    end = 1 + max(r.offset for r in finals if r.partition == copied.partition)
    history.record_read("final", copied.partition, end, copied.value, final=True)
    assert check(history).count("duplicated") == 1


@given(plans(), st.data())
def test_swapping_a_writers_records_is_found(plan: _Plan, data: st.DataObject) -> None:
    history = _record(plan)
    acked = {a.write: a.offset for a in history.acks}
    pairs = [(a, b) for a in acked for b in acked
             if a.writer == b.writer and a.partition == b.partition and a.seq < b.seq]  # fmt: skip
    if not pairs:
        return
    a, b = data.draw(st.sampled_from(pairs))
    swapped = {acked[a]: encode_value(b), acked[b]: encode_value(a)}
    history.reads = [
        r
        if not (r.final and r.partition == a.partition and r.offset in swapped)
        else type(r)(r.reader, r.partition, r.offset, swapped[r.offset], True)
        for r in history.reads
    ]
    result = check(history)
    assert result.count("reordered") >= 1 and result.count("changed") == 2
    assert result.count("lost") == 0 and result.count("duplicated") == 0


def test_the_report_table_and_details() -> None:
    history = _history(Write(0, 0, 0))
    history.record_sent(Write(0, 0, 1))
    history.record_ack(Write(0, 0, 1), 1)
    reports = [
        FaultReport("kill", injected=3, result=check(_history(Write(0, 0, 0)))),
        FaultReport("partition", injected=2, result=check(history), notes=["a note"]),
        FaultReport("disk-full", skipped="needs root"),
        FaultReport("zookeeper", error="TimeoutError: no"),
    ]
    table = format_table(reports).splitlines()
    assert table[0].split() == [
        "fault", "injected", "acked", "failed", "lost", "duplicated", "reordered", "vanished",
        "changed", "bad", "read", "verdict",
    ]  # fmt: skip
    assert table[2].split() == ["kill", "3", "1", "0", "0", "0", "0", "0", "0", "0", "ok"]
    assert table[3].split()[-1] == "VIOLATION" and table[3].split()[4] == "1"
    assert table[4].split()[-1] == "skipped" and table[5].split()[-1] == "error"
    assert [r.failed for r in reports] == [False, True, False, True]
    text = format_report(reports)
    assert "lost: 1 (partition 0: offsets 1)" in text
    assert "note: a note" in text and "skipped: needs root" in text
    assert text.endswith("violations or errors in: partition, zookeeper")
    assert format_report(reports[:1]).endswith("no violations")
