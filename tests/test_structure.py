"""The layering of ``src/sluice``, checked from the source: the sans-I/O core never imports
the network shell, and the concepts every layer shares are defined once."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "sluice"

CORE = (
    "base", "protocol", "log", "timer", "purgatory", "replication", "coordinator", "controller",
    "quota",
)  # fmt: skip
"""Packages that take bytes and a clock and return results: no sockets, no event loop."""

SHELL = (
    "sluice.server",
    "sluice.cli",
    "sluice.demo",
    "sluice.spark",
    "sluice.testing",
)
NETWORKING = ("asyncio", "socket", "selectors", "ssl", "socketserver")


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path, ast.parse(path.read_text(), str(path))


def _imports(module: str, path: Path, tree: ast.Module) -> Iterator[str]:
    """Every module ``tree`` imports, relative imports resolved, lazy ones included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module:
                yield node.module


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_core_never_imports_the_shell_or_networking() -> None:
    core = tuple(f"sluice.{p}" for p in CORE)
    found = [
        f"{module} imports {name}"
        for module, path, tree in _modules()
        if _within(module, core)
        for name in _imports(module, path, tree)
        if _within(name, SHELL) or _within(name, NETWORKING)
    ]
    assert found == []


def test_api_modules_import_neither_the_broker_nor_the_network_layer() -> None:
    """A request handler gets what it may use in its RequestContext: it never reaches
    into the Broker or the network layer (not even for type checking)."""
    found = [
        f"{module} imports {name}"
        for module, path, tree in _modules()
        if _within(module, ("sluice.server.apis",))
        for name in _imports(module, path, tree)
        if _within(name, ("sluice.server.broker", "sluice.server.network"))
    ]
    assert found == []


# What an API module may import only inside a function or for type checking: the broker
# imports every API module before its listeners open (sluice.server.apis).
_NOT_AT_API_MODULE_TOP = (
    "sluice.coordinator",
    "sluice.server.group_runtime",
    "sluice.server.txn_runtime",
    "sluice.server.cluster",
    "sluice.server.inter_broker",
    "kio.schema",
)


def _top_level_imports(module: str, path: Path, tree: ast.Module) -> Iterator[str]:
    """The imports ``tree`` runs when it is imported: not in functions, not under
    ``if TYPE_CHECKING``."""
    top = [
        node for node in tree.body
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
        and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]  # fmt: skip
    return _imports(module, path, ast.Module(top, []))


def test_api_modules_import_the_coordinators_and_kio_schemas_lazily() -> None:
    found = [
        f"{module} imports {name}"
        for module, path, tree in _modules()
        if _within(module, ("sluice.server.apis",))
        for name in _top_level_imports(module, path, tree)
        if _within(name, _NOT_AT_API_MODULE_TOP)
    ]
    assert found == []


# What the broker hands its collaborators by name instead of itself.
NARROW_COLLABORATORS = (
    "sluice.server.group_runtime",
    "sluice.server.txn_runtime",
    "sluice.server.topic_admin",
    "sluice.server.zk_topic_admin",
    "sluice.server.cluster",
    "sluice.server.replica_fetcher",
)


def test_coordinator_runtimes_topic_admin_and_cluster_do_not_import_the_broker() -> None:
    """The coordinator runtimes, the topic admins and the cluster manager take what they
    use (replica manager, metadata cache, topic admin, purgatory factory, ...), never the
    Broker (not even for type checking)."""
    modules = {module for module, _path, _tree in _modules()}
    assert set(NARROW_COLLABORATORS) <= modules
    found = [
        f"{module} imports {name}"
        for module, path, tree in _modules()
        if module in NARROW_COLLABORATORS
        for name in _imports(module, path, tree)
        if _within(name, ("sluice.server.broker",))
    ]
    assert found == []


MODE_BRANCHES_IN_BROKER = 3
"""``cluster is None`` / ``is not None`` in server/broker.py: only where stopping differs
(controlled shutdown first, the cluster manager stopped before the logs close, and
crashed). Everything else about the mode is in which topic admin and controller the
broker builds, and in its two start-up orders."""


