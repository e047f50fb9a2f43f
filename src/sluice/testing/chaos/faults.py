"""The faults a chaos run injects, Jepsen's nemeses: each is injected, held a while,
then healed, over and over during its round.

- ``kill``: kill -9 the leader of a random partition; heal: start it again.
- ``stop``: SIGSTOP the leader of a random partition; heal: SIGCONT.
- ``controller``: kill -9 the controller; heal: start it again.
- ``zookeeper``: kill -9 ZooKeeper; heal: start it again on its port and data.
- ``partition``: cut the leader of a random partition off from the other brokers;
  heal: reconnect.
- ``zk-partition``: cut the controller or a partition's leader off from ZooKeeper;
  heal: reconnect.
- ``corrupt``: kill -9 a partition's preferred replica and flip one byte inside a
  record batch of a closed segment of that partition on its disk (the active segment if
  none is closed yet); heal: start it again (leadership then comes back to it).
- ``disk-full``: fill the filesystem of a partition's leader; heal: free it and restart
  the broker (a failed log directory stays offline until then).

The clients are never cut off: a partition separates brokers from each other or from
ZooKeeper (through the :class:`~sluice.testing.chaos.proxy.FaultProxy`), as a network
between servers would.
"""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sluice.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
)
from sluice.testing.chaos.cluster import ZOOKEEPER, ChaosCluster, broker_party

__all__ = ["FAULTS", "Fault", "FaultContext", "corrupt_one_byte"]


@dataclass
class FaultContext:
    """What a fault acts on: the cluster, the round's topic, and the run's random
    numbers (seeded, so a run can be repeated)."""

    cluster: ChaosCluster
    topic: str
    partitions: int
    rng: random.Random


def _random_leader(ctx: FaultContext) -> tuple[int, int]:
    """(partition, leader) of a random led partition; (-1, broker) if none is led."""
    led = [(p, s.leader) for p, s in sorted(ctx.cluster.partition_states(ctx.topic).items())
           if s.leader >= 0]  # fmt: skip
    if not led:
        return -1, ctx.rng.choice(ctx.cluster.broker_ids)
    return ctx.rng.choice(led)


def _leader_text(partition: int) -> str:
    return f"leader of partition {partition}" if partition >= 0 else "no partition led"


class Fault:
    """One kind of fault: :meth:`inject` and :meth:`heal` return what they did, in words."""

    name: ClassVar[str]

    def unavailable(self, cluster: ChaosCluster) -> str | None:
        """Why this fault cannot run on ``cluster`` (None: it can)."""
        return None

    def inject(self, ctx: FaultContext) -> str:
        raise NotImplementedError

    def heal(self, ctx: FaultContext) -> str:
        raise NotImplementedError


class KillLeader(Fault):
    name = "kill"

    def __init__(self) -> None:
        self.victim = -1

    def inject(self, ctx: FaultContext) -> str:
        partition, self.victim = _random_leader(ctx)
        ctx.cluster.cluster.kill(self.victim)
        return f"kill -9 broker {self.victim} ({_leader_text(partition)})"

    def heal(self, ctx: FaultContext) -> str:
        ctx.cluster.cluster.start(self.victim)
        return f"started broker {self.victim}"


class PauseLeader(Fault):
    name = "stop"

    def __init__(self) -> None:
        self.victim = -1

    def inject(self, ctx: FaultContext) -> str:
        partition, self.victim = _random_leader(ctx)
        ctx.cluster.cluster.pause(self.victim)
        return f"SIGSTOP broker {self.victim} ({_leader_text(partition)})"

    def heal(self, ctx: FaultContext) -> str:
        ctx.cluster.cluster.resume(self.victim)
        return f"SIGCONT broker {self.victim}"


class KillController(Fault):
    name = "controller"

    def __init__(self) -> None:
        self.victim = -1

    def inject(self, ctx: FaultContext) -> str:
        self.victim = ctx.cluster.controller_id()
        if self.victim < 0:
            self.victim = ctx.rng.choice(ctx.cluster.broker_ids)
        ctx.cluster.cluster.kill(self.victim)
        return f"kill -9 broker {self.victim} (the controller)"

    def heal(self, ctx: FaultContext) -> str:
        ctx.cluster.cluster.start(self.victim)
        return f"started broker {self.victim}"


class KillZooKeeper(Fault):
    name = "zookeeper"

    def inject(self, ctx: FaultContext) -> str:
        ctx.cluster.cluster.kill_zookeeper()
        return "kill -9 ZooKeeper"

    def heal(self, ctx: FaultContext) -> str:
        ctx.cluster.cluster.restart_zookeeper()
        return "started ZooKeeper"


class PartitionLeader(Fault):
    name = "partition"

    def __init__(self) -> None:
        self.cut: list[tuple[str, str]] = []

    def inject(self, ctx: FaultContext) -> str:
        partition, victim = _random_leader(ctx)
        others = [b for b in ctx.cluster.broker_ids if b != victim]
        self.cut = [(broker_party(victim), broker_party(b)) for b in others]
        for a, b in self.cut:
            ctx.cluster.proxy.cut(a, b)
        return f"cut broker {victim} ({_leader_text(partition)}) from brokers {others}"

    def heal(self, ctx: FaultContext) -> str:
        for a, b in self.cut:
            ctx.cluster.proxy.heal(a, b)
        return "reconnected the brokers"


