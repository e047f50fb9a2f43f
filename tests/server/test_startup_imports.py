"""Startup stays light: what ``sluice broker`` imports before its listeners open, and what
a single-node broker never imports at all (nothing here is timed; the figures are
bench/compare.py's ``startup`` row). And the RequestGate that lets the listeners open
early: requests that arrive before the broker is ready wait and are served in order."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import ApiKey, Request, encode_request
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaServer
from sluice.server.request_gate import RequestGate
from support.waiting import wait_until_async
from support.wire import produce_request as _produce
from support.wire import read_correlation_id as _read_response

SRC = str(Path(__file__).resolve().parents[2] / "src")

# Imported on first use, or only once the listeners are open: a future top-level import
# of any of these in the startup path brings their cost back before the first connect.
NOT_BEFORE_LISTENING = (
    "sluice.coordinator",  # group and transaction coordinators: built after the listeners
    "sluice.controller.kafka_controller",
    "sluice.metastore",
    "sluice.server.cluster",
    "kazoo",
    "sluice.log.cleaner.log_cleaner",
    "sluice.server.group_runtime",
    "sluice.server.txn_runtime",
    "sluice.cli.topics",
    "sluice.cli.tool_clients",
    "sluice.demo",
    "sluice.cli.demo",
    "sluice.cli.bench",
    "sluice.spark",
    "sluice.client",
    "hypothesis",
)

# Never imported by a single-node broker, even once it serves: cluster mode, the
# controller's machinery, the CLI's tools, the demo, the benchmarks, the client.
NEVER_IN_SINGLE_NODE = (
    "sluice.controller.kafka_controller",
    "sluice.controller.admin_zk_client",
    "sluice.controller.kafka_zk_client",
    "sluice.controller.partition_state_machine",
    "sluice.controller.replica_state_machine",
    "sluice.controller.event_manager",
    "sluice.metastore",
    "sluice.server.cluster",
    "sluice.server.inter_broker",
    "kazoo",
    "sluice.cli.topics",
    "sluice.cli.tool_clients",
    "sluice.demo",
    "sluice.cli.demo",
    "sluice.cli.bench",
    "sluice.spark",
    "sluice.testing",
)


def _offenders(modules: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


ENV = {**os.environ, "PYTHONPATH": SRC}

# As ``sluice broker`` does (cli._skip_test_only_imports): kio would import hypothesis.
NO_HYPOTHESIS = "import sys\nsys.modules['hypothesis'] = None\n"
PRINT_MODULES = (
    "\nimport json, sys\n"
    "print(json.dumps(sorted(k for k, v in sys.modules.items() if v is not None)))"
)


def _fresh_modules(code: str) -> set[str]:
    """The modules imported by ``code`` in a fresh interpreter on this checkout."""
    out = subprocess.run(
        [sys.executable, "-c", NO_HYPOTHESIS + code + PRINT_MODULES],
        env=ENV, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.integration  # a fresh interpreter
def test_the_path_to_listening_does_not_import_the_heavy_modules() -> None:
    # What cmd_broker imports before Broker.start() opens the listeners: the module-level
    # imports of the CLI and the broker, and every API module (the broker needs their
    # versions), which import the coordinators only inside their functions; start()
    # imports the rest after listening.
    modules = _fresh_modules(
        "import sluice.cli, sluice.server.broker\n"
        "from sluice.server.apis import registry\n"
        "registry()"
    )
    assert "sluice.server.network" in modules  # the check sees the real startup path
    assert "sluice.server.apis.find_coordinator" in modules  # and the API modules
    assert _offenders(modules, (*NOT_BEFORE_LISTENING, "importlib.metadata")) == []
    assert "crc32c" not in modules  # only its C extension (sluice.protocol.records.crc)


@pytest.mark.integration  # a fresh interpreter
def test_the_api_modules_do_not_import_the_controller() -> None:
    modules = _fresh_modules("from sluice.server.apis import registry\nregistry()")
    assert "sluice.server.apis.alter_partition_reassignments" in modules
    assert "sluice.server.apis.leader_and_isr" in modules
    assert _offenders(modules, (*NEVER_IN_SINGLE_NODE, "hypothesis")) == []


@pytest.mark.integration  # a fresh interpreter
def test_a_single_node_broker_process_never_imports_cluster_or_tool_code(tmp_path: Path) -> None:
    """``python -X importtime -m sluice broker`` until it is ready, then SIGTERM: every
    module the process imported is on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "sluice", "broker",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    watchdog = threading.Timer(120, proc.kill)  # a broker that never gets ready ends the read
    watchdog.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "ready on" in line:
                break
        assert any("ready on" in line for line in lines), "".join(lines[-20:])
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
        watchdog.cancel()
    lines.extend(rest.splitlines())
    assert proc.returncode == 0, "".join(lines[-20:])  # SIGTERM once listening: clean stop
    imported = {m.group(1) for line in lines if (m := re.match(r"import time:.*\|\s*(\S+)$", line))}
    assert "sluice.coordinator.group.coordinator" in imported  # built once it listens
    assert _offenders(imported, NEVER_IN_SINGLE_NODE) == []


