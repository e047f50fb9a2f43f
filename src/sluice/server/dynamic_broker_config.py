"""``DynamicBrokerConfig``: broker configs changed while the broker runs, as Kafka's.

A dynamic broker config is set for one broker (the entity ``brokers/<id>``) or for every
broker (the cluster default, ``brokers/<default>``) with IncrementalAlterConfigs or
AlterConfigs on a BROKER resource. The value a broker uses is, first that is set
(Kafka's precedence, and DescribeConfigs' sources):

1. its per-broker dynamic config (DYNAMIC_BROKER_CONFIG),
2. the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG),
3. server.properties (STATIC_BROKER_CONFIG),
4. the key's default (DEFAULT_CONFIG).

Only the keys Kafka changes while it runs and that take effect in Sluice without a
restart may be set (:data:`DYNAMIC_CONFIGS`); any other key is refused with Kafka's
"Cannot update these configs dynamically". The two layers are merged into the broker's
one :class:`~sluice.config.BrokerConfig` (:meth:`BrokerConfig.set_dynamic`), so
everything that reads a key when it needs it sees the new value; the parts that hold a
value (the logs' ``LogConfig``, the connection limits) are told by the callbacks given
to :meth:`DynamicBrokerConfig.add_reconfigurable`.

:class:`DynamicBrokerConfig` does no I/O. :class:`DynamicConfigManager` keeps the
layers where the broker's other entity configs are (``server/client_quotas.py``'s
stores): a single node in its entity config file, a cluster in ZooKeeper's
``/config/brokers/<id>`` and ``/config/brokers/<default>``, each change announced under
``/config/changes`` so that every broker re-reads it (:meth:`DynamicConfigManager.reload`).
Its store I/O runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from sluice.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigError
from sluice.config_metadata import DYNAMIC_BROKER_CONFIGS

if TYPE_CHECKING:
    from sluice.server.client_quotas import EntityConfigStore

__all__ = [
    "DEFAULT_ENTITY",
    "DYNAMIC_CONFIGS",
    "LOG_DEFAULT_CONFIGS",
    "REPLICATION_THROTTLE_CONFIGS",
    "DynamicBrokerConfig",
    "DynamicConfigManager",
    "broker_entity_path",
]

log = logging.getLogger(__name__)

DEFAULT_ENTITY: Final = "<default>"
"""The entity name of the cluster-wide default, as Kafka's ZooKeeper mode writes it."""

# The broker defaults of topic configs: they reach the logs of topics without their own
# override (Kafka's DynamicLogConfig). unclean.leader.election.enable is left out: the
# controller reads it from its start-up config.
LOG_DEFAULT_CONFIGS: Final = frozenset(
    synonym
    for synonym, _ in TOPIC_CONFIGS.values()
    if synonym is not None
    and synonym in DYNAMIC_BROKER_CONFIGS
    and synonym != "unclean.leader.election.enable"
)
"""The dynamic ``log.*`` defaults (and ``message.max.bytes``, ``min.insync.replicas``,
``compression.type``) Sluice applies to the logs of topics without an override."""

CONNECTION_CONFIGS: Final = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"}
)

REPLICATION_THROTTLE_CONFIGS: Final = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)

DYNAMIC_CONFIGS: Final = frozenset(
    LOG_DEFAULT_CONFIGS
    | CONNECTION_CONFIGS
    | REPLICATION_THROTTLE_CONFIGS
    | {"log.cleaner.backoff.ms", "producer.id.expiration.ms"}
)
"""The broker keys that may be changed while Sluice runs: each is dynamic in Kafka and
read again (or handed to the part that holds it) when it changes."""

assert DYNAMIC_BROKER_CONFIGS.keys() & BROKER_CONFIGS.keys() >= DYNAMIC_CONFIGS


def broker_entity_path(broker_id: int | None) -> str:
    """``brokers/<id>``, or ``brokers/<default>`` for the cluster default (None)."""
    return f"brokers/{DEFAULT_ENTITY if broker_id is None else broker_id}"


def _set_string(names: list[str]) -> str:
    """Names as Kafka's messages print a Scala set: ``Set(a, b)``."""
    return f"Set({', '.join(names)})"


def _parse(props: Mapping[str, str]) -> dict[str, Any]:
    """Each value parsed by its key's definition (ConfigError for a bad one)."""
    return {key: BROKER_CONFIGS[key].parse(value) for key, value in props.items()}


Reconfigurable = Callable[[frozenset[str]], None]
"""Told the keys whose effective value changed, once the config holds the new values."""


