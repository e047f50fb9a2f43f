"""Fixtures for the Spark tests: one local[2] session for the whole run (the embedded
``broker`` per module is the suite's).

Every test in this directory is marked ``spark`` (tests/conftest.py); ``-m "not spark"``
skips them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from sluice.spark import local_session

    session = local_session("sluice-tests", cores=2)
    yield session
    session.stop()
