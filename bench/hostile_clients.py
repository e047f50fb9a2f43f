"""``sluice bench hostile-clients``: the broker's memory and service under hostile connections.

Each scenario starts a fresh ``sluice broker`` (bench/brokers.py), samples its RSS with
psutil while it runs, and prints figures; nothing here asserts a value. Scenarios:

* ``attack``: --attackers connections (40) each send a 4-byte size prefix claiming
  ``socket.request.max.bytes`` (100 MiB) and then trickle --trickle-bytes (4 KiB) of
  the frame in 256-byte pieces, and hold the connection for --attack-seconds. Meanwhile a
  well-behaved confluent-kafka producer sends one 1 KiB record every 20 ms (acks=all,
  one in flight) and a confluent-kafka consumer reads them: the producer's
  acknowledgement latency and the consumer's end-to-end latency are reported before,
  during and after the attack, with the broker's RSS over time.
* ``slowloris``: --slowloris connections (20) each send a size prefix claiming
  100 MiB and 1 KiB of the frame, then one byte every 2 s; reported: RSS, and when the
  broker closed them (if it did within --slowloris-seconds), with the same probe
  clients running.
* ``flood``: --attackers connections each claim 100 MiB and send real bytes as fast as
  the broker takes them, for --attack-seconds: what bounds memory when the bytes do
  arrive (``queued.max.request.bytes``), and what the probe clients see meanwhile.
* ``idle``: --idle-connections connections (2,000) each send one ApiVersions request,
  read its answer and stay open for --idle-seconds. Reported: the RSS per connection
  when they are open and once they are idle, and the RSS after they all close; the
  round is repeated (--idle-rounds, 2), to tell memory kept for reuse from a leak.

Figures only. Only 127.0.0.1 is used. The broker's properties can be set with
--override key=value (repeatable), for instance to compare limits.

    python bench/hostile_clients.py [--only attack,slowloris,flood,idle] [--json F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import psutil
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
except ImportError as missing:  # pragma: no cover - depends on the environment
    sys.exit(f"{missing}: pip install confluent-kafka psutil")

import brokers

MIB = 1024 * 1024
CLAIM = 104_857_600  # Kafka's socket.request.max.bytes default
PROBE_INTERVAL_S = 0.02
PROBE_RECORD = 1024
SAMPLE_S = 0.1
SCENARIOS = ("attack", "slowloris", "flood", "idle")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raise_open_file_limit() -> int:
    """This process opens thousands of sockets, and the broker it starts inherits the
    limit: raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- the broker's RSS over time ----------------------------------------------------------


class RssSampler:
    """Samples the broker's RSS every SAMPLE_S in a thread; ``mark`` names the phase."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc
        self.samples: list[tuple[float, int, str]] = []
        self.phase = "start"
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            with contextlib.suppress(psutil.Error):
                rss = self.proc.memory_info().rss
                self.samples.append((time.monotonic() - self._t0, rss, self.phase))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def now(self) -> int:
        return int(self.proc.memory_info().rss)

    def peak(self, phase: str | None = None) -> int:
        return max((rss for _, rss, p in self.samples if phase in (None, p)), default=0)

    def timeline(self, every_s: float = 1.0) -> list[tuple[float, int, str]]:
        out: list[tuple[float, int, str]] = []
        for t, rss, phase in self.samples:
            if not out or t - out[-1][0] >= every_s:
                out.append((t, rss, phase))
        return out


# --- well-behaved clients ------------------------------------------------------------------


@dataclass
class Probe:
    """A paced confluent-kafka producer and a consumer of what it sends, each in a thread.

    ``phase`` tags each latency with the scenario's phase at send time."""

    bootstrap: str
    topic: str
    phase: str = "before"
    acks: dict[str, list[float]] = field(default_factory=dict)
    e2e: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._produce, self._consume):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _produce(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
            "max.in.flight.requests.per.connection": 1, "enable.idempotence": False,
        })  # fmt: skip
        pad = b"x" * (PROBE_RECORD - 16)

        def delivered(err: Any, msg: Any, sent: float, phase: str) -> None:
            if err is not None:
                self.errors.append(str(err))
                return
            self.acks.setdefault(phase, []).append((time.perf_counter() - sent) * 1000)

        next_at = time.perf_counter()
        while not self._stop.is_set():
            phase = self.phase
            sent = time.perf_counter()
            value = struct.pack(">d", time.time()) + phase.encode().ljust(8)[:8] + pad
            producer.produce(
                self.topic, value,
                on_delivery=lambda e, m, s=sent, p=phase: delivered(e, m, s, p),
            )  # fmt: skip
            next_at += PROBE_INTERVAL_S
            while True:
                left = next_at - time.perf_counter()
                if left <= 0:
                    break
                producer.poll(min(left, 0.005))
        producer.flush(30)

    def _consume(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        })  # fmt: skip
        consumer.assign([TopicPartition(self.topic, 0, 0)])  # no group: no rebalance delay
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(msg.error()))
                    continue
                value = msg.value()
                sent = struct.unpack_from(">d", value)[0]
                phase = value[8:16].decode().strip()
                self.e2e.setdefault(phase, []).append((time.time() - sent) * 1000)
        finally:
            consumer.close()

    def figures(self, phase: str) -> dict[str, float]:
        acks = self.acks.get(phase, [])
        e2e = self.e2e.get(phase, [])
        return {
            "acks": len(acks),
            "ack_p50_ms": percentile(acks, 0.50), "ack_p99_ms": percentile(acks, 0.99),
            "ack_max_ms": max(acks, default=float("nan")),
            "consumed": len(e2e),
            "e2e_p50_ms": percentile(e2e, 0.50), "e2e_p99_ms": percentile(e2e, 0.99),
        }  # fmt: skip


