"""Argument helpers shared by the tools: ``key=value`` parsing, properties files."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = [
    "ToolError",
    "UsageError",
    "add_bootstrap_argument",
    "add_command_config_argument",
    "fail",
    "parse_assignments",
    "read_properties_file",
    "tool_command",
    "warner",
]


class ToolError(Exception):
    """A failure to report as one line on stderr (exit status 1)."""


class UsageError(ToolError):
    """A bad combination of arguments (exit status 2, like argparse)."""


def fail(prog: str, exc: ToolError) -> int:
    """Print ``prog: error: message`` to stderr and return the exit status."""
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, UsageError) else 1


def tool_command(
    prog: str, body: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``body`` as a tool's command: a :class:`ToolError` it raises becomes one line on
    stderr and its exit status (:func:`fail`)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except ToolError as exc:
            return fail(prog, exc)

    return run


def warner(prog: str) -> Callable[[str], None]:
    """A function printing ``prog: warning: message`` to stderr."""

    def warn(message: str) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr, flush=True)

    return warn


def add_bootstrap_argument(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_server",
        metavar="HOST:PORT[,...]",
        default=default,
        help="the broker(s) to connect to (required)",
    )


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config", metavar="FILE", help="a properties file of admin client settings"
    )


def parse_assignments(items: Iterable[str], what: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``; the value may itself contain ``=``."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"invalid {what} {item!r}: expected KEY=VALUE")
        result[key] = value
    return result


def read_properties_file(path: str) -> dict[str, str]:
    """A Java-style ``.properties`` file: ``key=value`` (or ``key: value``) lines,
    ``#``/``!`` comments. Line continuations and escapes are not supported."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ToolError(f"{path}:{number}: expected key=value, got {raw!r}")
        result[line[:cut].strip()] = line[cut + 1 :].strip()
    return result


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The client settings of a tool's ``--command-config`` file (none without one)."""
    path = getattr(args, "command_config", None)
    return read_properties_file(path) if path else {}