# -- RequestGate -------------------------------------------------------------------------


def _request(api_key: int, correlation_id: int) -> Any:
    class Header:
        pass

    header = Header()
    header.correlation_id = correlation_id  # type: ignore[attr-defined]

    class Req:
        pass

    req = Req()
    req.api_key = api_key  # type: ignore[attr-defined]
    req.header = header  # type: ignore[attr-defined]
    return req


def test_gate_holds_requests_and_serves_them_in_arrival_order() -> None:
    async def scenario() -> None:
        calls: list[int] = []

        def sync_handler(_ctx: Any, request: Any) -> str:
            calls.append(request.header.correlation_id)
            return f"sync {request.header.correlation_id}"

        async def async_answer(cid: int) -> str:
            return f"async {cid}"

        def async_handler(_ctx: Any, request: Any) -> Any:
            calls.append(request.header.correlation_id)
            return async_answer(request.header.correlation_id)

        def failing(_ctx: Any, request: Any) -> Any:
            calls.append(request.header.correlation_id)
            raise RuntimeError("boom")

        gate = RequestGate([1, 2, 3])
        held = [
            gate.handlers[key](None, _request(key, cid)) for cid, key in enumerate([1, 2, 1, 3, 2])
        ]
        held[4].cancel()  # its connection went away before the gate opened
        assert calls == [] and gate.held_count == 5 and not gate.is_open
        real = {1: sync_handler, 2: async_handler, 3: failing}
        gate.open(real)
        assert calls == [0, 1, 2, 3]  # in arrival order, synchronously, the cancelled skipped
        assert gate.is_open and gate.handlers == real  # later requests go straight through
        assert await held[0] == "sync 0"
        assert await held[1] == "async 1"
        assert await held[2] == "sync 2"
        with pytest.raises(RuntimeError, match="boom"):
            await held[3]
        with pytest.raises(RuntimeError):
            gate.open(real)

    asyncio.run(scenario())


def test_gate_open_takes_only_held_keys_and_close_cancels() -> None:
    async def scenario() -> None:
        gate = RequestGate([1, 2])
        with pytest.raises(ValueError):
            gate.open({3: lambda _ctx, request: None})  # not a gated key
        gate = RequestGate([1])
        waiting = gate.handlers[1](None, _request(1, 0))
        gate.close()
        assert waiting.cancelled() and gate.is_open

    asyncio.run(scenario())


@pytest.mark.integration  # a real listener
def test_requests_sent_before_the_gate_opens_are_answered_in_order() -> None:
    """Through a real listener: produces and a metadata request sent while the gate is
    shut are held, then appended in arrival order and answered in request order."""

    async def scenario() -> tuple[list[str], list[int]]:
        events: list[str] = []

        def produce(_ctx: Any, request: Request) -> Any:
            events.append(f"produce {request.header.correlation_id}")
            return build(request.response_type, responses=[], throttle_time=0)

        def metadata(_ctx: Any, request: Request) -> Any:
            events.append(f"metadata {request.header.correlation_id}")
            return build(request.response_type, throttle_time=0, brokers=[], cluster_id=None,
                         controller_id=-1, topics=[])  # fmt: skip

        gate = RequestGate([ApiKey.PRODUCE, ApiKey.METADATA])
        versions = registry().versions.restrict(gate.handlers)
        server = KafkaServer("127.0.0.1", 0, gate.handlers, versions, 1 << 20, 0, ClientIdentity())
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            for cid in (1, 2, 3):
                writer.write(encode_request(cid, _produce(1)))
            writer.write(encode_request(4, MetadataRequest(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )))  # fmt: skip
            await writer.drain()
            # the metadata waits behind them
            await wait_until_async(lambda: gate.held_count == 3, 5, "three requests held")
            assert events == []
            gate.open({ApiKey.PRODUCE: produce, ApiKey.METADATA: metadata})
            writer.write(encode_request(5, _produce(1)))  # after the gate: straight through
            await writer.drain()
            order = [await asyncio.wait_for(_read_response(reader), 5) for _ in range(5)]
        finally:
            writer.close()
            await server.stop_accepting()
            await server.drain_and_close(5)
        return events, order

    events, order = asyncio.run(scenario())
    assert order == [1, 2, 3, 4, 5]
    assert events == ["produce 1", "produce 2", "produce 3", "metadata 4", "produce 5"]
