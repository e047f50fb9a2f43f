"""Fixtures for the client tests: an embedded Sluice broker shared by a module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import sluice


@pytest.fixture(scope="module")
def broker() -> Iterator[sluice.EmbeddedBroker]:
    with sluice.EmbeddedBroker() as embedded:
        yield embedded


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
