"""``LogManager``: the broker's ``log.dirs`` and every partition log in them."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.log.checkpoint import fsync_directory
from sluice.log.config import LogConfig
from sluice.log.errors import InvalidTopicException, KafkaStorageException
from sluice.log.file_cache import UNBOUNDED, FileCache
from sluice.log.file_work import FileWork, InlineFileWork
from sluice.log.log import Log, parse_topic_partition
from sluice.log.log_dir_failure_channel import LogDirFailureChannel, describe_os_error

__all__ = [
    "CAUGHT_UP_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "FUTURE_DIR_SUFFIX",
    "LOCK_FILE",
    "LogDirNotFoundException",
    "LogManager",
    "TopicPartition",
]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
CAUGHT_UP_FILE = "caught-up"
"""Written in a future log's directory right before its swap: it holds what the current
log holds, so a start that finds it without the current log completes the swap."""
_FUTURE_DIR = re.compile(r"^(?P<base>.+)\.(?P<id>[0-9a-f]{32})-future$")


class LogDirNotFoundException(Exception):
    """A path that is not one of the ``log.dirs`` (LOG_DIR_NOT_FOUND)."""


def future_log_base_name(name: str) -> str | None:
    """``"orders-3.<32 hex digits>-future"`` -> ``"orders-3"``; None for another name."""
    found = _FUTURE_DIR.match(name)
    return found["base"] if found else None


_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class LogManager:
    """Owns the ``log.dirs``: on construction it locks each directory and opens every
    partition log in it (recovering them unless the clean-shutdown marker is present, which it
    then removes); :meth:`shutdown` flushes and closes all logs and writes the marker.

    A log directory goes offline, as in Kafka, when an I/O error meets one of its logs
    (reported to :attr:`failure_channel`; its owner then calls
    :meth:`handle_log_dir_failure`, which takes the directory's other logs offline too)
    or when it cannot be loaded at start-up. An offline directory gets no new logs,
    takes no part in retention, flushes and checkpoints, and gets no clean-shutdown
    marker, so the next start recovers its logs; the others serve on. Offline logs stay
    managed (:meth:`get_log` returns them, refusing every use), so that a partition of an
    offline directory is never created afresh elsewhere."""

    def __init__(
        self,
        log_dirs: Path | str | Sequence[Path | str],
        default_config: LogConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        topic_config: Callable[[str], LogConfig | None] | None = None,
        file_work: FileWork | None = None,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
        file_cache: FileCache = UNBOUNDED,
    ) -> None:
        """``topic_config(topic)`` supplies per-topic overrides for logs found on disk.
        ``file_work`` is where every managed log's background file work runs
        (sluice.log.file_work; inline when not given); a ``FileThread`` is started
        by the owner before and stopped after this manager's life.
        ``log_dir_failure_channel``: where the logs report I/O errors (a new one when
        not given). ``file_cache`` holds the descriptors of every managed log's segment
        files (sluice.log.file_cache), made on the thread that uses the logs; by default
        none is closed while in use. Raises ``KafkaStorageException`` when no directory
        can be loaded."""
        dirs = [log_dirs] if isinstance(log_dirs, str | Path) else list(log_dirs)
        if not dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [Path(d) for d in dirs]
        self.default_config = default_config if default_config is not None else LogConfig()
        self._clock = clock
        self._topic_config = topic_config
        self.file_work: FileWork = file_work if file_work is not None else InlineFileWork()
        self.file_cache = file_cache
        self._logs: dict[TopicPartition, Log] = {}
        # AlterReplicaLogDirs: the future logs being copied, and where the logs of
        # partitions not hosted yet are to be created.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._preferred_log_dirs: dict[TopicPartition, Path] = {}
        self._futures_in_use: set[int] = set()  # ids of those a worker holds
        self._flush_group: Callable[[Log], None] | None = None
        self._lock_fds: list[int] = []
        self._had_clean_shutdown: dict[Path, bool] = {}
        self._running = True
        channel = log_dir_failure_channel
        self.failure_channel = channel if channel is not None else LogDirFailureChannel()
        self._offline_dirs: set[Path] = set()  # those handle_log_dir_failure took offline
        try:
            for directory in self.log_dirs:
                try:
                    self._load_dir(directory)
                except OSError as exc:  # Kafka: that directory starts offline
                    self.failure_channel.maybe_add_offline_log_dir(directory, "loading", exc)
                    self.handle_log_dir_failure(directory)
            if not self.live_log_dirs:
                raise KafkaStorageException(
                    f"no log dir of {', '.join(map(str, self.log_dirs))} could be loaded"
                )
            self._complete_interrupted_swaps()
        except BaseException:
            self._close_logs(flush=False)
            self._release_locks()
            raise

    # -- startup -------------------------------------------------------------------------
    def _load_dir(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise KafkaStorageException(
                f"Failed to acquire lock on {directory}: another process is using it"
            ) from exc
        self._lock_fds.append(fd)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self._had_clean_shutdown[directory] = clean
        if not clean:
            logger.info("%s: no clean shutdown marker; logs will be recovered", directory)
        configs: dict[str, LogConfig] = {}  # by topic
        with os.scandir(directory) as entries:
            children = sorted(entry.name for entry in entries if entry.is_dir())
        for name in children:
            child = directory / name
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)  # a deletion cut short
                continue
            base = future_log_base_name(name)
            if base is not None:
                self._load_future_log(child, base, clean)
                continue
            topic, partition = parse_topic_partition(name)
            if partition < 0:
                continue
            key = TopicPartition(topic, partition)
            if key in self._logs:
                raise KafkaStorageException(f"Duplicate log directories for {key}: {child}")
            config = configs.get(topic)
            if config is None:
                config = configs[topic] = self._config_for(topic)
            self._logs[key] = Log(
                child, config, clock=self._clock, had_clean_shutdown=clean,
                file_work=self.file_work, log_dir_failure_channel=self.failure_channel,
                file_cache=self.file_cache,
            )  # fmt: skip
        if clean:
            marker.unlink()
            fsync_directory(directory)

    def _load_future_log(self, child: Path, base: str, clean: bool) -> None:
        """A future log found at start-up: a move between directories the broker stopped
        in the middle of, resumed once its partition is hosted again."""
        topic, partition = parse_topic_partition(base)
        if partition < 0:
            return
        key = TopicPartition(topic, partition)
        if key in self._future_logs:
            raise KafkaStorageException(f"Duplicate future log directories for {key}: {child}")
        self._future_logs[key] = self._open_future_log(child, self._config_for(topic), clean)

    def _open_future_log(self, path: Path, config: LogConfig, clean: bool = True) -> Log:
        """A future log is written by the move's worker thread alone: its files are its
        own (no shared file cache) and its file work runs inline there."""
        return Log(
            path, config, clock=self._clock, had_clean_shutdown=clean,
            log_dir_failure_channel=self.failure_channel,
        )  # fmt: skip

    def _complete_interrupted_swaps(self) -> None:
        """A future log marked caught up (:data:`CAUGHT_UP_FILE`) without a current log:
        the broker stopped between the two renames of a swap (the current log's directory
        was renamed for deletion). Finish the swap: the future log becomes the current one.
        A future log not marked caught up whose current log is missing (its directory
        offline) stays a future log: it may hold less than the current log. A mark found
        beside a current log is stale (the stop came before the renames) and removed."""
        for key, future in list(self._future_logs.items()):
            marker = future.dir / CAUGHT_UP_FILE
            if key in self._logs:
                if marker.exists():
                    marker.unlink()
                continue
            if not marker.exists():
                continue
            del self._future_logs[key]
            target = future.dir.parent / f"{key.topic}-{key.partition}"
            future.close()
            try:
                os.replace(future.dir, target)
                (target / CAUGHT_UP_FILE).unlink()
                fsync_directory(target.parent)
                log = Log(
                    target, self._config_for(key.topic), clock=self._clock,
                    had_clean_shutdown=True, file_work=self.file_work,
                    log_dir_failure_channel=self.failure_channel, file_cache=self.file_cache,
                )  # fmt: skip
            except OSError as exc:  # that directory starts offline, as for a failed load
                self.failure_channel.maybe_add_offline_log_dir(
                    target.parent, f"completing the move of {key}", exc
                )
                self.handle_log_dir_failure(target.parent)
                continue
            logger.info("%s: completed the interrupted move to log dir %s", key, target.parent)
            self._logs[key] = log

    @property
    def flush_group(self) -> Callable[[Log], None] | None:
        """What every managed log asks for the flushes its leader appends make due
        (``Log.flush_group``, sluice.log.group_flush); None: they flush inline."""
        return self._flush_group

    @flush_group.setter
    def flush_group(self, group: Callable[[Log], None] | None) -> None:
        self._flush_group = group
        for log in self._logs.values():
            log.flush_group = group

    def _config_for(self, topic: str) -> LogConfig:
        if self._topic_config is not None:
            config = self._topic_config(topic)
            if config is not None:
                return config
        return self.default_config

    def had_clean_shutdown(self, directory: Path | str) -> bool:
        """Whether ``directory`` held the clean-shutdown marker at startup."""
        return self._had_clean_shutdown[Path(directory)]

    # -- log dir failures ----------------------------------------------------------------
    @property
    def live_log_dirs(self) -> list[Path]:
        """The directories not offline, in ``log.dirs`` order."""
        channel = self.failure_channel
        return [
            d for d in self.log_dirs
            if d not in self._offline_dirs and not channel.has_offline_log_dir(d)
        ]  # fmt: skip

    def handle_log_dir_failure(self, directory: Path) -> list[TopicPartition]:
        """Kafka's ``LogManager.handleLogDirFailure``: take ``directory`` offline (it was
        reported to the failure channel) and every log in it; returns their partitions
        (none if it was offline already). On the logs' thread."""
        if directory in self._offline_dirs or directory not in self.log_dirs:
            return []
        self._offline_dirs.add(directory)
        error = self.failure_channel.offline_log_dirs.get(directory)
        if error is None:
            error = OSError(f"log dir {directory} taken offline")
        offline = sorted(tp for tp, log in self._logs.items() if log.dir.parent == directory)
        for tp in offline:
            self._logs[tp].take_offline(error)
        for tp, future in list(self._future_logs.items()):
            # A move to or from a failed directory ends (Kafka removes the future replica);
            # one its worker holds is closed when the worker lets go (end_future_work).
            if future.dir.parent == directory or tp in offline:
                del self._future_logs[tp]
                future.take_offline(error)
                if id(future) not in self._futures_in_use:
                    future.close()
        live = self.live_log_dirs
        logger.error(
            "stopped serving the %d logs in log dir %s (%s); %s",
            len(offline), directory, describe_os_error(error),
            f"{len(live)} log dirs remain online" if live else "no log dir remains online",
        )  # fmt: skip
        return offline

    # -- partition logs ------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, is_new: bool = True
    ) -> Log:
        """The log of ``topic``/``partition`` (offline, if its directory is), created in
        the least-used live directory if absent. As Kafka's ``getOrCreateLog``, the log of
        a partition that is not new (it may have been in an offline directory) is not
        created while a directory is offline: ``KafkaStorageException``."""
        self._check_running()
        existing = self._logs.get(TopicPartition(topic, partition))
        if existing is not None:
            return existing
        if not is_new and len(self.live_log_dirs) < len(self.log_dirs):
            offline = sorted(set(self.log_dirs) - set(self.live_log_dirs))
            raise KafkaStorageException(
                f"cannot create the log of {topic}-{partition}: log dirs "
                f"{', '.join(map(str, offline))} are offline"
            )
        log_dir = self.new_log_dirs(topic, [partition])[partition]
        return self.add_log(
            topic, partition, self.create_log(log_dir, config or self._config_for(topic))
        )

    def new_log_dirs(self, topic: str, partitions: Iterable[int]) -> dict[int, Path]:
        """Where the logs of ``topic``'s ``partitions`` that do not exist yet go: each in
        the directory an AlterReplicaLogDirs asked for it, if live, else in the live
        directory holding the fewest logs, current and future, counting those planned
        before it (Kafka's ``nextLogDirs``; ties go to the first in ``log.dirs``). To
        create many at once off the event loop: :meth:`create_log`
        each (any thread), then :meth:`add_log`. ``KafkaStorageException`` when every
        directory is offline."""
        self._check_running()
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise InvalidTopicException(f"Illegal topic name {topic!r}")
        live = self.live_log_dirs
        single = len(live) == 1  # no count to make
        counts = {directory: 0 if single else self._log_count(directory) for directory in live}
        planned: dict[int, Path] = {}
        for partition in partitions:
            if partition < 0:
                raise ValueError(f"Invalid partition {partition}")
            if TopicPartition(topic, partition) in self._logs:
                continue
            if not live:
                raise KafkaStorageException(f"no log dir is online for {topic}-{partition}")
            preferred = self._preferred_log_dirs.get(TopicPartition(topic, partition))
            directory = preferred if preferred in counts else min(live, key=counts.__getitem__)
            counts[directory] += 1
            planned[partition] = directory / f"{topic}-{partition}"
        return planned

    def create_log(self, log_dir: Path, config: LogConfig) -> Log:
        """A new, empty log in ``log_dir`` (a path from :meth:`new_log_dirs`), its parent
        directory fsynced, not managed yet (:meth:`add_log`). Touches only its own files,
        so it may run on a worker thread. An I/O error takes the directory offline
        (``KafkaStorageException``)."""
        return self.create_logs({0: log_dir}, config)[0]

    def create_logs(self, planned: Mapping[int, Path], config: LogConfig) -> dict[int, Log]:
        """New, empty logs in the directories ``planned`` (partition -> a path from
        :meth:`new_log_dirs`), not managed yet (:meth:`add_log`), each parent directory
        fsynced once at the end. A new log is its directory alone: its files are created
        by their first writes. All or none: when one cannot be made (ENOSPC, EIO, a file
        in the way, ...) every planned directory is removed, the log directory where it
        failed is taken offline, as Kafka does for an I/O error, and
        ``KafkaStorageException`` is raised. Touches only their own files and opens none,
        so it may run on a worker thread."""
        logs: dict[int, Log] = {}
        where = (Path(), "")  # the log directory and what was being done there
        try:
            for partition, path in planned.items():
                where = (path.parent, f"creating the log {path.name}")
                logs[partition] = Log(
                    path, config, clock=self._clock, file_work=self.file_work,
                    log_dir_failure_channel=self.failure_channel, file_cache=self.file_cache,
                )  # fmt: skip
            for parent in {path.parent for path in planned.values()}:
                where = (parent, "syncing new logs' directory")
                fsync_directory(parent)
        except OSError as exc:
            self.remove_unmanaged(logs.values(), planned.values())
            failed, what = where
            self.failure_channel.maybe_add_offline_log_dir(failed, what, exc)
            raise KafkaStorageException(
                f"{what} in {failed} failed: {describe_os_error(exc)}"
            ) from exc
        except BaseException:
            self.remove_unmanaged(logs.values(), planned.values())
            raise
        return logs

    @staticmethod
    def remove_unmanaged(logs: Iterable[Log], directories: Iterable[Path] = ()) -> None:
        """Close and remove logs that were never managed, and ``directories`` (a creation
        rolled back); on any thread. Errors are logged: what stays is removed at the next
        start, as a directory no topic holds."""
        logs = list(logs)
        for log in logs:
            try:
                log.close()
            except (OSError, KafkaStorageException) as exc:
                logger.warning("%s: not closed cleanly: %s", log.dir.name, exc)
        for directory in {*(log.dir for log in logs), *directories}:
            shutil.rmtree(directory, ignore_errors=True)

    def add_log(self, topic: str, partition: int, log: Log) -> Log:
        """Manage ``log`` (from :meth:`create_log`) as ``topic``/``partition``'s log."""
        self._check_running()
        key = TopicPartition(topic, partition)
        if key in self._logs:
            raise KafkaStorageException(f"{key} has a log already")
        self._logs[key] = log
        self._preferred_log_dirs.pop(key, None)
        log.flush_group = self._flush_group
        return log

    def _log_count(self, directory: Path) -> int:
        logs = (*self._logs.values(), *self._future_logs.values())
        return sum(1 for log in logs if log.dir.parent == directory)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; returns False if there was none. The log of
        an offline directory is closed and forgotten, its files left as they are; an I/O
        error takes the directory offline (and leaves the files to the next start)."""
        key = TopicPartition(topic, partition)
        self._preferred_log_dirs.pop(key, None)
        self.abort_future_log(key)
        log = self._logs.pop(key, None)
        if log is None:
            return False
        log.close()
        if log.is_offline:
            return True
        # Rename first so a crash mid-removal leaves a directory that startup deletes.
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(log.dir, doomed)
            fsync_directory(doomed.parent)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                log.dir.parent, f"deleting the log {log.dir.name}", exc
            )
            return True
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # -- moves between log dirs (AlterReplicaLogDirs) -------------------------------------
    @property
    def future_logs(self) -> Mapping[TopicPartition, Log]:
        """The future logs of moves between directories under way, by partition."""
        return self._future_logs

    def log_dir_of(self, path: str) -> Path:
        """The directory of ``log.dirs`` that ``path`` names (compared as absolute paths);
        ``LogDirNotFoundException`` if none, ``KafkaStorageException`` if it is offline
        (Kafka's ``isLogDirOnline``)."""
        wanted = os.path.abspath(path)
        for directory in self.log_dirs:
            if os.path.abspath(directory) == wanted:
                if directory not in self.live_log_dirs:
                    raise KafkaStorageException(f"Log directory {wanted} is offline")
                return directory
        raise LogDirNotFoundException(f"Failed to find log dir {wanted}.")

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, directory: Path) -> None:
        """Where ``tp``'s log is created if it is not hosted yet (Kafka's
        ``maybeUpdatePreferredLogDir``)."""
        if tp not in self._logs:
            self._preferred_log_dirs[tp] = directory

    def create_future_log(self, tp: TopicPartition, directory: Path) -> Log | None:
        """The future log of ``tp`` in ``directory`` (Kafka's ``maybeCreateFutureReplica``):
        None when the current log is in ``directory`` already (nothing to move); an
        existing future log in another directory is removed first. As for any log that is
        not new, none is created while a directory is offline (``KafkaStorageException``).
        """
        self._check_running()
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageException(f"{tp} has no log here")
        if current.is_offline:
            raise KafkaStorageException(f"Partition {tp} is offline")
        existing = self._future_logs.get(tp)
        if existing is not None:
            if existing.dir.parent == directory:
                return existing
            self.abort_future_log(tp)
        if current.dir.parent == directory:
            return None
        if len(self.live_log_dirs) < len(self.log_dirs):
            offline = sorted(set(self.log_dirs) - set(self.live_log_dirs))
            raise KafkaStorageException(
                f"Can not create the future log of {tp} because log dirs "
                f"{', '.join(map(str, offline))} are offline"
            )
        path = directory / f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        try:
            future = self._open_future_log(path, current.config)
            fsync_directory(directory)
        except OSError as exc:
            shutil.rmtree(path, ignore_errors=True)
            self.failure_channel.maybe_add_offline_log_dir(
                directory, f"creating the future log {path.name}", exc
            )
            raise KafkaStorageException(
                f"creating the future log of {tp} in {directory} failed: {describe_os_error(exc)}"
            ) from exc
        self._future_logs[tp] = future
        return future

    def begin_future_work(self, tp: TopicPartition) -> Log | None:
        """The future log of ``tp``, now held by the caller (a worker thread appends to it)
        until :meth:`end_future_work`; None if it has none."""
        future = self._future_logs.get(tp)
        if future is not None:
            self._futures_in_use.add(id(future))
        return future

    def end_future_work(self, future: Log) -> None:
        """The caller no longer uses ``future``; a future log removed meanwhile is closed
        and deleted now."""
        self._futures_in_use.discard(id(future))
        if not any(log is future for log in self._future_logs.values()):
            self._remove_log_dir(future)

    def abort_future_log(self, tp: TopicPartition) -> bool:
        """End the move of ``tp``: its future log is closed and deleted (once its worker
        let go of it). False if there was none."""
        future = self._future_logs.pop(tp, None)
        if future is None:
            return False
        if id(future) not in self._futures_in_use:
            self._remove_log_dir(future)
        return True

    def replace_current_with_future_log(self, tp: TopicPartition) -> Log:
        """Kafka's ``replaceCurrentWithFutureLog``, once the future log ends where the
        current log does (no append in between): the future log becomes ``tp``'s log in
        its directory, the current one is deleted. Its start is raised to the current
        log's. The steps go in an order a crash can be recovered from: the future log is
        marked caught up (:data:`CAUGHT_UP_FILE`), the current log's directory renamed for
        deletion, then the future log's to the partition's name; a start between the two
        renames finds a marked future log alone and completes the swap."""
        self._check_running()
        current = self._logs[tp]
        future = self._future_logs[tp]
        if id(future) in self._futures_in_use:
            raise RuntimeError(f"the future log of {tp} is still being written")
        if future.log_end_offset != current.log_end_offset:
            raise ValueError(
                f"the future log of {tp} ends at {future.log_end_offset}, "
                f"the current log at {current.log_end_offset}"
            )
        start = current.log_start_offset
        target = future.dir.parent / current.dir.name
        doomed = current.dir.with_name(f"{current.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        if future.log_start_offset < start:
            future.maybe_increment_log_start_offset(start)
        future.close()
        step = (future.dir.parent, f"marking the future log {future.dir.name} caught up")
        try:
            fd = os.open(future.dir / CAUGHT_UP_FILE, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_directory(future.dir)
        except OSError as exc:
            self._future_logs.pop(tp, None)  # its directory goes offline: the move ends
            self.failure_channel.maybe_add_offline_log_dir(step[0], step[1], exc)
            raise KafkaStorageException(f"{step[1]} failed: {describe_os_error(exc)}") from exc
        current.close()
        step = (current.dir.parent, f"renaming the log {current.dir.name} for deletion")
        try:
            os.replace(current.dir, doomed)
            fsync_directory(doomed.parent)
            step = (target.parent, f"renaming the future log {future.dir.name}")
            os.replace(future.dir, target)
            (target / CAUGHT_UP_FILE).unlink()
            fsync_directory(target.parent)
            step = (target.parent, f"opening the moved log {target.name}")
            log = Log(
                target, current.config, clock=self._clock, had_clean_shutdown=True,
                file_work=self.file_work, log_dir_failure_channel=self.failure_channel,
                file_cache=self.file_cache,
            )  # fmt: skip
        except OSError as exc:
            failed, what = step
            self.failure_channel.maybe_add_offline_log_dir(failed, what, exc)
            raise KafkaStorageException(
                f"{what} in {failed} failed: {describe_os_error(exc)}"
            ) from exc
        del self._future_logs[tp]
        self._logs[tp] = log
        log.flush_group = self._flush_group
        self.file_work.submit(lambda: shutil.rmtree(doomed, ignore_errors=True))
        logger.info("%s: moved to log dir %s at offset %d", tp, target.parent, log.log_end_offset)
        return log

    def _remove_log_dir(self, log: Log) -> None:
        """Close ``log`` (never managed, or no longer) and delete its directory, unless it
        is offline: an offline directory is not written again."""
        log.close()
        if log.is_offline:
            return
        doomed = log.dir.with_name(f"{log.dir.name}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(log.dir, doomed)
        except OSError:
            doomed = log.dir
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new config to all of its partition logs."""
        for key, log in self._logs.items():
            if key.topic == topic:
                log.update_config(config)

    @property
    def logs(self) -> Mapping[TopicPartition, Log]:
        return self._logs

    def __iter__(self) -> Iterator[Log]:
        return iter(list(self._logs.values()))

    def __len__(self) -> int:
        return len(self._logs)

    # -- periodic work -------------------------------------------------------------------
    def cleanup_logs(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> int:
        """Run retention on every log (``log.retention.check.interval.ms``); returns the
        number of segments deleted. A log's deletions stop at its high watermark if given."""
        self._check_running()
        deleted = 0
        for key, log in list(self._logs.items()):
            if log.is_offline:
                continue
            hw = None if high_watermarks is None else high_watermarks.get(key)
            with contextlib.suppress(KafkaStorageException):  # went offline, said so
                deleted += log.delete_old_segments(hw)
        return deleted

    def flush_dirty_logs(self) -> int:
        """Flush the logs whose ``flush.ms`` elapsed; returns how many were flushed."""
        self._check_running()
        flushed = 0
        for log in list(self._logs.values()):
            with contextlib.suppress(KafkaStorageException):  # went offline, said so
                flushed += log.flush_if_due()
        return flushed

    def checkpoint_recovery_points(self) -> int:
        """Kafka's ``checkpointLogRecoveryOffsets`` (a broker's
        ``log.flush.offset.checkpoint.interval.ms``): move each log's recovery point past
        the rolled segments flushed in the background, and have the file work write it
        to the log's recovery-point-offset-checkpoint where that does not hold it yet.
        Returns how many writes were handed to the file work."""
        self._check_running()
        count = 0
        for log in list(self._logs.values()):
            if log.is_closed or log.is_offline:
                continue
            log.apply_finished_flushes()
            if not log.recovery_point_checkpointed:
                self.file_work.submit(log.write_recovery_point_checkpoint)
                count += 1
        return count

    # -- shutdown ------------------------------------------------------------------------
    def abandon(self) -> None:
        """Close every log without flushing or writing the clean-shutdown marker (what a
        killed process leaves behind: the next start recovers the logs)."""
        if self._close_logs(flush=False):
            self._release_locks()

    def _close_logs(self, flush: bool) -> bool:
        """Close every log (flushed first when ``flush``); False if already closed."""
        if not self._running:
            return False
        self._running = False
        for log in self._logs.values():
            if flush and not log.is_offline:
                with contextlib.suppress(KafkaStorageException):  # went offline, said so
                    log.flush()
            log.close()  # an offline log, or one failing now, is closed as it is
        for future in self._future_logs.values():  # their moves resume at the next start
            if flush and not future.is_offline:
                with contextlib.suppress(KafkaStorageException):
                    future.flush()
            future.close()
        return True

    def shutdown(self) -> None:
        """Flush and close every log, then write the clean-shutdown marker in each live
        dir: an offline one (or one whose logs failed to close) is recovered at the next
        start."""
        if not self._close_logs(flush=True):
            return
        for directory in self.live_log_dirs:
            try:
                fd = os.open(directory / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                fsync_directory(directory)
            except OSError as exc:
                (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
                self.failure_channel.maybe_add_offline_log_dir(
                    directory, "writing the clean shutdown marker", exc
                )
        self._release_locks()

    def _release_locks(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)  # closing the descriptor drops the flock
        self._lock_fds.clear()

    def _check_running(self) -> None:
        if not self._running:
            raise KafkaStorageException("The log manager has been shut down")

    def __enter__(self) -> LogManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()
