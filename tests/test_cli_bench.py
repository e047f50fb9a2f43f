"""``sluice bench``'s command line and the compare report's goal arithmetic (no broker run)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sluice.cli import build_parser, main
from sluice.cli.bench import bench_dir
from support.bench import BENCH, import_bench


def test_bench_dir_is_the_checkouts() -> None:
    assert bench_dir() == BENCH


def test_bench_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:  # fmt: skip
    (tmp_path / "compare.py").write_text("")
    monkeypatch.setenv("SLUICE_BENCH_DIR", str(tmp_path))
    assert bench_dir() == tmp_path


def test_bench_passes_the_rest_of_the_line_to_the_harness() -> None:
    args = build_parser().parse_args(["bench", "compare", "--quick", "--only", "startup"])
    assert args.harness == "compare"
    assert args.harness_args == ["--quick", "--only", "startup"]
    args = build_parser().parse_args(["bench", "request-cost", "--repeat", "1"])
    assert args.harness == "request-cost"
    assert args.harness_args == ["--repeat", "1"]


def test_bench_flush_takes_its_options() -> None:
    args = build_parser().parse_args(["bench", "flush", "--repeat", "1", "--partitions", "4"])
    assert args.harness == "flush" and args.harness_args == ["--repeat", "1", "--partitions", "4"]
    flush = import_bench("flush")
    options = flush.build_parser().parse_args(["--repeat", "1", "--partitions", "4"])
    assert (options.repeat, options.partitions, options.producers) == (1, 4, 2)
    assert flush.MODES == {"group": "true", "inline": "false"}


def test_bench_hostile_clients_takes_its_options() -> None:
    args = build_parser().parse_args(["bench", "hostile-clients", "--only", "idle"])
    assert args.harness == "hostile-clients" and args.harness_args == ["--only", "idle"]
    hostile = import_bench("hostile_clients")
    options = hostile.build_parser().parse_args(
        ["--only", "attack,idle", "--override", "queued.max.request.bytes=209715200"]
    )
    assert (options.attackers, options.slowloris, options.idle_connections) == (40, 20, 2000)
    assert options.override == ["queued.max.request.bytes=209715200"]
    assert set(hostile.RUNNERS) == {"attack", "slowloris", "flood", "idle"}


def test_bench_rejects_an_unknown_harness(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "nonesuch"])
    assert "invalid choice" in capsys.readouterr().err


def test_bench_without_a_checkout_says_how(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr("sluice.cli.bench.bench_dir", lambda: None)
    assert main(["bench", "compare"]) == 2
    assert "SLUICE_BENCH_DIR" in capsys.readouterr().err


HARNESS = """
    import signal, subprocess, sys
    from pathlib import Path

    def main(argv):
        here = Path(argv[0])
        child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
        try:
            (here / "child.pid").write_text(str(child.pid))
            signal.pause()  # the harness at work, until a signal ends it
        finally:
            child.kill()
            child.wait()
            (here / "stopped").write_text("")
        return 0
