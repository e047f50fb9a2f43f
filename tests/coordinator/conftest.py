"""Fixtures for the group coordinator tests: an embedded broker for real clients.

The sans-I/O tests need none of this; the client tests share one EmbeddedBroker per
module and reuse ``tests/interop/interop_support.py`` for broker subprocesses.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))

import sluice

BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "8",
}


@pytest.fixture(scope="module")
def embedded() -> Iterator[sluice.EmbeddedBroker]:
    with sluice.EmbeddedBroker(config=BROKER_CONFIG) as broker:
        yield broker


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"
