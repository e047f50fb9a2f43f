"""The tools' Kafka client interface: the only module that touches a client library.

For now this wraps confluent-kafka (librdkafka). The rest of the tools see only
:class:`Admin`, :class:`Producer`, :class:`Consumer` and the library-neutral
names of :mod:`~sluice.tools_impl.client_types` (re-exported here), so swapping
in Sluice's own client later means rewriting this module alone.

Every client first fetches metadata: if no bootstrap broker answers, that fails
fast with one line ("cannot connect to host:port: Connection refused") instead
of librdkafka retrying and logging for the whole request timeout. librdkafka's
own log lines are off; its error events become ``warn`` calls, once each.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sluice.tools_impl.client_types import (
    EARLIEST,
    LATEST,
    ClientError,
    Headers,
    PartitionDescription,
    Record,
    StartOffset,
    TopicDescription,
    Warn,
)

if TYPE_CHECKING:
    import confluent_kafka

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "ClientError",
    "Consumer",
    "PartitionDescription",
    "Producer",
    "Record",
    "StartOffset",
    "TopicDescription",
]

REQUEST_TIMEOUT_S = 30.0  # one admin request or metadata fetch
GROUP_PROBE_TIMEOUT_S = 5.0  # finding the group coordinator and its committed offsets
_CONNECT_STEP_S = 0.25


def _kafka() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ClientError(
            "the tools need the confluent-kafka package for now: pip install confluent-kafka"
        ) from exc
    return confluent_kafka


def _error(exc: BaseException) -> ClientError:
    """A ClientError from a KafkaException (or anything else) with a one-line message."""
    if isinstance(exc, ClientError):
        return exc
    args = getattr(exc, "args", ())
    err = args[0] if args else None
    if err is not None and hasattr(err, "str") and hasattr(err, "name"):
        return ClientError(err.str() or err.name(), err.name())
    return ClientError(str(exc) or type(exc).__name__)


def _wait(future: Future[Any]) -> Any:
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S + 5)
    except Exception as exc:
        raise _error(exc) from exc


def _uuid_text(uuid: Any) -> str:
    """Kafka prints ids as URL-safe base64 (librdkafka's str() uses '+' and '/')."""
    high = uuid.get_most_significant_bits() & (2**64 - 1)
    low = uuid.get_least_significant_bits() & (2**64 - 1)
    raw = high.to_bytes(8, "big") + low.to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _headers(raw: Any) -> Headers:
    """A message's headers (librdkafka gives a list of pairs, or None)."""
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    return [(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in items]


_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)$")
_TRANSPORT_NOISE = re.compile(
    r"^\S+/(?:bootstrap|\d+): (?:Connect to \S+ failed: )?|\s*\(after .*\)$"
)


class _Watch:
    """librdkafka's error events (served by poll): the last transport error, whether
    every broker is down, and warnings (once per text) after the first connection."""

    def __init__(self, bootstrap: str, warn: Warn | None) -> None:
        self.bootstrap = bootstrap
        self.warn = warn
        self.connected = False
        self.all_down = False
        self.last_transport: str | None = None
        self._seen: set[str] = set()

    def __call__(self, err: Any) -> None:
        name = err.name()
        if name == "_ALL_BROKERS_DOWN":
            self.all_down = True
            return
        text = err.str() or name
        if name in ("_TRANSPORT", "_RESOLVE"):
            self.last_transport = _TRANSPORT_NOISE.sub("", text)
        text = _AFTER.sub("", text)  # "(after 3ms in state CONNECT)" varies; say it once
        if self.connected and self.warn is not None and text not in self._seen:
            self._seen.add(text)
            self.warn(text)

    def config(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "error_cb": self,
            "log_level": 0,  # errors arrive through error_cb instead
            "log.connection.close": False,
        }
        settings.update(overrides)
        return settings

    def connect(self, client: Any, poll: Callable[[], Any]) -> Any:
        """Cluster metadata, failing fast when no bootstrap broker can be reached."""
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        step = _CONNECT_STEP_S
        while True:
            try:
                metadata = client.list_topics(timeout=step)
            except Exception as exc:
                step = min(step * 2, 2.0)
                error = _error(exc)
                poll()
                if self.all_down or error.code in ("_RESOLVE", "_INVALID_ARG"):
                    detail = self.last_transport or str(error)
                    raise ClientError(f"cannot connect to {self.bootstrap}: {detail}",
                                      "_ALL_BROKERS_DOWN") from exc  # fmt: skip
                if time.monotonic() > deadline:
                    raise ClientError(f"no response from {self.bootstrap}: {error}",
                                      error.code) from exc  # fmt: skip
                continue
            self.connected = True
            return metadata


class Admin:
    """Topic administration: list, describe, create, delete, add partitions, configs."""

    def __init__(
        self, bootstrap: str, config: Mapping[str, str] | None = None, warn: Warn | None = None
    ) -> None:
        self._mod = _kafka().admin
        self._watch = _Watch(bootstrap, warn)
        try:
            self._admin = self._mod.AdminClient(self._watch.config(config or {}))
        except Exception as exc:
            raise _error(exc) from exc
        self._watch.connect(self._admin, lambda: self._admin.poll(0))

    def list_topics(self) -> list[str]:
        try:
            metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        except Exception as exc:
            raise _error(exc) from exc
        return sorted(metadata.topics)

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        """Descriptions in the order given; raises ClientError for an unknown topic."""
        if not names:
            return []
        collection = _kafka().TopicCollection(list(names))
        futures = self._admin.describe_topics(collection, request_timeout=REQUEST_TIMEOUT_S)
        result = []
        for name in names:
            desc = _wait(futures[name])
            partitions = [
                PartitionDescription(
                    p.id,
                    p.leader.id if p.leader is not None else -1,
                    [n.id for n in p.replicas],
                    [n.id for n in p.isr],
                )
                for p in sorted(desc.partitions, key=lambda p: p.id)
            ]
            result.append(
                TopicDescription(desc.name, _uuid_text(desc.topic_id), desc.is_internal, partitions)
            )
        return result

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's non-default configs (overrides and broker-level settings), by name."""
        resource = self._mod.ConfigResource(self._mod.ResourceType.TOPIC, name)
        futures = self._admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
        entries = _wait(futures[resource])
        return {
            e.name: e.value if e.value is not None else ""
            for e in sorted(entries.values(), key=lambda e: e.name)
            if not e.is_default
        }

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> None:
        """None means the broker's default (num.partitions, default.replication.factor)."""
        topic = self._mod.NewTopic(
            name,
            num_partitions=-1 if partitions is None else partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            config=dict(configs),
        )
        self._run_one(self._admin.create_topics, [topic], name)

    def delete_topic(self, name: str) -> None:
        self._run_one(self._admin.delete_topics, [name], name)

    def create_partitions(self, name: str, total: int) -> None:
        self._run_one(self._admin.create_partitions, [self._mod.NewPartitions(name, total)], name)

    def alter_topic_configs(
        self, name: str, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None:
        """Set and remove topic overrides, leaving the others as they are."""
        mod = self._mod
        entries = [
            mod.ConfigEntry(k, v, incremental_operation=mod.AlterConfigOpType.SET)
            for k, v in set_.items()
        ] + [
            mod.ConfigEntry(k, None, incremental_operation=mod.AlterConfigOpType.DELETE)
            for k in delete
        ]
        resource = mod.ConfigResource(mod.ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self._admin.incremental_alter_configs(
            [resource], request_timeout=REQUEST_TIMEOUT_S
        )
        _wait(futures[resource])

    def _run_one(self, call: Callable[..., Any], items: list[Any], key: str) -> None:
        try:
            futures = call(
                items, request_timeout=REQUEST_TIMEOUT_S, operation_timeout=REQUEST_TIMEOUT_S
            )
        except Exception as exc:
            raise _error(exc) from exc
        _wait(futures[key])


class Producer:
    """Sends records; delivery failures are counted, the first one kept for the report."""

    def __init__(
        self, bootstrap: str, config: Mapping[str, str] | None = None, warn: Warn | None = None
    ) -> None:
        self._watch = _Watch(bootstrap, warn)
        try:
            self._producer: confluent_kafka.Producer = _kafka().Producer(
                self._watch.config(config or {})
            )
        except Exception as exc:
            raise _error(exc) from exc
        self._watch.connect(self._producer, lambda: self._producer.poll(0))
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = err.str() or err.name()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one record, waiting for room in the local queue if it is full."""
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, **kwargs)
            except BufferError:
                self._producer.poll(0.1)
                continue
            except Exception as exc:
                raise _error(exc) from exc
            break
        self._producer.poll(0)

    def flush(self) -> int:
        """Wait for outstanding deliveries (bounded by delivery.timeout.ms); returns how
        many are still undelivered."""
        return int(self._producer.flush())


class Consumer:
    """Reads records from assigned partitions, or through a consumer group."""

    def __init__(
        self,
        bootstrap: str,
        group: str | None,
        config: Mapping[str, str] | None = None,
        warn: Warn | None = None,
    ) -> None:
        kafka = _kafka()
        self._kafka = kafka
        self.group = group
        self._watch = _Watch(bootstrap, warn)
        settings = {
            # confluent-kafka insists on a group id; without --group none is ever
            # used for coordination or commits, only direct assignment.
            "group.id": group or "sluice-console-consumer",
            "enable.auto.commit": "true" if group is not None else "false",
            "enable.auto.offset.store": "true" if group is not None else "false",
            "allow.auto.create.topics": "false",
        }
        settings.update(config or {})
        try:
            self._consumer: confluent_kafka.Consumer = kafka.Consumer(self._watch.config(settings))
        except Exception as exc:
            raise _error(exc) from exc
        # No assignment yet, so polling only serves error events.
        self._watch.connect(self._consumer, lambda: self._consumer.poll(0))

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids; raises ClientError if it does not exist."""
        try:
            metadata = self._consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        except Exception as exc:
            raise _error(exc) from exc
        info = metadata.topics.get(topic)
        err = getattr(info, "error", None)
        if info is None or err is not None:
            if err is not None and err.name() != "UNKNOWN_TOPIC_OR_PART":
                raise ClientError(f"topic '{topic}': {err.str()}", err.name())
            raise ClientError(f"Topic '{topic}' does not exist", "UNKNOWN_TOPIC_OR_PART")
        return sorted(info.partitions)

    def check_group(self, topic: str, partitions: Sequence[int]) -> None:
        """Fail fast unless the group's coordinator answers (fetching committed offsets)."""
        tps = [self._kafka.TopicPartition(topic, p) for p in partitions]
        try:
            self._consumer.committed(tps, timeout=GROUP_PROBE_TIMEOUT_S)
        except Exception as exc:
            raise ClientError(
                f"no answer from the coordinator of group '{self.group}' (does the broker "
                f"support consumer groups?): {_error(exc)}",
                "COORDINATOR_NOT_AVAILABLE",
            ) from exc

    def assign(self, topic: str, partitions: Sequence[int], start: StartOffset) -> None:
        kafka = self._kafka
        if start == EARLIEST:
            offset = kafka.OFFSET_BEGINNING
        elif start == LATEST:
            offset = kafka.OFFSET_END
        else:
            offset = int(start)
        try:
            self._consumer.assign([kafka.TopicPartition(topic, p, offset) for p in partitions])
        except Exception as exc:
            raise _error(exc) from exc

    def subscribe(self, topic: str) -> None:
        try:
            self._consumer.subscribe([topic])
        except Exception as exc:
            raise _error(exc) from exc

    def poll(self, timeout_s: float) -> Record | None:
        """The next record, or None after ``timeout_s``; raises ClientError on fatal errors
        (non-fatal ones, like a partition end or a transient broker error, give None)."""
        try:
            msg = self._consumer.poll(timeout_s)
        except Exception as exc:
            raise _error(exc) from exc
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.fatal() or err.name() in ("UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED"):
                raise ClientError(err.str() or err.name(), err.name())
            return None
        ts_type, ts = msg.timestamp()
        kind = {1: "CreateTime", 2: "LogAppendTime"}.get(ts_type)
        return Record(
            topic=msg.topic() or "",
            partition=msg.partition() or 0,
            offset=msg.offset() or 0,
            timestamp_type=kind,
            timestamp=ts if kind is not None else -1,
            key=msg.key(),
            value=msg.value(),
            headers=_headers(msg.headers()),
        )

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception as exc:
            raise _error(exc) from exc
