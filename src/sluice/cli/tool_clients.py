"""The tools' Kafka client interface: the only module that touches a client library.

This wraps Sluice's own clients (:mod:`sluice.client`). The rest of the tools see
only :class:`Admin`, :class:`Producer`, :class:`Consumer` and the library-neutral
names of :mod:`~sluice.cli.tool_types` (re-exported here).

Every client first checks that a bootstrap broker accepts connections: if none
does, that fails fast with one line ("cannot connect to host:port: Connection
refused") instead of retrying for the whole request timeout. The clients' own
warnings (logged under ``sluice.client``) become ``warn`` calls, once per text.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import logging
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sluice.cli.tool_types import (
    EARLIEST,
    LATEST,
    ClientError,
    ConfigValue,
    GroupDescription,
    GroupMember,
    GroupPartitionLag,
    Headers,
    LogDirInfo,
    LogDirReplica,
    PartitionDescription,
    Record,
    StartOffset,
    TopicDescription,
    Warn,
)
from sluice.security.acl import AclBinding, AclBindingFilter

if TYPE_CHECKING:
    from sluice.client.admin import ProducerState, TransactionDescription, TransactionListing

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "ClientError",
    "ConfigValue",
    "Consumer",
    "GroupDescription",
    "GroupMember",
    "GroupPartitionLag",
    "LogDirInfo",
    "LogDirReplica",
    "PartitionDescription",
    "Producer",
    "Record",
    "StartOffset",
    "TopicDescription",
]

REQUEST_TIMEOUT_S = 30.0  # one admin request or metadata fetch
GROUP_PROBE_TIMEOUT_S = 5.0  # finding the group coordinator and its committed offsets
_CONNECT_TIMEOUT_S = 5.0
_DEFAULT_MAX_BLOCK_MS = 60_000


def _error(exc: BaseException) -> ClientError:
    """A ClientError from a Sluice client exception (or anything else), one line."""
    if isinstance(exc, ClientError):
        return exc
    from sluice.client.errors import UnsupportedVersionException
    from sluice.protocol import ErrorCode

    message = str(exc) or type(exc).__name__
    # Admin errors read "CreateTopics t: Topic 't' already exists."; keep the reason.
    head, sep, tail = message.partition(": ")
    if sep and tail and head.split(" ")[0].isalpha() and head[:1].isupper() and " " in head:
        message = tail
    if isinstance(exc, UnsupportedVersionException):
        return ClientError(message, "_UNSUPPORTED_FEATURE")
    code = getattr(exc, "code", None)
    name = ""
    if isinstance(code, int) and code:
        try:
            name = ErrorCode(code).name.upper()
        except ValueError:
            name = str(code)
    return ClientError(" ".join(message.splitlines()), name)


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            out.append((host or "localhost", int(port or 9092)))
        except ValueError as exc:
            raise ClientError(
                f"invalid bootstrap server {server.strip()!r}", "_INVALID_ARG"
            ) from exc
    if not out:
        raise ClientError("no bootstrap server given", "_INVALID_ARG")
    return out


def _probe(bootstrap: str) -> None:
    """Fail fast unless some bootstrap broker accepts a TCP connection."""
    last: OSError | None = None
    for host, port in _servers(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            last = exc
    detail = (last.strerror if last is not None else None) or str(last)
    raise ClientError(f"cannot connect to {bootstrap}: {detail}", "_ALL_BROKERS_DOWN")


def _uuid_text(uuid: Any) -> str:
    """Kafka prints ids as URL-safe base64 without padding."""
    raw = uuid.bytes if uuid is not None else bytes(16)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class _WarnHandler(logging.Handler):
    """Forwards the clients' warnings to ``warn``, once per text."""

    def __init__(self, warn: Warn) -> None:
        super().__init__(logging.WARNING)
        self.warn = warn
        self._seen: set[str] = set()
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # pragma: no cover - a bad log call
            return
        with self._lock2:
            if text in self._seen:
                return
            self._seen.add(text)
        self.warn(text)


def _watch(warn: Warn | None) -> _WarnHandler | None:
    if warn is None:
        return None
    handler = _WarnHandler(warn)
    log = logging.getLogger("sluice.client")
    log.addHandler(handler)
    log.propagate = False
    return handler


