"""Fixtures for the client tests (the embedded ``broker`` is the suite's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice.client.producer.partitioner import BuiltInPartitioner


@pytest.fixture
def randoms() -> Iterator[list[int]]:
    """The random numbers the built-in partitioner draws, in order: a test appends them."""
    values: list[int] = []
    BuiltInPartitioner.mock_random = lambda: values.pop(0)
    yield values
    BuiltInPartitioner.mock_random = None
