"""Fixtures that run a real Sluice broker process for interoperability tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from interop_support import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("broker")
    proc = BrokerProcess(root / "data").start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker did not shut down cleanly ({code}):\n{proc.log_tail()}"


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