class PartitionFromZooKeeper(Fault):
    name = "zk-partition"

    def __init__(self) -> None:
        self.victim = -1

    def inject(self, ctx: FaultContext) -> str:
        controller = ctx.cluster.controller_id()
        if controller >= 0 and ctx.rng.random() < 0.5:
            self.victim, what = controller, "the controller"
        else:
            partition, self.victim = _random_leader(ctx)
            what = _leader_text(partition)
        ctx.cluster.proxy.cut(broker_party(self.victim), ZOOKEEPER)
        return f"cut broker {self.victim} ({what}) from ZooKeeper"

    def heal(self, ctx: FaultContext) -> str:
        ctx.cluster.proxy.heal(broker_party(self.victim), ZOOKEEPER)
        return f"reconnected broker {self.victim} to ZooKeeper"


def corrupt_one_byte(segment: Path, rng: random.Random) -> tuple[int, int, int] | None:
    """Flip one byte inside the records of a random batch of ``segment`` (not in a batch
    header: the batch still parses, its checksum no longer matches). Returns (file
    position, batch base offset, batch last offset), or None if it holds no batch."""
    data = segment.read_bytes()
    batches = []
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        base = int.from_bytes(data[pos : pos + LENGTH_OFFSET], "big")
        length = int.from_bytes(data[pos + LENGTH_OFFSET : pos + LOG_OVERHEAD], "big", signed=True)
        end = pos + LOG_OVERHEAD + length
        if length <= 0 or end > len(data):
            break
        delta = pos + LAST_OFFSET_DELTA_OFFSET
        last = base + int.from_bytes(data[delta : delta + 4], "big")
        if end - pos > BATCH_HEADER_SIZE:
            batches.append((pos, end, base, last))
        pos = end
    if not batches:
        return None
    start, end, base, last = rng.choice(batches)
    where = rng.randrange(start + BATCH_HEADER_SIZE, end)
    with open(segment, "r+b") as f:
        f.seek(where)
        f.write(bytes([data[where] ^ 0xFF]))
    return where, base, last


class CorruptSegment(Fault):
    name = "corrupt"
    LEAD_AGAIN_S = 30.0
    """How long :meth:`heal` waits for the victim to lead the corrupted partition again."""

    def __init__(self) -> None:
        self.victim = -1
        self.partition = -1

    def inject(self, ctx: FaultContext) -> str:
        states = ctx.cluster.partition_states(ctx.topic)
        choices = {p: s.replicas[0] for p, s in states.items()} or {
            p: ctx.rng.choice(ctx.cluster.broker_ids) for p in range(ctx.partitions)
        }  # the preferred replica: leadership comes back to it once it is in sync

        def segments(partition: int) -> list[Path]:
            directory = ctx.cluster.log_dir(choices[partition]) / f"{ctx.topic}-{partition}"
            return sorted(directory.glob("*.log"), key=lambda path: int(path.stem))

        with_closed = [p for p in sorted(choices) if len(segments(p)) > 1]
        with_data = [p for p in sorted(choices) if any(s.stat().st_size for s in segments(p))]
        partition = ctx.rng.choice(with_closed or with_data or sorted(choices))
        self.partition = partition
        self.victim = choices[partition]
        ctx.cluster.cluster.kill(self.victim)
        found = segments(partition)
        pick, what = (found[:-1], "closed") if len(found) > 1 else (found, "active")
        for segment in ctx.rng.sample(pick, len(pick)):
            done = corrupt_one_byte(segment, ctx.rng)
            if done is not None:
                where, base, last = done
                return (
                    f"kill -9 broker {self.victim}, flipped the byte at {where} of its "
                    f"{what} segment {segment.name} of partition {partition} "
                    f"(batch of offsets {base}-{last})"
                )
        return f"kill -9 broker {self.victim}; partition {partition} had no batch to corrupt"

    def heal(self, ctx: FaultContext) -> str:
        """Start the victim and wait until it leads the corrupted partition again (the
        controller's preferred-leader election), so that reads go to its copy."""
        ctx.cluster.cluster.start(self.victim)
        deadline = time.monotonic() + self.LEAD_AGAIN_S
        while time.monotonic() < deadline:
            state = ctx.cluster.partition_states(ctx.topic).get(self.partition)
            if state is not None and state.leader == self.victim:
                return f"started broker {self.victim}; it leads partition {self.partition} again"
            time.sleep(0.2)
        return (
            f"started broker {self.victim}; it did not lead partition {self.partition} "
            f"again within {self.LEAD_AGAIN_S:g}s"
        )


class DiskFull(Fault):
    name = "disk-full"
    FILLER = "chaos-filler"

    def __init__(self) -> None:
        self.victim = -1

    def unavailable(self, cluster: ChaosCluster) -> str | None:
        if cluster.disk_mb is None:
            return "the brokers' log directories are not on filesystems of their own"
        return None

    def inject(self, ctx: FaultContext) -> str:
        partition, self.victim = _random_leader(ctx)
        filler = ctx.cluster.disk(self.victim) / self.FILLER
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(filler, "wb") as f:
            try:
                while True:
                    written += os.write(f.fileno(), chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        return (
            f"filled the disk of broker {self.victim} ({_leader_text(partition)}) "
            f"with {written >> 20} MiB"
        )

    def heal(self, ctx: FaultContext) -> str:
        """Free the disk and restart the broker: a log directory that failed stays
        offline until the broker starts again (as in Kafka, an operator's restart)."""
        (ctx.cluster.disk(self.victim) / self.FILLER).unlink(missing_ok=True)
        ctx.cluster.cluster.restart_broker(self.victim)
        return f"freed the disk of broker {self.victim} and restarted it"


FAULTS: dict[str, Callable[[], Fault]] = {
    f.name: f
    for f in (
        KillLeader,
        PauseLeader,
        KillController,
        KillZooKeeper,
        PartitionLeader,
        PartitionFromZooKeeper,
        CorruptSegment,
        DiskFull,
    )
}
"""Every fault by name, in the order a run goes through them."""