"""


@pytest.mark.integration  # sluice bench and the harness's child, processes
def test_sigterm_stops_the_harness_through_its_finally_blocks(tmp_path: Path) -> None:
    """``timeout`` or a CI limit SIGTERMs ``sluice bench``: the processes the harness
    started (brokers, load generators) must not outlive it."""
    (tmp_path / "compare.py").write_text(textwrap.dedent(HARNESS))
    env = {**os.environ, "SLUICE_BENCH_DIR": str(tmp_path)}
    bench = subprocess.Popen([sys.executable, "-m", "sluice", "bench", "compare", str(tmp_path)],
                             env=env)  # fmt: skip
    try:
        pid_file = tmp_path / "child.pid"
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert bench.poll() is None, "the harness exited early"
            assert time.monotonic() < deadline, "the harness did not start its child"
            time.sleep(0.02)
        child = int(pid_file.read_text())
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=30) == 128 + signal.SIGTERM
        assert (tmp_path / "stopped").exists()
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)  # reaped by the harness's finally block
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()


@dataclass
class FakeRow:
    key: str
    generator: str = "gen"
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    import compare_report

    yield compare_report
    sys.modules.pop("compare_report", None)


def test_goal_ratio_is_the_median_of_per_run_ratios(report) -> None:  # type: ignore[no-untyped-def]
    row = FakeRow("produce-p1", runs={
        "sluice": [{"MB/s": 120.0, "broker CPU-s/GB": 2.0}, {"MB/s": 90.0, "broker CPU-s/GB": 2.0},
                   {"MB/s": 300.0, "broker CPU-s/GB": 2.0}],
        "tansu": [{"MB/s": 100.0, "broker CPU-s/GB": 4.0}, {"MB/s": 100.0, "broker CPU-s/GB": 4.0},
                  {"MB/s": 100.0, "broker CPU-s/GB": 4.0}],
    })  # fmt: skip
    lines = {(ln.text): ln for ln in report.goal_lines([row])}
    mbs = lines["MB/s >= 1.2x Tansu"]
    assert mbs.value == pytest.approx(1.2)  # ratios 1.2, 0.9, 3.0
    assert mbs.met is True
    assert lines["CPU-s/GB <= Tansu"].value == pytest.approx(0.5)
    assert lines["MB/s >= 90% of null sink"].met is None  # no null runs: not judged


def test_absolute_goal_and_missing_rows(report) -> None:  # type: ignore[no-untyped-def]
    row = FakeRow("startup", runs={"sluice": [{"ready ms": 400.0, "idle RSS MB": 40.0}],
                                   "tansu": [{"ready ms": 30.0, "idle RSS MB": 10.0}]})  # fmt: skip
    lines = report.goal_lines([row])
    assert [(ln.text, ln.met) for ln in lines] == [
        ("ready <= 300 ms", False), ("idle RSS <= 60 MB", True)]  # fmt: skip
    assert lines[0].theirs == 30.0 and lines[0].base == "tansu"


@pytest.fixture
def compare(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    import compare as module

    yield module
    sys.modules.pop("compare", None)


def idle_options(compare, idle_wait: float = 20.0):  # type: ignore[no-untyped-def]
    return compare.Options(quick=False, repeat=1, seconds=1, records=1, latency_seconds=1,
                           rate=1, producers=1, store_gb=0.1, idle_cpu=25.0,
                           idle_wait=idle_wait)  # fmt: skip


def fake_machine(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, compare, reported: list[int | None]
) -> None:
    """One-second CPU samples on a manual clock, an idle CPU and load, and the free page
    reporting counter taking the values of ``reported`` (its last one from then on)."""
    now = [0.0]

    def cpu_percent(interval: float) -> float:
        now[0] += interval
        return 0.0

    machine = compare.brokers  # where wait_idle reads the machine
    monkeypatch.setattr(machine.psutil, "cpu_percent", cpu_percent)
    monkeypatch.setattr(machine.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    values = iter(reported)
    last = [reported[-1]]
    monkeypatch.setattr(machine, "reported_kib", lambda: next(values, last[0]))


def test_idle_waits_until_free_page_reporting_settles(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, compare
) -> None:
    # The counter moves for the first samples (a run just freed memory), then stays.
    fake_machine(monkeypatch, compare, [100, 200, 300, 400, 400, 400, 400, 400])
    seen = compare.wait_idle(idle_options(compare))
    assert seen == "load 0.10 busy 0% waited 6s"  # last change at 3 s, then 3 quiet s


def test_idle_without_page_reporting_is_cpu_and_load_only(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, compare
) -> None:
    fake_machine(monkeypatch, compare, [None])
    assert compare.wait_idle(idle_options(compare)) == "load 0.10 busy 0% waited 1s"


def test_idle_gives_up_while_pages_are_still_reported(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, compare
) -> None:
    fake_machine(monkeypatch, compare, list(range(0, 10_000, 7)))
    seen = compare.wait_idle(idle_options(compare, idle_wait=5.0))
    assert seen == "load 0.10 busy 0% reporting pages NOT IDLE after 5s"


def test_the_cluster_row_reports_the_latency_runs_rate_and_leader_cpu(  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch, compare
) -> None:
    """One record in flight falls below the paced rate once p50 exceeds its interval: the
    row says what rate its latency run reached and how busy the leader was."""

    class Nodes:
        stopped = False

        def stop(self) -> None:
            Nodes.stopped = True

    latency = {"p50 ms": 1.2, "p99 ms": 2.5, "max ms": 9.0, "records/s": 812.0,
               "broker CPU %": 86.0, "broker peak RSS MiB": 40.0}  # fmt: skip
    fake = types.SimpleNamespace(
        Config=lambda *args: args,
        start_cluster=lambda session_ms: Nodes(),
        single_throughput=lambda handle, partitions, cfg: {"MB/s": 400.0},
        cluster_throughput=lambda nodes, partitions, cfg: {"MB/s": 300.0},
        cluster_latency=lambda nodes, workload, cfg: dict(latency),
    )
    monkeypatch.setitem(sys.modules, "cluster", fake)
    monkeypatch.setattr(compare.brokers, "sluice", lambda: contextlib.nullcontext(("b:1", None)))
    monkeypatch.setattr(compare, "wait_idle", lambda opts: "idle")
    row = compare.cluster_row(idle_options(compare))
    assert row.errors == [] and Nodes.stopped
    (run,) = row.runs["cluster"]
    assert run == {"MB/s": 300.0, "p50 ms": 1.2, "p99 ms": 2.5, "max ms": 9.0,
                   "latency records/s": 812.0, "leader CPU %": 86.0}  # fmt: skip
    assert row.runs["single"] == [{"MB/s": 400.0}]


def test_the_soak_trend_sets_the_first_half_beside_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import soak

    try:
        # A p99 that creeps up and an RSS that leaks show as a second half above the first.
        minutes = [{"e2e p99": 10.0 * i, "RSS MB": 40.0 + i} for i in range(1, 7)]
        minutes[2].pop("e2e p99")  # a report with too few samples has no percentile
        lines = soak.trend(minutes)
        assert lines == [
            " e2e p99: 10.0-60.0; median of the first 2 reports 15.0, of the last 3 50.0",
            "  RSS MB: 41.0-46.0; median of the first 3 reports 42.0, of the last 3 45.0",
        ]
        assert soak.trend([{"e2e p99": 5.0}]) == []
    finally:
        sys.modules.pop("soak", None)


def test_compare_launches_brokers_from_compiled_bytecode(compare) -> None:  # type: ignore[no-untyped-def]
    """Every module of the package the broker runs from has its bytecode written (as a
    wheel install has), whatever PYTHONDONTWRITEBYTECODE says."""
    import importlib.util

    import sluice

    compare.brokers.compile_sluice()
    package = Path(sluice.__file__).parent
    sources = sorted(package.rglob("*.py"))
    assert sources
    missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).exists()]
    assert missing == []


def test_the_report_names_the_machine(report) -> None:  # type: ignore[no-untyped-def]
    env = {"cpu model": "AMD EPYC", "wake-up round trip us": {"one CPU": 13.6, "across CPUs": 60.8}}
    assert report.machine_line(env) == (
        "cpu AMD EPYC; wake-up round trip 13.6 us one CPU, 60.8 us across CPUs")  # fmt: skip
    assert report.machine_line({}) == "cpu unknown; wake-up round trip not measured"


@pytest.mark.integration  # the probe round-trips a byte with a second process
def test_the_wakeup_probe_measures_and_restores_affinity(compare) -> None:  # type: ignore[no-untyped-def]
    before = os.sched_getaffinity(0)
    trips = compare.brokers.wakeup_round_trip_us(count=50)
    assert os.sched_getaffinity(0) == before
    expected = {"one CPU"} | ({"across CPUs"} if len(before) > 1 else set())
    assert set(trips) == expected
    assert all(us > 0 for us in trips.values())
    assert compare.brokers.cpu_model() != ""


def test_bench_authorizer_takes_its_options_and_makes_valid_acls() -> None:
    args = build_parser().parse_args(["bench", "authorizer", "--repeat", "1", "--acls", "10"])
    assert args.harness == "authorizer" and args.harness_args == ["--repeat", "1", "--acls", "10"]
    bench = import_bench("authorizer")
    options = bench.build_parser().parse_args(["--repeat", "1"])
    assert (options.repeat, options.acls, options.size) == (1, 1000, 1024)
    bindings = bench.acl_bindings(1000)
    assert len(set(bindings)) == 1000
    for binding in bindings:
        binding.validate()
    costs = bench.decision_costs(50)
    assert costs["cached ns"] > 0 and costs["uncached ns"] > 0
