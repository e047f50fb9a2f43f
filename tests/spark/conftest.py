"""Fixtures for the Spark tests: one local[2] session for the whole run, one broker per module.

Every test in this directory is marked ``spark``; ``-m "not spark"`` skips them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import sluice

pytest.importorskip("pyspark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from sluice.spark import local_session

    session = local_session("sluice-tests", cores=2)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker() -> Iterator[sluice.EmbeddedBroker]:
    with sluice.EmbeddedBroker() as embedded:
        yield embedded


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
