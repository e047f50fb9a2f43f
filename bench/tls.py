"""TLS against PLAINTEXT: produce and consume MB/s through one broker's two listeners.

One ``sluice broker`` process serves a PLAINTEXT and an SSL listener (a development CA
and broker certificate from ``sluice.security.certificates``; no client certificates).
Each round, in alternating order, for each listener:

* produce: one producer (acks=1, --size byte records, linger.ms=5, batch.size=1 MiB,
  no compression) sends --records records to a new topic of --partitions partitions:
  MB/s from the first send to the last acknowledgement;
* consume: one consumer reads them all back from the start (assigned partitions,
  fetch.max.bytes and max.partition.fetch.bytes 8 MiB, fetch.queue.backoff.ms=10):
  MB/s.

The clients are confluent-kafka's (``--client confluent``, the default) or Sluice's own
(``--client sluice``). They differ in what the broker's TLS costs: librdkafka writes a
TLS record per buffer segment (about 1.8 KB for 1 KiB records), each decrypted on its
own, while Sluice's producer writes a request's buffers as full 16 KiB records.

Each phase records the broker's CPU seconds (user + system, from /proc) per GB moved,
and the client's (this process: confluent-kafka's threads, which do its TLS).
It prints every run, the medians per listener and the SSL/PLAINTEXT ratios, with the
goals (produce at least 0.6x, consume at least 0.4x). The clients run on the same
machine, so the TLS rows also pay for the client's encryption. Fetches over TLS cannot
use sendfile: the broker reads the log and writes through TLS. It also says whether
kernel TLS (the ``tls`` TCP upper-layer protocol) is available here. Figures only:
nothing here asserts a time. Only 127.0.0.1 is used.

    sluice bench tls [--repeat 3] [--records 200000] [--size 1024] [--partitions 4]
                     [--client confluent|sluice]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import HOST, Meter, compile_sluice, launch, log, wait_idle
from produce_consume import fmt, print_medians
from sluice.ports import free_port
from sluice.security.certificates import DevelopmentPki, write_development_pki

MB = 1_000_000
GB = 1_000_000_000
PROTOCOLS = ("PLAINTEXT", "SSL")
GOALS = {"produce MB/s": 0.6, "consume MB/s": 0.4}
METRICS = [
    "produce MB/s", "produce CPU-s/GB", "produce client CPU-s/GB",
    "consume MB/s", "consume CPU-s/GB", "consume client CPU-s/GB",
]  # fmt: skip


def kernel_tls() -> str:
    """Whether the kernel offers the ``tls`` upper-layer protocol on a TCP socket."""
    ulps = Path("/proc/sys/net/ipv4/tcp_available_ulp")
    available = ulps.read_text().split() if ulps.exists() else []
    server = socket.socket()
    try:
        server.bind((HOST, 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            accepted, _ = server.accept()
            accepted.close()
            try:
                client.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_ULP", 31), b"tls")
            except OSError as exc:
                return f"no (TCP_ULP tls: {exc.strerror}; available ULPs: {available or 'none'})"
    finally:
        server.close()
    return "yes (the tls ULP attaches; Python's ssl offers no way to hand it the keys)"


def client_config(protocol: str, bootstrap: str, pki: DevelopmentPki) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3}
    if protocol == "SSL":
        conf.update({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)})
    return conf


def create_topic(conf: dict[str, Any], partitions: int) -> str:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)  # held until the answer comes
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def sluice_config(protocol: str, bootstrap: str, pki: DevelopmentPki) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if protocol == "SSL":
        conf.update({"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca)})
    return conf


def produce_sluice(conf: dict[str, Any], topic: str, args: argparse.Namespace) -> tuple[int, float]:
    from sluice.client import Producer as SluiceProducer

    producer = SluiceProducer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                               "buffer.memory": 256 << 20})  # fmt: skip
    value = b"x" * args.size
    started = time.perf_counter()
    try:
        for i in range(args.records):
            producer.send(topic, value=value, partition=i % args.partitions)
        producer.flush()
    finally:
        producer.close()
    return args.records, time.perf_counter() - started


def consume_sluice(conf: dict[str, Any], topic: str, count: int, partitions: int) -> float:
    from sluice.client import Consumer as SluiceConsumer

    consumer = SluiceConsumer({
        **conf, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20,
        "max.poll.records": 100_000,
    })  # fmt: skip
    consumer.assign([(topic, p) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    try:
        while seen < count:
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"consumed {seen} of {count} records in 120 s")
            seen += len(consumer.poll(1.0))
        return time.perf_counter() - started
    finally:
        consumer.close(autocommit=False)


def produce(conf: dict[str, Any], topic: str, args: argparse.Namespace) -> tuple[int, float]:
    producer = Producer({
        **conf, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
        "queue.buffering.max.kbytes": 256 * 1024, "compression.type": "none",
    })  # fmt: skip
    value = b"x" * args.size
    delivered = 0
    errors: list[str] = []

    def done(error: Any, _message: Any) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1
        elif len(errors) < 3:
            errors.append(str(error))

    started = time.perf_counter()
    for i in range(args.records):
        while True:
            try:
                producer.produce(topic, value, partition=i % args.partitions, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records left unsent after 120 s")
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"produce failed: {errors}")
    return delivered, elapsed


def consume(conf: dict[str, Any], topic: str, count: int, partitions: int) -> float:
    consumer = Consumer({
        **conf, "group.id": f"{topic}-reader", "enable.auto.commit": False,
        "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20,
        "fetch.wait.max.ms": 100,
        # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever its queue
        # holds queued.min.messages: a 1 s stall per run, as bench/produce_consume.py notes.
        "fetch.queue.backoff.ms": 10,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 120
    try:
        while seen < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {seen} of {count} records in 120 s")
            # No more than is missing: consume() waits until it has the number asked for.
            for message in consumer.consume(min(10_000, count - seen), 0.2):
                if message.error() is not None:
                    raise KafkaException(message.error())
                seen += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


def one_run(
    protocol: str, bootstrap: str, proc: psutil.Process, pki: DevelopmentPki,
    args: argparse.Namespace,
) -> dict[str, float]:  # fmt: skip
    conf = client_config(protocol, bootstrap, pki)
    topic = create_topic(conf, args.partitions)
    sluice_client = args.client == "sluice"
    if sluice_client:
        conf = sluice_config(protocol, bootstrap, pki)
    me = psutil.Process()
    client_start = sum(me.cpu_times()[:2])
    with Meter(proc) as produced:
        records, produce_s = (produce_sluice if sluice_client else produce)(conf, topic, args)
    client_mid = sum(me.cpu_times()[:2])
    size = records * args.size
    with Meter(proc) as consumed:
        reader = consume_sluice if sluice_client else consume
        consume_s = reader(conf, topic, records, args.partitions)
    client_end = sum(me.cpu_times()[:2])
    return {
        "produce MB/s": size / produce_s / MB,
        "produce CPU-s/GB": produced.cpu_s / (size / GB),
        "produce client CPU-s/GB": (client_mid - client_start) / (size / GB),
        "consume MB/s": size / consume_s / MB,
        "consume CPU-s/GB": consumed.cpu_s / (size / GB),
        "consume client CPU-s/GB": (client_end - client_mid) / (size / GB),
    }


def print_table(runs: dict[str, list[dict[str, float]]]) -> None:
    ratios = print_medians("", runs, METRICS, "SSL", "PLAINTEXT")
    if ratios is not None:
        for metric, goal in GOALS.items():
            verdict = "met" if ratios[metric] >= goal else "NOT met"
            print(f"  goal: SSL {metric} >= {goal}x PLAINTEXT: {ratios[metric]:.2f}x, {verdict}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice bench tls", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--records", type=int, default=200_000, help="records per run")
    parser.add_argument("--size", type=int, default=1024, help="record value bytes (1024)")
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions (4)")
    parser.add_argument(
        "--client", choices=("confluent", "sluice"), default="confluent",
        help="the clients: confluent-kafka (default) or Sluice's own",
    )  # fmt: skip
    parser.add_argument("--idle-cpu", type=float, default=15.0, help="idle below this busy %%")
    parser.add_argument("--idle-wait", type=float, default=20.0, help="most s to wait for idle")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compile_sluice()
    log(f"kernel TLS available: {kernel_tls()}")
    log(f"clients: {args.client}")
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in PROTOCOLS}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        workdir = Path(tmp)
        pki = write_development_pki(workdir / "pki", [HOST])
        ports = {p: free_port() for p in PROTOCOLS}
        listeners = ",".join(f"{p}://{HOST}:{ports[p]}" for p in PROTOCOLS)
        (workdir / "logs").mkdir()
        overrides = {
            "listeners": listeners,
            "log.dirs": str(workdir / "logs"),
            "ssl.keystore.location": str(pki.broker),
            "num.partitions": str(args.partitions),
        }
        argv = [sys.executable, "-m", "sluice", "broker"]
        for key, value in overrides.items():
            argv += ["--override", f"{key}={value}"]
        with launch(argv, ports["PLAINTEXT"], workdir) as (_, proc):
            for index in range(args.repeat):
                order = PROTOCOLS if index % 2 == 0 else tuple(reversed(PROTOCOLS))
                for protocol in order:
                    seen = wait_idle(args.idle_cpu, args.idle_wait)
                    bootstrap = f"{HOST}:{ports[protocol]}"
                    result = one_run(protocol, bootstrap, proc, pki, args)
                    runs[protocol].append(result)
                    figures = "  ".join(f"{m} {fmt(result[m])}" for m in METRICS)
                    log(f"{protocol} run {index + 1} ({seen}): {figures}")
    print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