def test_single_node_and_cluster_differ_in_collaborators_not_branches() -> None:
    branch = re.compile(r"cluster is (not )?None")
    broker = (PACKAGE / "server" / "broker.py").read_text()
    assert len(branch.findall(broker)) == MODE_BRANCHES_IN_BROKER
    for module in NARROW_COLLABORATORS:
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        assert not branch.search(path.read_text()), module


def test_the_check_sees_imports() -> None:
    """The walker finds absolute, relative and function-level imports."""
    tree = ast.parse("import asyncio\nfrom ..server import x\ndef f():\n    from .y import z\n")
    names = set(_imports("sluice.log.a", PACKAGE / "log" / "a.py", tree))
    assert names == {"asyncio", "sluice.server", "sluice.log.y"}


def _definitions(name: str) -> list[str]:
    """Where a class or module-level assignment named ``name`` is made."""
    places = []
    for module, _path, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                places.append(module)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    places.append(module)
    return places


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("TopicPartition", "sluice.base.topic_partition"),
        ("CompressionType", "sluice.protocol.records.compression"),
        ("BatchHeader", "sluice.protocol.records.batch"),
        ("MetadataCache", "sluice.replication.metadata_cache"),
        ("RequestContext", "sluice.server.request_context"),
        ("Clock", "sluice.base.clock"),
        ("SystemClock", "sluice.base.clock"),
        ("ManualClock", "sluice.base.clock"),
    ],
)
def test_shared_concepts_are_defined_once(name: str, home: str) -> None:
    assert _definitions(name) == [home]


_SYSTEM_TIME = frozenset({"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
                          "perf_counter_ns", "sleep"})  # fmt: skip


def _system_time_reads(tree: ast.Module) -> Iterator[str]:
    """``time.monotonic()`` and the like, and ``from time import ...`` of them."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
            and node.attr in _SYSTEM_TIME
        ):
            yield f"time.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            yield from (f"time.{a.name}" for a in node.names if a.name in _SYSTEM_TIME)


# Sans-I/O parts of the clients, on the same clock.
CLOCKED_CLIENT = (
    "sluice.client.net",
    "sluice.client.producer.accumulator",
    "sluice.client.producer.buffer_pool",
    "sluice.client.producer.sender",
)


def test_the_core_reads_time_only_through_the_clock() -> None:
    """Kafka's ``Time``: the sans-I/O core takes wall and monotonic time from the injected
    ``Clock`` (base/clock.py is the one place that reads the system's)."""
    core = (*(f"sluice.{p}" for p in CORE), *CLOCKED_CLIENT)
    found = [
        f"{module} reads {name}"
        for module, _path, tree in _modules()
        if _within(module, core) and module != "sluice.base.clock"
        for name in _system_time_reads(tree)
    ]
    assert found == []


# The v2 batch header's struct layouts, whole and in parts: only the records module may
# spell them out.
_HEADER_LAYOUTS = (">qiibIhiqqqhii", ">qiib", ">hiqqqhii", ">IhiqqqhiI")


def test_the_batch_header_layout_is_written_once() -> None:
    found = sorted(
        module
        for module, _path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in _HEADER_LAYOUTS
    )
    assert set(found) == {"sluice.protocol.records.batch"}


def test_the_server_connection_is_sans_io_all_the_way_down() -> None:
    """The broker's connection state machine, and everything it imports from Sluice,
    touch neither the shell nor networking; it holds the one frame parser."""
    modules = {module: (path, tree) for module, path, tree in _modules()}
    seen: set[str] = set()
    todo = ["sluice.protocol.server_connection"]
    found = []
    while todo:
        module = todo.pop()
        if module in seen or module not in modules:
            continue
        seen.add(module)
        for name in _imports(module, *modules[module]):
            if _within(name, SHELL) or _within(name, NETWORKING):
                found.append(f"{module} imports {name}")
            todo.append(name)
    assert "sluice.protocol.frames" in seen
    assert found == []
    assert _definitions("FrameDecoder") == ["sluice.protocol.frames"]
