"""The Spark source's consumer pool, with stand-in consumers and a manual clock."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.spark.consumer_pool import ConsumerPool


class StandIn:
    """Records what the pool does to a consumer."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.assigned: list[Any] | None = None
        self.closed = False

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def close(self, autocommit: bool = True) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_consumers_are_reused_by_config_expire_and_are_bounded() -> None:
    clock = Clock()
    made: list[StandIn] = []

    def factory(config: dict[str, Any]) -> Any:
        made.append(StandIn(config))
        return made[-1]

    pool = ConsumerPool(capacity=2, idle_timeout_s=300, clock=clock, factory=factory)
    with pool.consumer({"bootstrap.servers": "a", "fetch.max.wait.ms": 10}) as first:
        pass
    assert first.assigned == [] and not first.closed and len(pool) == 1
    with pool.consumer({"fetch.max.wait.ms": "10", "bootstrap.servers": "a"}) as again:
        assert again is first  # same settings, in any order and type: the same consumer
        with pool.consumer({"bootstrap.servers": "a", "fetch.max.wait.ms": 10}) as other:
            assert other is not first  # taken: a second one is made
    assert len(made) == 2 and len(pool) == 2
    with pool.consumer({"bootstrap.servers": "b"}):
        pass
    assert len(pool) == 2 and made[1].closed  # over capacity: the longest idle goes
    clock.now = 301
    with pool.consumer({"bootstrap.servers": "c"}):
        pass
    assert made[0].closed and made[2].closed  # idle past the timeout
    assert not made[3].closed and len(pool) == 1
    pool.close()
    assert all(c.closed for c in made) and len(pool) == 0


def test_a_failed_task_closes_its_consumer() -> None:
    made: list[StandIn] = []

    def factory(config: dict[str, Any]) -> Any:
        made.append(StandIn(config))
        return made[-1]

    pool = ConsumerPool(factory=factory)
    with pytest.raises(RuntimeError), pool.consumer({"bootstrap.servers": "a"}):
        raise RuntimeError("task failed")
    assert made[0].closed and len(pool) == 0
