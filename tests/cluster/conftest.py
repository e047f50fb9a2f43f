"""Cluster tests need ZooKeeper (Debian's ``zookeeper`` package), Java and kazoo."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice.testing import EmbeddedCluster
from support.zookeeper import require_zookeeper


@pytest.fixture
def cluster_prerequisites() -> None:
    """Skips the test when ZooKeeper, Java or kazoo is missing; for fixtures that build
    their own cluster."""
    require_zookeeper()


@pytest.fixture
def cluster3(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], zookeeper=True) as cluster:
        yield cluster
