"""Kafka-format offset checkpoint files, written atomically (temp file, fsync, rename).

Format (text): a version line ``0``, an entry-count line, then one ``<topic> <partition>
<offset>`` line per entry -- the format of Kafka's ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from sluice.log.errors import KafkaStorageException

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "OffsetCheckpointFile",
    "fsync_directory",
    "write_atomically",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_VERSION = 0


def fsync_directory(directory: Path) -> None:
    """Make renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path``'s contents with ``data``: written whole to ``<path>.tmp``, fsynced,
    renamed over ``path``, the directory fsynced. An ``OSError`` on the way (a full disk:
    a short write, then ``ENOSPC``) is raised with ``path`` as it was and the temporary
    file removed, so a failed write never leaves a torn file nor holds space."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


class OffsetCheckpointFile:
    """A ``(topic, partition) -> offset`` map persisted in Kafka's checkpoint text format."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file's contents atomically and durably (:func:`write_atomically`)."""
        lines = [str(_VERSION), str(len(offsets))]
        lines.extend(f"{t} {p} {offset}" for (t, p), offset in offsets.items())
        write_atomically(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; an absent file reads as empty."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        try:
            version = int(lines[0])
            count = int(lines[1])
            if version != _VERSION or len(lines) < 2 + count:
                raise ValueError(f"version {version}, {count} entries")
            result: dict[tuple[str, int], int] = {}
            for line in lines[2 : 2 + count]:
                topic, partition, offset = line.rsplit(" ", 2)
                result[(topic, int(partition))] = int(offset)
        except (IndexError, ValueError) as exc:
            raise KafkaStorageException(f"Malformed checkpoint file {self.path}: {exc}") from exc
        return result
