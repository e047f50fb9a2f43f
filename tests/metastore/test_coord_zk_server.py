"""The throwaway ZooKeeper harness: it answers, it serves kazoo, it starts again after a
crash, and it stops."""

from __future__ import annotations

import socket

import pytest

from sluice.metastore.zk_server import (
    ZooKeeperServer,
    ensure_zookeeper_installed,
    find_zookeeper_classpath,
)


def test_the_session_server_answers_four_letter_words(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.running
    assert zookeeper_server.four_letter_word("ruok") == "imok"
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")
    assert zookeeper_server.connect_string == f"127.0.0.1:{zookeeper_server.port}"


def test_a_server_starts_and_stops(zookeeper_server: ZooKeeperServer) -> None:
    # zookeeper_server only guarantees the package is there (or skips).
    assert find_zookeeper_classpath() is not None
    assert ensure_zookeeper_installed() == find_zookeeper_classpath()
    from sluice.metastore.zookeeper import ZooKeeperStore

    server = ZooKeeperServer(startup_timeout_s=60)
    with server:
        port = server.port
        assert port != zookeeper_server.port
        with ZooKeeperStore(f"{server.connect_string}/chroot/sluice") as store:
            store.create("/hello", b"world")
            assert store.get("/hello")[0] == b"world"
        with ZooKeeperStore(server.connect_string) as root:
            assert root.get("/chroot/sluice/hello")[0] == b"world"
    assert not server.running
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    server.stop()  # idempotent


def test_a_killed_server_starts_again_on_its_port_and_data(
    zookeeper_server: ZooKeeperServer,
) -> None:
    from sluice.metastore.zookeeper import ZooKeeperStore

    with ZooKeeperServer(startup_timeout_s=60) as server:
        port = server.port
        with ZooKeeperStore(server.connect_string) as store:
            store.create("/kept", b"across a crash")
        server.kill()  # SIGKILL: no clean shutdown
        assert not server.running
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        server.start()
        assert server.running and server.port == port
        with ZooKeeperStore(server.connect_string) as store:
            assert store.get("/kept")[0] == b"across a crash"
    assert not server.running
