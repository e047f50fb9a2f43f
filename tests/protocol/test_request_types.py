"""``sluice.protocol.requests``: each API's request union holds exactly kio's classes of
the versions the broker accepts, and ``body_of`` hands out a body only for its own API."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import DEFAULT_VERSIONS, ApiKey, decode_request, encode_request
from sluice.protocol import requests as request_types
from sluice.protocol.apis import request_type
from sluice.protocol.requests import body_of


def _aliases() -> dict[str, typing.Any]:
    """The module's type-checking-only aliases, evaluated."""
    source = Path(request_types.__file__).read_text()
    namespace: dict[str, typing.Any] = {"__name__": "_requests", "__package__": "sluice.protocol"}
    exec(compile(source.replace("if TYPE_CHECKING:", "if True:"), "requests", "exec"), namespace)
    return namespace


def test_each_union_holds_the_accepted_versions() -> None:
    aliases = _aliases()
    for key, entry in DEFAULT_VERSIONS.items():
        versions = range(entry.min_version, entry.max_version + 1)
        expected = {request_type(key, v) for v in versions}
        name = request_type(key, entry.max_version).__name__
        union = aliases[name]
        members = set(typing.get_args(union)) or {union}
        assert members == expected, ApiKey(key).name


def test_body_of_checks_the_api() -> None:
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)  # fmt: skip
    request = decode_request(encode_request(1, body)[4:])
    assert body_of(request, ApiKey.METADATA) == body
    with pytest.raises(TypeError):
        body_of(request, ApiKey.FETCH)  # type: ignore[call-overload]
