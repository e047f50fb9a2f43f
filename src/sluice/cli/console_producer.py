"""``sluice console-producer``: one record per stdin line (like kafka-console-producer)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

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

__all__ = ["LineReader", "add_parser", "run"]

PROG = "sluice console-producer"

_DESCRIPTION = """\
Read lines from stdin and send each one as a record, like
kafka-console-producer.sh. At end of input it waits for every record to be
delivered; the exit status is 1 if any was not.

Reader properties (--property KEY=VALUE):
  parse.key=true            split each line into key and value at key.separator
  key.separator=SEP         default: a tab
  parse.headers=true        the line starts with headers, then headers.delimiter
  headers.delimiter=SEP     between the headers and the rest (default: a tab)
  headers.separator=SEP     between headers (default: ,)
  headers.key.separator=SEP between a header's key and value (default: :)
  null.marker=TEXT          a key, value or header value equal to TEXT is sent as null
  ignore.error=true         a line without the separator is sent with a null key
                            (default: stop with an error)"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "console-producer",
        help="send lines from stdin to a topic",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", metavar="NAME", help="the topic to send to (required)")
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line reader property, see above (repeatable)",
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer client setting, e.g. linger.ms=5 (repeatable)",
    )
    parser.add_argument(
        "--producer.config",
        "--producer-config",
        dest="producer_config",
        metavar="FILE",
        help="producer client settings from a properties file",
    )
    parser.add_argument(
        "--acks",
        "--request-required-acks",
        dest="acks",
        choices=["all", "-1", "0", "1"],
        help="acknowledgements to wait for: all (= -1), 1 or 0 (default: all)",
    )
    parser.add_argument(
        "--compression-codec",
        metavar="CODEC",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="compress batches: none, gzip, snappy, lz4 or zstd (default: none)",
    )
    parser.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="send every record to this partition (default: by key, or spread)",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="wait for each record to be acknowledged before reading the next",
    )
    parser.add_argument(
        "--delivery-timeout-ms",
        type=int,
        default=120_000,
        metavar="MS",
        help="give up on a record not delivered within this time (default: 120000)",
    )
    parser.set_defaults(func=run)


class LineReader:
    """Turns input lines into (key, value, headers), honouring the reader properties."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        def text(name: str, default: str) -> bytes:
            return props.get(name, default).encode("utf-8")

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = text("key.separator", "\t")
        self.headers_delimiter = text("headers.delimiter", "\t")
        self.headers_separator = text("headers.separator", ",")
        self.headers_key_separator = text("headers.key.separator", ":")
        marker = props.get("null.marker")
        self.null_marker = marker.encode("utf-8") if marker is not None else None
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if not value:
                raise UsageError(f"property {name} must not be empty")

    def _null(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def parse(
        self, line: bytes, number: int
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise ToolError(
                        f"No headers delimiter found on line number {number}: "
                        f"'{line.decode('utf-8', 'replace')}'"
                    )
            else:
                rest = tail
                for item in head.split(self.headers_separator) if head else []:
                    name, has_value, value = item.partition(self.headers_key_separator)
                    hvalue = self._null(value) if has_value else None
                    headers.append((name.decode("utf-8", "replace"), hvalue))
        key: bytes | None = None
        if self.parse_key:
            k, sep, v = rest.partition(self.key_separator)
            if sep:
                key, rest = self._null(k), v
            elif not self.ignore_error:
                raise ToolError(
                    f"No key separator found on line number {number}: "
                    f"'{line.decode('utf-8', 'replace')}'"
                )
        return key, self._null(rest), headers


def _lines(stream: Any) -> Iterator[bytes]:
    """stdin lines without their line ending, as bytes (text streams are UTF-8 encoded)."""
    source = getattr(stream, "buffer", stream)
    for raw in source:
        line = raw if isinstance(raw, bytes) else raw.encode("utf-8")
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


def _settings(args: argparse.Namespace) -> dict[str, str]:
    settings: dict[str, str] = {}
    if args.producer_config:
        settings.update(read_properties_file(args.producer_config))
    settings.update(parse_assignments(args.producer_property, "--producer-property"))
    if args.acks is not None:
        settings["acks"] = "all" if args.acks == "-1" else args.acks
    if args.compression_codec is not None:
        settings["compression.type"] = args.compression_codec
    settings.setdefault("delivery.timeout.ms", str(args.delivery_timeout_ms))
    return settings


def _run(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    if not args.topic:
        raise UsageError("--topic is required")
    if args.delivery_timeout_ms < 1:
        raise UsageError("--delivery-timeout-ms must be positive")
    reader = LineReader(parse_assignments(args.property, "--property"))
    from sluice.cli.tool_clients import ClientError, Producer

    try:
        producer = Producer(args.bootstrap_server, _settings(args), warner(PROG))
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    error: ToolError | None = None
    sent = 0
    try:
        for number, line in enumerate(_lines(sys.stdin), 1):
            key, value, headers = reader.parse(line, number)
            producer.send(args.topic, value, key, headers, args.partition)
            sent += 1
            if args.sync:
                producer.flush()
                if producer.failed:
                    break
    except ToolError as exc:  # a malformed line: stop reading, deliver what was read
        error = exc
    except KeyboardInterrupt:
        pass
    except ClientError as exc:
        error = ToolError(str(exc))
    try:
        undelivered = producer.flush()
    except ClientError as exc:
        undelivered = sent - producer.delivered - producer.failed
        if producer.first_error is None:
            producer.first_error = str(exc)
    finally:
        with contextlib.suppress(Exception):
            producer.close()
    if error is not None:
        fail(PROG, error)
    failed = producer.failed + undelivered
    if failed:
        print(
            f"{PROG}: error: {failed} of {sent} records were not delivered: "
            f"{producer.first_error or 'timed out'}",
            file=sys.stderr,
        )
    return 1 if failed or error is not None else 0


run = tool_command(PROG, _run)
