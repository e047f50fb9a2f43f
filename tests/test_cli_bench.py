"""``sluice bench``'s command line and the compare report's goal arithmetic (no broker run)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sluice.bench_cli import bench_dir
from sluice.cli import build_parser, main

BENCH = Path(__file__).resolve().parents[1] / "bench"


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


def test_bench_rejects_an_unknown_harness(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "nonesuch"])
    assert "invalid choice" in capsys.readouterr().err


def test_bench_without_a_checkout_says_how(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr("sluice.bench_cli.bench_dir", lambda: None)
    assert main(["bench", "compare"]) == 2
    assert "SLUICE_BENCH_DIR" in capsys.readouterr().err


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
