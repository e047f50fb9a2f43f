"""The log's set-up: --log-level checked, text and JSON lines (one object per line with
ts, level, logger, message and the event's fields); and ``sluice broker --log-format
json`` writing nothing but JSON lines from start to stop."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from sluice.base.log_summary import summarize
from sluice.base.topic_partition import TopicPartition
from sluice.cli import main
from sluice.cli.log_format import log_level, setup_logging
from sluice.ports import free_port


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_levels_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert (log_level("warn"), log_level(" debug ")) == ("WARNING", "DEBUG")
    with pytest.raises(SystemExit) as info:
        main(["broker", "--log-level", "verbose"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--log-level: invalid choice: 'VERBOSE'" in err and "'DEBUG', 'INFO'" in err
    with pytest.raises(ValueError, match="unknown log level"):
        setup_logging("loud")


def test_json_lines_carry_the_event_fields(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("info", "json", stream=out)
    log = logging.getLogger("sluice.test.events")
    tp = TopicPartition("orders", 3)
    log.info("[Partition %s broker=%d] Shrinking ISR from %s to %s", tp, 2, [1, 2], [2],
             extra={"event": "isr_shrink", "topic": tp.topic, "partition": tp.partition,
                    "broker_id": 2, "isr": [2], "where": Path("/data/a")})  # fmt: skip
    log.debug("not at INFO")
    try:
        raise OSError(28, "No space left on device")
    except OSError:
        log.exception("log dir %s is offline", "/data/a", extra={"log_dir": "/data/a"})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2
    first, second = lines
    assert first["level"] == "INFO" and first["logger"] == "sluice.test.events"
    assert first["message"] == "[Partition orders-3 broker=2] Shrinking ISR from [1, 2] to [2]"
    assert (first["event"], first["topic"], first["partition"], first["broker_id"]) == (
        "isr_shrink",
        "orders",
        3,
        2,
    )
    assert first["isr"] == [2] and first["where"] == "/data/a"  # str() of what JSON lacks
    assert datetime.fromisoformat(first["ts"]).utcoffset() is not None
    assert "exc_info" not in first
    assert second["level"] == "ERROR" and second["log_dir"] == "/data/a"
    assert "OSError: [Errno 28] No space left on device" in second["exc_info"]


def test_text_lines_keep_kafkas_layout(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("WARNING", "text", stream=out)
    logging.getLogger("sluice.test").warning("disk %s", "full", extra={"log_dir": "/a"})
    logging.getLogger("sluice.test").info("not shown")
    (line,) = out.getvalue().splitlines()
    assert line.startswith("[") and line.endswith("] WARNING sluice.test: disk full")


def test_summaries_name_ten_and_count_the_rest() -> None:
    assert summarize([1, 2, 3]) == "1, 2, 3"
    assert summarize(list(range(25))) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 15 more"
    assert summarize(["a", "b", "c"], str.upper, sample=2) == "A, B and 1 more"


@pytest.mark.integration
def test_broker_process_writes_json_lines(tmp_path: Path) -> None:
    port = free_port()
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    src = Path(__file__).resolve().parents[1] / "src"
    broker = subprocess.Popen(
        [sys.executable, "-m", "sluice", "broker", "--log-format", "json",
         "--override", f"listeners={listener}", "--override", f"log.dirs={tmp_path}"],
        env={**os.environ, "PYTHONPATH": str(src)}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert broker.stderr is not None
    lines = []
    try:
        for line in broker.stderr:
            lines.append(json.loads(line))
            if "ready on" in lines[-1]["message"]:
                break
        broker.send_signal(signal.SIGTERM)
        _, rest = broker.communicate(timeout=30)
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait(10)
    lines += [json.loads(line) for line in rest.splitlines()]
    assert broker.returncode == 0
    assert {"ts", "level", "logger", "message"} <= set(lines[0])
    assert any("stopped cleanly" in line["message"] for line in lines)
