"""``ClusterView``: what the console shows and changes, through Kafka's protocol.

One view holds the Kafka clients of one console login — Sluice's :class:`Admin` and,
once records are browsed, a :class:`Consumer` without a group — connected to the
broker's own listener with that login's credentials, so every answer and every change
passes the same authentication and ACL checks as any other client's request. Its
methods block (run them off the event loop) and return plain JSON-ready values; a
Kafka error is raised as the client's exception (``exc.code`` is Kafka's error code).
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluice.client.admin import Admin, ConfigEntry, NewTopic
from sluice.client.consumer.consumer import Consumer, TopicPartition
from sluice.client.errors import KafkaException, exception_for
from sluice.protocol import ErrorCode

__all__ = ["MAX_RECORDS", "RECORD_FIELD_BYTES", "ClusterView"]

MAX_RECORDS: Final = 200
"""The most records one browse returns."""
RECORD_FIELD_BYTES: Final = 16 * 1024
"""A key, value or header value longer than this is cut (its full size is given)."""
BROWSE_TIMEOUT_S: Final = 5.0
"""The longest one browse waits for its records."""
_CONFIG_SOURCES: Final = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}  # fmt: skip


def _bytes(data: bytes | None) -> dict[str, Any] | None:
    """A key, value or header value for JSON: base64 (cut to RECORD_FIELD_BYTES) and size."""
    if data is None:
        return None
    cut = data[:RECORD_FIELD_BYTES]
    return {"base64": base64.b64encode(cut).decode("ascii"), "size": len(data),
            "truncated": len(cut) < len(data)}  # fmt: skip


def _config(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": None if entry.is_sensitive else entry.value,
        "source": _CONFIG_SOURCES.get(entry.source, "UNKNOWN"),
        "is_default": entry.is_default,
        "read_only": entry.read_only,
        "sensitive": entry.is_sensitive,
    }


class ClusterView:
    """The Kafka clients of one console login, made with the client settings ``config``
    (bootstrap servers, security protocol, SASL credentials)."""

    def __init__(self, config: Mapping[str, Any], *, client_id: str = "sluice-console") -> None:
        self._config = {**config, "client.id": client_id}
        self.admin = Admin(
            {**self._config, "request.timeout.ms": 10_000, "default.api.timeout.ms": 15_000}
        )
        self._consumer: Consumer | None = None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.admin.close()
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close(autocommit=False)

    # -- cluster ---------------------------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        """DescribeCluster: the cluster id, the controller and the live brokers."""
        description = self.admin.describe_cluster()
        return {
            "cluster_id": description.cluster_id,
            "controller_id": description.controller_id,
            "brokers": [
                {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in sorted(description.brokers, key=lambda b: b.node_id)
            ],
        }

    # -- topics ----------------------------------------------------------------------------

    def _sizes(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, int]:
        """Each partition's log size in bytes, its largest replica's (DescribeLogDirs,
        which needs DESCRIBE on the cluster: nothing without it)."""
        try:
            dirs = self.admin.describe_log_dirs(partitions=partitions)
        except KafkaException as exc:
            if exc.code == ErrorCode.cluster_authorization_failed:
                return {}
            raise
        sizes: dict[TopicPartition, int] = {}
        for broker_dirs in dirs.values():
            for log_dir in broker_dirs.values():
                for tp, replica in log_dir.replicas.items():
                    if not replica.is_future:
                        sizes[tp] = max(sizes.get(tp, 0), replica.size)
        return sizes

    def topics(self, internal: bool = False) -> list[dict[str, Any]]:
        """Every topic the login may describe: partitions, replication, under-replicated
        partitions and size (None when the login may not describe the cluster)."""
        names = self.admin.list_topics(internal=internal)
        descriptions = self.admin.describe_topics(names) if names else {}
        sizes = self._sizes(None)
        out = []
        for name in names:
            description = descriptions.get(name)
            if description is None:
                continue
            parts = description.partitions
            size = [sizes.get(TopicPartition(name, p.partition)) for p in parts]
            out.append({
                "name": name,
                "internal": description.internal,
                "partitions": len(parts),
                "replication_factor": max((len(p.replicas) for p in parts), default=0),
                "under_replicated": sum(len(p.isr) < len(p.replicas) for p in parts),
                "offline": sum(p.leader < 0 for p in parts),
                "size_bytes": None if any(s is None for s in size) else sum(s or 0 for s in size),
            })  # fmt: skip
        return out

    def topic(self, name: str) -> dict[str, Any]:
        """One topic: its partitions (leader, replicas, ISR, start and end offsets,
        size) and its configs."""
        description = self.admin.describe_topics([name])[name]
        tps = [TopicPartition(name, p.partition) for p in description.partitions]
        starts = self.admin.list_offsets(tps, "earliest") if tps else {}
        ends = self.admin.list_offsets(tps, "latest") if tps else {}
        sizes = self._sizes(tps)
        configs: list[dict[str, Any]] | None
        try:
            entries = self.admin.describe_configs(topics=[name])[(2, name)]
            configs = [_config(e) for e in sorted(entries.values(), key=lambda e: e.name)]
        except KafkaException as exc:
            if exc.code != ErrorCode.topic_authorization_failed:
                raise
            configs = None  # DESCRIBE_CONFIGS not granted
        partitions = [
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "start_offset": starts.get(tp),
                "end_offset": ends.get(tp),
                "size_bytes": sizes.get(tp),
            }
            for p, tp in zip(description.partitions, tps, strict=True)
        ]
        return {"name": name, "internal": description.internal, "partitions": partitions,
                "configs": configs}  # fmt: skip

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> dict[str, Any]:
        created = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor, dict(configs))]
        )
        return {"name": name, "partitions": created.get(name, partitions)}

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topics([name])

    def alter_topic_configs(
        self, name: str, set_: Mapping[str, str], delete: Iterable[str]
    ) -> list[dict[str, Any]]:
        """IncrementalAlterConfigs: set some keys, remove the overrides of others; the
        configs afterwards."""
        changes: dict[str, str | None] = {**dict(set_), **{key: None for key in delete}}
        self.admin.alter_configs({name: changes})
        entries = self.admin.describe_configs(topics=[name])[(2, name)]
        return [_config(e) for e in sorted(entries.values(), key=lambda e: e.name)]

    # -- records ---------------------------------------------------------------------------

    def _browser(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                {**self._config, "enable.auto.commit": False, "fetch.max.wait.ms": 100,
                 "max.poll.records": MAX_RECORDS, "request.timeout.ms": 10_000}
            )  # fmt: skip
        return self._consumer

    def records(self, topic: str, partition: int, limit: int) -> dict[str, Any]:
        """The newest ``limit`` records of a partition below its high watermark (fewer
        where a compacted log or transaction markers leave gaps), oldest first."""
        tp = TopicPartition(topic, partition)
        if partition not in {p.partition for p in self.admin.describe_topics([topic])[topic]
                             .partitions}:  # fmt: skip
            raise exception_for(ErrorCode.unknown_topic_or_partition, f"no partition {tp}")
        start = self.admin.list_offsets([tp], "earliest").get(tp) or 0
        end = self.admin.list_offsets([tp], "latest").get(tp) or 0
        first = max(start, end - limit)
        out: list[dict[str, Any]] = []
        if end > first:
            consumer = self._browser()
            consumer.assign([tp])
            try:
                consumer.seek(tp, first)
                deadline = time.monotonic() + BROWSE_TIMEOUT_S
                while time.monotonic() < deadline:
                    for record in consumer.poll(0.2):
                        if first <= record.offset < end:
                            out.append({
                                "offset": record.offset,
                                "timestamp": record.timestamp,
                                "timestamp_type": record.timestamp_type,
                                "key": _bytes(record.key),
                                "value": _bytes(record.value),
                                "headers": [{"key": k, "value": _bytes(v)}
                                            for k, v in record.headers],
                            })  # fmt: skip
                    if consumer.position(tp, timeout=1.0) >= end:
                        break
            finally:
                consumer.assign([])
        return {"topic": topic, "partition": partition, "start_offset": start,
                "end_offset": end, "records": out[-limit:]}  # fmt: skip

    # -- groups ----------------------------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        """Every group the login may describe, with its state and member count."""
        listings = self.admin.list_groups()
        out = []
        for listing in listings:
            members: int | None = None
            with contextlib.suppress(KafkaException):
                described = self.admin.describe_groups([listing.group_id])
                members = len(described[listing.group_id].members)
            out.append({"group_id": listing.group_id, "protocol_type": listing.protocol_type,
                        "state": listing.state, "members": members})  # fmt: skip
        return out

    def group(self, group_id: str) -> dict[str, Any]:
        """One group: its members and their assignments, and per partition its committed
        offset, the partition's end offset and the lag between them."""
        description = self.admin.describe_groups([group_id])[group_id]
        if description.state == "Dead":
            raise exception_for(ErrorCode.group_id_not_found, f"group {group_id} does not exist")
        committed = self.admin.list_group_offsets(group_id)
        ends = self.admin.list_offsets(list(committed), "latest") if committed else {}
        offsets = []
        for tp, om in sorted(committed.items()):
            end = ends.get(tp)
            offsets.append({
                "topic": tp.topic, "partition": tp.partition, "committed": om.offset,
                "end_offset": end, "lag": None if end is None else max(end - om.offset, 0),
                "metadata": om.metadata,
            })  # fmt: skip
        return {
            "group_id": group_id,
            "state": description.state,
            "protocol_type": description.protocol_type,
            "protocol": description.protocol,
            "members": [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "group_instance_id": m.group_instance_id,
                    "assignment": [{"topic": t, "partition": p} for t, p in sorted(m.assignment)],
                }
                for m in description.members
            ],
            "offsets": offsets,
        }

    def reset_group_offsets(
        self, group_id: str, to: str, offset: int | None, topic: str | None
    ) -> dict[str, Any]:
        """kafka-consumer-groups --reset-offsets --execute for the group's committed
        partitions (of ``topic`` only, if given): ``to`` is earliest, latest or offset.
        Refused (NON_EMPTY_GROUP) while the group has members, as Kafka's tool does."""
        description = self.admin.describe_groups([group_id])[group_id]
        if description.state not in ("Empty", "Dead"):
            raise exception_for(
                ErrorCode.non_empty_group,
                f"group {group_id} is {description.state}: stop its consumers first",
            )
        committed = sorted(self.admin.list_group_offsets(group_id))
        tps = [tp for tp in committed if topic is None or tp.topic == topic]
        if topic is not None and not tps:  # a topic the group has not committed yet
            parts = self.admin.describe_topics([topic])[topic].partitions
            tps = [TopicPartition(topic, p.partition) for p in parts]
        if not tps:
            raise exception_for(
                ErrorCode.invalid_request, f"group {group_id} has no committed offsets to reset"
            )
        if to == "offset":
            assert offset is not None
            starts = self.admin.list_offsets(tps, "earliest")
            ends = self.admin.list_offsets(tps, "latest")
            targets = {  # clamped into the log, as Kafka's tool does
                tp: min(max(offset, starts.get(tp) or 0), ends.get(tp) or 0) for tp in tps
            }
        else:
            found = self.admin.list_offsets(tps, to)
            targets = {tp: found.get(tp) or 0 for tp in tps}
        self.admin.alter_group_offsets(group_id, targets)
        return {"group_id": group_id, "offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": o}
            for tp, o in sorted(targets.items())
        ]}  # fmt: skip
