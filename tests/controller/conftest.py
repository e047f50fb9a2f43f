"""Fixtures for the controller tests: an in-process cluster, and a real ZooKeeper."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "metastore"))

from controller_support import InProcessCluster  # noqa: E402
from coord_support import zookeeper_or_skip  # noqa: E402

from sluice.metastore.zk_server import ZooKeeperServer  # noqa: E402


@pytest.fixture
def cluster() -> InProcessCluster:
    """Three brokers (1, 2, 3); broker 1 is the controller once it has run."""
    c = InProcessCluster((1, 2, 3))
    c.run()
    return c


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    with zookeeper_or_skip() as server:
        yield server
