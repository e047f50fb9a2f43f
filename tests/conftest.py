"""Settings, markers and shared fixtures for the whole suite.

Hypothesis draws the same examples on every run (``derandomize``, seeded from each test),
so the suite passes or fails the same way each time: two CI runs failed on examples a
fresh random seed found once, in a test's own model. ``HYPOTHESIS_PROFILE=explore``
draws new random examples on each run (and keeps failing ones in ``.hypothesis/``):
search that way, then keep what is found as an ``@example``.

Every test is marked ``unit`` or ``integration`` here (:func:`pytest_collection_modifyitems`):

- ``integration``: it runs a broker (embedded or a process), ZooKeeper, Spark or a real
  client, or opens a socket or a process at all. That is every test in
  ``INTEGRATION_DIRS``, in ``INTEGRATION_MODULES``, using a fixture in
  ``INTEGRATION_FIXTURES``, or marked ``@pytest.mark.integration`` itself (with the
  reason, in a module whose other tests are unit).
- ``unit``: everything else: bytes, a manual clock, threads and event loops in one
  process, no sockets (an event loop's own wake-up pair aside) and no processes.
  ``pytest -m unit`` runs about a thousand of them in well under a minute.

A new test that opens a socket or starts a process is marked, or its module listed in
``INTEGRATION_MODULES``; ``pytest -m unit`` must stay free of both. Tests in tests/spark
are also marked ``spark``; soak tests mark themselves ``slow``.

Helpers live in the ``support`` package (tests/support, on the path through
pyproject.toml's pytest ``pythonpath``); the fixtures here are built on them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import sluice
from sluice.metastore.zk_server import ZooKeeperServer
from support.zookeeper import zookeeper_or_skip

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

TESTS = Path(__file__).resolve().parent

# Directories (under tests/) whose every test is an integration test.
INTEGRATION_DIRS = frozenset({"cluster", "interop", "spark"})

# Modules (paths under tests/) whose tests run brokers, servers, clients or processes.
INTEGRATION_MODULES = frozenset(
    {
        "client/test_client_admin.py",
        "client/test_client_interop.py",
        "client/test_client_network.py",
        "client/test_client_producer.py",
        "client/test_client_transactions.py",
        "coordinator/test_group_bad_input.py",
        "coordinator/test_group_confluent.py",
        "coordinator/test_group_pure_python.py",
        "coordinator/test_group_restart.py",
        "coordinator/test_group_topic_deletion.py",
        "controller/test_controller_zookeeper.py",
        "log/test_log_cleaner_e2e.py",
        "metastore/test_coord_zk_server.py",
        "server/test_admin_apis.py",
        "server/test_advertised_apis.py",
        "server/test_broker_retention.py",
        "server/test_broker_stop.py",
        "server/test_connection_limits.py",
        "server/test_dynamic_broker_configs.py",
        "server/test_fuzz_requests.py",
        "server/test_gc_policy.py",
        "server/test_group_flush_clients.py",
        "server/test_network_answers.py",
        "server/test_network_pipelining.py",
        "server/test_sendfile.py",
        "server/test_startup_gate.py",
        "test_bench_soak.py",
        "test_cli_tools.py",
        "test_cli_transactions_hanging.py",
    }
)

# Fixtures that start a broker, ZooKeeper or Spark: a test using one is integration.
INTEGRATION_FIXTURES = frozenset({"broker", "zookeeper_server", "spark"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test ``unit`` or ``integration`` (see the module docstring), and the
    tests in tests/spark ``spark``."""
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        directory = where.split("/", 1)[0] if "/" in where else ""
        if directory == "spark":
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("integration") or item.get_closest_marker("unit"):
            continue
        if (
            directory in INTEGRATION_DIRS
            or where in INTEGRATION_MODULES
            or INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    """Settings for the module's ``broker``; a module or directory overrides this fixture
    to configure it."""
    return {}


@pytest.fixture(scope="module")
def broker(broker_config: dict[str, Any]) -> Iterator[sluice.EmbeddedBroker]:
    """An embedded broker shared by the tests of a module."""
    with sluice.EmbeddedBroker(config=broker_config) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """One throwaway ZooKeeper for the whole run (skips when it is not installed)."""
    with zookeeper_or_skip() as server:
        yield server


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def group() -> str:
    """A consumer group id no other test uses."""
    return f"g-{uuid.uuid4().hex[:10]}"
