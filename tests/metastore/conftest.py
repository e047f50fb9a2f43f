"""Fixtures for the coordination tests: store factories over both implementations.

The ``store_factory`` fixture is parametrised over both implementations, so each
contract test runs against :class:`InProcessStore` (a unit test) and against a real
ZooKeeper (an integration test, on the suite's ``zookeeper_server``; skipped, with the
reason, only when the zookeeper package is missing).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice.base.clock import ManualClock
from sluice.metastore import (
    CoordinationStore,
    DataTree,
    InProcessStore,
    delete_recursive,
)
from sluice.metastore.zk_server import ZooKeeperServer
from support.metastore import StoreFactory, unique_base


@pytest.fixture(params=["in_process", pytest.param("zookeeper", marks=pytest.mark.integration)])
def store_factory(request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    opened: list[CoordinationStore] = []
    if request.param == "in_process":
        tree = DataTree(ManualClock(1_000))

        def make() -> CoordinationStore:
            store = InProcessStore(tree, session_timeout_ms=6_000)
            opened.append(store)
            return store

    else:
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        from sluice.metastore.zookeeper import ZooKeeperStore

        def make() -> CoordinationStore:
            store = ZooKeeperStore(server.connect_string, session_timeout_ms=6_000)
            opened.append(store)
            return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def base(store_factory: StoreFactory) -> Iterator[str]:
    """A fresh persistent znode for one test, removed afterwards."""
    path = unique_base()
    admin = store_factory()
    admin.create(path)
    yield path
    delete_recursive(admin, path)
