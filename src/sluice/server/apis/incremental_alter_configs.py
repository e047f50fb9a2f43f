"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT single topic or dynamic
broker configs.

Other overrides of the topic (other dynamic configs of the broker layer) are kept. APPEND
and SUBTRACT work on list configs (``cleanup.policy``, ``log.cleanup.policy``) starting
from the current effective value (the override, else the broker's value), as KRaft's
ConfigurationControlManager does: APPEND skips items already present, SUBTRACT removes
every occurrence. BROKER resources are checked and stored as AlterConfigs' are
(:mod:`sluice.server.apis.alter_configs`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, format_config_value
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.apis.alter_configs import AlterRejected, alter_resources
from sluice.server.topics import TopicInfo

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.incremental_alter_configs.v0.request as v0
    import kio.schema.incremental_alter_configs.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.IncrementalAlterConfigsRequest | v1.IncrementalAlterConfigsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, needs_coordinators=False)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _apply(ctx: RequestContext, info: TopicInfo, resource: Any) -> dict[str, str]:
    effective = ctx.topic_admin.topic_configs(info.name)

    def definition(name: str) -> ConfigDef:
        entry = TOPIC_CONFIGS.get(name)
        if entry is None:
            raise AlterRejected(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        return entry[1]

    return _operations(resource, dict(info.configs), definition, effective.get)


def _apply_broker(ctx: RequestContext, stored: dict[str, str], resource: Any) -> dict[str, str]:
    def definition(name: str) -> ConfigDef | None:
        return BROKER_CONFIGS.get(name)  # an unknown key is refused when validated

    def current(name: str) -> Any:
        return ctx.config[name] if name in BROKER_CONFIGS else None

    return _operations(resource, stored, definition, current)


def _operations(
    resource: Any,
    overrides: dict[str, str],
    definition_of: Callable[[str], ConfigDef | None],
    effective_of: Callable[[str], Any],
) -> dict[str, str]:
    """``overrides`` with the resource's operations applied, in order."""
    counts = Counter(c.name for c in resource.configs)
    duplicates = sorted(n for n, k in counts.items() if k > 1)
    if duplicates:
        raise AlterRejected(
            ErrorCode.invalid_request,
            f"Error due to duplicate config keys: {', '.join(duplicates)}",
        )
    for config in resource.configs:
        name, op, value = config.name, config.config_operation, config.value
        if op not in _OP_NAMES:
            raise AlterRejected(ErrorCode.invalid_request, f"Unknown config operation {op}")
        entry = definition_of(name)
        if op == DELETE:
            overrides.pop(name, None)
            continue
        if value is None:
            raise AlterRejected(ErrorCode.invalid_request, f"Null value not supported for: {name}")
        if op == SET:
            overrides[name] = value
            continue
        if entry is None or entry.type not in ("list", "throttled_replicas"):
            raise AlterRejected(
                ErrorCode.invalid_config,
                f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
            )
        current = overrides.get(name, format_config_value(effective_of(name)) or "")
        items = [v.strip() for v in current.split(",") if v.strip()]
        changes = [v.strip() for v in value.split(",") if v.strip()]
        if op == APPEND:
            items += [v for v in dict.fromkeys(changes) if v not in items]
        else:
            items = [v for v in items if v not in changes]
        overrides[name] = ",".join(items)
    return overrides


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    return alter_resources(
        ctx, request, body.resources, bool(body.validate_only),
        lambda info, res: _apply(ctx, info, res),
        lambda stored, res: _apply_broker(ctx, stored, res),
    )  # fmt: skip
