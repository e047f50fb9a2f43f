"""CRC-32C (Castagnoli), the checksum of Kafka's record batches: the ``crc32c`` package's C
function, loaded without running that package's ``__init__``, which reads its own
distribution metadata through ``importlib.metadata`` (20-30 ms of a broker's startup,
for a version string nobody reads)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable

__all__ = ["crc32c"]

_EXTENSION = "crc32c._crc32c"


def _load() -> Callable[..., int]:
    """``crc32c._crc32c.crc32c``, from the extension module itself if it can be found
    beside the package, else through the package as usual."""
    module = sys.modules.get(_EXTENSION)
    if module is None:
        package = importlib.util.find_spec("crc32c")
        locations = package.submodule_search_locations if package is not None else None
        finder = importlib.machinery.FileFinder(
            locations[0] if locations else "",
            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        )
        spec = finder.find_spec(_EXTENSION) if locations else None
        if spec is None or spec.loader is None:
            from crc32c import crc32c as packaged

            return packaged
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[_EXTENSION] = module  # a later ``import crc32c`` reuses it
    function: Callable[..., int] = module.crc32c
    return function


crc32c: Callable[..., int] = _load()
"""``crc32c(data, value=0) -> int``: the CRC-32C of ``data``, continuing from ``value``."""
