"""Ports picked to listen on later stay out of the way of outgoing connections."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice import ports
from sluice.ports import ephemeral_range, free_port, listen_candidates


def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t50000\n")
    assert ephemeral_range(setting) == range(40_000, 50_001)
    assert ephemeral_range(tmp_path / "missing") == range(32_768, 61_000)


def test_candidates_are_the_stretches_outside_the_ephemeral_range() -> None:
    linux_default = range(32_768, 61_000)
    assert listen_candidates(linux_default) == [range(10_000, 32_768), range(61_000, 65_536)]
    assert listen_candidates(range(1_024, 65_536)) == []
    # A stretch shorter than 1,000 ports is not used.
    assert listen_candidates(range(10_500, 65_000)) == []
    assert listen_candidates(range(40_000, 65_536)) == [range(10_000, 40_000)]


@pytest.mark.integration  # binds sockets
def test_free_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    ephemeral = ephemeral_range()
    picked = [free_port() for _ in range(50)]
    assert len(set(picked)) == len(picked)
    assert not [p for p in picked if p in ephemeral]
    for port in picked[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.integration  # binds sockets
def test_a_port_something_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = free_port()
    wanted = free_port()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", taken))
        listener.listen()
        ports._handed_out.discard(taken)
        ports._handed_out.discard(wanted)
        offered: Iterator[int] = iter([taken, wanted])
        monkeypatch.setattr(ports.random, "choice", lambda stretch: next(offered))
        assert free_port() == wanted


@pytest.mark.integration  # binds sockets
def test_without_a_stretch_outside_the_range_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: range(1_024, 65_536))
    first, second = free_port(), free_port()
    assert first != second
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", first))
