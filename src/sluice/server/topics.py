"""``TopicRegistry``: topics, their partition assignments and config overrides.

A broker keeps them in ``__sluice_topics.json`` in its first log dir (written atomically;
a failed write raises ``KafkaStorageException`` and takes that dir offline): on a
single node every topic, created and deleted by its topic admin; in a cluster, where
ZooKeeper holds the topics, the ones this broker hosts a replica of, recorded as the
controller assigns and removes them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from pathlib import Path
from typing import Any

from sluice.config import ConfigError, validate_topic_configs
from sluice.log.checkpoint import write_atomically
from sluice.log.errors import KafkaStorageException
from sluice.log.log_dir_failure_channel import LogDirFailureChannel, describe_os_error
from sluice.replication.metadata_cache import INTERNAL_TOPICS

__all__ = [
    "EXCESSIVE_BATCH_MESSAGE",
    "MAX_PARTITIONS_PER_REQUEST",
    "InvalidReplicaAssignment",
    "InvalidReplicationFactor",
    "InvalidRequest",
    "InvalidTopicError",
    "PolicyViolation",
    "TopicInfo",
    "TopicRegistry",
    "validate_topic_name",
]

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249

MAX_PARTITIONS_PER_REQUEST = 10_000
"""Partitions one CreateTopics or CreatePartitions request may create, as Kafka's
controller bounds the records of one operation (``MAX_RECORDS_PER_USER_OP``); beyond it
every topic of the request is answered POLICY_VIOLATION with Kafka's message."""
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


class InvalidReplicationFactor(ValueError):
    """INVALID_REPLICATION_FACTOR."""


class InvalidReplicaAssignment(ValueError):
    """INVALID_REPLICA_ASSIGNMENT."""


class InvalidRequest(ValueError):
    """INVALID_REQUEST."""


class InvalidTopicError(ValueError):
    """A topic name Kafka would reject, or an operation refused on an internal topic
    (INVALID_TOPIC_EXCEPTION)."""


class PolicyViolation(ValueError):
    """What the broker's policy refuses (POLICY_VIOLATION): topic configs under which an
    internal topic would lose records, more partitions than ``max.broker.partitions``."""


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
        )
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


@dataclasses.dataclass
class TopicInfo:
    """A topic: its id, replica assignment per partition and config overrides."""

    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    configs: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "assignment": {str(p): r for p, r in self.assignment.items()},
            "configs": self.configs,
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> TopicInfo:
        return cls(
            name,
            uuid.UUID(data["topic_id"]),
            {int(p): list(r) for p, r in data["assignment"].items()},
            dict(data.get("configs", {})),
        )


class TopicRegistry:
    """The topics of a broker (see the module), persisted next to the logs."""

    FILE = "__sluice_topics.json"

    def __init__(
        self, directory: Path, failure_channel: LogDirFailureChannel | None = None
    ) -> None:
        """``failure_channel``: where a failed write reports ``directory`` (a log dir)."""
        self._path = directory / self.FILE
        self._failure_channel = failure_channel
        self.topics: dict[str, TopicInfo] = {}
        if self._path.exists():
            data = json.loads(self._path.read_text(encoding="utf-8"))
            self.topics = {n: TopicInfo.from_json(n, t) for n, t in data["topics"].items()}

    @property
    def writable(self) -> bool:
        """Whether the registry's log dir is online (its writes can be tried)."""
        channel = self._failure_channel
        return channel is None or not channel.has_offline_log_dir(self._path.parent)

    def _save(self) -> None:
        """Write the file atomically. An I/O error takes its log dir offline (reported to
        the failure channel) and raises ``KafkaStorageException``; the file keeps its
        previous contents."""
        payload = {"version": 1, "topics": {n: t.to_json() for n, t in self.topics.items()}}
        # json's C encoder (no indent): 20,000 partitions in about 10 ms
        data = json.dumps(payload, sort_keys=True).encode()
        try:
            write_atomically(self._path, data)
        except OSError as exc:
            if self._failure_channel is not None:
                self._failure_channel.maybe_add_offline_log_dir(
                    self._path.parent, "writing the topic registry", exc
                )
            raise KafkaStorageException(
                f"cannot write {self._path}: {describe_os_error(exc)}"
            ) from exc

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def create(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: dict[str, str],
        validate_only: bool = False,
    ) -> TopicInfo:
        """Register a topic (raises InvalidTopicError, ConfigError, FileExistsError)."""
        validate_topic_name(name)
        if name in self.topics:
            raise FileExistsError(f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for existing in self.topics:
            if existing.replace(".", "_") == collision:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")
        validate_topic_configs(configs)
        info = TopicInfo(name, uuid.uuid4(), assignment, dict(configs))
        if not validate_only:
            self.topics[name] = info
            try:
                self._save()
            except KafkaStorageException:
                del self.topics[name]  # not created
                raise
        return info

    def put(self, info: TopicInfo) -> None:
        """Record a topic as it is (checked by the caller); not recorded if the file
        cannot be written."""
        previous = self.topics.get(info.name)
        self.topics[info.name] = info
        try:
            self._save()
        except BaseException:
            if previous is None:
                del self.topics[info.name]
            else:
                self.topics[info.name] = previous
            raise

    def delete(self, name: str) -> TopicInfo | None:
        info = self.topics.pop(name, None)
        if info is not None:
            self._save()
        return info

    def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicInfo:
        """Add partitions to a topic; not added if the file cannot be written."""
        info = self.topics[name]
        info.assignment.update(new)
        try:
            self._save()
        except BaseException:
            for partition in new:
                del info.assignment[partition]
            raise
        return info

    def remove_partition(self, name: str, partition: int) -> None:
        """Forget one partition of a topic; the topic goes with its last partition."""
        info = self.topics.get(name)
        if info is None:
            return
        info.assignment.pop(partition, None)
        if not info.assignment:
            self.delete(name)
        else:
            self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides (validated first)."""
        try:
            validate_topic_configs(configs)
        except ConfigError:
            raise
        self.topics[name].configs = dict(configs)
        self._save()
