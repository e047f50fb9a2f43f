"""The quota managers on a manual millisecond clock: Kafka's rates, throttle times,
precedence of the eight entity combinations and the token bucket."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.quota import (
    DEFAULT,
    ClientQuotaEntity,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    MetricConfig,
    QuotaManagers,
    QuotaType,
    Rate,
    ThrottlingQuotaExceeded,
    TokenBucket,
)

CONFIG = MetricConfig(samples=11, window_ms=1000)


def produce_manager(**quotas: float) -> ClientQuotaManager:
    manager = ClientQuotaManager(QuotaType.PRODUCE, CONFIG)
    for path, value in quotas.items():
        entity = ClientQuotaEntity.from_path(path.replace("__", "/"))
        assert entity is not None
        manager.update_quota(entity, value)
    return manager


# -- Rate -----------------------------------------------------------------------------------


def test_a_new_rate_counts_ten_windows_at_least() -> None:
    rate = Rate(CONFIG)
    rate.record(1000, 0)
    # One sample, 0 ms elapsed: measured over (11 - 1) windows, as Kafka does.
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.window_size_ms(500) == 10_500


def test_a_rate_forgets_windows_eleven_windows_old() -> None:
    rate = Rate(CONFIG)
    for second in range(11):
        rate.record(100, second * 1000)
    assert rate.total(10_999) == 1100
    assert rate.total(11_000) == 1000  # the first window began 11 s ago
    assert rate.total(30_000) == 0


@given(
    st.lists(
        st.tuples(st.integers(0, 3000), st.floats(0, 1e6, allow_nan=False)),
        min_size=1,
        max_size=60,
    )
)
def test_a_rate_sums_what_was_recorded_in_its_live_windows(
    steps: list[tuple[int, float]],
) -> None:
    """Reference model: every value recorded at t counts at `now` while the window it
    went into began less than samples * window ago; window starts follow Kafka's rule
    (a new window begins at the first record a window or more after the current one's
    start)."""
    rate = Rate(CONFIG)
    now = 0
    recorded: list[tuple[int, float]] = []  # (window start, value)
    window_start: int | None = None
    for gap, value in steps:
        now += gap
        if window_start is None or now - window_start >= CONFIG.window_ms:
            window_start = now
        rate.record(value, now)
        recorded.append((window_start, value))
    horizon = CONFIG.samples * CONFIG.window_ms
    starts = sorted({s for s, _ in recorded})[-CONFIG.samples :]
    expected = sum(v for s, v in recorded if s in starts and now - s < horizon)
    assert rate.total(now) == pytest.approx(expected, rel=1e-9, abs=1e-6)
    assert rate.window_size_ms(now) >= (CONFIG.samples - 1) * CONFIG.window_ms


# -- throttle times ---------------------------------------------------------------------------


def test_throttle_time_is_the_excess_over_the_quota_times_the_window() -> None:
    manager = produce_manager(users__ANONYMOUS=100.0)
    # 2000 bytes at t=0, measured over 10 s: 200 B/s against 100 -> (200-100)/100 * 10 s.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "c", 2000, 0) == 10_000
    # Within the quota: no throttle.
    fresh = produce_manager(users__ANONYMOUS=1000.0)
    assert fresh.record_and_get_throttle_time_ms("ANONYMOUS", "c", 5000, 0) == 0


@given(st.floats(1, 1e7), st.floats(0, 1e8), st.integers(0, 20_000))
def test_the_throttle_brings_the_rate_back_to_the_quota(
    quota: float, value: float, at_ms: int
) -> None:
    """Kafka's formula: waiting the throttle time with nothing recorded brings the
    measured rate down to the quota (the window grows by the throttle)."""
    manager = produce_manager(clients__c=quota)
    throttle = manager.record_and_get_throttle_time_ms("u", "c", value, at_ms)
    rate = Rate(CONFIG)
    rate.record(value, at_ms)
    observed = rate.measure(at_ms)
    if observed <= quota:
        assert throttle == 0
        return
    window = rate.window_size_ms(at_ms)
    assert throttle == round((observed - quota) / quota * window)
    # value / (window + throttle) == quota, up to rounding of the throttle
    assert value / ((window + throttle) / 1000) == pytest.approx(quota, rel=1e-3, abs=1)


def test_the_request_quota_caps_a_throttle_at_one_window() -> None:
    manager = ClientRequestQuotaManager(CONFIG)
    manager.update_quota(ClientQuotaEntity(client_id="c"), 1.0)  # 1% of a thread
    # 5 s of handler time at once: far over, capped at one 1 s window.
    assert manager.record_nanos_and_get_throttle_time_ms("u", "c", 5 * 10**9, 0) == 1000


def test_bandwidth_throttles_are_not_capped() -> None:
    manager = produce_manager(clients__c=10.0)
    assert manager.record_and_get_throttle_time_ms("u", "c", 10_000, 0) > 100_000


def test_no_quota_means_no_measure_and_no_throttle() -> None:
    manager = produce_manager()
    assert manager.record_and_get_throttle_time_ms("u", "c", 1e12, 0) == 0
    assert manager.throttle_stats() == {}
    assert manager.max_value_in_quota_window("u", "c") == math.inf


def test_fetch_size_bound_is_ten_windows_of_quota() -> None:
    manager = produce_manager(clients__c=1000.0)
    assert manager.max_value_in_quota_window("u", "c") == 10_000.0


def test_throttle_stats_per_sensor() -> None:
    manager = produce_manager(users__alice=10.0)
    manager.record_throttle("alice", "a", 300, 0)
    manager.record_throttle("alice", "b", 500, 0)
    stats = manager.throttle_stats()[("alice", "")]  # one user budget for both clients
    assert (stats.count, stats.total_ms, stats.max_ms) == (2, 800, 500)


# -- precedence ------------------------------------------------------------------------------

PRECEDENCE = [
    ("users/alice/clients/app", ("alice", "app")),
    ("users/alice/clients/<default>", ("alice", "app")),
    ("users/alice", ("alice", "")),
    ("users/<default>/clients/app", ("alice", "app")),
    ("users/<default>/clients/<default>", ("alice", "app")),
    ("users/<default>", ("alice", "")),
    ("clients/app", ("", "app")),
    ("clients/<default>", ("", "app")),
]


@given(st.sets(st.integers(0, 7), min_size=1))
def test_the_first_applicable_quota_in_kafkas_order_wins(configured: set[int]) -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, CONFIG)
    for index in configured:
        entity = ClientQuotaEntity.from_path(PRECEDENCE[index][0])
        assert entity is not None
        manager.update_quota(entity, float(1000 + index))
    first = min(configured)
    tags = manager.metric_tags("alice", "app")
    assert tags == PRECEDENCE[first][1]
    assert manager.quota_limit(tags) == 1000 + first


def test_other_users_and_clients_fall_to_their_defaults() -> None:
    manager = produce_manager(users__alice=1.0, **{"clients__<default>": 7.0})
    assert manager.quota_limit(manager.metric_tags("bob", "x")) == 7.0
    assert manager.metric_tags("bob", "x") == ("", "x")
    # a default user quota: each user a budget of its own
    manager.update_quota(ClientQuotaEntity(user=DEFAULT), 5.0)
    assert manager.metric_tags("bob", "x") == ("bob", "")
    assert manager.metric_tags("carol", "x") == ("carol", "")


def test_a_user_quota_is_shared_by_the_users_clients() -> None:
    manager = produce_manager(users__alice=100.0)
    assert manager.record_and_get_throttle_time_ms("alice", "a", 900, 0) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 900, 0) > 0
    # bob has no quota at all
    assert manager.record_and_get_throttle_time_ms("bob", "a", 1e9, 0) == 0


def test_principal_names_are_sanitized_as_stored() -> None:
    entity = ClientQuotaEntity.from_path("users/CN%3Dclient%2COU%3Dx")
    assert entity is not None
    manager = ClientQuotaManager(QuotaType.PRODUCE, CONFIG)
    manager.update_quota(entity, 1.0)
    assert manager.quota_limit(manager.metric_tags_for("CN=client,OU=x", "c")) == 1.0


def test_removing_a_quota_rebounds_existing_sensors() -> None:
    manager = produce_manager(clients__c=10.0)
    assert manager.record_and_get_throttle_time_ms("u", "c", 1000, 0) > 0
    manager.update_quota(ClientQuotaEntity(client_id="c"), None)
    assert manager.record_and_get_throttle_time_ms("u", "c", 1000, 10) == 0


# -- controller mutations ----------------------------------------------------------------------


def test_token_bucket_starts_full_and_refills_at_the_rate() -> None:
    bucket = TokenBucket(CONFIG)
    assert bucket.measure(2.0, 0) == 22.0  # 11 windows of 1 s at 2/s
    bucket.record(30, 2.0, 0)
    assert bucket.measure(2.0, 0) == -8.0
    assert bucket.measure(2.0, 4000) == 0.0
    assert bucket.measure(2.0, 100_000) == 22.0


def test_strict_mutation_quota_refuses_once_the_bucket_is_empty() -> None:
    now = [0]
    managers = QuotaManagers(CONFIG, CONFIG, lambda: now[0])
    managers.apply(ClientQuotaEntity(client_id="c"), {"controller_mutation_rate": "1"})
    quota = managers.controller_mutation.new_quota_for("u", "c", strict=True)
    quota.record(20)  # 11 tokens: accepted, 9 in debt
    assert not quota.is_exceeded
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.record(1)
    assert refused.value.throttle_time_ms == 9000
    assert quota.is_exceeded and quota.throttle_time_ms() == 9000
    now[0] = 4000
    assert quota.throttle_time_ms() == 5000
    now[0] = 9000
    again = managers.controller_mutation.new_quota_for("u", "c", strict=True)
    again.record(1)  # back at zero: accepted
    assert not again.is_exceeded


def test_permissive_mutation_quota_accepts_and_throttles() -> None:
    managers = QuotaManagers(CONFIG, CONFIG, lambda: 0)
    managers.apply(ClientQuotaEntity(client_id="c"), {"controller_mutation_rate": "1"})
    quota = managers.controller_mutation.new_quota_for("u", "c", strict=False)
    quota.record(20)
    quota.record(5)
    assert not quota.is_exceeded
    assert quota.throttle_time_ms() == 14_000


def test_managers_take_each_key_of_an_entity_config() -> None:
    managers = QuotaManagers(CONFIG, CONFIG, lambda: 0)
    alice = ClientQuotaEntity(user="alice")
    managers.apply(alice, {"producer_byte_rate": "1024", "request_percentage": "50.5",
                           "SCRAM-SHA-512": "salt=...,iterations=4096"})  # fmt: skip
    assert managers.quotas() == {alice: {"producer_byte_rate": 1024.0, "request_percentage": 50.5}}
    managers.apply(alice, {"request_percentage": "50.5"})
    assert managers.quotas() == {alice: {"request_percentage": 50.5}}
    managers.apply(alice, {})
    assert managers.quotas() == {}


def test_a_refused_mutation_gives_its_permits_back() -> None:
    managers = QuotaManagers(CONFIG, CONFIG, lambda: 0)
    managers.apply(ClientQuotaEntity(client_id="c"), {"controller_mutation_rate": "1"})
    quota = managers.controller_mutation.new_quota_for("u", "c", strict=True)
    quota.record(11)
    quota.refund(11)  # the creation failed its checks
    quota.record(11)  # the bucket is full again
    assert not quota.is_exceeded
