"""AlterConfigs (33): replace ALL config overrides of a topic or dynamic configs of a
broker (the legacy, non-incremental API).

Configs not named in the request lose their override and fall back to the broker default,
as in Kafka. Overrides under which an internal topic would lose records (a ``delete``
cleanup policy) get POLICY_VIOLATION, also with ``validate_only``. A BROKER resource
names this broker's id (its per-broker dynamic configs) or is empty (the cluster
default, :mod:`sluice.server.dynamic_broker_config`); another broker's id, a key that
cannot change while the broker runs or a refused value get INVALID_REQUEST with Kafka's
messages. The shared machinery (duplicate resources, topic lookup, validation,
validate_only) is used by IncrementalAlterConfigs too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from sluice.config import ConfigError, topic_config_defaults, validate_topic_configs
from sluice.log import LogConfig, LogError
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
)
from sluice.server.messages import build
from sluice.server.topics import PolicyViolation, TopicInfo

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.alter_configs.v0.request as v0
    import kio.schema.alter_configs.v1.request as v1
    import kio.schema.alter_configs.v2.request as v2

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.AlterConfigsRequest | v1.AlterConfigsRequest | v2.AlterConfigsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, needs_coordinators=False)

__all__ = ["AlterRejected", "alter_resources", "broker_layer", "check_topic_configs", "handle"]

TOPIC = 2
BROKER = 4

_LOG_CONFIG_NAMES = frozenset(LogConfig.kafka_names())


class AlterRejected(Exception):
    """One resource of an alter request fails with ``code`` and this message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_topic_configs(ctx: RequestContext, overrides: dict[str, str]) -> None:
    """Raise ConfigError/LogError unless ``overrides`` would be a valid set of topic
    overrides: known names, parseable values within range, and a valid log config."""
    validate_topic_configs(overrides)
    values: dict[str, Any] = {**topic_config_defaults(ctx.config), **overrides}
    LogConfig.from_properties(
        {
            k: ",".join(v) if isinstance(v, list) else v
            for k, v in values.items()
            if k in _LOG_CONFIG_NAMES and v is not None
        }
    )


NewOverrides = Callable[[TopicInfo, Any], dict[str, str]]
"""(topic, request resource) -> the topic's complete new overrides; raises AlterRejected."""

NewBrokerConfigs = Callable[[dict[str, str], Any], dict[str, str]]
"""(the stored dynamic configs of a broker layer, request resource) -> its complete new
dynamic configs; raises AlterRejected."""


def broker_layer(ctx: RequestContext, name: str) -> bool:
    """Whether BROKER resource ``name`` is this broker's own configs (True) or the cluster
    default (False, the empty name); AlterRejected for another broker, as Kafka."""
    if not name:
        return False
    try:
        broker_id = int(name)
    except ValueError:
        raise AlterRejected(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != ctx.broker_id:
        raise AlterRejected(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.broker_id}, but received {name}",
        )
    return True


async def _alter_broker(
    ctx: RequestContext, resource: Any, validate_only: bool, new_configs: NewBrokerConfigs
) -> None:
    name = resource.resource_name
    per_broker = broker_layer(ctx, name)
    manager = ctx.dynamic_configs
    if manager is None:
        raise AlterRejected(ErrorCode.invalid_request, "dynamic broker configs are not served")
    try:
        await manager.alter(per_broker, lambda current: new_configs(current, resource),
                            validate_only)  # fmt: skip
    except (ConfigError, LogError) as exc:
        # Kafka answers INVALID_REQUEST for a broker config it cannot take (KAFKA-13609)
        raise AlterRejected(
            ErrorCode.invalid_request,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {exc}",
        ) from None


def _alter_one(
    ctx: RequestContext, resource: Any, validate_only: bool, new_overrides: NewOverrides
) -> None:
    rtype, name = resource.resource_type, resource.resource_name
    if rtype != TOPIC:
        raise AlterRejected(ErrorCode.invalid_request, f"Unsupported resource type: {rtype}")
    info = ctx.topic_admin.topic_info(name)
    if info is None:
        raise AlterRejected(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
    overrides = new_overrides(info, resource)
    try:
        check_topic_configs(ctx, overrides)
        ctx.topic_admin.check_topic_configs(name, overrides)
        if not validate_only:
            ctx.topic_admin.update_topic_configs(name, overrides)
    except (ConfigError, LogError) as exc:
        raise AlterRejected(ErrorCode.invalid_config, str(exc)) from None
    except PolicyViolation as exc:
        raise AlterRejected(ErrorCode.policy_violation, str(exc)) from None


def alter_resources(
    ctx: RequestContext,
    request: Request,
    resources: Sequence[Any],
    validate_only: bool,
    new_overrides: NewOverrides,
    new_broker_configs: NewBrokerConfigs,
) -> Any:
    """The response to an AlterConfigs or IncrementalAlterConfigs request: at once, or
    once the BROKER resources' configs are stored."""
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    responses = []
    pending: list[tuple[dict[str, Any], Awaitable[None]]] = []
    for resource in resources:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise AlterRejected(
                    ErrorCode.invalid_request, "Each resource must appear at most once."
                )
            _check_authorized(ctx, resource)
            if resource.resource_type == BROKER:
                alter = _alter_broker(ctx, resource, validate_only, new_broker_configs)
                pending.append((entry, alter))
            else:
                _alter_one(ctx, resource, validate_only, new_overrides)
        except AlterRejected as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
        responses.append(entry)
    if not pending:
        return build(request.response_type, throttle_time=0, responses=responses)
    return _respond_when_stored(request, responses, pending)


async def _respond_when_stored(
    request: Request,
    responses: list[dict[str, Any]],
    pending: list[tuple[dict[str, Any], Awaitable[None]]],
) -> Any:
    for entry, alter in pending:
        try:
            await alter
        except AlterRejected as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
    return build(request.response_type, throttle_time=0, responses=responses)


def _check_authorized(ctx: RequestContext, resource: Any) -> None:
    """As Kafka: ALTER_CONFIGS on the topic, or on the cluster for broker configs."""
    if resource.resource_type == TOPIC:
        if not authorize(
            ctx, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name
        ):
            raise AlterRejected(ErrorCode.topic_authorization_failed, "")
    elif not authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):
        raise AlterRejected(ErrorCode.cluster_authorization_failed, "")


def _replace_all_broker(_current: dict[str, str], resource: Any) -> dict[str, str]:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise AlterRejected(
            ErrorCode.invalid_request,
            f"Null value not supported for broker configs: {','.join(nulls)}",
        )
    return {c.name: c.value for c in resource.configs}


def _replace_all(info: TopicInfo, resource: Any) -> dict[str, str]:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise AlterRejected(
            ErrorCode.invalid_request,
            f"Null value not supported for topic configs: {','.join(nulls)}",
        )
    return {c.name: c.value for c in resource.configs}


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    return alter_resources(
        ctx, request, body.resources, bool(body.validate_only), _replace_all, _replace_all_broker
    )
