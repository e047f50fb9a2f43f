"""``sluice demo``'s command line: help text and bad arguments (no Spark started)."""

from __future__ import annotations

import pytest

from sluice.cli import main


def test_demo_help_explains_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--events", "--rate", "--window", "--watermark", "--output-dir",
                   "--bootstrap-server", "--cluster"):  # fmt: skip
        assert option in text
    assert "Parquet" in text and "watermark" in text


@pytest.mark.parametrize("args", [["--events", "0"], ["--window", "0"], ["--minutes", "0"]])
def test_demo_rejects_bad_numbers(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", *args]) == 2
    assert "sluice demo:" in capsys.readouterr().err


def test_demo_cluster_mode_starts_its_own_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--cluster", "--bootstrap-server", "127.0.0.1:9092"]) == 2
    assert "--cluster starts its own brokers" in capsys.readouterr().err
