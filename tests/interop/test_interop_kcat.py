"""kcat (Debian's package, librdkafka 2.0.2) against a real broker process."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from support.brokers import BrokerProcess

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def kcat(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=60, check=True)
    return done.stdout.decode()


def test_metadata_listing(broker: BrokerProcess, topic: str) -> None:
    kcat("-b", broker.bootstrap, "-t", topic, "-P", stdin=b"one\n")
    out = kcat("-b", broker.bootstrap, "-L")
    assert "1 brokers:" in out and f"broker 0 at {broker.bootstrap}" in out
    assert f'topic "{topic}" with 1 partitions' in out


def test_produce_and_consume(broker: BrokerProcess, topic: str) -> None:
    lines = b"".join(b"key%d:value %d\n" % (i, i) for i in range(25))
    kcat("-b", broker.bootstrap, "-t", topic, "-P", "-K:", stdin=lines)
    out = kcat("-b", broker.bootstrap, "-t", topic, "-C", "-e", "-f", "%k|%s|%o\n")
    assert out.splitlines() == [f"key{i}|value {i}|{i}" for i in range(25)]
    tail = kcat("-b", broker.bootstrap, "-t", topic, "-C", "-o", "-3", "-e", "-f", "%s\n")
    assert tail.splitlines() == ["value 22", "value 23", "value 24"]
