"""Request bodies the clients send, built as kio dataclasses for any version.

:func:`build` fills a kio message class from keyword values (nested dicts or
lists of dicts for nested entities), ignoring fields the version lacks and giving
required ones it was not told about a neutral value, so one call site serves
every version. :data:`CLIENT_VERSIONS` is the range of each API the clients
implement; the network client picks the highest version the broker supports.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kio.static.protocol import RequestPayload

from sluice.protocol import ApiKey
from sluice.protocol.apis import request_type

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "CLIENT_VERSIONS",
    "api_versions_request",
    "build",
    "init_producer_id_request",
    "metadata_request",
]

CLIENT_SOFTWARE_NAME: Final = "sluice-python"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"

CLIENT_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    ApiKey.PRODUCE: (3, 11),  # v3+ carries magic v2 batches; v12 needs transactions v2
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
}
"""API key -> (min, max) version the Sluice clients implement. Consumers and admin
clients add their APIs here."""


_Plan = tuple[tuple[str, str, type | None, bool], ...]
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, f.metadata.get("kafka_type", ""), _entity_in(hints[f.name]), required))
    return tuple(out)


def _entity_in(annotation: Any) -> type | None:
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _entity_in(arg)
        if found is not None:
            return found
    return None


def _convert(kafka_type: str, nested: type | None, value: Any) -> Any:
    if value is None:
        return None
    if nested is not None:
        if isinstance(value, Mapping):
            return build(nested, **value)
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return tuple(build(nested, **v) if isinstance(v, Mapping) else v for v in value)
        return value
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _zero(kafka_type: str, nested: type | None) -> Any:
    if nested is not None:
        return ()
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type == "string":
        return ""
    if kafka_type == "bool":
        return False
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid":
        return None
    return 0


def build(cls: type[Any], **values: Any) -> Any:
    """An instance of kio message class ``cls`` from ``values`` (see the module doc)."""
    kwargs: dict[str, Any] = {}
    for name, kafka_type, nested, required in _plan(cls):
        if name in values:
            kwargs[name] = _convert(kafka_type, nested, values[name])
        elif required:
            kwargs[name] = _zero(kafka_type, nested)
    return cls(**kwargs)


def api_versions_request(version: int) -> RequestPayload:
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.API_VERSIONS, version),
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        ),
    )


def metadata_request(
    version: int, topics: list[str] | None, allow_auto_topic_creation: bool
) -> RequestPayload:
    """Metadata for ``topics`` (None: all topics)."""
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.METADATA, version),
            topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )


def init_producer_id_request(
    version: int, producer_id: int = -1, producer_epoch: int = -1
) -> RequestPayload:
    """InitProducerId for an idempotent (non-transactional) producer."""
    return typing.cast(
        RequestPayload,
        build(
            request_type(ApiKey.INIT_PRODUCER_ID, version),
            transactional_id=None,
            transaction_timeout=2**31 - 1,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        ),
    )
