"""``sluice console-consumer``: print a topic's records (like kafka-console-consumer)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    fail,
    parse_assignments,
    read_properties_file,
    tool_command,
    warner,
)

if TYPE_CHECKING:
    from sluice.cli.tool_clients import StartOffset

__all__ = ["RecordFormatter", "add_parser", "run"]

PROG = "sluice console-consumer"
_POLL_S = 0.2  # the longest single wait, so --timeout-ms and Ctrl-C stay responsive

_DESCRIPTION = """\
Print the records of a topic to stdout, like kafka-console-consumer.sh.

Without --group the consumer reads every partition of the topic (or only
--partition) directly, without a consumer group and without committing offsets.
It starts at the end unless --from-beginning or --offset says otherwise, and
runs until --max-messages records were printed, no record arrived for
--timeout-ms, or Ctrl-C. The count of records is then printed to stderr.

Formatter properties (--property KEY=VALUE):
  print.timestamp=true   prefix CreateTime:<ms> (or LogAppendTime:<ms>)
  print.partition=true   prefix Partition:<n>
  print.offset=true      prefix Offset:<n>
  print.headers=true     prefix the headers as k1:v1,k2:v2 (or NO_HEADERS)
  print.key=true         prefix the key
  print.value=false      leave out the value
  key.separator=SEP      between the fields above (default: a tab)
  headers.separator=SEP  between headers (default: ,)
  line.separator=SEP     after each record (default: a newline)
  null.literal=TEXT      how a null key, value or header prints (default: null)"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "console-consumer",
        help="print the records of a topic",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", metavar="NAME", help="the topic to read (required)")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest record (default: the end); with --group, "
        "only where the group has no committed offset",
    )
    parser.add_argument(
        "--partition", type=int, metavar="N", help="read only this partition (default: all)"
    )
    parser.add_argument(
        "--offset",
        metavar="N|earliest|latest",
        help="where to start in each read partition: an offset, earliest or latest "
        "(default: latest, or earliest with --from-beginning)",
    )
    parser.add_argument(
        "--max-messages", type=int, metavar="N", help="exit after printing N records"
    )
    parser.add_argument(
        "--timeout-ms", type=int, metavar="MS", help="exit if no record arrives for MS milliseconds"
    )
    parser.add_argument(
        "--group",
        metavar="ID",
        help="consume as a member of this consumer group, committing offsets "
        "(needs group support in the broker)",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a formatter property, see above (repeatable)",
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a consumer client setting, e.g. fetch.min.bytes=1 (repeatable)",
    )
    parser.add_argument(
        "--consumer.config",
        "--consumer-config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer client settings from a properties file",
    )
    parser.set_defaults(func=run)


class RecordFormatter:
    """Kafka's DefaultMessageFormatter: the chosen fields joined by key.separator."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            value = props.get(name)
            return default if value is None else value.strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = props.get("key.separator", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.line_separator = props.get("line.separator", "\n")
        self.null_literal = props.get("null.literal", "null")

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", "replace")

    def format(self, record: Any) -> str:
        fields: list[str] = []
        if self.print_timestamp:
            kind = record.timestamp_type
            fields.append(f"{kind}:{record.timestamp}" if kind else "NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = [f"{k}:{self._text(v)}" for k, v in record.headers]
            fields.append(self.headers_separator.join(headers) if headers else "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        if self.print_value:
            fields.append(self._text(record.value))
        return self.key_separator.join(fields) + self.line_separator


def _start(args: argparse.Namespace) -> StartOffset:
    from sluice.cli.tool_clients import EARLIEST, LATEST

    if args.offset is None:
        return EARLIEST if args.from_beginning else LATEST
    text = args.offset.strip().lower()
    if text == EARLIEST:
        return EARLIEST
    if text == LATEST:
        return LATEST
    try:
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        raise UsageError(
            f"--offset must be a non-negative number, earliest or latest, not {args.offset!r}"
        )
    return offset


def _check(args: argparse.Namespace) -> None:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    if not args.topic:
        raise UsageError("--topic is required")
    if args.offset is not None and args.from_beginning:
        raise UsageError("--offset and --from-beginning cannot be used together")
    if args.offset is not None and args.group is not None and args.partition is None:
        raise UsageError("--offset with --group needs --partition")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError("--timeout-ms must not be negative")
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must not be negative")


def _run(args: argparse.Namespace) -> int:
    _check(args)
    start = _start(args)
    formatter = RecordFormatter(parse_assignments(args.property, "--property"))
    settings: dict[str, str] = {}
    if args.consumer_config:
        settings.update(read_properties_file(args.consumer_config))
    settings.update(parse_assignments(args.consumer_property, "--consumer-property"))
    if args.group is not None:
        settings.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    from sluice.cli.tool_clients import ClientError, Consumer

    try:
        consumer = Consumer(args.bootstrap_server, args.group, settings, warner(PROG))
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    printed = [0]
    started = False
    error: ToolError | None = None
    try:
        partitions = consumer.partitions(args.topic)
        if args.partition is not None:
            if args.partition not in partitions:
                raise ToolError(
                    f"Topic '{args.topic}' has no partition {args.partition} "
                    f"(it has {len(partitions)})"
                )
            partitions = [args.partition]
        if args.group is not None:
            consumer.check_group(args.topic, partitions)
        if args.group is not None and args.partition is None:
            consumer.subscribe(args.topic)
        else:
            consumer.assign(args.topic, partitions, start)
        started = True
        with _sigterm_as_interrupt():
            _consume(consumer, formatter, args, sys.stdout, printed)
    except ClientError as exc:
        error = ToolError(str(exc))
    except ToolError as exc:
        error = exc
    with contextlib.suppress(ClientError):
        consumer.close()
    status = 0 if error is None else fail(PROG, error)
    if started:
        sys.stdout.flush()  # the records first, then the summary on stderr
        print(f"Processed a total of {printed[0]} messages", file=sys.stderr)
    return status


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM end the loop like Ctrl-C (printing the count), as Kafka's tool does."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _consume(
    consumer: Any,
    formatter: RecordFormatter,
    args: argparse.Namespace,
    out: TextIO,
    printed: list[int],
) -> None:
    """Print records until --max-messages, --timeout-ms of silence, or Ctrl-C,
    counting them in ``printed[0]``."""
    limit: int | None = args.max_messages
    idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    last = time.monotonic()
    try:
        while limit is None or printed[0] < limit:
            wait = _POLL_S
            if idle_s is not None:
                left = last + idle_s - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            record = consumer.poll(wait)
            if record is None:
                continue
            out.write(formatter.format(record))
            out.flush()
            printed[0] += 1
            last = time.monotonic()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # e.g. piped into head: stop quietly, also at exit
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())


run = tool_command(PROG, _run)
