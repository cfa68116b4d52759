"""The automatic scratch pass a command starts once it has succeeded (and the app at its start).

Which commands start it, and how it is turned off for a process tree, is decided here;
when a pass is due and how it runs is the engine's (:mod:`engine.scratch.schedule`).
"""

from __future__ import annotations

import argparse
import os

from hermes_tui.cli.common import Context

# Commands that never start the automatic scratch pass: read-only ones (they create and
# change nothing in a home), and the ones where the user is looking at (or running) a
# prune themselves. A command's verbs that only read are listed per command.
NO_AUTO_PRUNE = frozenset({"doctor", "scratch", "prune", "ps", "attention", "watch"})
READ_ONLY_VERBS = {
    "kanban": ("verb", frozenset({"list", "show", "tail", None})),
    "proc": ("proc_command", frozenset({"poll", "log", "wait", None})),
}


def starts_auto_prune(args: argparse.Namespace) -> bool:
    """Whether this command, once it has succeeded, may start the automatic pass."""
    if args.command in NO_AUTO_PRUNE:
        return False
    if args.command in READ_ONLY_VERBS:
        attr, read_only = READ_ONLY_VERBS[args.command]
        return getattr(args, attr, None) not in read_only
    return True


def auto_prune_disabled_by_env() -> bool:
    """HERMES_AUTO_PRUNE=0 turns the automatic pass off for this process tree (CI, tests)."""
    return os.environ.get("HERMES_AUTO_PRUNE", "").strip().lower() in ("0", "false", "no", "off")


def start_auto_prune(ctx: Context) -> None:
    """Start the hourly scratch pass in a detached child if one is due; never waits.

    A bad config is left for the command itself to report."""
    if auto_prune_disabled_by_env():
        return
    from engine.config import ConfigError
    from engine.scratch.schedule import maybe_start_auto_prune

    try:
        settings = ctx.settings
    except ConfigError:
        return
    maybe_start_auto_prune(ctx.home, settings)