class DynamicBrokerConfig:
    """One broker's two dynamic layers over its static config (see the module)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self._reconfigurables: list[Reconfigurable] = []

    def add_reconfigurable(self, callback: Reconfigurable) -> None:
        self._reconfigurables.append(callback)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Raise ConfigError unless ``props`` may become the layer's configs: every key
        dynamic here, every value valid, and the broker config they make consistent."""
        refused = sorted(key for key in props if key not in DYNAMIC_CONFIGS)
        if refused:
            raise ConfigError(f"Cannot update these configs dynamically: {_set_string(refused)}")
        new = _parse(props)
        other = _parse(self.cluster_default if per_broker else self.per_broker)
        layered = {**new, **other} if not per_broker else {**other, **new}
        self._candidate(layered)

    def _candidate(self, dynamic: Mapping[str, Any]) -> BrokerConfig:
        """The broker config with ``dynamic`` over the static one (ConfigError, LogError
        for a value the broker or the log refuses)."""
        from sluice.server.connection_quotas import ConnectionQuotas
        from sluice.server.topic_admin import topic_log_config

        candidate = BrokerConfig({**self.config.explicit(), **dynamic})  # checked as a whole
        topic_log_config(candidate, {})
        if CONNECTION_CONFIGS & dynamic.keys():
            ConnectionQuotas.from_config(candidate)  # the overrides' host names resolve
        return candidate

    def update(self, props: Mapping[str, str], per_broker: bool) -> frozenset[str]:
        """Replace one layer's configs (validated already) and tell the reconfigurables;
        returns the keys whose effective value changed."""
        if per_broker:
            self.per_broker = dict(props)
        else:
            self.cluster_default = dict(props)
        return self._apply()

    def load(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> None:
        """Take the stored layers at start. A stored key that is not dynamic here or whose
        value is refused is left out, with a warning (as Kafka drops them)."""
        self.per_broker = self.usable(per_broker, "per-broker")
        self.cluster_default = self.usable(cluster_default, "cluster default")
        self._apply()

    def usable(self, props: Mapping[str, str], where: str) -> dict[str, str]:
        """The stored configs of a layer this broker can take (the others logged)."""
        out: dict[str, str] = {}
        for key, value in props.items():
            try:
                if key not in DYNAMIC_CONFIGS:
                    raise ConfigError("not a dynamic config of this broker")
                BROKER_CONFIGS[key].parse(value)
            except ConfigError as exc:
                log.warning("stored dynamic broker config %s=%s (%s) ignored: %s",
                            key, value, where, exc)  # fmt: skip
                continue
            out[key] = value
        return out

    def _apply(self) -> frozenset[str]:
        before = {key: self.config[key] for key in DYNAMIC_CONFIGS}
        merged = {**_parse(self.cluster_default), **_parse(self.per_broker)}
        self.config.set_dynamic(merged)
        changed = frozenset(k for k in DYNAMIC_CONFIGS if self.config[k] != before[k])
        if changed:
            log.info("dynamic broker configs changed: %s",
                     ", ".join(f"{k}={self.config[k]}" for k in sorted(changed)))  # fmt: skip
            for callback in self._reconfigurables:
                try:
                    callback(changed)
                except Exception:
                    log.exception("applying dynamic broker configs %s failed", sorted(changed))
        return changed


NewConfigs = Callable[[dict[str, str]], dict[str, str]]
"""A layer's stored configs -> its new configs (raises to refuse the change)."""


class DynamicConfigManager:
    """A broker's dynamic configs and where they are stored: alters them for the admin
    APIs and takes the changes other brokers made."""

    def __init__(self, dynamic: DynamicBrokerConfig, broker_id: int, store: EntityConfigStore):
        self.dynamic = dynamic
        self.broker_id = broker_id
        self.store = store
        self._lock = asyncio.Lock()  # one read-modify-write of the store at a time

    def _path(self, per_broker: bool) -> str:
        return broker_entity_path(self.broker_id if per_broker else None)

    def fetch(self) -> tuple[dict[str, str], dict[str, str]]:
        """Both stored layers, per-broker and cluster default (blocking)."""
        return (
            self.store.fetch_entity_config(self._path(True)),
            self.store.fetch_entity_config(self._path(False)),
        )

    def load(self, layers: tuple[dict[str, str], dict[str, str]]) -> None:
        """Take the layers :meth:`fetch` read (at start, on the event loop)."""
        self.dynamic.load(*layers)

    async def alter(self, per_broker: bool, new_configs: NewConfigs, validate_only: bool) -> None:
        """Change one layer: its stored configs are read, ``new_configs`` makes the new
        ones, which are validated (ConfigError, LogError), then stored and applied."""
        loop = asyncio.get_running_loop()
        path = self._path(per_broker)
        async with self._lock:
            current = await loop.run_in_executor(None, self.store.fetch_entity_config, path)
            new = new_configs(current)
            self.dynamic.validate(new, per_broker)
            if validate_only:
                return
            await loop.run_in_executor(None, self.store.change_entity_config, path, new)
            self.dynamic.update(new, per_broker)

    def reload(self, entity_path: str) -> None:
        """A stored entity config changed (a ``/config/changes`` notification, on the
        event loop): re-read it if it is one of this broker's layers."""
        for per_broker in (True, False):
            if entity_path == self._path(per_broker):
                stored = self.store.fetch_entity_config(entity_path)
                self.dynamic.update(self.dynamic.usable(stored, entity_path), per_broker)
