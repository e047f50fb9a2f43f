"""Several confluent-kafka producer processes as one load generator.

One Python process driving librdkafka tops out near a few hundred thousand
``produce()`` calls a second, which would cap the produce figures of a fast broker
(and of the null sink, the ceiling). :func:`multi_produce` starts ``procs`` copies of
this file as worker processes; each runs ``produce_consume.produce_bulk`` (the same
client settings as every other produce figure) from a common start time until a
common deadline or its share of the records, and prints its delivered count as JSON.

    python bench/producers.py BOOTSTRAP TOPIC SIZE ACKS RECORDS SECONDS START BROKER_PID
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPAWN_GRACE_S = 2.0  # worker processes import confluent-kafka before the common start


@dataclass(frozen=True)
class Produced:
    """What the workers delivered together, and the wall time from the start to the last one."""

    records: int
    elapsed: float
    errors: list[str]


def multi_produce(
    bootstrap: str,
    topic: str,
    size: int,
    acks: str,
    procs: int,
    seconds: float,
    records: int,
    broker_pid: int,
    before_start: float = 0.0,
) -> tuple[Produced, float]:
    """Produce with ``procs`` worker processes; returns what they delivered and the start time
    (``time.time()``), which lies ``SPAWN_GRACE_S + before_start`` seconds from now."""
    start = time.time() + SPAWN_GRACE_S + before_start
    share = max(1, records // procs)
    argv = [sys.executable, str(HERE / "producers.py"), bootstrap, topic, str(size), acks]
    argv += [str(share), str(seconds), repr(start), str(broker_pid)]
    workers = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(procs)
    ]
    total, end, errors = 0, start, []
    for worker in workers:
        out, err = worker.communicate(timeout=seconds + SPAWN_GRACE_S + before_start + 120)
        try:
            report = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            errors.append(f"worker exited {worker.returncode}: {err.strip()[-300:]}")
            continue
        total += int(report["ok"])
        end = max(end, float(report["end"]))
        if report["error"]:
            errors.append(str(report["error"]))
    return Produced(total, max(end - start, 1e-9), errors), start


def worker(argv: list[str]) -> int:
    """One worker: wait for the common start, produce, print {"ok", "end", "error"}."""
    sys.path.insert(0, str(HERE))
    import psutil

    from produce_consume import BrokerHandle, Case, produce_bulk

    bootstrap, topic, size, acks, records, seconds, start, pid = argv
    handle = BrokerHandle("broker", bootstrap, psutil.Process(int(pid)))
    case = Case("produce", int(size), acks)
    delay = float(start) - time.time()
    if delay > 0:
        time.sleep(delay)
    # produce_bulk's time limit counts from its first send, i.e. from the common start.
    delivery, _ = produce_bulk(handle, topic, case, int(records), float(seconds))
    report = {"ok": delivery.ok, "end": time.time(), "error": delivery.first_error}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1:]))
