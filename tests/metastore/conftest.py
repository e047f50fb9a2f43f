"""Fixtures for the coordination tests: a session-wide ZooKeeper and store factories.

The ``store_factory`` fixture is parametrised over both implementations, so each
contract test runs against :class:`InProcessStore` and against a real ZooKeeper
(skipped, with the reason, only when the zookeeper package is missing).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coord_support import StoreFactory, unique_base, zookeeper_or_skip

from sluice.base.clock import ManualClock
from sluice.metastore import (
    CoordinationStore,
    DataTree,
    InProcessStore,
    delete_recursive,
)
from sluice.metastore.zk_server import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    with zookeeper_or_skip() as server:
        yield server


@pytest.fixture(params=["in_process", "zookeeper"])
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
