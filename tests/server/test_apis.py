"""The API modules and their registry: every module is found and declares its key,
versions and handler; each request type union holds exactly the versions declared; the
versions tables of docs/protocol.md are the declarations; and what a broker advertises
in ApiVersions stays byte for byte what it was (a change to a served version range is a
deliberate edit of this file)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import re
import typing
from pathlib import Path
from types import ModuleType

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

import sluice.server.apis as apis_package
from sluice.protocol import (
    ApiKey,
    VersionTable,
    api_versions_fallback_response,
    api_versions_response,
    decode_request,
    encode_request,
    encode_response,
    kio_version_range,
    request_type,
)
from sluice.server.apis import ApiRegistry, ApiSpec, RawApiSpec, registry

# (api key, min accepted, max, min advertised) of every API a broker serves.
SERVED = [
    (0, 3, 11, 0), (1, 4, 17, 4), (2, 1, 9, 1), (3, 0, 12, 0), (8, 2, 9, 2), (9, 1, 9, 1),
    (10, 0, 6, 0), (11, 0, 9, 0), (12, 0, 4, 0), (13, 0, 5, 0), (14, 0, 5, 0), (15, 0, 5, 0),
    (16, 0, 5, 0), (17, 0, 1, 0), (18, 0, 4, 0), (19, 2, 7, 2), (20, 1, 6, 1), (21, 0, 2, 0),
    (22, 0, 5, 0), (23, 2, 4, 2), (24, 0, 5, 0), (25, 0, 4, 0), (26, 0, 4, 0), (27, 1, 1, 1),
    (28, 0, 4, 0), (29, 1, 3, 1), (30, 1, 3, 1), (31, 1, 3, 1), (32, 1, 4, 1), (33, 0, 2, 0),
    (34, 1, 2, 1), (35, 1, 4, 1), (36, 0, 2, 0), (37, 0, 3, 0), (42, 0, 2, 0), (43, 0, 2, 0),
    (44, 0, 1, 0), (45, 0, 0, 0), (46, 0, 0, 0), (47, 0, 0, 0), (48, 0, 1, 0), (49, 0, 1, 0),
    (50, 0, 0, 0), (51, 0, 0, 0), (60, 0, 1, 0), (61, 0, 0, 0), (65, 0, 0, 0), (66, 0, 1, 0),
]  # fmt: skip

# SHA-256 of the framed ApiVersions response (correlation id 7) of each version, and of
# the v0 fallback sent for a version the broker does not know.
ANSWERS = {
    0: "e919675b3a209528f3d07dfb075ef04624852038de7f1c63e7d3a9f89d9061c0",
    1: "6bcc5a1cf7168ecdb5d381815de945e6e2a6758ffdde561d5edae7741e5adbb1",
    2: "6bcc5a1cf7168ecdb5d381815de945e6e2a6758ffdde561d5edae7741e5adbb1",
    3: "4defc13b74a78366d6ff27bb7998ee9003fb1fdf81822830f7b7b87649ec8e7e",
    4: "4defc13b74a78366d6ff27bb7998ee9003fb1fdf81822830f7b7b87649ec8e7e",
}
FALLBACK = "23f85764a6fee237defb01dec8247d39e369f667b40b4795ea1da0430a5ea2dc"


def served_versions() -> VersionTable:
    """The version table a broker accepts and advertises."""
    return registry().versions


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_served_versions_are_unchanged() -> None:
    table = served_versions()
    entries = [(k, e.min_version, e.max_version, e.advertised_min) for k, e in table.items()]
    assert entries == SERVED


@pytest.mark.parametrize("version", sorted(ANSWERS))
def test_api_versions_answers_are_byte_identical(version: int) -> None:
    answer = encode_response(7, api_versions_response(served_versions(), version))
    assert _digest(answer) == ANSWERS[version]


def test_the_fallback_answer_is_byte_identical() -> None:
    answer = encode_response(7, api_versions_fallback_response(served_versions()))
    assert _digest(answer) == FALLBACK


# -- the registry ---------------------------------------------------------------------------

PACKAGE = Path(apis_package.__file__).parent


def _api_modules() -> list[ModuleType]:
    names = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    return [importlib.import_module(f"sluice.server.apis.{name}") for name in names]


def test_the_registry_finds_every_module() -> None:
    found = registry()
    modules = _api_modules()
    assert len(modules) == len(found.specs) + len(found.raw_keys)
    for module in modules:
        spec = module.API
        if isinstance(spec, RawApiSpec):
            assert spec.key in found.raw_keys, module.__name__
        else:
            assert found.specs[spec.key] is spec, module.__name__
            assert found.handlers([spec.key])[spec.key] is module.handle


def test_every_advertised_api_has_a_handler() -> None:
    found = registry()
    handlers = found.handlers()
    assert set(handlers) == set(found.versions) == set(found.specs)
    assert all(callable(handle) for handle in handlers.values())
    assert ApiKey.SASL_HANDSHAKE in found.versions
    assert ApiKey.SASL_AUTHENTICATE in found.versions


def test_a_module_is_named_after_its_api() -> None:
    for module in _api_modules():
        assert module.__name__.rpartition(".")[2] == module.API.key.name.lower()
        assert module.__doc__ is not None, module.__name__


def test_the_versions_a_module_note_names_are_its_spec() -> None:
    for module in _api_modules():
        spec = module.API
        found = re.search(r"^Versions (\d+)(?:-(\d+))?", module.__doc__ or "", re.MULTILINE)
        if isinstance(spec, ApiSpec) and found:
            low, high = int(found[1]), int(found[2] or found[1])
            assert (low, high) == (spec.versions.min_version, spec.versions.max_version)


def test_the_apis_served_before_the_coordinators() -> None:
    assert set(registry().served_before_coordinators) == {
        ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH,
        ApiKey.LIST_OFFSETS, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_CONFIGS,
        ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DELETE_RECORDS, ApiKey.CREATE_PARTITIONS,
        ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.DESCRIBE_LOG_DIRS,
        ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
        ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS,
        ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_PRODUCERS,
    }  # fmt: skip


def _body_union(module: ModuleType) -> set[type]:
    """The members of the module's ``Body`` alias, evaluated from its TYPE_CHECKING block."""
    tree = ast.parse(inspect.getsource(module))
    block = next(
        node for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )  # fmt: skip
    namespace = dict(vars(module))
    exec(compile(ast.Module(block.body, []), module.__name__, "exec"), namespace)
    body = namespace["Body"]
    return set(typing.get_args(body)) or {body}


