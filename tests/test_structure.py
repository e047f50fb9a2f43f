"""The layering of ``src/sluice``, checked from the source: the sans-I/O core never imports
the network shell, and the concepts every layer shares are defined once."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "sluice"

CORE = ("base", "protocol", "log", "timer", "purgatory", "replication", "coordinator", "controller")
"""Packages that take bytes and a clock and return results: no sockets, no event loop."""

SHELL = (
    "sluice.server",
    "sluice.cli",
    "sluice.demo",
    "sluice.spark",
    "sluice.embedded",
    "sluice.embedded_cluster",
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


def test_handlers_import_neither_the_broker_nor_the_network_layer() -> None:
    """A request handler gets what it may use in its RequestContext: it never reaches
    into the Broker or the network layer (not even for type checking)."""
    found = [
        f"{module} imports {name}"
        for module, path, tree in _modules()
        if _within(module, ("sluice.server.handlers",))
        for name in _imports(module, path, tree)
        if _within(name, ("sluice.server.broker", "sluice.server.network"))
    ]
    assert found == []


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
    ],
)
def test_shared_concepts_are_defined_once(name: str, home: str) -> None:
    assert _definitions(name) == [home]


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
