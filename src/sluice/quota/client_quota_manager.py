"""Kafka's client quota managers: how much a user / client id may produce, fetch, keep the
broker busy and mutate, and how long it is throttled when it goes over.

:class:`ClientQuotaManager` (``producer_byte_rate``, ``consumer_byte_rate``) and
:class:`ClientRequestQuotaManager` (``request_percentage``) measure a :class:`~.stats.Rate`
per *sensor*; :class:`ControllerMutationQuotaManager` (``controller_mutation_rate``) a
:class:`~.stats.TokenBucket`. Which sensor a request counts against, and which quota
bounds it, follow Kafka's ``DefaultQuotaCallback``: of the quotas configured for one
quota type, the first that applies in this order wins —

1. ``users/<user>/clients/<client-id>``
2. ``users/<user>/clients/<default>``
3. ``users/<user>``
4. ``users/<default>/clients/<client-id>``
5. ``users/<default>/clients/<default>``
6. ``users/<default>``
7. ``clients/<client-id>``
8. ``clients/<default>``

— and the sensor is keyed by the tags that quota is shared under: (user, client id) for
1, 2, 4 and 5, (user, "") for 3 and 6, ("", client id) for 7 and 8. So a user quota is
one budget for all of that user's clients; a default user quota gives every user a
budget of its own. No quota applies: nothing is measured and nothing throttled.

Throttle times are Kafka's: a rate ``observed`` over its ``quota`` throttles for
``(observed - quota) / quota * window`` ms, where ``window`` is the time the rate was
measured over; the request quota's throttle is capped at one quota window
(``quota.window.size.seconds``), the bandwidth quotas' are not (a Fetch's size is
bounded instead, :meth:`ClientQuotaManager.max_value_in_quota_window`). A token bucket
``tokens`` below zero throttles for ``-tokens / rate`` seconds.

The user is the session principal's name (``ANONYMOUS`` for an unauthenticated client),
sanitized as Kafka stores it; a missing client id is "". Each sensor also keeps the
throttle time applied to it (:class:`ThrottleStats`). Sensors idle for an hour are
dropped, as Kafka expires them. No locks, no I/O: the caller passes the time.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .entity import DEFAULT, ClientQuotaEntity, sanitize
from .stats import MetricConfig, Rate, TokenBucket

__all__ = [
    "ClientQuotaManager",
    "ClientRequestQuotaManager",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "QuotaManagers",
    "QuotaType",
    "ThrottleStats",
    "ThrottlingQuotaExceeded",
]

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
"""Kafka's ``InactiveSensorExpirationTimeSeconds``: an idle sensor is dropped after this."""
_EXPIRY_CHECK_MS = 60_000

Tags = tuple[str, str]
"""A sensor's (sanitized user, client id); "" where the quota is not split by it."""


class QuotaType(enum.Enum):
    """The client quota types, named by their config keys."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"


class ThrottlingQuotaExceeded(Exception):
    """THROTTLING_QUOTA_EXCEEDED (a strict controller mutation quota is used up)."""

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_time_ms = throttle_time_ms


@dataclass(slots=True)
class ThrottleStats:
    """Throttle time applied to one sensor: how often, in total, the longest."""

    count: int = 0
    total_ms: int = 0
    max_ms: int = 0

    def record(self, ms: int) -> None:
        self.count += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)


class _Sensor:
    __slots__ = ("bound", "last_record_ms", "measure", "throttle")

    def __init__(self, measure: Rate | TokenBucket, bound: float | None, now_ms: int) -> None:
        self.measure = measure
        self.bound = bound
        self.last_record_ms = now_ms
        self.throttle = ThrottleStats()


class _QuotaSensors:
    """The quotas of one type and the sensors they are measured on."""

    def __init__(self, quota_type: QuotaType, config: MetricConfig) -> None:
        self.quota_type = quota_type
        self.config = config
        self._quotas: dict[ClientQuotaEntity, float] = {}
        self._sensors: dict[Tags, _Sensor] = {}
        self._tags: dict[tuple[str, str], Tags] = {}  # (principal name, client id) -> tags
        self._next_expiry_ms: int | None = None

    # -- quotas ---------------------------------------------------------------------------
    @property
    def quotas_enabled(self) -> bool:
        return bool(self._quotas)

    @property
    def quotas(self) -> Mapping[ClientQuotaEntity, float]:
        return self._quotas

    def update_quota(self, entity: ClientQuotaEntity, value: float | None) -> None:
        """Set (None: remove) ``entity``'s quota; sensors are re-keyed and re-bounded."""
        if value is None:
            self._quotas.pop(entity, None)
        else:
            self._quotas[entity] = float(value)
        self._tags.clear()
        for tags, sensor in self._sensors.items():
            sensor.bound = self.quota_limit(tags)

    def metric_tags(self, user: str, client_id: str) -> Tags:
        """The sensor a (sanitized user, client id) counts against (see the module)."""
        q = self._quotas
        user_q = ClientQuotaEntity
        if user_q(user, client_id) in q:
            return (user, client_id)
        if user_q(user, DEFAULT) in q:
            return (user, client_id)
        if user_q(user, None) in q:
            return (user, "")
        if user_q(DEFAULT, client_id) in q or user_q(DEFAULT, DEFAULT) in q:
            return (user, client_id)
        if user_q(DEFAULT, None) in q:
            return (user, "")
        return ("", client_id)

    def metric_tags_for(self, principal_name: str, client_id: str | None) -> Tags:
        """The sensor a principal's client counts against."""
        return self.metric_tags(sanitize(principal_name), client_id or "")

    def quota_limit(self, tags: Tags) -> float | None:
        """The quota bounding the sensor ``tags`` (None: none applies)."""
        user, client_id = tags
        q = self._quotas
        e = ClientQuotaEntity
        found: float | None = None
        if user and client_id:
            for entity in (e(user, client_id), e(user, DEFAULT), e(DEFAULT, client_id),
                           e(DEFAULT, DEFAULT)):  # fmt: skip
                found = q.get(entity)
                if found is not None:
                    break
        elif user:
            found = q.get(e(user, None))
            if found is None:
                found = q.get(e(DEFAULT, None))
        elif client_id:
            found = q.get(e(None, client_id))
            if found is None:
                found = q.get(e(None, DEFAULT))
        return found

    # -- sensors --------------------------------------------------------------------------
    def sensor(self, principal_name: str, client_id: str | None, now_ms: int) -> _Sensor:
        key = (principal_name, client_id or "")
        tags = self._tags.get(key)
        if tags is None:
            tags = self._tags[key] = self.metric_tags_for(principal_name, client_id)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(
                self._new_measure(), self.quota_limit(tags), now_ms
            )
            self._maybe_expire(now_ms)
        sensor.last_record_ms = now_ms
        return sensor

    def _new_measure(self) -> Rate | TokenBucket:
        return Rate(self.config)

    def throttle_stats(self) -> dict[Tags, ThrottleStats]:
        """Each sensor's throttle time so far, by its (user, client id) tags."""
        return {tags: sensor.throttle for tags, sensor in self._sensors.items()}

    def _maybe_expire(self, now_ms: int) -> None:
        if self._next_expiry_ms is not None and now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + _EXPIRY_CHECK_MS
        idle = [t for t, s in self._sensors.items()
                if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]  # fmt: skip
        for tags in idle:
            del self._sensors[tags]
        if idle:
            self._tags.clear()


