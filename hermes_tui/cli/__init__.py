"""The ``hermes-tui`` command line.

With no subcommand it opens the full-screen app (the only path that imports Textual);
every subcommand works headless. Subcommands live in one module each under this
package and register themselves through ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from hermes_tui import __version__
from hermes_tui.cli.common import EXIT_FAILED, EXIT_USAGE, CliError, Context, guard_terminal_output

# Every subcommand: the module under hermes_tui.cli that registers it, and the line
# `hermes-tui --help` shows for it (tests/test_cli.py checks each line is the
# one the module registers). Only the module of the command being run is imported, so
# `--help` and every command start without building parsers they do not use.
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("doctor", "check the home: config, scratch size, TMPDIR, big cache folders, pidfd"),
    "run": ("proc", "run a command in its own session (foreground: Ctrl+Z backgrounds it, Ctrl+C stops it)"),
    "ps": ("proc", "list process sessions (running; --all adds finished ones)"),
    "proc": ("proc", "poll, read, wait for or kill one process session"),
    "kanban": ("kanban", "the kanban board: create and move cards, dispatch workers, follow events"),
    "scratch": ("scratch", "list scratch entries (state, idle age, size, why kept, processes inside); "
                "restore from quarantine"),
    "prune": ("prune", "prune idle scratch entries (shows the plan and asks; --dry-run / --yes for scripts)"),
    "attention": ("attention", "what needs a person: blocked cards, failed sessions, prunes due, home warnings; "
                  "dismiss KEY"),
    "watch": ("attention", "print each new attention item as it comes and send its notices, until Ctrl+C"),
}

# Global options that take a value (so the word after them is not a command).
_VALUE_OPTIONS = ("--home",)


def _terminal_columns() -> int:
    """The width argparse would wrap help at (``shutil.get_terminal_size``'s rule:
    $COLUMNS, else the terminal of stdout, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's own formatter, minus its ``import shutil`` (and bz2, lzma, zlib with
    it), which every command paid at start-up: argparse builds a formatter for each
    argument it adds."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # exit 2 with one line, as argparse does, plus a hint
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def command_in(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not a global option)."""
    at = _command_at(argv)
    return None if at is None else argv[at]


def _command_at(argv: list[str]) -> int | None:
    """Where the subcommand is in ``argv``, or None."""
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word in _VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            return i if word in COMMANDS else None
    return None


def build_parser(command: str | None = None, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser. With ``command`` (the one being run) only its own sub-parser is
    built (``register_one`` where a module registers several commands); without one,
    every command is a one-line entry (enough for the listing and for "invalid choice").
    Given ``argv`` too, ``kanban`` builds only the verb in it (see its ``register``)."""
    parser = _Parser(
        prog="hermes-tui",
        description="A terminal console for an agent workspace: the kanban board, background "
        "processes, scratch entries and the prune log. With no command, opens the full-screen app.",
        epilog="Home: --home DIR, else $HERMES_HOME, else ~/.hermes. Exit codes: 0 ok, 1 failed, 2 usage/config.",
    )
    parser.add_argument("--version", action="version", version=f"hermes-tui {__version__}")
    parser.add_argument("--home", metavar="DIR", help="the home directory (default: $HERMES_HOME or ~/.hermes)")
    parser.add_argument("--demo", action="store_true", help="open the app on a freshly built demo home (temp dir)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    if command is not None:
        module = importlib.import_module(f"hermes_tui.cli.{COMMANDS[command][0]}")
        register_one = getattr(module, "register_one", None)
        if register_one is not None:
            register_one(sub, command)
        elif command == "kanban" and argv is not None:
            at = _command_at(argv)
            module.register(sub, argv[at + 1:] if at is not None else None)
        else:
            module.register(sub)
        return parser
    for name, (_module, help_) in COMMANDS.items():
        sub.add_parser(name, help=help_, add_help=False)
    return parser


def _open_app(ctx: Context) -> int:
    from hermes_tui.cli.launch import launch_app

    return launch_app(ctx)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_in(argv), argv)
    args = parser.parse_args(argv)
    ctx = Context(args)
    try:
        if not args.demo:
            from engine.home import check_home_path

            check_home_path(ctx.home.root)
        if args.command is None:
            return _open_app(ctx)
        guard_terminal_output()  # headless from here on: outside text never drives the terminal
        if args.demo:
            raise CliError("--demo opens the app; it cannot be combined with a command", EXIT_USAGE)
        code = args.func(ctx)
        # After the command, and only when it succeeded: a failing command (a bad
        # config, a refused action) never starts a pass.
        from hermes_tui.cli.auto_prune import start_auto_prune, starts_auto_prune

        if code == 0 and starts_auto_prune(args):
            start_auto_prune(ctx)
        return code
    except CliError as exc:
        print(f"hermes-tui: {exc.message}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("hermes-tui: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # typed engine errors: one line, no traceback
        from engine.config import ConfigDenied, ConfigError
        from engine.home import HomeError
        from engine.kanban.hosts import BadHostId

        if isinstance(exc, ConfigDenied):  # another user's home: said as doctor says it, exit 1
            exc = PermissionError(13, "Permission denied", os.fspath(exc.path))
        elif isinstance(exc, (ConfigError, BadHostId)):
            print(f"hermes-tui: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, HomeError):
            print(f"hermes-tui: home: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, BrokenPipeError):
            return EXIT_FAILED
        if isinstance(exc, PermissionError):  # another user's home, session or board: a failed operation
            from engine.text import escape_text

            where = escape_text(os.fsdecode(exc.filename)) if exc.filename is not None else "a file of the home"
            print(f"hermes-tui: permission denied: {where} (it belongs to another user, or its mode shuts "
                  "you out); nothing was changed", file=sys.stderr)
            return EXIT_FAILED
        import errno

        if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG):
            # A read-only or full file system, a path too long: not a bug, one line.
            from engine.text import escape_text

            where = escape_text(os.fsdecode(exc.filename)) if exc.filename is not None else "a file of the home"
            print(f"hermes-tui: {exc.strerror or exc}: {where}", file=sys.stderr)
            return EXIT_FAILED
        from engine.processes.session import ProcessLookupFailed

        if isinstance(exc, ProcessLookupFailed):
            print(f"hermes-tui: {exc.message}", file=sys.stderr)
            return EXIT_FAILED
        if os.environ.get("HERMES_DEBUG"):
            raise
        # A bug, not bad input: still one line, with a way to get the details.
        print(f"hermes-tui: internal error: {type(exc).__name__}: {exc} "
              "(run with HERMES_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
