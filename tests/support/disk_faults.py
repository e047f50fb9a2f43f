"""Injected disk failures: the writes of files under a directory fail with ``OSError``.

:class:`DiskFaults` patches the ``os`` calls the log layer writes with (``write``,
``pwrite``, ``pwritev``, and on request ``fsync``, creating ``open``, ``mkdir`` and
``replace``) so
that, once armed, those touching files under its root raise ``OSError(errno)``: a full
disk (``ENOSPC``, after an optional byte budget, the write that crosses it being short
as the kernel's is) or a failing one (``EIO``). Other files, and so other log
directories, are untouched. The patch holds for every thread (the broker's event loop,
its file and flush threads). Used where no small filesystem can be mounted; tests that
can mount one use a real full tmpfs instead (docs/testing.md).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["DiskFaults"]

_WRITES = ("write", "pwrite", "pwritev")


class DiskFaults:
    """Failing writes under ``root`` once :meth:`arm` is called (see the module)."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        root: Path,
        error: int = errno.ENOSPC,
        ops: Iterable[str] = _WRITES,
    ) -> None:
        self.root = str(root.resolve())
        self.error = error
        self.ops = set(ops)
        self.failures = 0  # calls failed so far
        self._armed = False
        self._budget: int | None = None
        self._lock = threading.Lock()
        names = (*_WRITES, "fsync", "open", "replace", "mkdir")
        real = {name: getattr(os, name) for name in names}
        self._real = real
        monkeypatch.setattr(os, "write", lambda fd, data: self._write(fd, data, None))
        monkeypatch.setattr(os, "pwrite", lambda fd, data, at: self._write(fd, data, at))
        monkeypatch.setattr(os, "pwritev", self._pwritev)
        monkeypatch.setattr(os, "fsync", self._fsync)
        monkeypatch.setattr(os, "open", self._open)
        monkeypatch.setattr(os, "replace", self._replace)
        monkeypatch.setattr(os, "mkdir", self._mkdir)

    def arm(self, budget: int = 0) -> DiskFaults:
        """Fail from now on, after ``budget`` more bytes of writes."""
        with self._lock:
            self._armed = True
            self._budget = budget
        return self

    def disarm(self) -> None:
        """Space was freed: writes succeed again."""
        with self._lock:
            self._armed = False

    # -- the patched calls -------------------------------------------------------------
    def _under_root(self, path: str | bytes | os.PathLike[str] | int) -> bool:
        if isinstance(path, int):
            try:
                path = os.readlink(f"/proc/self/fd/{path}")
            except OSError:
                return False
        name = os.fsdecode(path)
        return os.path.abspath(name).startswith(self.root + os.sep)

    def _allowed(self, op: str, target: str | os.PathLike[str] | int, size: int) -> int | None:
        """How many bytes of ``size`` may go (None: all); raises when none may."""
        if not self._armed or op not in self.ops or not self._under_root(target):
            return None
        with self._lock:
            budget = self._budget
            if budget is not None and budget > 0 and size > 0:
                allowed = min(size, budget)
                self._budget = budget - allowed
                return allowed
            self.failures += 1
        raise OSError(self.error, os.strerror(self.error))

    def _write(self, fd: int, data: Any, at: int | None) -> int:
        view = memoryview(data)
        allowed = self._allowed("pwrite" if at is not None else "write", fd, len(view))
        if allowed is not None:
            view = view[:allowed]
        if at is None:
            written: int = self._real["write"](fd, view)
        else:
            written = self._real["pwrite"](fd, view, at)
        return written

    def _pwritev(self, fd: int, buffers: Sequence[Any], at: int) -> int:
        views = [memoryview(b) for b in buffers]
        allowed = self._allowed("pwritev", fd, sum(len(v) for v in views))
        if allowed is not None:
            kept: list[memoryview] = []
            for view in views:
                if allowed <= 0:
                    break
                kept.append(view[:allowed])
                allowed -= len(kept[-1])
            views = kept
        written: int = self._real["pwritev"](fd, views, at)
        return written

    def _fsync(self, fd: int) -> None:
        self._allowed("fsync", fd, 0)
        self._real["fsync"](fd)

    def _open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        if flags & os.O_CREAT and not os.path.exists(path):
            self._allowed("create", path, 0)
        fd: int = self._real["open"](path, flags, mode, dir_fd=dir_fd)
        return fd

    def _mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
        self._allowed("mkdir", path, 0)
        self._real["mkdir"](path, mode, dir_fd=dir_fd)

    def _replace(self, src: Any, dst: Any, **kwargs: Any) -> None:
        self._allowed("replace", dst, 0)
        self._real["replace"](src, dst, **kwargs)
