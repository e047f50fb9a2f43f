"""The web console's JSON API over HTTP, as the page calls it, and the cluster state
the console tests look at (tests/console)."""

from __future__ import annotations

import base64
import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import sluice
from support.waiting import wait_until


class ConsoleHttp:
    """Requests to an embedded broker's console, logged in as ``user`` if given."""

    def __init__(self, broker: sluice.EmbeddedBroker, user: str | None = None,
                 password: str = "") -> None:  # fmt: skip
        assert broker.broker is not None and broker.broker.console is not None
        self.base = f"http://127.0.0.1:{broker.broker.console.port}"
        self.headers: dict[str, str] = {}
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    def request(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """(status, decoded JSON answer or the text) of one request."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        all_headers = {**self.headers, **(headers or {})}
        if method in ("POST", "DELETE"):
            all_headers.setdefault("Content-Type", "application/json")
        request = urllib.request.Request(self.base + path, data, all_headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text.decode("utf-8", "replace")

    def get(self, path: str) -> Any:
        """The answer of a GET that must succeed."""
        status, body = self.request("GET", path)
        assert status == 200, (path, status, body)
        return body


@contextlib.contextmanager
def console_state(bootstrap: str) -> Iterator[None]:
    """Topic orders (3 partitions, 10 records each: key k<n>, JSON value {"n": n}, header
    source=test; confluent-kafka), topic events (5 binary values; kafka-python), group
    billing (read everything, committed offset 4 on each orders partition, gone: Empty;
    kafka-python) and group live (a confluent-kafka member on events while the block
    runs)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    admin = AdminClient({"bootstrap.servers": bootstrap})
    made = admin.create_topics([NewTopic("orders", 3, 1), NewTopic("events", 1, 1)])
    for future in made.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce("orders", key=f"k{i}", value=json.dumps({"n": i}), partition=i % 3,
                         headers=[("source", b"test")])  # fmt: skip
    assert producer.flush(30) == 0
    python_producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        python_producer.send("events", bytes([0, 1, 2, i]), partition=0)
    python_producer.flush(30)
    python_producer.close()

    billing = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="billing",
                            auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    read, deadline = 0, time.monotonic() + 30
    while read < 30 and time.monotonic() < deadline:
        read += sum(len(batch) for batch in billing.poll(1000).values())
    assert read == 30
    billing.commit({TopicPartition("orders", p): OffsetAndMetadata(4, "", -1) for p in range(3)})
    billing.close()

    live = Consumer({"bootstrap.servers": bootstrap, "group.id": "live",
                     "auto.offset.reset": "earliest"})  # fmt: skip
    live.subscribe(["events"])
    wait_until(lambda: live.poll(0.2) is not None and live.assignment(), 30, "live joined")
    try:
        yield
    finally:
        live.close()
