"""What every CLI subcommand shares: the resolved home, the settings, errors, output.

Exit codes (the CLI contract): 0 success, 1 a failed operation, 2 bad usage or config.
Subcommand modules import engine modules lazily inside their handlers so that
``hermes-tui --help`` stays fast and never imports Textual.
"""

from __future__ import annotations

import argparse
import sys

# Not `from typing import TYPE_CHECKING`: importing typing alone is ~10% of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:  # imported lazily at run time: --help must not pay for YAML and the engine
    from collections.abc import Iterable
    from typing import Any

    from engine.config import Settings
    from engine.home import HomeLayout

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure to report as one line (no traceback) with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.message = message
        self.code = code


class Context:
    """Resolved lazily: a command that never needs the config never reads it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._home: HomeLayout | None = None
        self._settings: Settings | None = None

    @property
    def home(self) -> HomeLayout:
        if self._home is None:
            from engine.home import HomeLayout, resolve_home

            self._home = HomeLayout(resolve_home(getattr(self.args, "home", None)))
        return self._home

    @property
    def settings(self) -> Settings:
        """The home's settings; a bad config raises ConfigError (exit 2 in main)."""
        if self._settings is None:
            from engine.config import load_config

            self._settings = load_config(self.home.config_file)
        return self._settings

    @property
    def json(self) -> bool:
        return bool(getattr(self.args, "json", False))


def print_json(obj: Any) -> None:
    """One JSON document on stdout."""
    import json

    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def print_json_streamed(head: dict, key: str, items: Iterable[Any], tail: dict) -> None:
    """The document ``print_json`` would write for ``{**head, key: [*items], **tail}``,
    byte for byte, written as ``items`` come: the list is never held."""
    import json

    dumps = json.JSONEncoder(indent=2, sort_keys=False, default=str).encode  # one encoder for every item

    write = sys.stdout.write
    write("{\n")
    for k, v in head.items():
        write("  " + dumps(k) + ": " + dumps(v).replace("\n", "\n  ") + ",\n")
    write("  " + dumps(key) + ": [")
    first = True
    for item in items:
        write(("\n" if first else ",\n") + "    " + dumps(item).replace("\n", "\n    "))
        first = False
    write("]" if first else "\n  ]")
    for k, v in tail.items():
        write(",\n  " + dumps(k) + ": " + dumps(v).replace("\n", "\n  "))
    write("\n}\n")
    sys.stdout.flush()


def number_arg(*, integer: bool = False, allow_zero: bool = False, unit: str = ""):
    """An argparse ``type=`` for a finite number > 0 (or >= 0 with ``allow_zero``).

    The error names what was expected: ``must be a positive number of seconds, got 'x'``.
    """
    kind = "whole number" if integer else "number"
    what = f"{'a' if allow_zero else 'a positive'} {kind}{f' of {unit}' if unit else ''}"
    if allow_zero:
        what += " >= 0"

    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = f"{'non_negative' if allow_zero else 'positive'}_{kind.replace(' ', '_')}"
    return parse


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


# -- the terminal is the user's ----------------------------------------------------------

class TerminalSafeStream:
    """A text stream in front of a terminal that escapes control characters in every
    write. ``buffer`` is the terminal's own byte stream: ``proc log --raw`` writes the
    stored bytes there on purpose. Everything else (fileno, isatty, encoding) is the
    wrapped stream's."""

    def __init__(self, stream) -> None:
        from engine.text import escape_text

        self._stream = stream
        self._escape = lambda text: escape_text(text, keep_lines=True)

    @property
    def wrapped(self):
        """The stream as it was: for output that is the user's own terminal session
        (a foreground ``run``), which must reach the terminal unchanged."""
        return self._stream

    def write(self, text: str) -> int:
        self._stream.write(self._escape(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_terminal_output() -> None:
    """Put :class:`TerminalSafeStream` in front of stdout and stderr where each is a
    terminal. Done once, by the CLI entry point, for headless commands only (the app
    owns the terminal itself); output to a pipe or a file stays byte-exact."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, TerminalSafeStream):
            continue
        try:
            tty = stream is not None and stream.isatty()
        except (AttributeError, ValueError, OSError):
            tty = False
        if tty:
            setattr(sys, name, TerminalSafeStream(stream))
