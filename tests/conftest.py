"""Settings and shared fixtures for the whole suite.

Hypothesis draws the same examples on every run (``derandomize``, seeded from each test),
so the suite passes or fails the same way each time: two CI runs failed on examples a
fresh random seed found once, in a test's own model. ``HYPOTHESIS_PROFILE=explore``
draws new random examples on each run (and keeps failing ones in ``.hypothesis/``):
search that way, then keep what is found as an ``@example``.

Tests in tests/spark are marked ``spark``; soak tests mark themselves ``slow``.

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests in tests/spark ``spark``."""
    spark = Path(__file__).resolve().parent / "spark"
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(spark):
            item.add_marker(pytest.mark.spark)


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
