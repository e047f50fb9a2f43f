"""The broker's client quotas: the quota managers, where their configs are stored, and how
a change reaches them.

Quota configs are Kafka's dynamic user and client-id configs, by entity path
(``users/alice``, ``clients/app``, ``users/alice/clients/app``, ``<default>`` for a
default; names sanitized, :mod:`sluice.quota.entity`):

* a **single node** keeps them in ``__sluice_entity_configs.json`` in its first log
  directory, replaced atomically on each change (written whole, fsynced, renamed), and
  reads them at start;
* a **cluster** keeps them in ZooKeeper where Kafka's ZooKeeper mode does
  (``/config/users/<user>``, ``/config/clients/<client-id>``,
  ``/config/users/<user>/clients/<client-id>``), each change announced under
  ``/config/changes/config_change_<seq>`` with its entity path; every broker watches the
  notifications (``server/cluster.py``) and re-reads the entity
  (:meth:`ClientQuotas.reload`).

AlterClientQuotas reads an entity's stored config, applies the request's operations
(keeping keys that are not quotas, such as a user's SCRAM credentials), writes it back
and hands it to the managers; DescribeClientQuotas filters what is stored. Store I/O runs
on a worker thread; the managers are only touched on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sluice.log.checkpoint import write_atomically
from sluice.quota import ClientQuotaEntity, FilterComponent, QuotaManagers
from sluice.quota.entity import alter_entity_config, describe_quotas, parse_entity

if TYPE_CHECKING:
    from sluice.controller.admin_zk_client import AdminZkClient
    from sluice.protocol import Request
    from sluice.quota import ControllerMutationQuota
    from sluice.server.request_context import RequestContext

__all__ = [
    "ClientQuotas",
    "EntityConfigStore",
    "LocalEntityConfigStore",
    "ZkEntityConfigStore",
    "controller_mutation_quota",
    "mutation_throttle_ms",
]

log = logging.getLogger(__name__)

QuotaOp = tuple[str, float, bool]
"""An AlterClientQuotas operation: (key, value, remove)."""


class EntityConfigStore(Protocol):
    """Where user and client-id configs are kept, by entity path."""

    def fetch_entity_config(self, entity_path: str) -> dict[str, str]: ...

    def fetch_all_entity_configs(self) -> dict[str, dict[str, str]]: ...

    def change_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Write (an empty config: remove) the entity's config."""


class LocalEntityConfigStore:
    """A single node's entity configs: one JSON file, replaced atomically."""

    FILE = "__sluice_entity_configs.json"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILE
        self._configs: dict[str, dict[str, str]] = {}
        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._configs = {
                str(p): {str(k): str(v) for k, v in c.items()}
                for p, c in data.get("entities", {}).items()
            }

    def fetch_entity_config(self, entity_path: str) -> dict[str, str]:
        return dict(self._configs.get(entity_path, {}))

    def fetch_all_entity_configs(self) -> dict[str, dict[str, str]]:
        return {p: dict(c) for p, c in self._configs.items()}

    def change_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        configs = dict(self._configs)
        if config:
            configs[entity_path] = dict(config)
        else:
            configs.pop(entity_path, None)
        payload = {"version": 1, "entities": configs}
        write_atomically(self.path, json.dumps(payload, sort_keys=True).encode())
        self._configs = configs


class ZkEntityConfigStore:
    """A cluster's entity configs, in ZooKeeper under ``/config`` (every write announced
    under ``/config/changes``)."""

    def __init__(self, admin_zk: AdminZkClient) -> None:
        self._admin = admin_zk

    def fetch_entity_config(self, entity_path: str) -> dict[str, str]:
        return self._admin.fetch_entity_config(entity_path)

    def fetch_all_entity_configs(self) -> dict[str, dict[str, str]]:
        return self._admin.fetch_all_entity_configs()

    def change_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        self._admin.change_entity_config(entity_path, config)


AlterResult = tuple[list[tuple[str, str | None]], Exception | None]
"""An entry's entity components as sent, and what failed (None: done)."""


class ClientQuotas:
    """The quota managers and their stored configs (see the module)."""

    def __init__(self, managers: QuotaManagers, store: EntityConfigStore) -> None:
        self.managers = managers
        self.store = store
        self._lock = asyncio.Lock()  # one read-modify-write of the store at a time

    def load(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Take the stored entity configs (read at start), by entity path."""
        for path, config in configs.items():
            entity = ClientQuotaEntity.from_path(path)
            if entity is not None:
                self.managers.apply(entity, config)

    def reload(self, entity_path: str) -> None:
        """An entity's stored config changed (a ``/config/changes`` notification, handled
        on the event loop as the topic configs' are): read it again."""
        entity = ClientQuotaEntity.from_path(entity_path)
        if entity is None:
            return
        self.managers.apply(entity, self.store.fetch_entity_config(entity_path))
        log.info("client quotas of %s now %s", entity, self.managers.quotas().get(entity, {}))

    async def alter(
        self,
        entries: Iterable[tuple[list[tuple[str, str | None]], list[QuotaOp]]],
        validate_only: bool,
    ) -> list[AlterResult]:
        """Apply AlterClientQuotas entries, each on its own: an entry's error (Kafka's
        InvalidRequest) leaves the others to succeed."""
        loop = asyncio.get_running_loop()
        results: list[AlterResult] = []
        async with self._lock:
            for components, ops in entries:
                try:
                    entity = parse_entity(components)
                    path = entity.path
                    current = await loop.run_in_executor(None, self.store.fetch_entity_config, path)
                    new = alter_entity_config(current, ops)
                    if not validate_only:
                        await loop.run_in_executor(None, self.store.change_entity_config, path, new)
                        self.managers.apply(entity, new)
                        log.info("client quotas of %s set to %s", entity, new)
                except Exception as exc:
                    results.append((components, exc))
                else:
                    results.append((components, None))
        return results

    async def describe(
        self, components: list[FilterComponent], strict: bool
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """DescribeClientQuotas over what is stored (raises InvalidRequest or
        UnsupportedEntityType for a bad filter)."""
        loop = asyncio.get_running_loop()
        stored = await loop.run_in_executor(None, self.store.fetch_all_entity_configs)
        by_entity: dict[ClientQuotaEntity, Mapping[str, str]] = {}
        for path, config in stored.items():
            entity = ClientQuotaEntity.from_path(path)
            if entity is not None:
                by_entity[entity] = config
        return describe_quotas(by_entity, components, strict)


def controller_mutation_quota(
    ctx: RequestContext, request: Request, strict_since: int
) -> ControllerMutationQuota | None:
    """The controller mutation quota of a CreateTopics, CreatePartitions or DeleteTopics
    request (None: no such quota is set): strict from ``strict_since``, the first
    version that knows THROTTLING_QUOTA_EXCEEDED (KIP-599), permissive before."""
    quotas = ctx.quotas
    if quotas is None or not quotas.managers.controller_mutation.quotas_enabled:
        return None
    return quotas.managers.controller_mutation.new_quota_for(
        ctx.principal.name, ctx.client_id, request.api_version >= strict_since
    )


def mutation_throttle_ms(ctx: RequestContext, quota: ControllerMutationQuota | None) -> int:
    """The throttle the request's mutations call for (its answer's throttle_time_ms)."""
    if quota is None or ctx.quotas is None:
        return 0
    ms = quota.throttle_time_ms()
    ctx.quotas.managers.controller_mutation.record_throttle(ctx.principal.name, ctx.client_id, ms)
    return ms
