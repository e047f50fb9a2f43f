"""Ctrl-C during ``sluice demo``: one line on stderr, exit status 130, no traceback from
the driver, py4j, Spark's JVM or its Python workers, and no process left behind (the
first test is quick; the one that interrupts a running micro-batch takes minutes on a
busy 2-core machine and is marked slow).

The demo runs as a process of its own process group, and SIGINT goes to the whole
group, as a terminal sends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice.cli.demo import INTERRUPTED

SRC = Path(__file__).resolve().parents[2] / "src"


def _interrupt_demo(tmp_path: Path, after: str, timeout_s: float) -> tuple[int, str]:
    """Start the demo, send SIGINT to its process group once a line containing
    ``after`` appears; returns its exit status and everything it printed after that."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYSPARK_PYTHON": sys.executable}
    demo = subprocess.Popen(
        [sys.executable, "-m", "sluice", "demo", "--events", "200000", "--rate", "2000",
         "--output-dir", str(tmp_path)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert demo.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = []
    try:
        for line in demo.stdout:
            seen.append(line)
            if after in line:
                break
            assert time.monotonic() < deadline, f"no {after!r} line in time: {seen}"
        else:
            pytest.fail(f"the demo ended before {after!r}: {seen}")
        os.killpg(demo.pid, signal.SIGINT)
        rest, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(10)
    return demo.returncode, rest


def _assert_quiet_exit(status: int, rest: str, tmp_path: Path) -> None:
    assert status == INTERRUPTED, rest
    *before, last = rest.strip().splitlines()
    assert last == "sluice demo: interrupted; Spark and the broker are stopped", rest
    # at most the sink's own word that the batch in flight was dropped (a Spark worker's)
    assert all(line.startswith("sluice sink: ") for line in before if line), rest
    assert "Traceback" not in rest and "Exception" not in rest
    time.sleep(1)  # the JVM and the Python workers end with the driver
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    daemons = subprocess.run(["pgrep", "-f", "sluice.demo.spark_daemon"], capture_output=True,
                             text=True)  # fmt: skip
    assert left.stdout == "" and daemons.stdout == "", (left.stdout, daemons.stdout)


def test_ctrl_c_while_spark_starts(tmp_path: Path) -> None:
    status, rest = _interrupt_demo(tmp_path, "starting Spark", 60)
    _assert_quiet_exit(status, rest, tmp_path)


@pytest.mark.slow
def test_ctrl_c_during_a_micro_batch(tmp_path: Path) -> None:
    status, rest = _interrupt_demo(tmp_path, "micro-batch 1:", 240)
    _assert_quiet_exit(status, rest, tmp_path)
