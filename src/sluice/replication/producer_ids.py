"""``ProducerIdManager``: hands out producer ids that are never reused, even across restarts.

As in Kafka's ZooKeeper-mode ``ProducerIdManager``, ids are reserved in blocks (1000 by
default) and only the latest reserved block is persisted, before any id of it is handed
out. Sluice keeps it in ``<log.dir>/latest-producer-id-block`` with the JSON Kafka stores in
the ``/latest_producer_id_block`` znode::

    {"version":1,"broker":0,"block_start":"1000","block_end":"1999"}

After a restart the next block starts after ``block_end``, so ids handed out before (and the
rest of their block) are skipped, never repeated. In a cluster the blocks come from that
znode itself (:class:`ZkProducerIdBlockSource`), updated with a version check, so no two
brokers ever hand out the same id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.log.checkpoint import write_atomically
from sluice.log.log_dir_failure_channel import LogDirFailureChannel

__all__ = [
    "PRODUCER_ID_BLOCK_FILE",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdBlock",
    "ProducerIdManager",
    "ProducerIdsExhaustedError",
    "ZkProducerIdBlockSource",
]

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_FILE = "latest-producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000
_LONG_MAX = 2**63 - 1
_VERSION = 1


class ProducerIdsExhaustedError(RuntimeError):
    """Every producer id up to Long.MAX has been handed out."""


class ProducerIdBlock:
    """A reserved range ``[first, last]`` of producer ids."""

    __slots__ = ("broker_id", "first", "last")

    def __init__(self, broker_id: int, first: int, last: int) -> None:
        self.broker_id = broker_id
        self.first = first
        self.last = last

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _VERSION,
                "broker": self.broker_id,
                "block_start": str(self.first),
                "block_end": str(self.last),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ProducerIdBlock:
        data = json.loads(text)
        if data.get("version") != _VERSION:
            raise ValueError(f"unknown producer id block version {data.get('version')!r}")
        return cls(int(data["broker"]), int(data["block_start"]), int(data["block_end"]))

    def __repr__(self) -> str:
        return f"ProducerIdBlock(broker={self.broker_id}, {self.first}..{self.last})"


LATEST_PRODUCER_ID_BLOCK_ZNODE = "/latest_producer_id_block"


class ZkProducerIdBlockSource:
    """Kafka's ZooKeeper-mode block allocation: read ``/latest_producer_id_block``, write
    the next block with the version read, and start again if another broker won."""

    def __init__(self, store: Any, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE):
        self.store = store
        self.broker_id = broker_id
        self.block_size = block_size

    def __call__(self) -> ProducerIdBlock:
        from sluice.metastore.errors import BadVersionError, NodeExistsError, NoNodeError

        path = LATEST_PRODUCER_ID_BLOCK_ZNODE
        while True:
            try:
                data, stat = self.store.get(path)
            except NoNodeError:
                data, stat = b"", None
            first = 0
            if data:
                first = ProducerIdBlock.from_json(data.decode()).last + 1
            if first > _LONG_MAX - self.block_size:
                raise ProducerIdsExhaustedError("Have exhausted all producer ids")
            block = ProducerIdBlock(self.broker_id, first, first + self.block_size - 1)
            payload = block.to_json().encode()
            try:
                if stat is None:
                    self.store.create(path, payload)
                else:
                    self.store.set(path, payload, stat.version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker reserved a block meanwhile
            return block


class ProducerIdManager:
    """Allocates producer ids for InitProducerId from blocks persisted in ``log.dirs``."""

    __slots__ = (
        "_block", "_block_size", "_failure_channel", "_next", "block_source", "broker_id",
        "path",
    )  # fmt: skip

    def __init__(
        self, log_dir: Path, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE,
        block_source: Callable[[], ProducerIdBlock] | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:  # fmt: skip
        """``failure_channel``: where a failed write of the block file reports
        ``log_dir`` (which then goes offline), before the ``OSError`` is raised."""
        self._failure_channel = failure_channel
        if block_size < 1:
            raise ValueError(f"Invalid producer id block size {block_size}")
        self.path = Path(log_dir) / PRODUCER_ID_BLOCK_FILE
        self.broker_id = broker_id
        self._block_size = block_size
        self._block: ProducerIdBlock | None = None
        self._next = 0
        # Cluster mode: blocks come from ZooKeeper instead of the local file.
        self.block_source = block_source

    def latest_block(self) -> ProducerIdBlock | None:
        """The block last persisted (by this or an earlier run), None if never."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return ProducerIdBlock.from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            # Guessing a start could hand out ids twice: refuse instead.
            raise ValueError(f"Malformed producer id block file {self.path}: {exc}") from exc

    def generate_producer_id(self) -> int:
        """The next unused producer id, reserving (and persisting) a new block when needed."""
        block = self._block
        if block is None or self._next > block.last:
            block = self._allocate_block()
            self._next = block.first
        producer_id = self._next
        self._next += 1
        return producer_id

    def _allocate_block(self) -> ProducerIdBlock:
        if self.block_source is not None:
            block = self.block_source()
            self._block = block
            log.info("Reserved producer id block %d..%d in ZooKeeper", block.first, block.last)
            return block
        latest = self._block or self.latest_block()
        first = 0 if latest is None else latest.last + 1
        if first > _LONG_MAX - self._block_size:
            raise ProducerIdsExhaustedError("Have exhausted all producer ids")
        block = ProducerIdBlock(self.broker_id, first, first + self._block_size - 1)
        self._write(block)
        self._block = block
        log.info("Reserved producer id block %d..%d", block.first, block.last)
        return block

    def _write(self, block: ProducerIdBlock) -> None:
        """Persist ``block`` atomically; an I/O error is reported to the failure channel
        (the file keeps the previous block) and raised."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, (block.to_json() + "\n").encode())
        except OSError as exc:
            if self._failure_channel is not None:
                self._failure_channel.maybe_add_offline_log_dir(
                    self.path.parent, "writing the producer id block", exc
                )
            raise
