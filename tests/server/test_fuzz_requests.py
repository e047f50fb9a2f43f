"""The broker under hostile input (bench/fuzz.py, bounded here): every served API and
version, each field of a valid request at its extremes, null and longest, then random
mutations, over real sockets. No traceback in the log, a few log lines however many bad
requests, every valid request answered, and real clients served during and after."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

from sluice.testing import EmbeddedBroker
from support.bench import import_bench
from support.clients import consume_kafka_python, create_topic

SECONDS = 50  # the bound of the whole run, which takes 20-40 s
RANDOM = 4000  # random mutations after the sweep


@pytest.fixture(scope="module")
def fuzz() -> ModuleType:
    return import_bench("fuzz", forget=("fuzz",))


@pytest.fixture
def capture(fuzz: ModuleType) -> Iterator[object]:
    handler = fuzz.LogCapture()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def broker(fuzz: ModuleType) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as embedded:
        fuzz.prepare(embedded.bootstrap_servers)
        yield embedded


def test_no_request_causes_a_traceback_and_the_log_stays_bounded(
    fuzz: ModuleType, capture: object, broker: EmbeddedBroker
) -> None:
    swept = sum(1 for _ in fuzz.sweep(1))
    requests = itertools.chain(fuzz.sweep(1), itertools.islice(fuzz.cases(1, 6), RANDOM))
    started = time.monotonic()
    report = fuzz.run(broker.bootstrap_servers, capture, requests, seconds=SECONDS)
    elapsed = time.monotonic() - started

    assert report.traceback_count == 0, report.summary(verbose=True)
    assert report.closed_on_valid == [], report.summary()
    assert report.serves_after
    assert report.requests >= swept, f"the sweep did not finish: {report.summary()}"
    assert report.outcomes["closed"] > 1000  # the malformed ones: as Kafka, it closes
    # One line per 10 s for each kind of refusal, however many there were.
    refusals = sum(
        count for source, count in capture.sources.items()  # type: ignore[attr-defined]
        if "sluice.server.network" in source or "sluice.server.connection" in source
    )  # fmt: skip
    assert refusals <= 4 * (elapsed / 10 + 1), report.summary()


def test_clients_are_served_while_another_sends_hostile_requests(
    fuzz: ModuleType, capture: object, broker: EmbeddedBroker
) -> None:
    from confluent_kafka import Producer

    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "steady", 1)
    reports: list[object] = []
    attacker = threading.Thread(
        target=lambda: reports.append(
            fuzz.run(bootstrap, capture, itertools.islice(fuzz.cases(7, 6), 3000), seconds=40)
        ),
        name="hostile-client",
    )
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    values: list[bytes] = []
    attacker.start()
    try:
        while attacker.is_alive() or len(values) < 300:  # confluent-kafka all along
            value = f"steady-{len(values)}".encode()
            producer.produce("steady", value, on_delivery=lambda e, _m: e and errors.append(e))
            values.append(value)
            producer.poll(0.01)
        assert producer.flush(30) == 0
    finally:
        attacker.join(60)
    assert errors == []
    consumed = consume_kafka_python(bootstrap, "steady", len(values))  # and kafka-python after
    assert [value for _, value, _, _ in consumed] == values
    (report,) = reports
    assert report.requests == 3000  # type: ignore[attr-defined]
    assert report.traceback_count == 0, report.summary(verbose=True)  # type: ignore[attr-defined]
    assert report.serves_after  # type: ignore[attr-defined]
