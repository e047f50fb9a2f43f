"""Running a real Sluice broker process for interoperability tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from sluice.embedded_cluster import wait_until
from sluice.ports import free_port


class BrokerProcess:
    """A ``sluice broker`` subprocess on a loopback port, with its data directory."""

    def __init__(self, data_dir: Path, port: int | None = None, **overrides: str) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.overrides = overrides
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        args = [
            sys.executable, "-m", "sluice", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            args += ["--override", f"{key.replace('_', '.')}={value}"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self._log_start = log.tell()
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        wait_until(self._listening, 30, f"broker on port {self.port} ({self.log_tail()})")
        # The port accepts connections before the broker has finished starting (requests
        # wait meanwhile); started means its "ready on" line.
        wait_until(self._ready, 30, f"broker ready ({self.log_tail()})")
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker exited with {self.proc.returncode}: {self.log_tail()}")
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            return b" ready on " in log.read()

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker exited with {self.proc.returncode}: {self.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout_s)
        return int(self.proc.returncode)

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)


def produce_acked(bootstrap: str, topic: str, values: list[bytes], batch_size: int) -> None:
    """Produce ``values`` with confluent-kafka, acks=all, and check each was acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all", "batch.size": batch_size}
    )
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda e, _m: e and errors.append(e))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def read_from_start(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Up to ``count`` values of partition 0 from its start, read with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == count:
            break
    consumer.close()
    return got


def named_segments(directory: Path, timeout: float = 15.0) -> list[Path]:
    """The data files of a running broker's partition ``directory``, in offset order, once
    every segment a roll has taken has its final name: a roll writes into files the
    broker's file thread made ahead (``<stem>.log.next``) and names just after
    (sluice.log.next_segment); only an unused set, holding no batch, keeps that name."""

    def all_named() -> bool:
        return not any(holds_a_batch(path) for path in directory.glob("*.log.next"))

    wait_until(all_named, timeout, f"the segments of {directory.name} named")
    return sorted(directory.glob("*.log"))


def holds_a_batch(path: Path) -> bool:
    """Whether a data file starts with a batch: an unused one made ahead is empty, or all
    zeros where it was allocated (a batch's length field is never 0)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return False  # named meanwhile
    return len(head) == 12 and head[8:] != bytes(4)


class RawClient:
    """A bare Kafka protocol connection for sending well- and ill-formed requests."""

    def __init__(self, bootstrap: str, timeout_s: float = 10) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """One response frame, or None when the broker closed the connection."""
        size = self._read_exact(4)
        if size is None:
            return None
        return self._read_exact(int.from_bytes(size, "big", signed=True))

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def is_closed_by_broker(self) -> bool:
        return self.read_frame() is None

    def request(self, body: object) -> object:
        """Send a kio request dataclass and decode the response of the same version."""
        from kio.serial import entity_reader

        from sluice.protocol import encode_request
        from sluice.protocol.apis import response_header_version, response_type
        from sluice.protocol.headers import skip_tagged_fields

        self.correlation_id += 1
        self.send_raw(encode_request(self.correlation_id, body))  # type: ignore[arg-type]
        frame = self.read_frame()
        assert frame is not None, "the broker closed the connection"
        assert int.from_bytes(frame[:4], "big") == self.correlation_id
        api_key, version = int(body.__api_key__), int(body.__version__)  # type: ignore[attr-defined]
        offset = 4
        if response_header_version(api_key, version) >= 1:
            offset = skip_tagged_fields(frame, offset, len(frame))
        value, _ = entity_reader(response_type(api_key, version))(frame, offset)
        return value


def record_batch(values: list[bytes], key: bytes | None = None) -> bytes:
    """A valid magic-v2 record batch (kio's writer) holding ``values``."""
    import datetime
    import io

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.static.primitive import i8, i16, i32, i64

    now = datetime.datetime.now(datetime.UTC)
    records = tuple(
        Record(attributes=i8(0), timestamp=now, offset=i64(i), key=key, value=v, headers=())
        for i, v in enumerate(values)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
        records=records, attributes=i16(0),
    )  # fmt: skip
    buf = io.BytesIO()
    write_new_batch(buf, batch)
    return buf.getvalue()
