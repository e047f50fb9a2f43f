"""The interoperability tests run a real ``sluice broker`` process: here ``broker`` is a
:class:`~support.brokers.BrokerProcess` shared by a module (elsewhere, an embedded one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.brokers import BrokerProcess, broker_process


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with broker_process(tmp_path_factory.mktemp("broker")) as proc:
        yield proc
