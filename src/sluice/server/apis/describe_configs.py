"""DescribeConfigs (32): topic and broker configs with their sources, synonyms and types.

As Kafka's ``ConfigHelper``: a TOPIC resource lists every topic config with its effective
value; its source is DYNAMIC_TOPIC_CONFIG for an override, else that of the first broker
synonym that has a value, in Kafka's precedence (DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG;
:mod:`sluice.server.dynamic_broker_config`). A BROKER resource named by this broker's
id lists the broker's own configs; the empty name lists the cluster-wide dynamic
defaults that are set. Each entry's ``is_sensitive`` (a secret's value null),
``config_type`` and ``documentation`` are Kafka's (:mod:`sluice.config_metadata`); a
broker key is ``read_only`` unless this broker changes it while it runs
(:data:`~sluice.server.dynamic_broker_config.DYNAMIC_CONFIGS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, format_config_value
from sluice.config_metadata import ConfigType, config_type, is_sensitive
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
)
from sluice.server.dynamic_broker_config import DYNAMIC_CONFIGS, DynamicBrokerConfig
from sluice.server.messages import build, field
from sluice.server.topics import InvalidTopicError, validate_topic_name

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.describe_configs.v1.request as v1
    import kio.schema.describe_configs.v2.request as v2
    import kio.schema.describe_configs.v3.request as v3
    import kio.schema.describe_configs.v4.request as v4

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v1.DescribeConfigsRequest
        | v2.DescribeConfigsRequest
        | v3.DescribeConfigsRequest
        | v4.DescribeConfigsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, needs_coordinators=False)

__all__ = ["BROKER", "TOPIC", "handle"]

# ConfigResource.Type
TOPIC = 2
BROKER = 4

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Broker configs that stand for one another, most specific first (KafkaConfig's synonyms).
_SYNONYM_GROUPS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.dirs", "log.dir"),
)


def _broker_synonyms(name: str) -> tuple[str, ...]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def _synonyms(
    config: BrokerConfig,
    name: str,
    sensitive: bool = False,
    dynamic: DynamicBrokerConfig | None = None,
) -> list[dict[str, Any]]:
    """The broker config ``name`` and its synonyms that have a value: those set
    dynamically for this broker, then for the cluster, then in server.properties, then
    those with a default; as Kafka, entries before ``name``'s own are dropped (so
    ``log.retention.ms`` has none unless it has a value itself). A ``sensitive`` one's
    values are null."""

    def shown(value: Any) -> str | None:
        return None if sensitive else format_config_value(value)

    names = _broker_synonyms(name)
    static = config.explicit()
    out: list[dict[str, Any]] = []
    if dynamic is not None:
        layers = (
            (dynamic.per_broker, DYNAMIC_BROKER_CONFIG),
            (dynamic.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
        )
        for layer, source in layers:
            out += [
                {"name": n, "value": None if sensitive else layer[n], "source": source}
                for n in names
                if n in layer
            ]
    out += [
        {"name": n, "value": shown(static[n]), "source": STATIC_BROKER_CONFIG}
        for n in names
        if n in static
    ]
    out += [
        {"name": n, "value": shown(default), "source": DEFAULT_CONFIG}
        for n in names
        if (default := BROKER_CONFIGS[n].default) is not None
    ]
    first = next((i for i, s in enumerate(out) if s["name"] == name), len(out))
    return out[first:]


def _entry(
    name: str,
    value: Any,
    synonyms: list[dict[str, Any]],
    read_only: bool,
    kind: ConfigType,
    doc: str,
    include_synonyms: bool,
    include_docs: bool,
) -> dict[str, Any]:
    """One config as Kafka reports it (:mod:`sluice.config_metadata`): a sensitive one's
    value is null."""
    sensitive = is_sensitive(kind)
    return {
        "name": name,
        "value": None if sensitive else format_config_value(value),
        "read_only": read_only,
        "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": kind,
        "documentation": (doc or None) if include_docs else None,
    }


def _wanted(keys: Any, name: str) -> bool:
    # null (and, as in Kafka, an empty list) means every config.
    return not keys or name in keys


def topic_configs(
    ctx: RequestContext, topic: str, keys: Any, include_synonyms: bool, include_docs: bool
) -> list[dict[str, Any]]:
    info = ctx.topic_admin.topic_info(topic)
    overrides = info.configs if info is not None else {}
    values = ctx.topic_admin.topic_configs(topic)
    log_config = None
    out = []
    for name, (synonym, definition) in TOPIC_CONFIGS.items():
        if not _wanted(keys, name):
            continue
        value = values.get(name)
        if value is None:  # e.g. flush.ms: the log layer's own default applies
            if log_config is None:
                log_config = ctx.topic_admin.log_config_for(topic)
            value = getattr(log_config, name.replace(".", "_"), None)
        kind = config_type(name, definition.type)
        sensitive = is_sensitive(kind)
        synonyms = _synonyms(ctx.config, synonym, sensitive, _dynamic(ctx)) if synonym else []
        if name in overrides:
            shown = None if sensitive else format_config_value(value)
            synonyms.insert(0, {"name": name, "value": shown, "source": DYNAMIC_TOPIC_CONFIG})
        doc = definition.doc or (BROKER_CONFIGS[synonym].doc if synonym else "")
        out.append(_entry(name, value, synonyms, False, kind, doc, include_synonyms, include_docs))
    return out


def _dynamic(ctx: RequestContext) -> DynamicBrokerConfig | None:
    return None if ctx.dynamic_configs is None else ctx.dynamic_configs.dynamic


def broker_configs(
    ctx: RequestContext, keys: Any, include_synonyms: bool, include_docs: bool
) -> list[dict[str, Any]]:
    config = ctx.config
    dynamic = _dynamic(ctx)
    out = []
    for name, definition in BROKER_CONFIGS.items():
        if not _wanted(keys, name):
            continue
        kind = config_type(name, definition.type)
        synonyms = _synonyms(config, name, is_sensitive(kind), dynamic)
        read_only = name not in DYNAMIC_CONFIGS
        out.append(
            _entry(name, config[name], synonyms, read_only, kind, definition.doc,
                   include_synonyms, include_docs)
        )  # fmt: skip
    return out


def default_broker_configs(
    ctx: RequestContext, keys: Any, include_synonyms: bool, include_docs: bool
) -> list[dict[str, Any]]:
    """The cluster-wide dynamic defaults that are set, each with its value there and only
    its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (Kafka's ``perBrokerConfig = false``)."""
    dynamic = _dynamic(ctx)
    if dynamic is None:
        return []
    out = []
    for name, raw in sorted(dynamic.cluster_default.items()):
        definition = BROKER_CONFIGS.get(name)
        if definition is None or not _wanted(keys, name):
            continue
        kind = config_type(name, definition.type)
        synonyms = [
            s
            for s in _synonyms(ctx.config, name, is_sensitive(kind), dynamic)
            if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        read_only = name not in DYNAMIC_CONFIGS
        out.append(
            _entry(name, definition.parse(raw), synonyms, read_only, kind, definition.doc,
                   include_synonyms, include_docs)
        )  # fmt: skip
    return out


def _describe(
    ctx: RequestContext, resource: Any, include_synonyms: bool, include_docs: bool
) -> dict[str, Any]:
    rtype, name = resource.resource_type, resource.resource_name
    keys = field(resource, "configuration_keys")
    result: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": rtype,
        "resource_name": name,
        "configs": [],
    }
    # As Kafka: DESCRIBE_CONFIGS on the topic, or on the cluster for broker configs.
    if rtype == TOPIC and not authorize(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name
    ):
        result["error_code"] = ErrorCode.topic_authorization_failed
        return result
    if rtype != TOPIC and not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        result["error_code"] = ErrorCode.cluster_authorization_failed
        return result
    if rtype == TOPIC:
        try:
            validate_topic_name(name)
        except InvalidTopicError as exc:
            result.update(error_code=ErrorCode.invalid_topic_exception, error_message=str(exc))
            return result
        if ctx.topic_admin.topic_info(name) is None:
            result.update(error_code=ErrorCode.unknown_topic_or_partition,
                          error_message=f"Topic {name} does not exist.")  # fmt: skip
            return result
        result["configs"] = topic_configs(ctx, name, keys, include_synonyms, include_docs)
    elif rtype == BROKER:
        if name == "":
            result["configs"] = default_broker_configs(ctx, keys, include_synonyms, include_docs)
            return result
        try:
            broker_id = int(name)
        except ValueError:
            message = f"Broker id must be an integer, but it is: {name}"
            result.update(error_code=ErrorCode.invalid_request, error_message=message)
            return result
        if broker_id != ctx.broker_id:
            result.update(error_code=ErrorCode.invalid_request,
                          error_message=f"Unexpected broker id, expected {ctx.broker_id} "
                                        f"or empty string, but received {name}")  # fmt: skip
            return result
        result["configs"] = broker_configs(ctx, keys, include_synonyms, include_docs)
    else:
        result.update(error_code=ErrorCode.invalid_request,
                      error_message=f"Unsupported resource type: {rtype}")  # fmt: skip
    return result


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    include_synonyms = bool(field(body, "include_synonyms", False))
    include_docs = bool(field(body, "include_documentation", False))
    results = [_describe(ctx, r, include_synonyms, include_docs) for r in body.resources]
    return build(request.response_type, throttle_time=0, results=results)
