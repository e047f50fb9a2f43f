"""``sluice chaos``'s command line, without running a cluster: its fault names, option
parsing and refusals."""

from __future__ import annotations

import pytest

from sluice.cli import build_parser, main
from sluice.cli.chaos import FAULT_NAMES
from sluice.testing.chaos.faults import FAULTS


def test_the_command_names_every_fault() -> None:
    assert tuple(FAULTS) == FAULT_NAMES


def test_options() -> None:
    args = build_parser().parse_args(
        ["chaos", "--faults", "kill, partition", "--duration", "5", "--hold", "1:2",
         "--quiet", "3", "--seed", "9"]
    )  # fmt: skip
    assert args.faults == ["kill", "partition"]
    assert (args.duration, args.hold, args.quiet, args.seed) == (5.0, (1.0, 2.0), (3.0, 3.0), 9)
    assert build_parser().parse_args(["chaos"]).faults == list(FAULTS)
    assert build_parser().parse_args(["chaos", "--faults", "all"]).faults == list(FAULTS)


@pytest.mark.parametrize(
    "argv",
    [
        ["chaos", "--faults", "kill,fire"],
        ["chaos", "--faults", ","],
        ["chaos", "--hold", "3:1"],
        ["chaos", "--quiet", "x"],
    ],
)
def test_bad_options_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "sluice chaos: error:" in capsys.readouterr().err


def test_too_few_brokers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--brokers", "2"]) == 2
    assert "--brokers must be >= 3" in capsys.readouterr().err
