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


@pytest.mark.parametrize("java_home", [None, "/nonexistent-jdk"])
def test_demo_without_java_says_how_to_install_it(
    java_home: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    if java_home is None:
        monkeypatch.delenv("JAVA_HOME", raising=False)
    else:
        monkeypatch.setenv("JAVA_HOME", java_home)
    assert main(["demo", "--events", "10"]) == 1
    err = capsys.readouterr().err
    assert "apt-get install openjdk-17-jre-headless" in err
    assert ("no java on PATH" if java_home is None else "/nonexistent-jdk has no bin/java") in err
    assert "Traceback" not in err


def test_demo_log_level_and_format_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--log-level", "LOUD"], ["--log-format", "xml"]):
        with pytest.raises(SystemExit) as info:
            main(["demo", *args])
        assert info.value.code == 2
        assert "invalid choice" in capsys.readouterr().err
