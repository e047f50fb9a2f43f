"""The benchmark harness scripts (bench/) for the tests that check them.

bench/ is a directory of scripts that import one another by bare name (``import
raw_reader``), not a package: :func:`import_bench` imports one with bench/ on the path
only while importing, through pytest's own monkeypatch, which puts the path back."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def import_bench(name: str, *, forget: tuple[str, ...] = ()) -> ModuleType:
    """bench/``name``.py, imported; the modules named in ``forget`` (it and what it imports)
    are taken out of ``sys.modules`` again, so that other tests import them afresh."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        try:
            return importlib.import_module(name)
        finally:
            for module in forget:
                sys.modules.pop(module, None)