def test_each_body_union_holds_exactly_the_declared_versions() -> None:
    for key, spec in registry().specs.items():
        module = importlib.import_module(f"sluice.server.apis.{spec.key.name.lower()}")
        versions = range(spec.versions.min_version, spec.versions.max_version + 1)
        assert _body_union(module) == {request_type(key, v) for v in versions}, spec


def test_body_checks_the_api() -> None:
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)  # fmt: skip
    request = decode_request(encode_request(1, body)[4:], served_versions())
    metadata = registry().specs[ApiKey.METADATA]
    assert metadata.body(request) == body
    with pytest.raises(TypeError):
        registry().specs[ApiKey.FETCH].body(request)


def _module(name: str, **attributes: object) -> ModuleType:
    module = ModuleType(name)
    vars(module).update(attributes)
    return module


def _handle(_ctx: object, _request: object) -> None:
    return None


def test_the_registry_refuses_a_module_without_a_spec_or_twice_the_same_key() -> None:
    heartbeat = _module("heartbeat", API=ApiSpec(ApiKey.HEARTBEAT, 0, 4), handle=_handle)
    with pytest.raises(TypeError):
        ApiRegistry([heartbeat, _module("helper", handle=_handle)])
    with pytest.raises(TypeError):
        ApiRegistry([_module("heartbeat", API=ApiSpec(ApiKey.HEARTBEAT, 0, 4))])
    with pytest.raises(ValueError):
        ApiRegistry([heartbeat, heartbeat])
    with pytest.raises(ValueError):  # outside what kio decodes
        ApiSpec(ApiKey.HEARTBEAT, 0, 5)


# -- docs/protocol.md ---------------------------------------------------------------------

PROTOCOL_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
_ROW = re.compile(r"^\| [A-Za-z]+ \((\d+)\) \|")
_SPAN = re.compile(r"^(\d+)(?:-(\d+))?$")


def _span(text: str) -> tuple[int, int]:
    found = _SPAN.match(text.strip().strip("*"))
    assert found, text
    return int(found[1]), int(found[2] or found[1])


def test_the_versions_tables_in_the_protocol_doc_are_the_specs() -> None:
    """Each row of the doc's versions tables: the key's kio range (the column after the
    clients') and what Sluice accepts, then in parentheses what it advertises if lower."""
    section = PROTOCOL_DOC.read_text().split("## Versions", 1)[1].split("\n## ", 1)[0]
    rows: dict[int, tuple[tuple[int, int], tuple[int, int], tuple[int, int]]] = {}
    for line in section.splitlines():
        if not (found := _ROW.match(line)):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        accepted, _, advertised = cells[-1].partition(" (")
        key = int(found[1])
        assert key not in rows, line
        rows[key] = (
            _span(cells[-2]),
            _span(accepted),
            _span(advertised.rstrip(")")) if advertised else _span(accepted),
        )
    specs = registry().specs
    assert set(rows) == set(specs)
    for key, (kio, accepted, advertised) in rows.items():
        versions = specs[key].versions
        assert kio == kio_version_range(key), ApiKey(key).name
        assert accepted == (versions.min_version, versions.max_version), ApiKey(key).name
        assert advertised == (versions.advertised_min, versions.max_version), ApiKey(key).name
