"""Options of the ``sluice`` Spark source and sink, checked once on the driver.

The names, meanings and (where Spark has them) error messages follow Spark's own
Kafka source: ``kafka.bootstrap.servers``, one of ``subscribe`` / ``subscribePattern`` /
``assign``, where to start and end (``startingOffsets``, ``startingTimestamp``,
``startingOffsetsByTimestamp`` and their ``ending`` forms), how to split the work
(``minPartitions``, ``maxRecordsPerPartition``), how much each micro-batch takes
(``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``), the
consumers' identity (``groupIdPrefix``, ``kafka.group.id``), ``failOnDataLoss``,
``includeHeaders``; every other ``kafka.*`` option goes to Sluice's consumer or producer.
Offsets travel as JSON objects ``{"topic": {"0": 12, "1": 40}}`` with keys in a
stable order (topics sorted, partitions by number), because Spark compares them
as strings.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "EARLIEST",
    "LATEST",
    "ByTimestamp",
    "OffsetMap",
    "ReaderOptions",
    "SluiceOptionError",
    "WriterOptions",
    "offsets_from_json",
    "offsets_to_json_dict",
]

log = logging.getLogger("sluice.spark")

EARLIEST: Final = -2
LATEST: Final = -1

OffsetMap = dict[tuple[str, int], int]

_READER_KEYS: Final = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "minpartitions", "maxrecordsperpartition", "maxoffsetspertrigger",
    "minoffsetspertrigger", "maxtriggerdelay", "groupidprefix", "failondataloss",
    "includeheaders", "kafkaconsumer.polltimeoutms", "path", "checkpointlocation", "queryname",
}  # fmt: skip
_WRITER_KEYS: Final = {
    "topic",
    "commitlogtopic",
    "transactional",
    "path",
    "checkpointlocation",
    "queryname",
}
# consumer settings the source sets itself: it names the group and the client
_CONSUMER_OWNED: Final = {"group.id", "client.id"}
# Spark's reasons for refusing these consumer settings, in its words
_CONSUMER_REFUSED: Final = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingoffsets' to 'earliest' or 'latest' to specify where to start. Structured "
        "Streaming manages which offsets are consumed internally, rather than relying on the "
        "kafkaConsumer to do it. This will ensure that no data is missed when new "
        "topics/partitions are dynamically subscribed. Note that 'startingoffsets' only applies "
        "when a new Streaming query is started, and that resuming will always pick up from "
        "where the query left off. See the docs for more details."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


class SluiceOptionError(ValueError):
    """A ``sluice`` source or sink option is missing, unknown or malformed."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _client_config(options: Mapping[str, str], owned: set[str]) -> dict[str, str]:
    """``kafka.*`` options as client properties (``kafka.`` removed), servers included."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if key.lower().startswith("kafka."):
            name = key[len("kafka.") :]
            if name in owned:
                continue
            config[name] = value
    if not config.get("bootstrap.servers"):
        raise SluiceOptionError("option kafka.bootstrap.servers is required")
    return config


def _bool_option(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise SluiceOptionError(f"option {key} must be true or false, got {raw!r}")


def _unknown(opts: Mapping[str, str], known: set[str], what: str) -> None:
    bad = sorted(k for k in opts if k not in known and not k.startswith("kafka."))
    if bad:
        raise SluiceOptionError(
            f"unknown {what} option(s): {', '.join(bad)} (client settings take the prefix kafka.)"
        )


def offsets_from_json(text: str, what: str) -> OffsetMap:
    """Parse ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SluiceOptionError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SluiceOptionError(f'{what} must be a JSON object like {{"topic": {{"0": 0}}}}')
    out: OffsetMap = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise SluiceOptionError(f"{what}: topic {topic!r} must map partitions to offsets")
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise SluiceOptionError(f"{what}: partition {part!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < -2:
                raise SluiceOptionError(
                    f"{what}: offset {offset!r} of {topic}-{p} must be >= 0, -2 or -1"
                )
            out[(str(topic), p)] = offset
    return out


def offsets_to_json_dict(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """The stable, JSON-ready form: topics sorted, partitions in numeric order."""
    out: dict[str, dict[str, int]] = {}
    for topic, part in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return out


def offsets_from_json_dict(raw: Mapping[str, Any]) -> OffsetMap:
    return {(t, int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: a topic list, a regex, or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assigned:
            return f"assign {sorted(self.assigned)}"
        return f"subscribe {list(self.topics)}"


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise SluiceOptionError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind, value = given[0], opts[given[0]]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SluiceOptionError("option subscribe needs at least one topic")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise SluiceOptionError(f"subscribePattern {value!r} is not a regex: {exc}") from None
        return Subscription(pattern=value)
    try:
        raw = json.loads(value)
        ok = isinstance(raw, dict) and all(
            isinstance(ps, list) and all(isinstance(p, int) for p in ps) for ps in raw.values()
        )
    except json.JSONDecodeError:
        ok = False
    if not ok:
        raise SluiceOptionError(
            f'option assign must be JSON like {{"topic": [0, 1]}}, got {value!r}'
        )
    return Subscription(assigned=tuple(sorted((t, p) for t, ps in raw.items() for p in ps)))


@dataclass(frozen=True)
class ByTimestamp:
    """Offsets looked up by record time (ListOffsets with a timestamp): per partition, the
    earliest offset whose timestamp is at or after the given time. ``everywhere`` is one
    time for every partition (``startingTimestamp``), ``per_partition`` one per partition
    (``startingOffsetsByTimestamp``). When no record is that recent, a start fails or
    goes to the latest offset (``startingOffsetsByTimestampStrategy``); an end is always
    the latest offset."""

    everywhere: int | None = None
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)
    latest_when_unmatched: bool = False

    def describe(self) -> str:
        if self.everywhere is not None:
            return f"timestamp {self.everywhere}"
        return f"timestamps {offsets_to_json_dict(self.per_partition)}"


OffsetSpec = str | OffsetMap | ByTimestamp
"""Where to start or end: "earliest", "latest", a JSON offset map, or by timestamp."""


def _timestamps_from_json(text: str, what: str) -> dict[tuple[str, int], int]:
    out = offsets_from_json(text, what)
    bad = sorted(tp for tp, ts in out.items() if ts < 0)
    if bad:
        raise SluiceOptionError(f"{what}: timestamps are milliseconds >= 0 (bad: {bad})")
    return out


def _offset_spec(
    opts: Mapping[str, str], prefix: str, default: str, latest_when_unmatched: bool
) -> OffsetSpec:
    """``<prefix>Timestamp`` over ``<prefix>OffsetsByTimestamp`` over ``<prefix>Offsets``,
    Spark's order of preference."""
    if f"{prefix}timestamp" in opts:
        raw = opts[f"{prefix}timestamp"].strip()
        try:
            everywhere = int(raw)
        except ValueError:
            raise SluiceOptionError(f"Expected a single long value, got {raw}") from None
        if everywhere < 0:
            raise SluiceOptionError(f"option {prefix}Timestamp must be >= 0, got {raw}")
        return ByTimestamp(everywhere=everywhere, latest_when_unmatched=latest_when_unmatched)
    if f"{prefix}offsetsbytimestamp" in opts:
        what = f"option {prefix}OffsetsByTimestamp"
        per = _timestamps_from_json(opts[f"{prefix}offsetsbytimestamp"].strip(), what)
        return ByTimestamp(per_partition=per, latest_when_unmatched=latest_when_unmatched)
    raw = opts.get(f"{prefix}offsets", default).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    return offsets_from_json(raw, f"option {prefix}Offsets")


def _positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    if key not in opts:
        return None
    try:
        value = int(opts[key].strip())
    except ValueError:
        raise SluiceOptionError(f"option {name} must be an integer, got {opts[key]!r}") from None
    if value <= 0:
        raise SluiceOptionError(f"{name} must be positive")
    return value


_TIME_UNITS_MS: Final = {
    "us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
    "d": 86_400_000,
}  # fmt: skip


def time_string_ms(text: str, name: str) -> int:
    """Spark's time strings: a whole number with an optional unit (us, ms, s, m, min, h,
    d); without one, milliseconds."""
    found = re.fullmatch(r"(\d+)\s*([a-z]+)?", text.strip().lower())
    if found is None or (found.group(2) or "ms") not in _TIME_UNITS_MS:
        raise SluiceOptionError(
            f"option {name}: {text!r} is not a time. Time must be specified as seconds (s), "
            "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). "
            "E.g. 50s, 100ms, or 250us."
        )
    return int(int(found.group(1)) * _TIME_UNITS_MS[found.group(2) or "ms"])


def _refuse_consumer_settings(opts: Mapping[str, str]) -> None:
    for name, reason in _CONSUMER_REFUSED.items():
        if f"kafka.{name}" in opts:
            raise SluiceOptionError(reason)


@dataclass(frozen=True)
class ReaderOptions:
    """The source's options, parsed; picklable, so the Python workers get a copy.

    ``consumer_config`` is what every task's consumer gets: the ``kafka.*`` options plus
    ``group.id`` (``kafka.group.id``, or ``<groupIdPrefix>-<uuid>-executor``) and
    ``client.id`` (``kafka.client.id``, or ``consumer-<group.id>``). The driver's
    consumer uses :meth:`driver_config`."""

    consumer_config: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_s: float
    read_committed: bool = field(default=False)
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    driver_group_id: str | None = None

    def driver_config(self) -> dict[str, str]:
        """The driver's consumer: the tasks' settings under the driver's group id."""
        config = dict(self.consumer_config)
        if self.driver_group_id is not None:
            if config.get("client.id") == f"consumer-{config.get('group.id')}":
                config["client.id"] = f"consumer-{self.driver_group_id}"
            config["group.id"] = self.driver_group_id
        return config

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReaderOptions:
        opts = _lower(options)
        _unknown(opts, _READER_KEYS, "source")
        _refuse_consumer_settings(opts)
        config = _client_config(options, set(_CONSUMER_OWNED))
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise SluiceOptionError(
                f"option startingOffsetsByTimestampStrategy must be error or latest, got "
                f"{opts['startingoffsetsbytimestampstrategy']!r}"
            )
        starting = _offset_spec(
            opts, "starting", "latest" if streaming else "earliest", strategy == "latest"
        )
        ending = _offset_spec(opts, "ending", "latest", True)
        if streaming:
            if "endingoffsets" in opts:
                raise SluiceOptionError("option endingOffsets is for batch queries only")
            if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
                raise SluiceOptionError("ending timestamp not valid in streaming queries")
        else:
            _check_batch_bounds(starting, ending)
            for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if key.lower() in opts:
                    log.warning("%s option ignored in batch queries", key)
        max_per_trigger = _positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        min_per_trigger = _positive(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
        if min_per_trigger is not None and min_per_trigger > (max_per_trigger or min_per_trigger):
            raise SluiceOptionError(
                f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                f"maxOffsetsPerTrigger({max_per_trigger})."
            )
        delay_ms = time_string_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
        if streaming and "maxtriggerdelay" in opts and min_per_trigger is None:
            log.warning("maxTriggerDelay has no effect without minOffsetsPerTrigger")
        try:
            poll_ms = float(opts.get("kafkaconsumer.polltimeoutms", "120000"))
        except ValueError:
            raise SluiceOptionError("option kafkaConsumer.pollTimeoutMs must be a number") from None
        group, driver_group = _group_ids(options, opts, streaming)
        config["group.id"] = group
        config["client.id"] = _option(options, "kafka.client.id") or f"consumer-{group}"
        return cls(
            consumer_config=config,
            subscription=_subscription(opts),
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=max_per_trigger,
            fail_on_data_loss=_bool_option(opts, "failondataloss", True),
            include_headers=_bool_option(opts, "includeheaders", False),
            poll_timeout_s=poll_ms / 1000,
            read_committed=config.get("isolation.level") == "read_committed",
            min_partitions=_positive(opts, "minpartitions", "minPartitions"),
            max_records_per_partition=_positive(
                opts, "maxrecordsperpartition", "maxRecordsPerPartition"
            ),
            min_offsets_per_trigger=min_per_trigger,
            max_trigger_delay_ms=delay_ms,
            driver_group_id=driver_group,
        )


def _option(options: Mapping[str, str], key: str) -> str | None:
    """A ``kafka.*`` option's value, its key in any case."""
    for k, v in options.items():
        if str(k).lower() == key:
            return str(v)
    return None


def _group_ids(
    options: Mapping[str, str], opts: Mapping[str, str], streaming: bool
) -> tuple[str, str]:
    """The tasks' and the driver's ``group.id``: ``kafka.group.id`` for both when set,
    otherwise unique per query from ``groupIdPrefix`` (Spark's defaults)."""
    given = _option(options, "kafka.group.id")
    if given:
        log.warning(
            "Kafka option 'kafka.group.id' has been set on this query: queries or sources "
            "sharing a group id show up to the brokers as one consumer group"
        )
        if "groupidprefix" in opts:
            log.warning(
                "Option groupIdPrefix will be ignored as option kafka.group.id has been set."
            )
        return given, given
    default = "spark-kafka-source" if streaming else "spark-kafka-relation"
    unique = f"{opts.get('groupidprefix', default)}-{uuid.uuid4()}"
    return f"{unique}-executor", f"{unique}-driver"


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting == "latest":
        raise SluiceOptionError("startingOffsets=latest is for streaming queries only")
    if ending == "earliest":
        raise SluiceOptionError("endingOffsets=earliest is for streaming queries only")
    if isinstance(starting, dict) and LATEST in starting.values():
        raise SluiceOptionError("startingOffsets: -1 (latest) is not allowed in batch")
    if isinstance(ending, dict) and EARLIEST in ending.values():
        raise SluiceOptionError("endingOffsets: -2 (earliest) is not allowed")
    if isinstance(starting, ByTimestamp) and isinstance(ending, ByTimestamp):
        for tp, ts in starting.per_partition.items():
            end = ending.per_partition.get(tp)
            if end is not None and ts > end:
                raise SluiceOptionError(
                    f"startingOffsetsByTimestamp {ts} of {tp[0]}-{tp[1]} is after its "
                    f"endingOffsetsByTimestamp {end}"
                )
        if (starting.everywhere or 0) > (ending.everywhere or 2**63):
            raise SluiceOptionError(
                f"startingTimestamp {starting.everywhere} is after endingTimestamp "
                f"{ending.everywhere}"
            )


@dataclass(frozen=True)
class WriterOptions:
    """The sink's options, parsed."""

    producer_config: dict[str, str]
    topic: str | None
    commit_log_topic: str
    transactional: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriterOptions:
        opts = _lower(options)
        _unknown(opts, _WRITER_KEYS, "sink")
        config = _client_config(options, set())
        for key, value in (("enable.idempotence", "true"), ("acks", "all")):
            if config.setdefault(key, value).lower() not in (value, "-1"):
                raise SluiceOptionError(f"the sluice sink needs kafka.{key}={value}")
        topic = opts.get("topic") or None
        raw = opts.get("transactional", "true").strip().lower()
        if raw not in ("true", "false"):
            raise SluiceOptionError(f"transactional must be true or false, not {raw!r}")
        commit_log = opts.get("commitlogtopic", "_sluice_spark_commits")
        return cls(config, topic, commit_log, raw == "true")
