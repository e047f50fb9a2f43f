"""ZooKeeper for tests: a throwaway server (Debian's ``zookeeper`` package and Java), or a
skip that says what to install. The session-wide ``zookeeper_server`` fixture in
tests/conftest.py starts one for the whole run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sluice.metastore.zk_server import ZooKeeperServer, find_java, find_zookeeper_classpath


def require_zookeeper() -> None:
    """Skip the test (with the reason) unless kazoo, ZooKeeper and Java are installed."""
    pytest.importorskip("kazoo", reason="kazoo is not installed (pip install kazoo)")
    if find_zookeeper_classpath() is None or find_java() is None:
        pytest.skip(
            "ZooKeeper not found: install Debian's 'zookeeper' package "
            "(apt-get install zookeeper; scripts/setup.sh does it) "
            "or set SLUICE_ZOOKEEPER_CLASSPATH"
        )


@contextmanager
def zookeeper_or_skip() -> Iterator[ZooKeeperServer]:
    """Start a throwaway ZooKeeper, or skip (with the reason) if it is not installed."""
    require_zookeeper()
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.stop()
