"""Client quotas: a throttled producer and consumer held to their quota while unthrottled
ones run at full speed on the same broker, in the same run.

One ``sluice broker`` (default settings: ``quota.window.num=11`` windows of
``quota.window.size.seconds=1``). Through Sluice's admin client (AlterClientQuotas) the
client id ``throttled`` gets ``producer_byte_rate`` and ``throttled-consumer`` gets
``consumer_byte_rate``, both ``--rate`` bytes/s; ``free`` and ``free-consumer`` get none.

* **produce**: two confluent-kafka producer processes (1 KiB records, acks=1,
  linger.ms=5, batch.size 64 KiB), ``throttled`` and ``free``, from a common start.
  Kafka's rate is a sum over the last 11 one-second samples divided by at least ten
  windows, so a new client may send ten windows' worth of its quota at once, and the
  samples of that burst leave the sum together 11 s later: the rate a client is held
  to is its quota over whole 11 s spans. Each client is measured from ``--warmup``
  (11) seconds after its first acknowledged record for ``--seconds`` (44: four spans).
  The throttled producer's rate is compared with its quota (goal: within 10%), the
  free one's with it (a ratio).
* **consume**: two confluent-kafka consumer processes (max.partition.fetch.bytes 64 KiB)
  reading the free producer's topic (kept at 2 GiB by retention) from its start,
  ``throttled-consumer`` measured as above, ``free-consumer`` over the time it takes
  to reach the end.

It prints each client's MB/s in the window, the throttle times the broker reported, the
ratios and the broker's CPU seconds per phase. Figures only: nothing here asserts.
Only 127.0.0.1 is used.

    sluice bench quotas [--rate 1048576] [--warmup 11] [--seconds 44] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MB = 1_000_000
RECORD = 1024
BATCH = 65536  # producer batch.size and consumer max.partition.fetch.bytes
SPAWN_GRACE_S = 2.5


def _produce_worker(bootstrap: str, topic: str, client_id: str, start: float, warmup: float,
                    seconds: float) -> dict[str, object]:  # fmt: skip
    import confluent_kafka

    counted = [0, 0]  # bytes acknowledged in the window, in all
    throttles: list[int] = []
    window: list[float] = []  # from the first acknowledgement

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        if err is not None:
            return
        now = time.time()
        if not window:
            window.extend((now + warmup, now + warmup + seconds))
        counted[1] += RECORD
        if window[0] <= now < window[1]:
            counted[0] += RECORD

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1", "linger.ms": 5,
        "batch.size": BATCH, "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
    })  # fmt: skip
    payload = b"q" * RECORD
    time.sleep(max(start - time.time(), 0))
    while not window or time.time() < window[1]:
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
            continue
        producer.poll(0)
    producer.purge()
    producer.flush(5)
    return {"window_bytes": counted[0], "total_bytes": counted[1], "throttles": throttles}


def _consume_worker(bootstrap: str, topic: str, client_id: str, start: float, warmup: float,
                    seconds: float) -> dict[str, object]:  # fmt: skip
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "enable.partition.eof": True, "max.partition.fetch.bytes": BATCH,
        "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
    })  # fmt: skip
    throttles: list[int] = []
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    window: list[float] = []  # from the first record
    in_window = total = 0
    caught_up_at = first = None
    time.sleep(max(start - time.time(), 0))
    while (not window or time.time() < window[1]) and caught_up_at is None:
        for msg in consumer.consume(1000, timeout=0.2):
            if msg.error() is not None:
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    caught_up_at = caught_up_at or time.time()
                continue
            now = time.time()
            if not window:
                first = now
                window.extend((now + warmup, now + warmup + seconds))
            size = len(msg.value() or b"")
            total += size
            if window[0] <= now < window[1]:
                in_window += size
    consumer.close()
    return {"window_bytes": in_window, "total_bytes": total, "throttles": throttles,
            "caught_up_s": None if caught_up_at is None or first is None
            else caught_up_at - first}  # fmt: skip


def _spawn(kind: str, bootstrap: str, topic: str, client_id: str, start: float,
           warmup: float, seconds: float) -> subprocess.Popen[str]:  # fmt: skip
    argv = [sys.executable, str(Path(__file__).resolve()), f"--{kind}-worker", bootstrap,
            topic, client_id, repr(start), str(warmup), str(seconds)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(proc: subprocess.Popen[str], limit_s: float) -> dict[str, object]:
    out, err = proc.communicate(timeout=limit_s)
    try:
        return dict(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        raise RuntimeError(f"worker exited {proc.returncode}: {err.strip()[-400:]}") from None


def _rate(report: dict[str, object], seconds: float) -> float:
    """Bytes/s in the measured window; for a consumer that caught up with the topic's end
    first, its bytes over the time it took."""
    caught = report.get("caught_up_s")
    if caught:
        return float(report["total_bytes"]) / float(caught)  # type: ignore[arg-type]
    return float(report["window_bytes"]) / seconds  # type: ignore[arg-type]


def _line(name: str, report: dict[str, object], seconds: float, rate: float) -> str:
    bps = _rate(report, seconds)
    throttles = list(report["throttles"])  # type: ignore[call-overload]
    shown = f"{len(throttles)} throttled answers, max {max(throttles)} ms" if throttles else (
        "no throttled answer")  # fmt: skip
    caught = report.get("caught_up_s")
    if caught:
        total = float(report["total_bytes"]) / MB  # type: ignore[arg-type]
        shown += f"; read all {total:.0f} MB in {float(caught):.1f} s"  # type: ignore[arg-type]
    return f"  {name:<20} {bps / MB:8.2f} MB/s  ({bps / rate:7.2f}x the quota; {shown})"


def run_once(rate: float, warmup: float, seconds: float) -> dict[str, float]:
    from brokers import Meter, sluice
    from sluice.client import Admin, NewTopic

    figures: dict[str, float] = {}
    with sluice(overrides={"log.retention.check.interval.ms": "1000"}) as (bootstrap, proc):
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            bounded = {"retention.bytes": str(2 << 30), "segment.bytes": str(128 << 20)}
            admin.create_topics([
                NewTopic("quota-throttled", 1), NewTopic("quota-free", 1, config=bounded)
            ])  # fmt: skip
            admin.alter_client_quotas([
                ({"client-id": "throttled"}, {"producer_byte_rate": rate}),
                ({"client-id": "throttled-consumer"}, {"consumer_byte_rate": rate}),
            ])  # fmt: skip
        limit = SPAWN_GRACE_S + warmup + seconds + 120
        for phase in ("produce", "consume"):
            start = time.time() + SPAWN_GRACE_S
            if phase == "produce":
                workers = {
                    "throttled": _spawn("produce", bootstrap, "quota-throttled",
                                        "throttled", start, warmup, seconds),
                    "free": _spawn("produce", bootstrap, "quota-free", "free",
                                   start, warmup, seconds),
                }  # fmt: skip
            else:
                workers = {
                    "throttled": _spawn("consume", bootstrap, "quota-free",
                                        "throttled-consumer", start, warmup, seconds),
                    "free": _spawn("consume", bootstrap, "quota-free",
                                   "free-consumer", start, warmup, seconds),
                }  # fmt: skip
            with Meter(proc) as meter:
                reports = {name: _collect(w, limit) for name, w in workers.items()}
            throttled, free = _rate(reports["throttled"], seconds), _rate(reports["free"], seconds)
            print(f"{phase}: quota {rate / MB:.2f} MB/s, each client measured over "
                  f"{warmup:g}-{warmup + seconds:g} s after its first record; "
                  f"broker CPU {meter.cpu_s:.1f} s")  # fmt: skip
            print(_line(f"throttled {phase}r", reports["throttled"], seconds, rate))
            print(_line(f"free {phase}r", reports["free"], seconds, rate))
            ratio = throttled / rate
            print(f"  throttled / quota = {ratio:.3f} (within 10%: "
                  f"{'yes' if abs(ratio - 1) <= 0.10 else 'no'}); free / throttled = "
                  f"{free / max(throttled, 1):.1f}")  # fmt: skip
            figures[f"{phase}_ratio"] = ratio
            figures[f"{phase}_cpu_s"] = meter.cpu_s
    return figures


def main(argv: list[str]) -> int:
    if argv[:1] in (["--produce-worker"], ["--consume-worker"]):
        kind = argv[0]
        bootstrap, topic, client_id, start, warmup, seconds = argv[1:7]
        worker = _produce_worker if kind == "--produce-worker" else _consume_worker
        report = worker(bootstrap, topic, client_id, float(start), float(warmup), float(seconds))
        print(json.dumps(report))
        return 0
    parser = argparse.ArgumentParser(
        prog="sluice bench quotas", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--rate", type=float, default=1_048_576.0,
                        help="the quota, bytes per second (default 1 MiB/s)")  # fmt: skip
    parser.add_argument("--warmup", type=float, default=11.0,
                        help="seconds from a client's first record to its measured window "
                        "(past the first burst of ten windows' quota)")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=44.0,
                        help="the measured window: a whole number of the rate's 11 s spans, "
                        "over which Kafka's sampled rate holds a client to its quota")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh broker")
    args = parser.parse_args(argv)
    runs = []
    for index in range(args.repeat):
        print(f"run {index + 1} of {args.repeat}")
        runs.append(run_once(args.rate, args.warmup, args.seconds))
    if len(runs) > 1:
        for key in runs[0]:
            print(f"{key}: " + ", ".join(f"{r[key]:.3f}" for r in runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