class ClientQuotaManager(_QuotaSensors):
    """A byte-rate quota (``producer_byte_rate`` or ``consumer_byte_rate``)."""

    max_throttle_time_ms: int | None = None
    """A cap on one throttle (None: none)."""

    def record_and_get_throttle_time_ms(
        self, principal_name: str, client_id: str | None, value: float, now_ms: int
    ) -> int:
        """Record ``value`` against the client's sensor; the throttle time its rate now
        calls for (0: within its quota, or no quota applies)."""
        if not self._quotas:
            return 0
        sensor = self.sensor(principal_name, client_id, now_ms)
        rate = sensor.measure
        assert isinstance(rate, Rate)
        rate.record(value, now_ms)
        bound = sensor.bound
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = round((observed - bound) / bound * rate.window_size_ms(now_ms))
        cap = self.max_throttle_time_ms
        return int(throttle if cap is None else min(throttle, cap))

    def unrecord(
        self, principal_name: str, client_id: str | None, value: float, now_ms: int
    ) -> None:
        """Take back a value recorded (a throttled Fetch answered without its records)."""
        if self._quotas:
            sensor = self.sensor(principal_name, client_id, now_ms)
            assert isinstance(sensor.measure, Rate)
            sensor.measure.record(-value, now_ms)

    def record_throttle(
        self, principal_name: str, client_id: str | None, ms: int, now_ms: int
    ) -> None:
        """A throttle of ``ms`` was applied to the client for this quota."""
        if self._quotas and ms > 0:
            self.sensor(principal_name, client_id, now_ms).throttle.record(ms)

    def max_value_in_quota_window(self, principal_name: str, client_id: str | None) -> float:
        """The most a client may take in one quota window's worth of samples (Kafka bounds
        a Fetch's size by it); infinite without a quota."""
        if not self._quotas:
            return math.inf
        tags = self.metric_tags(sanitize(principal_name), client_id or "")
        bound = self.quota_limit(tags)
        if bound is None:
            return math.inf
        return bound * (self.config.samples - 1) * self.config.window_ms / 1000.0


class ClientRequestQuotaManager(ClientQuotaManager):
    """``request_percentage``: the share of a broker thread's time a client's requests
    may take (100 = one thread), measured as handler time; a throttle is capped at one
    quota window."""

    def __init__(self, config: MetricConfig) -> None:
        super().__init__(QuotaType.REQUEST, config)
        self.max_throttle_time_ms = config.window_ms

    def record_nanos_and_get_throttle_time_ms(
        self, principal_name: str, client_id: str | None, nanos: int, now_ms: int
    ) -> int:
        """Record ``nanos`` of handler time (as a percentage of one second)."""
        return self.record_and_get_throttle_time_ms(
            principal_name, client_id, nanos * 100.0 / 1e9, now_ms
        )