def _unwatch(handler: _WarnHandler | None) -> None:
    if handler is not None:
        log = logging.getLogger("sluice.client")
        log.removeHandler(handler)
        if not log.handlers:
            log.propagate = True


class Admin:
    """Topic and group administration."""

    def __init__(
        self, bootstrap: str, config: Mapping[str, str] | None = None, warn: Warn | None = None
    ) -> None:
        from sluice.client import Admin as SluiceAdmin

        _probe(bootstrap)
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "request.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
        }
        settings.update(config or {})
        try:
            self._admin = SluiceAdmin(settings)
            self._admin._client.refresh_metadata([])
        except Exception as exc:
            raise _error(exc) from exc

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise _error(exc) from exc

    def alter_user_scram_credentials(
        self, user: str, upsertions: Mapping[str, tuple[str, int]], deletions: Sequence[str]
    ) -> None:
        """Set ``user``'s credentials (mechanism -> (password, iterations)) and delete
        those of ``deletions``."""
        from sluice.client.admin import UserScramCredentialDeletion as Deletion
        from sluice.client.admin import UserScramCredentialUpsertion as Upsertion

        self._call(
            self._admin.alter_user_scram_credentials,
            [Upsertion(user, m, password, iterations)
             for m, (password, iterations) in upsertions.items()],
            [Deletion(user, m) for m in deletions],
        )  # fmt: skip

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None
    ) -> dict[str, list[tuple[str, int]]]:
        """User -> (mechanism, iterations) of each credential; every user for None."""
        return dict(self._call(self._admin.describe_user_scram_credentials, users))

    def list_topics(self) -> list[str]:
        return list(self._call(self._admin.list_topics, internal=True))

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        """Descriptions in the order given; raises ClientError for an unknown topic."""
        if not names:
            return []
        body = self._call(self._admin._client.refresh_metadata, list(names))
        by_name = {t.name: t for t in body.topics}
        result = []
        for name in names:
            t = by_name.get(name)
            if t is None or t.error_code:
                code = "UNKNOWN_TOPIC_OR_PART" if t is None else _code_name(int(t.error_code))
                raise ClientError(f"Topic '{name}' does not exist", code)
            partitions = [
                PartitionDescription(
                    int(p.partition_index),
                    int(p.leader_id),
                    [int(r) for r in p.replica_nodes],
                    [int(r) for r in p.isr_nodes],
                )
                for p in sorted(t.partitions, key=lambda p: int(p.partition_index))
            ]
            result.append(
                TopicDescription(name, _uuid_text(t.topic_id), bool(t.is_internal), partitions)
            )
        return result

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's non-default configs (overrides and broker-level settings), by name."""
        from sluice.client.admin import RESOURCE_TOPIC

        configs = self._call(self._admin.describe_configs, topics=[name])
        entries = configs.get((RESOURCE_TOPIC, name), {})
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
        from sluice.client import NewTopic

        topic = NewTopic(
            name,
            num_partitions=-1 if partitions is None else partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            config=dict(configs),
        )
        self._call(self._admin.create_topics, [topic])

    def delete_topic(self, name: str) -> None:
        self._call(self._admin.delete_topics, [name])

    def create_partitions(self, name: str, total: int) -> None:
        self._call(self._admin.create_partitions, {name: total})

    def alter_topic_configs(
        self, name: str, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None:
        """Set and remove topic overrides, leaving the others as they are."""
        changes: dict[str, str | None] = dict(set_)
        changes.update({k: None for k in delete})
        self._call(self._admin.alter_configs, {name: changes})

    # -- ACLs --------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        self._call(self._admin.create_acls, bindings)

    def describe_acls(self, filter_: AclBindingFilter) -> list[AclBinding]:
        return list(self._call(self._admin.describe_acls, filter_))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        return list(self._call(self._admin.delete_acls, filters))

    # -- configs and client quotas (sluice configs) ---------------------------------------

    def broker_ids(self) -> list[int]:
        """The live brokers' ids."""
        return sorted(b.node_id for b in self._call(self._admin.describe_cluster).brokers)

    def describe_configs(self, resource_type: int, name: str) -> list[ConfigValue]:
        """A topic's (2) or broker's (4) configs with their sources and synonyms."""
        from sluice.protocol import ApiKey

        body = self._call(
            self._admin._client.send, _config_node(resource_type, name), ApiKey.DESCRIBE_CONFIGS,
            resources=[{"resource_type": resource_type, "resource_name": name,
                        "configuration_keys": None}],
            include_synonyms=True, include_documentation=False,
        )  # fmt: skip
        (result,) = body.results
        if result.error_code:
            raise ClientError(
                result.error_message or _code_name(int(result.error_code)),
                _code_name(int(result.error_code)),
            )
        return [
            ConfigValue(
                c.name,
                c.value,
                _config_source(int(c.config_source)),
                bool(c.is_sensitive),
                [(_config_source(int(y.source)), y.name, y.value) for y in c.synonyms or ()],
            )
            for c in result.configs
        ]

    def alter_configs(
        self, resource_type: int, name: str, set_: Mapping[str, str], delete: Sequence[str]
    ) -> None:
        """IncrementalAlterConfigs: SET ``set_``, DELETE ``delete`` on one resource."""
        from sluice.protocol import ApiKey

        configs = [{"name": k, "config_operation": 0, "value": v} for k, v in set_.items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = self._call(
            self._admin._client.send, _config_node(resource_type, name),
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            resources=[{"resource_type": resource_type, "resource_name": name,
                        "configs": configs}],
            validate_only=False,
        )  # fmt: skip
        for r in body.responses:
            if r.error_code:
                code = _code_name(int(r.error_code))
                raise ClientError(r.error_message or code, code)

    def alter_client_quotas(
        self, entity: Mapping[str, str | None], ops: Mapping[str, float | None]
    ) -> None:
        """Set (a number) or remove (None) quotas of one entity (None names: defaults)."""
        self._call(self._admin.alter_client_quotas, [(entity, ops)])

    def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        return list(self._call(self._admin.describe_client_quotas, components, strict))

    # -- groups ------------------------------------------------------------------------

    def list_groups(self) -> list[str]:
        return [g.group_id for g in self._call(self._admin.list_groups)]

    def describe_group(self, group: str) -> GroupDescription:
        """The group's state and members, and per committed partition its offset,
        the log end offset and the lag."""
        described = self._call(self._admin.describe_groups, [group])
        desc = described.get(group)
        members: list[GroupMember] = []
        state = "Dead"
        if desc is not None:
            state = desc.state
            members = [
                GroupMember(
                    m.member_id,
                    m.client_id,
                    m.host,
                    [(tp.topic, tp.partition) for tp in m.assignment],
                    m.group_instance_id,
                )
                for m in desc.members
            ]
        committed = self._call(self._admin.list_group_offsets, group)
        owners = {tp: m for m in members for tp in m.assignment}
        wanted = set(committed) | {_tp(t, p) for m in members for t, p in m.assignment}
        ends = self._call(self._admin.list_offsets, sorted(wanted), "latest") if wanted else {}
        partitions = []
        for tp in sorted(wanted):
            om = committed.get(tp)
            current = om.offset if om is not None else None
            end = ends.get(tp)
            lag = None if current is None or end is None else max(end - current, 0)
            partitions.append(
                GroupPartitionLag(
                    tp.topic, tp.partition, current, end, lag, owners.get((tp.topic, tp.partition))
                )
            )
        node = self._call(self._admin.group_coordinator, group)
        protocol = desc.protocol if desc is not None else ""
        coordinator = (node.host, node.port, node.node_id)
        return GroupDescription(group, state, members, partitions, protocol, coordinator)

    def partition_offsets(
        self, partitions: Sequence[tuple[str, int]], spec: str | int
    ) -> dict[tuple[str, int], int | None]:
        """Per partition: its "earliest" or "latest" offset, or (``spec`` an int) the
        first offset whose timestamp is at least ``spec`` ms (None: no such record)."""
        found = self._call(self._admin.list_offsets, [_tp(t, p) for t, p in partitions], spec)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def alter_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for a group without active members."""
        wanted = {_tp(t, p): offset for (t, p), offset in offsets.items()}
        self._call(self._admin.alter_group_offsets, group, wanted)

    def describe_log_dirs(self, brokers: Sequence[int]) -> dict[int, list[LogDirInfo]]:
        """Each broker's log directories with every partition log in them."""
        found = self._call(self._admin.describe_log_dirs, list(brokers))
        return {
            broker: [
                LogDirInfo(
                    path,
                    None if d.error == 0 else _code_name(d.error),
                    [
                        LogDirReplica(tp.topic, tp.partition, r.size, r.offset_lag, r.is_future)
                        for tp, r in d.replicas.items()
                    ],
                )
                for path, d in dirs.items()
            ]
            for broker, dirs in found.items()
        }

    def list_offsets(
        self, partitions: Sequence[tuple[str, int]], spec: str | int
    ) -> dict[tuple[str, int], int | None]:
        """Each partition's offset for ``spec`` ("earliest", "latest" or a timestamp:
        -3 asks for the record of the highest timestamp); None where the broker has none."""
        found = self._call(self._admin.list_offsets, list(partitions), spec)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def elect_leaders(
        self, election_type: int, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[str | None, str | None]]:
        """Each partition's outcome: (None, None) when elected, else (Kafka error code
        name, message); every partition for None."""
        found = self._call(self._admin.elect_leaders, election_type, partitions)
        return {
            (tp.topic, tp.partition): (None if code == 0 else _code_name(code), message)
            for tp, (code, message) in found.items()
        }

    def alter_partition_reassignments(
        self, targets: Mapping[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], tuple[str | None, str | None]]:
        """Start (replicas) or cancel (None) reassignments; each partition's outcome:
        (None, None) when accepted, else (Kafka error code name, message)."""
        found = self._call(self._admin.alter_partition_reassignments, dict(targets))
        return {
            (tp.topic, tp.partition): (None if code == 0 else _code_name(code), message)
            for tp, (code, message) in found.items()
        }

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """Reassignments in progress: (replicas, adding, removing) by partition."""
        found = self._call(self._admin.list_partition_reassignments, partitions)
        return {(tp.topic, tp.partition): value for tp, value in found.items()}

    def delete_group(self, group: str) -> None:
        self._call(self._admin.delete_groups, [group])

    def list_transactions(self) -> list[TransactionListing]:
        return list(self._call(self._admin.list_transactions))

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        found: TransactionDescription = self._call(
            self._admin.describe_transaction, transactional_id
        )
        return found

    def describe_producers(
        self, partitions: Sequence[tuple[str, int]], broker_id: int | None = None
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """The producers each partition's leader (or ``broker_id``) knows."""
        found = self._call(self._admin.describe_producers, partitions, broker_id)
        return {(tp.topic, tp.partition): states for tp, states in found.items()}

    def abort_transaction(
        self, partition: tuple[str, int], producer_id: int, producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:  # fmt: skip
        self._call(self._admin.abort_transaction, partition, producer_id, producer_epoch,
                   coordinator_epoch)  # fmt: skip

    def close(self) -> None:
        self._admin.close()


def _tp(topic: str, partition: int) -> Any:
    from sluice.client import TopicPartition

    return TopicPartition(topic, partition)


_CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


def _config_source(code: int) -> str:
    """Kafka's ConfigSource name of a DescribeConfigs source code."""
    return _CONFIG_SOURCES.get(code, "UNKNOWN")


def _config_node(resource_type: int, name: str) -> int | None:
    """Where a config request goes: a broker's own configs to that broker (as Kafka's
    admin client sends them), anything else to any broker."""
    return int(name) if resource_type == 4 and name.isdigit() else None


def _code_name(code: int) -> str:
    from sluice.protocol import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


class Producer:
    """Sends records; delivery failures are counted, the first one kept for the report."""

    def __init__(
        self, bootstrap: str, config: Mapping[str, str] | None = None, warn: Warn | None = None
    ) -> None:
        from sluice.client import Producer as SluiceProducer

        _probe(bootstrap)
        settings: dict[str, Any] = {"bootstrap.servers": bootstrap}
        settings.update(config or {})
        if "max.block.ms" not in settings:
            # A record for a missing partition fails within the delivery timeout.
            delivery = int(settings.get("delivery.timeout.ms", 120_000))
            settings["max.block.ms"] = min(delivery, _DEFAULT_MAX_BLOCK_MS)
        self._handler = _watch(warn)
        try:
            self._producer = SluiceProducer(settings)
        except Exception as exc:
            _unwatch(self._handler)
            raise _error(exc) from exc
        self._lock = threading.Lock()
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def _on_delivery(self, _metadata: Any, exc: Exception | None) -> None:
        with self._lock:
            if exc is None:
                self.delivered += 1
                return
            self.failed += 1
            if self.first_error is None:
                self.first_error = str(_error(exc))

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one record, waiting for room in the local buffer if it is full."""
        try:
            self._producer.send(
                topic, value, key, partition=partition, headers=headers or None,
                callback=self._on_delivery,
            )  # fmt: skip
        except Exception as exc:
            raise _error(exc) from exc

    def flush(self) -> int:
        """Wait for outstanding deliveries (bounded by delivery.timeout.ms); returns how
        many are still undelivered (always 0: failures are counted in ``failed``)."""
        try:
            self._producer.flush()
        except Exception as exc:
            raise _error(exc) from exc
        return 0

    def close(self) -> None:
        try:
            self._producer.close()
        finally:
            _unwatch(self._handler)


class Consumer:
    """Reads records from assigned partitions, or through a consumer group."""

    def __init__(
        self,
        bootstrap: str,
        group: str | None,
        config: Mapping[str, str] | None = None,
        warn: Warn | None = None,
    ) -> None:
        from sluice.client import Consumer as SluiceConsumer

        _probe(bootstrap)
        self.group = group
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": group is not None,
            "allow.auto.create.topics": False,
        }
        settings.update(config or {})
        self._handler = _watch(warn)
        try:
            self._consumer = SluiceConsumer(settings)
        except Exception as exc:
            _unwatch(self._handler)
            raise _error(exc) from exc
        self._buffer: collections.deque[Any] = collections.deque()

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids; raises ClientError if it does not exist."""
        try:
            partitions = self._consumer.partitions_for(topic)
        except Exception as exc:
            raise _error(exc) from exc
        if not partitions:
            raise ClientError(f"Topic '{topic}' does not exist", "UNKNOWN_TOPIC_OR_PART")
        return list(partitions)

    def check_group(self, topic: str, partitions: Sequence[int]) -> None:
        """Fail fast unless the group's coordinator answers (fetching committed offsets)."""
        tps = [_tp(topic, p) for p in partitions]
        pool = concurrent.futures.ThreadPoolExecutor(1, "sluice-group-probe")
        try:
            pool.submit(self._consumer.committed, tps).result(timeout=GROUP_PROBE_TIMEOUT_S)
        except Exception as exc:
            reason = (
                "timed out" if isinstance(exc, concurrent.futures.TimeoutError) else _error(exc)
            )
            raise ClientError(
                f"no answer from the coordinator of group '{self.group}' (does the broker "
                f"support consumer groups?): {reason}",
                "COORDINATOR_NOT_AVAILABLE",
            ) from exc
        finally:
            pool.shutdown(wait=False)

    def assign(self, topic: str, partitions: Sequence[int], start: StartOffset) -> None:
        from sluice.client.consumer.fetcher import EARLIEST as FROM_START
        from sluice.client.consumer.fetcher import LATEST as FROM_END

        tps = [_tp(topic, p) for p in partitions]
        offset = FROM_START if start == EARLIEST else FROM_END if start == LATEST else int(start)
        try:
            self._consumer.assign(tps)
            for tp in tps:
                self._consumer.seek(tp, offset)
        except Exception as exc:
            raise _error(exc) from exc

    def subscribe(self, topic: str) -> None:
        try:
            self._consumer.subscribe([topic])
        except Exception as exc:
            raise _error(exc) from exc

    def poll(self, timeout_s: float) -> Record | None:
        """The next record, or None after ``timeout_s``; raises ClientError on errors."""
        if not self._buffer:
            try:
                self._buffer.extend(self._consumer.poll(timeout_s))
            except Exception as exc:
                raise _error(exc) from exc
            if not self._buffer:
                return None
        msg = self._buffer.popleft()
        kind = {1: "CreateTime", 2: "LogAppendTime"}.get(int(msg.timestamp_type))
        return Record(
            topic=msg.topic,
            partition=msg.partition,
            offset=msg.offset,
            timestamp_type=kind,
            timestamp=msg.timestamp if kind is not None else -1,
            key=msg.key,
            value=msg.value,
            headers=list(msg.headers or []),
        )

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception as exc:
            raise _error(exc) from exc
        finally:
            _unwatch(self._handler)
