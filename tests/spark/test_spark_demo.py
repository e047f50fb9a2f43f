"""``sluice demo``'s pipeline end to end on a small event count, checked against plain Python."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sluice.demo import DemoConfig, run_demo
from sluice.demo.events import generate_events, reference_aggregates
from sluice.demo.report import chart_figure

pytestmark = pytest.mark.timeout(300)


def _get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as answer:
        body: bytes = answer.read()
    return body


def test_demo_pipeline_matches_plain_python(spark: Any, tmp_path: Path) -> None:
    """On its own embedded broker, as `sluice demo` runs: the console and the metrics it
    announces answer while it runs, and the metrics count the clickstream."""
    config = DemoConfig(
        events=1_500, rate=0, window_s=60, watermark_s=90, minutes=4, partitions=2,
        output_dir=tmp_path, seed=11, trigger_s=1.0,
    )  # fmt: skip
    lines: list[str] = []
    urls: dict[str, str] = {}
    seen: dict[str, bytes] = {}

    def log(line: str) -> None:
        lines.append(line)
        for label in ("web console: ", "Prometheus metrics: "):
            if label in line:
                urls[label] = line.split(label)[1].split()[0]
                seen[label] = _get(urls[label])
        if "window rows from" in line and "Prometheus metrics: " in urls:  # after the run
            seen["metrics after"] = _get(urls["Prometheus metrics: "])

    result = run_demo(config, spark=spark, log=log)

    assert result.matches, "\n".join(lines)
    assert b"<html" in seen["web console: "].lower()
    after = seen["metrics after"].decode()
    messages_in = sum(
        float(row.rsplit(" ", 1)[1]) for row in after.splitlines()
        if row.startswith("kafka_server_brokertopicmetrics_messagesin_total{topic=\"shop-clicks")
    )  # fmt: skip
    assert messages_in == 1_500 + 1  # the clickstream and its end-of-stream marker
    # the reference is not empty or trivial: four windows, purchases and revenue in them
    windows = {w for w, _ in result.expected}
    assert len(windows) == 4
    assert sum(p for _, p, _ in result.metrics.values()) > 0
    assert sum(r for _, _, r in result.metrics.values()) > 0
    assert result.parquet_rows == len(result.metrics)
    # the Parquet files keep the window bounds as timestamps, which read back as the
    # windows the topic names
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "metrics.parquet")
    for bound in ("window_start", "window_end"):
        assert pa.types.is_timestamp(table.schema.field(bound).type), table.schema
    starts = {t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in table.column("window_start").to_pylist()}
    assert starts == windows
    ends = table.column("window_end").to_pylist()
    assert all((e - s).total_seconds() == 60 for s, e in
               zip(table.column("window_start").to_pylist(), ends, strict=True))  # fmt: skip
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


def test_chart_legend_beside_the_bars_and_conversion_from_zero() -> None:
    import matplotlib.pyplot as plt

    metrics = {
        (f"2026-01-01T10:0{m}:00Z", product): (100, 10 + m, 1000 * (m + 1))
        for m in range(6) for product in ("p01", "p02", "p03", "p04", "p05", "p06", "p07")
    }  # fmt: skip
    fig = chart_figure(metrics, "test")
    try:
        ax_rev, ax_conv = fig.axes
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        legend = ax_rev.get_legend().get_window_extent(renderer)
        plot = ax_rev.get_window_extent(renderer)
        assert legend.x0 >= plot.x1  # to the right of the plot area: it hides no bar
        assert ax_conv.get_ylim()[0] == 0
        assert ax_conv.get_ylim()[1] > max(line.get_ydata().max() for line in ax_conv.lines)
    finally:
        plt.close(fig)
