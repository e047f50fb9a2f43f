"""The group coordinator tests: the sans-I/O ones use ``support.group_coordinator``; the
ones with real clients share the suite's embedded ``broker`` per module, set up here for
quick rebalances."""

from __future__ import annotations

from typing import Any

import pytest

BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "8",
}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return BROKER_CONFIG
