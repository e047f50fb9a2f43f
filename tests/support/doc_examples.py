"""The examples of a Markdown document, for tests that run them as written.

A fenced block preceded by ``<!-- example: NAME -->`` is an example named NAME
(:func:`examples`). A ``bash`` example is ``sluice`` commands (a trailing backslash
continues a line), each followed by the lines it prints as ``# `` comments
(:func:`commands`); :func:`run_sluice` runs one in this process through
``sluice.cli.main`` and returns what it printed. Ports and paths the documents use
(``127.0.0.1:9092``, ``/path/to/pki``) are rewritten by the tests with
:func:`rewrite`."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
_EXAMPLE = re.compile(r"^<!-- example: ([\w-]+) -->\n```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Example:
    name: str
    language: str
    text: str


@dataclass(frozen=True)
class Command:
    argv: list[str]
    """Without the leading ``sluice``."""
    prints: list[str]
    """The lines the document says it prints (its ``# `` comments)."""


def examples(*documents: str) -> dict[str, Example]:
    """The named examples of ``docs/<document>`` for each document; a name used twice is
    an error."""
    found: dict[str, Example] = {}
    for document in documents:
        for match in _EXAMPLE.finditer((DOCS / document).read_text()):
            name, language, text = match.groups()
            assert name not in found, f"example {name} twice in {documents}"
            found[name] = Example(name, language, text)
    return found


def rewrite(text: str, replacements: Mapping[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text


def commands(text: str) -> list[Command]:
    """The ``sluice`` commands of a bash example, with the output each is said to print."""
    found: list[Command] = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("# "):
            assert found, f"output before any command: {line}"
            found[-1].prints.append(line[2:])
        elif line.strip():
            argv = shlex.split(line)
            assert argv[0] == "sluice", line
            found.append(Command(argv[1:], []))
    return found


def run_sluice(argv: list[str]) -> tuple[int, str, str]:
    """``sluice ARGV`` in this process: (exit status, standard output, standard error)."""
    from sluice.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_as_documented(command: Command) -> str:
    """Run a command, check it succeeds and prints what the document says (when it says);
    its output."""
    code, out, err = run_sluice(command.argv)
    assert code == 0, (command.argv, out, err)
    if command.prints:
        assert out.splitlines() == command.prints, (command.argv, out)
    return out
