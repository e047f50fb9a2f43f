"""``sluice demo``'s pipeline end to end on a small event count, checked against plain Python."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.demo import DemoConfig, run_demo
from sluice.demo.events import generate_events, reference_aggregates

pytestmark = pytest.mark.timeout(300)


def test_demo_pipeline_matches_plain_python(
    spark: Any, broker: sluice.EmbeddedBroker, tmp_path: Path
) -> None:
    config = DemoConfig(
        events=1_500, rate=0, window_s=60, watermark_s=90, minutes=4, partitions=2,
        output_dir=tmp_path, bootstrap_server=broker.bootstrap_servers, seed=11, trigger_s=1.0,
    )  # fmt: skip
    lines: list[str] = []
    result = run_demo(config, spark=spark, log=lines.append)

    assert result.matches, "\n".join(lines)
    # the reference is not empty or trivial: four windows, purchases and revenue in them
    windows = {w for w, _ in result.expected}
    assert len(windows) == 4
    assert sum(p for _, p, _ in result.metrics.values()) > 0
    assert sum(r for _, _, r in result.metrics.values()) > 0
    assert result.parquet_rows == len(result.metrics)
    assert result.chart.exists() and result.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any("match a plain-Python computation" in line for line in lines)
    assert any(line.startswith("total: ") for line in lines)


def test_generator_is_late_and_out_of_order_but_within_the_watermark() -> None:
    events = generate_events(2_000, 5, start_ms=1_700_000_040_000, seed=3)
    *shop, marker = events
    assert marker.type == "end_of_stream" and marker.event_time_ms > shop[-1].event_time_ms
    times = [e.event_time_ms for e in shop]
    out_of_order = sum(1 for a, b in itertools.pairwise(times) if b < a)
    assert out_of_order > 20
    # no event arrives more than 45.4 s after a later one was delivered (watermark 90 s)
    latest = 0
    for t in times:
        assert latest - t <= 45_400
        latest = max(latest, t)
    per_window = reference_aggregates(shop, 60_000)
    assert {a.window_start_ms for a in per_window} == {
        1_700_000_040_000 + m * 60_000 for m in range(5)
    }
    assert sum(a.views for a in per_window) == sum(1 for e in shop if e.type == "view")
