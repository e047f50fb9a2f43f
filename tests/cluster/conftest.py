"""Cluster tests need ZooKeeper (Debian's ``zookeeper`` package), Java and kazoo."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice.embedded_cluster import EmbeddedCluster


@pytest.fixture
def cluster_prerequisites() -> None:
    """Skips the test when ZooKeeper, Java or kazoo is missing; for fixtures that build
    their own cluster."""
    pytest.importorskip("kazoo")
    from sluice.metastore.zk_server import find_java, find_zookeeper_classpath

    if find_zookeeper_classpath() is None or find_java() is None:
        pytest.skip("ZooKeeper not installed (apt-get install zookeeper)")


@pytest.fixture
def cluster3(cluster_prerequisites: None) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], zookeeper=True) as cluster:
        yield cluster