def create_topic(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"probe-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    return topic


# --- hostile connections -------------------------------------------------------------------


class Hostile:
    """Raw sockets that claim a large frame; ``closed_at`` records when the broker closed
    each one (seconds after it was opened)."""

    def __init__(self, bootstrap: str, count: int) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.socks: list[socket.socket] = []
        self.opened = time.monotonic()
        self.closed_at: dict[int, float] = {}
        self.sent = 0
        for _ in range(count):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.setblocking(False)
            self.socks.append(sock)

    def open_count(self) -> int:
        return len(self.socks) - len(self.closed_at)

    def send(self, index: int, data: bytes) -> None:
        """Send what the socket takes now; notice a close by the broker."""
        if index in self.closed_at:
            return
        sock = self.socks[index]
        try:
            self.sent += sock.send(data)
        except BlockingIOError:
            pass
        except OSError:
            self.closed_at[index] = time.monotonic() - self.opened
        self.check(index)

    def check(self, index: int) -> None:
        if index in self.closed_at:
            return
        try:
            if self.socks[index].recv(65536) == b"":
                self.closed_at[index] = time.monotonic() - self.opened
        except BlockingIOError:
            pass
        except OSError:
            self.closed_at[index] = time.monotonic() - self.opened

    def check_all(self) -> None:
        for index in range(len(self.socks)):
            self.check(index)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def hold(seconds: float, tick: Callable[[float], None], every_s: float = 0.05) -> None:
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        tick(elapsed)
        time.sleep(every_s)


Running = tuple[str, psutil.Process, RssSampler, Probe | None]


@contextlib.contextmanager
def broker_with_probe(opts: argparse.Namespace, probe: bool) -> Iterator[Running]:
    with brokers.sluice(overrides=opts.overrides) as (bootstrap, proc):
        brokers.first_answer(bootstrap)
        with RssSampler(proc) as rss:
            client: Probe | None = None
            if probe:
                client = Probe(bootstrap, create_topic(bootstrap))
                client.start()
                time.sleep(opts.warmup_seconds)
                client.acks.clear()
                client.e2e.clear()
                time.sleep(opts.phase_seconds)
            try:
                yield bootstrap, proc, rss, client
            finally:
                if client is not None:
                    client.stop()


def print_timeline(rss: RssSampler, extra: Callable[[float], str] | None = None) -> None:
    print("     t      RSS  phase")
    for t, value, phase in rss.timeline():
        print(f"  {t:5.1f} s {value / MIB:6.0f} MiB  {phase}{extra(t) if extra else ''}")


def print_probe(client: Probe, phases: tuple[str, ...]) -> dict[str, Any]:
    print("  probe clients (confluent-kafka, 1 KiB every 20 ms, acks=all):")
    out: dict[str, Any] = {}
    for phase in phases:
        fig = client.figures(phase)
        out[phase] = fig
        print(
            f"    {phase:7s} produce p50 {fig['ack_p50_ms']:6.1f} ms  p99 {fig['ack_p99_ms']:7.1f} "
            f"ms  max {fig['ack_max_ms']:7.1f} ms  ({fig['acks']:.0f} acks)  "
            f"e2e p50 {fig['e2e_p50_ms']:6.1f} ms  p99 {fig['e2e_p99_ms']:7.1f} ms "
            f"({fig['consumed']:.0f} consumed)"
        )
    if client.errors:
        print(f"    errors: {len(client.errors)}, first: {client.errors[0]}")
    return out


def run_attack(opts: argparse.Namespace) -> dict[str, Any]:
    count, trickle = opts.attackers, opts.trickle_bytes
    print(f"\n== attack: {count} connections claim {CLAIM} bytes, then trickle {trickle} B each")
    with broker_with_probe(opts, probe=True) as (bootstrap, _proc, rss, client):
        assert client is not None
        before = rss.now()
        client.phase = rss.phase = "attack"
        hostile = Hostile(bootstrap, count)
        for index in range(count):
            hostile.send(index, struct.pack(">i", CLAIM))
        piece = b"\0" * 256
        pieces = trickle // len(piece)
        sent_pieces = [0]

        def tick(elapsed: float) -> None:
            due = min(pieces, int(elapsed / 0.25) + 1)
            while sent_pieces[0] < due:
                for index in range(count):
                    hostile.send(index, piece)
                sent_pieces[0] += 1
            hostile.check_all()

        hold(opts.attack_seconds, tick)
        open_at_end = hostile.open_count()
        total_sent = hostile.sent
        hostile.close()
        client.phase = rss.phase = "after"
        time.sleep(opts.phase_seconds)
        after = rss.now()
    print_timeline(rss)
    figures = print_probe(client, ("before", "attack", "after"))
    print(
        f"  RSS before {before / MIB:.0f} MiB, peak during the attack "
        f"{rss.peak('attack') / MIB:.0f} MiB, after {after / MIB:.0f} MiB; "
        f"{total_sent} bytes sent by the attackers; {open_at_end}/{count} still open at the end"
    )
    return {
        "rss_before": before, "rss_peak": rss.peak("attack"), "rss_after": after,
        "sent": total_sent, "open_at_end": open_at_end, "probe": figures,
    }  # fmt: skip


def run_slowloris(opts: argparse.Namespace) -> dict[str, Any]:
    count = opts.slowloris
    print(f"\n== slowloris: {count} connections hold partial frames claiming {CLAIM} bytes")
    with broker_with_probe(opts, probe=True) as (bootstrap, _proc, rss, client):
        assert client is not None
        before = rss.now()
        client.phase = rss.phase = "hold"
        hostile = Hostile(bootstrap, count)
        for index in range(count):
            hostile.send(index, struct.pack(">i", CLAIM) + b"\0" * 1024)
        last_byte = [0.0]

        def tick(elapsed: float) -> None:
            if elapsed - last_byte[0] >= 2.0:
                last_byte[0] = elapsed
                for index in range(count):
                    hostile.send(index, b"\0")
            hostile.check_all()
            if not hostile.open_count():
                raise StopIteration

        with contextlib.suppress(StopIteration):
            hold(opts.slowloris_seconds, tick)
        closed = sorted(hostile.closed_at.values())
        held = rss.peak("hold")
        hostile.close()
        client.phase = rss.phase = "after"
        time.sleep(opts.phase_seconds)
        after = rss.now()
    print_timeline(rss)
    figures = print_probe(client, ("before", "hold", "after"))
    if closed:
        print(
            f"  the broker closed {len(closed)}/{count} connections, after "
            f"{closed[0]:.1f}-{closed[-1]:.1f} s"
        )
    else:
        print(f"  the broker closed none of them in {opts.slowloris_seconds:.0f} s")
    print(
        f"  RSS before {before / MIB:.0f} MiB, peak while held {held / MIB:.0f} MiB, "
        f"after {after / MIB:.0f} MiB"
    )
    return {
        "rss_before": before, "rss_peak": held, "rss_after": after, "closed_after_s": closed,
        "probe": figures,
    }  # fmt: skip


def run_flood(opts: argparse.Namespace) -> dict[str, Any]:
    count = opts.attackers
    print(f"\n== flood: {count} connections claim {CLAIM} bytes and send them at full speed")
    with broker_with_probe(opts, probe=True) as (bootstrap, _proc, rss, client):
        assert client is not None
        before = rss.now()
        client.phase = rss.phase = "flood"
        hostile = Hostile(bootstrap, count)
        remaining = [CLAIM] * count
        chunk = b"\0" * 65536
        for index in range(count):
            hostile.send(index, struct.pack(">i", CLAIM))

        def tick(_elapsed: float) -> None:
            for index in range(count):
                if remaining[index] > 0 and index not in hostile.closed_at:
                    sent = hostile.sent
                    hostile.send(index, chunk[: min(len(chunk), remaining[index] - 1)])
                    remaining[index] -= hostile.sent - sent

        hold(opts.attack_seconds, tick, every_s=0.001)
        total_sent = hostile.sent
        open_at_end = hostile.open_count()
        hostile.close()
        client.phase = rss.phase = "after"
        time.sleep(opts.phase_seconds)
        after = rss.now()
    print_timeline(rss)
    figures = print_probe(client, ("before", "flood", "after"))
    print(
        f"  RSS before {before / MIB:.0f} MiB, peak during the flood "
        f"{rss.peak('flood') / MIB:.0f} MiB, after {after / MIB:.0f} MiB; "
        f"{total_sent / MIB:.0f} MiB sent by the attackers; {open_at_end}/{count} still open"
    )
    return {
        "rss_before": before, "rss_peak": rss.peak("flood"), "rss_after": after,
        "sent": total_sent, "open_at_end": open_at_end, "probe": figures,
    }  # fmt: skip


def open_idle(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` connections, each after one ApiVersions request and its answer."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, port), timeout=10)
            socks.append(sock)
            sock.sendall(brokers.API_VERSIONS_V0)
            answer = b""
            while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("the broker closed a connection")
                answer += chunk
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def run_idle(opts: argparse.Namespace) -> dict[str, Any]:
    count = opts.idle_connections
    print(f"\n== idle: {count} connections, each after one ApiVersions request, "
          f"{opts.idle_rounds} rounds")  # fmt: skip
    rounds: list[dict[str, float]] = []
    with broker_with_probe(opts, probe=False) as (bootstrap, proc, rss, _client):
        host, _, port = bootstrap.rpartition(":")
        time.sleep(opts.phase_seconds)
        before = rss.now()
        for number in range(1, opts.idle_rounds + 1):
            rss.phase = f"open {number}"
            socks = open_idle(host, int(port), count)
            try:
                opened = rss.now()
                rss.phase = f"idle {number}"
                time.sleep(opts.idle_seconds)
                idle = rss.now()
                fds = proc.num_fds()
            finally:
                for sock in socks:
                    sock.close()
            rss.phase = f"closed {number}"
            time.sleep(opts.idle_seconds)
            closed = rss.now()
            rounds.append({
                "rss_open": opened, "rss_idle": idle, "rss_closed": closed, "fds": fds,
                "per_connection_open": (opened - before) / count,
                "per_connection_idle": (idle - before) / count,
            })  # fmt: skip
    print_timeline(rss)
    print(f"  RSS before {before / MIB:.1f} MiB")
    for number, fig in enumerate(rounds, 1):
        print(
            f"  round {number}: {count} open {fig['rss_open'] / MIB:.1f} MiB "
            f"({fig['per_connection_open'] / 1024:.1f} KiB each), after {opts.idle_seconds:.0f} s "
            f"idle {fig['rss_idle'] / MIB:.1f} MiB ({fig['per_connection_idle'] / 1024:.1f} KiB "
            f"each; broker fds {fig['fds']:.0f}); {opts.idle_seconds:.0f} s after they closed "
            f"{fig['rss_closed'] / MIB:.1f} MiB ({(fig['rss_closed'] - before) / MIB:+.1f} MiB "
            "from before)"
        )
    return {"rss_before": before, "rounds": rounds}


RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "attack": run_attack,
    "slowloris": run_slowloris,
    "flood": run_flood,
    "idle": run_idle,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios to run")
    parser.add_argument("--attackers", type=int, default=40)
    parser.add_argument("--trickle-bytes", type=int, default=4096)
    parser.add_argument("--attack-seconds", type=float, default=20.0)
    parser.add_argument("--slowloris", type=int, default=20)
    parser.add_argument("--slowloris-seconds", type=float, default=60.0)
    parser.add_argument("--idle-connections", type=int, default=2000)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--idle-rounds", type=int, default=2)
    parser.add_argument("--warmup-seconds", type=float, default=2.0)
    parser.add_argument("--phase-seconds", type=float, default=5.0)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    opts.overrides = dict(item.split("=", 1) for item in opts.override)
    chosen = [name.strip() for name in opts.only.split(",") if name.strip()]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        print(f"unknown scenarios: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    limit = raise_open_file_limit()
    brokers.compile_sluice()
    print(f"open-file limit {limit}; broker overrides: {opts.overrides or 'none'}")
    results = {name: RUNNERS[name](opts) for name in chosen}
    if opts.json is not None:
        opts.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
