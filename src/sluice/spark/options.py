"""Options of the ``sluice`` Spark source and sink, checked once on the driver.

The names and meanings follow Spark's own Kafka source: ``kafka.bootstrap.servers``,
one of ``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets``,
``endingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``;
every other ``kafka.*`` option goes to Sluice's consumer or producer.
Offsets travel as JSON objects ``{"topic": {"0": 12, "1": 40}}`` with keys in a
stable order (topics sorted, partitions by number), because Spark compares them
as strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetMap",
    "ReaderOptions",
    "SluiceOptionError",
    "WriterOptions",
    "offsets_from_json",
    "offsets_to_json_dict",
]

EARLIEST: Final = -2
LATEST: Final = -1

OffsetMap = dict[tuple[str, int], int]

_READER_KEYS: Final = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "maxoffsetspertrigger", "failondataloss", "includeheaders",
    "kafkaconsumer.polltimeoutms", "path", "checkpointlocation", "queryname",
}  # fmt: skip
_WRITER_KEYS: Final = {
    "topic",
    "commitlogtopic",
    "transactional",
    "path",
    "checkpointlocation",
    "queryname",
}
# consumer settings the source owns: it assigns partitions and seeks itself
_CONSUMER_OWNED: Final = {"group.id", "enable.auto.commit", "auto.offset.reset"}


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


def _offsets_option(opts: Mapping[str, str], key: str, default: str) -> str | OffsetMap:
    raw = opts.get(key, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    return offsets_from_json(raw, f"option {key}")


@dataclass(frozen=True)
class ReaderOptions:
    """The source's options, parsed; picklable, so the Python workers get a copy."""

    consumer_config: dict[str, str]
    subscription: Subscription
    starting: str | OffsetMap
    ending: str | OffsetMap
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_s: float
    read_committed: bool = field(default=False)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReaderOptions:
        opts = _lower(options)
        _unknown(opts, _READER_KEYS, "source")
        config = _client_config(options, set(_CONSUMER_OWNED))
        starting = _offsets_option(opts, "startingoffsets", "latest" if streaming else "earliest")
        ending = _offsets_option(opts, "endingoffsets", "latest")
        if streaming and "endingoffsets" in opts:
            raise SluiceOptionError("option endingOffsets is for batch queries only")
        if not streaming:
            if starting == "latest":
                raise SluiceOptionError("startingOffsets=latest is for streaming queries only")
            if ending == "earliest":
                raise SluiceOptionError("endingOffsets=earliest is for streaming queries only")
            if isinstance(starting, dict) and LATEST in starting.values():
                raise SluiceOptionError("startingOffsets: -1 (latest) is not allowed in batch")
            if isinstance(ending, dict) and EARLIEST in ending.values():
                raise SluiceOptionError("endingOffsets: -2 (earliest) is not allowed")
        max_per_trigger = None
        if "maxoffsetspertrigger" in opts:
            try:
                max_per_trigger = int(opts["maxoffsetspertrigger"])
            except ValueError:
                max_per_trigger = 0
            if max_per_trigger <= 0:
                raise SluiceOptionError("option maxOffsetsPerTrigger must be a positive integer")
        try:
            poll_ms = float(opts.get("kafkaconsumer.polltimeoutms", "120000"))
        except ValueError:
            raise SluiceOptionError("option kafkaConsumer.pollTimeoutMs must be a number") from None
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
