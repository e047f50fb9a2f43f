"""Build kio's per-version message dataclasses from plain values, for any version.

kio generates one frozen dataclass per API version. A broker handler (response)
or a client (request) describes its message once, as keyword values with nested
dicts/lists for nested entities;
``build`` keeps the fields that exist in the requested version, converts
milliseconds to the ``timedelta`` kio uses for duration fields, and fills
defaults. ``field`` reads a request field that older versions lack.

An ``error_message`` (or ``batch_index_error_message``) longer than
:data:`MAX_ERROR_MESSAGE` characters is cut short: a message may quote what a client sent
(a topic name, a config value, up to 32,767 bytes in a legacy string, more in a compact
one), and the response must still encode, its strings within their length prefix.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = ["MAX_ERROR_MESSAGE", "build", "field", "ms"]

_MISSING = object()

MAX_ERROR_MESSAGE = 1024
"""Characters kept of an error message in a response (4 KiB of UTF-8 at most)."""


_Plan = tuple[tuple[str, str, type | None, bool], ...]
_plans: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    """(name, kafka type, nested entity class or None, required) per field of ``cls``."""
    plan = _plans.get(cls)
    if plan is None:
        plan = _plans[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        nested = _entity_in(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, f.metadata.get("kafka_type", ""), nested, required))
    return tuple(out)


def _entity_in(annotation: Any) -> type | None:
    """The dataclass inside an annotation such as ``tuple[X, ...] | None``."""
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
    if kafka_type == "error_code" and isinstance(value, int):
        return ErrorCode(value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    if isinstance(value, list):
        return tuple(value)
    return value


def build(cls: type[Any], **values: Any) -> Any:
    """Construct ``cls`` from ``values``; keys that this version lacks are ignored."""
    kwargs: dict[str, Any] = {}
    for name, kafka_type, nested, required in _plan(cls):
        value = values.get(name, _MISSING)
        if value is _MISSING:
            if required:
                # Required in this version but not supplied: a neutral zero value.
                value = () if nested is not None else _zero(kafka_type)
            else:
                continue
        if type(value) is str and len(value) > MAX_ERROR_MESSAGE and name.endswith("message"):
            value = f"{value[: MAX_ERROR_MESSAGE - 30]}... ({len(value)} characters)"
        kwargs[name] = _convert(kafka_type, nested, value)
    return cls(**kwargs)


def _zero(kafka_type: str) -> Any:
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type in ("string",):
        return ""
    if kafka_type == "bool":
        return False
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid":
        return None
    return 0


def field(message: Any, name: str, default: Any = None) -> Any:
    """A request field, or ``default`` when this version does not have it."""
    return getattr(message, name, default)


def ms(value: Any) -> int:
    """Milliseconds from a kio duration (``timedelta``) or a plain integer."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
