"""Fixtures for the controller tests: an in-process cluster (a real ZooKeeper is the
suite's ``zookeeper_server``)."""

from __future__ import annotations

import pytest

from support.controller import InProcessCluster


@pytest.fixture
def cluster() -> InProcessCluster:
    """Three brokers (1, 2, 3); broker 1 is the controller once it has run."""
    c = InProcessCluster((1, 2, 3))
    c.run()
    return c
