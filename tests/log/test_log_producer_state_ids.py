"""ProducerIdManager: producer ids come from persisted blocks and are never reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.replication.producer_ids import PRODUCER_ID_BLOCK_FILE, ProducerIdManager


def test_ids_are_monotonic_within_and_across_blocks(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, broker_id=3, block_size=4)
    assert not (tmp_path / PRODUCER_ID_BLOCK_FILE).exists()
    ids = [manager.generate_producer_id() for _ in range(10)]
    assert ids == list(range(10))
    stored = json.loads((tmp_path / PRODUCER_ID_BLOCK_FILE).read_text())
    assert stored == {"version": 1, "broker": 3, "block_start": "8", "block_end": "11"}


def test_a_restart_continues_after_the_last_reserved_block(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, broker_id=0, block_size=1000)
    used = [first.generate_producer_id() for _ in range(3)]
    assert used == [0, 1, 2]
    # A crash or restart: the rest of block 0..999 is skipped, never handed out again.
    second = ProducerIdManager(tmp_path, broker_id=0, block_size=1000)
    assert second.generate_producer_id() == 1000
    third = ProducerIdManager(tmp_path, broker_id=0, block_size=1000)
    assert third.generate_producer_id() == 2000
    assert not list(tmp_path.glob("*.tmp"))


def test_a_malformed_block_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="Malformed producer id block"):
        ProducerIdManager(tmp_path, broker_id=0).generate_producer_id()


def test_cluster_blocks_come_from_zookeeper_and_never_overlap(tmp_path: Path) -> None:
    """Brokers of a cluster reserve blocks in /latest_producer_id_block with a version
    check: interleaved allocations on three brokers never hand out an id twice."""
    from sluice.metastore.memory import InProcessStore
    from sluice.replication.producer_ids import ZkProducerIdBlockSource

    store = InProcessStore()
    managers = [
        ProducerIdManager(tmp_path / f"b{b}", b, block_size=3,
                          block_source=ZkProducerIdBlockSource(store, b, block_size=3))
        for b in range(3)
    ]  # fmt: skip
    ids = [managers[i % 3].generate_producer_id() for i in range(30)]
    assert len(set(ids)) == 30
    data, _ = store.get("/latest_producer_id_block")
    assert int(json.loads(data)["block_end"]) >= max(ids)
    assert not any((tmp_path / f"b{b}" / PRODUCER_ID_BLOCK_FILE).exists() for b in range(3))


def test_a_lost_race_for_the_block_znode_is_retried() -> None:
    from sluice.metastore.memory import InProcessStore
    from sluice.replication.producer_ids import ZkProducerIdBlockSource

    store = InProcessStore()
    source = ZkProducerIdBlockSource(store, 1, block_size=10)
    real_set = store.set
    raced = []

    def racing_set(path: str, data: bytes, version: int = -1) -> object:
        if not raced:  # another broker writes between our read and our write
            raced.append(True)
            real_set(path, b'{"version":1,"broker":2,"block_start":"10","block_end":"19"}')
        return real_set(path, data, version)

    source()  # creates the znode: 0..9
    store.set = racing_set  # type: ignore[method-assign]
    block = source()
    assert (block.first, block.last) == (20, 29)


def test_a_block_that_cannot_be_written_is_not_handed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the file keeps the block before (a torn one could hand ids out twice
    after a restart), the log dir is reported offline, and no id of the new block is
    given; once there is space, allocation goes on after the last persisted block."""
    import errno

    from sluice.log import LogDirFailureChannel
    from support.disk_faults import DiskFaults

    channel = LogDirFailureChannel()
    manager = ProducerIdManager(tmp_path, broker_id=0, block_size=2, failure_channel=channel)
    assert [manager.generate_producer_id() for _ in range(2)] == [0, 1]
    before = (tmp_path / PRODUCER_ID_BLOCK_FILE).read_bytes()
    faults = DiskFaults(monkeypatch, tmp_path, errno.ENOSPC).arm(budget=10)
    with pytest.raises(OSError, match="No space"):
        manager.generate_producer_id()
    faults.disarm()
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_bytes() == before
    assert not list(tmp_path.glob("*.tmp")) and set(channel.offline_log_dirs) == {tmp_path}
    assert manager.generate_producer_id() == 2