class ControllerMutationQuota:
    """One request's controller mutation quota (Kafka's ``Strict`` and
    ``PermissiveControllerMutationQuota``). Strict: a mutation is refused with
    THROTTLING_QUOTA_EXCEEDED once the bucket is empty; permissive: always accepted."""

    __slots__ = ("_clock", "_last_recorded_ms", "_last_throttle_ms", "_rate", "_sensor", "strict")

    def __init__(self, sensor: _Sensor | None, strict: bool, clock: Callable[[], int]) -> None:
        self._sensor = sensor
        self.strict = strict
        self._clock = clock
        self._last_throttle_ms = 0
        self._last_recorded_ms = 0

    @property
    def is_exceeded(self) -> bool:
        """A strict quota refused a mutation of this request."""
        return self.strict and self._last_throttle_ms > 0

    def record(self, permits: float) -> None:
        """Take ``permits`` (partitions created or deleted), as Kafka's quotas do.

        :raises ThrottlingQuotaExceeded: strict, and the bucket was empty already.
        """
        sensor = self._sensor
        if sensor is None or sensor.bound is None:
            return
        bucket = sensor.measure
        assert isinstance(bucket, TokenBucket)
        now = self._clock()
        rate = sensor.bound
        if self.strict:
            tokens = bucket.measure(rate, now)
            if tokens < 0:
                self._throttled(tokens, rate, now)
                raise ThrottlingQuotaExceeded(self._last_throttle_ms)
            bucket.record(permits, rate, now)
        else:
            bucket.record(permits, rate, now)
            tokens = bucket.measure(rate, now)
            if tokens < 0:
                self._throttled(tokens, rate, now)

    def refund(self, permits: float) -> None:
        """Give back what :meth:`record` took for a mutation that was then refused (Kafka
        records only mutations that passed their checks)."""
        sensor = self._sensor
        if sensor is not None and sensor.bound is not None:
            assert isinstance(sensor.measure, TokenBucket)
            sensor.measure.record(-permits, sensor.bound, self._clock())

    def _throttled(self, tokens: float, rate: float, now: int) -> None:
        self._last_throttle_ms = round(-tokens / rate * 1000)
        self._last_recorded_ms = now

    def throttle_time_ms(self) -> int:
        """What is left of the last throttle this request's mutations called for."""
        left = self._last_throttle_ms - (self._clock() - self._last_recorded_ms)
        return max(0, int(left))


class ControllerMutationQuotaManager(_QuotaSensors):
    """``controller_mutation_rate``: partitions created, added or deleted per second."""

    def __init__(self, config: MetricConfig, clock: Callable[[], int]) -> None:
        super().__init__(QuotaType.CONTROLLER_MUTATION, config)
        self._clock = clock

    def _new_measure(self) -> Rate | TokenBucket:
        return TokenBucket(self.config)

    def new_quota_for(
        self, principal_name: str, client_id: str | None, strict: bool
    ) -> ControllerMutationQuota:
        """The quota one CreateTopics, CreatePartitions or DeleteTopics request uses:
        strict from the versions that know THROTTLING_QUOTA_EXCEEDED (KIP-599)."""
        if not self._quotas:
            return ControllerMutationQuota(None, strict, self._clock)
        sensor = self.sensor(principal_name, client_id, self._clock())
        return ControllerMutationQuota(sensor, strict, self._clock)

    def record_throttle(self, principal_name: str, client_id: str | None, ms: int) -> None:
        if self._quotas and ms > 0:
            self.sensor(principal_name, client_id, self._clock()).throttle.record(ms)


class QuotaManagers:
    """The four client quota managers of a broker (Kafka's ``QuotaManagers``), and the
    stored quota configs they follow."""

    def __init__(self, config: MetricConfig, mutation_config: MetricConfig,
                 clock: Callable[[], int]) -> None:  # fmt: skip
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, config)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, config)
        self.request = ClientRequestQuotaManager(config)
        self.controller_mutation = ControllerMutationQuotaManager(mutation_config, clock)
        self._managers: dict[str, _QuotaSensors] = {
            m.quota_type.value: m
            for m in (self.produce, self.fetch, self.request, self.controller_mutation)
        }
        self.active = False
        """Whether any quota is configured (otherwise nothing needs measuring)."""

    def apply(self, entity: ClientQuotaEntity, config: Mapping[str, str]) -> None:
        """``entity``'s stored config is now ``config``: each quota type takes its key's
        value, or drops the entity's quota if the key is gone (unreadable values count as
        gone)."""
        for key, manager in self._managers.items():
            raw = config.get(key)
            value: float | None = None
            if raw is not None:
                try:
                    value = float(raw)
                except ValueError:
                    value = None
                if value is not None and not (math.isfinite(value) and value > 0):
                    value = None
            manager.update_quota(entity, value)
        self.active = any(m.quotas_enabled for m in self._managers.values())

    def quotas(self) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas in force, by entity."""
        out: dict[ClientQuotaEntity, dict[str, float]] = {}
        for key, manager in self._managers.items():
            for entity, value in manager.quotas.items():
                out.setdefault(entity, {})[key] = value
        return out
