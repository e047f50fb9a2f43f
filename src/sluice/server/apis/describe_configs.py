"""DescribeConfigs (32): topic and broker configs with their sources, synonyms and types.

As Kafka's ``ConfigHelper``: a TOPIC resource lists every topic config with its effective
value; its source is DYNAMIC_TOPIC_CONFIG for an override, else that of the first broker
synonym that has a value (STATIC_BROKER_CONFIG when set in server.properties, else
DEFAULT_CONFIG). A BROKER resource named by this broker's id lists the broker's own
configs (read-only: Sluice has no dynamic broker configs); the empty name asks for the
cluster-wide dynamic defaults, of which there are none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, format_config_value
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
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
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigsResponse.ConfigType, by ConfigDef.type
CONFIG_TYPES = {
    "bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "password": 9,
}  # fmt: skip

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


def _synonyms(config: BrokerConfig, name: str) -> list[dict[str, Any]]:
    """The broker config ``name`` and its synonyms that have a value: those set explicitly,
    then those with a default; as Kafka, entries before ``name``'s own are dropped (so
    ``log.retention.ms`` has none unless it has a value itself)."""
    names = _broker_synonyms(name)
    out = [
        {"name": n, "value": format_config_value(config[n]), "source": STATIC_BROKER_CONFIG}
        for n in names
        if config.is_set(n)
    ]
    out += [
        {"name": n, "value": format_config_value(default), "source": DEFAULT_CONFIG}
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
    type_name: str,
    doc: str,
    include_synonyms: bool,
    include_docs: bool,
) -> dict[str, Any]:
    sensitive = type_name == "password"  # as Kafka: its value is never shown
    if sensitive:
        synonyms = [{**s, "value": None} for s in synonyms]
    return {
        "name": name,
        "value": None if sensitive else format_config_value(value),
        "read_only": read_only,
        "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": CONFIG_TYPES.get(type_name, 0),
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
        synonyms = _synonyms(ctx.config, synonym) if synonym else []
        if name in overrides:
            synonyms.insert(
                0,
                {"name": name, "value": format_config_value(value), "source": DYNAMIC_TOPIC_CONFIG},
            )
        doc = definition.doc or (BROKER_CONFIGS[synonym].doc if synonym else "")
        out.append(
            _entry(name, value, synonyms, False, definition.type, doc,
                   include_synonyms, include_docs)
        )  # fmt: skip
    return out


def broker_configs(
    ctx: RequestContext, keys: Any, include_synonyms: bool, include_docs: bool
) -> list[dict[str, Any]]:
    config = ctx.config
    out = []
    for name, definition in BROKER_CONFIGS.items():
        if not _wanted(keys, name):
            continue
        synonyms = _synonyms(config, name)
        out.append(
            _entry(name, config[name], synonyms, True, definition.type, definition.doc,
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
            return result  # no dynamic cluster-wide defaults in Sluice
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
