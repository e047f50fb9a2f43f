"""sluice.protocol.records.crc: the crc32c package's C function, loaded without the package's
``__init__`` (which reads distribution metadata at import, a broker startup cost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import crc32c as packaged
import pytest

from sluice.protocol.records.crc import crc32c

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_it_is_the_packaged_function() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    data = bytes(range(256)) * 5
    assert crc32c(data) == packaged.crc32c(data)
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)
    assert crc32c(memoryview(data)[3:77]) == packaged.crc32c(data[3:77])


@pytest.mark.integration  # a child interpreter
def test_loading_it_skips_the_package_init() -> None:
    code = (
        "import sys, json\nimport sluice.protocol.records.crc\n"
        "names = [m for m in sys.modules if m.startswith('crc32c')]\n"
        "print(json.dumps(sorted(names)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout) == ["crc32c._crc32c"]
