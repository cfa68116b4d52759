"""Opening the full-screen app (the only place the CLI imports Textual)."""

from __future__ import annotations

import signal
import sys

from engine.config import load_config
from hermes_tui.cli.common import EXIT_USAGE, CliError, Context


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(
            "the app needs a terminal; for scripts use a command such as 'hermes-tui doctor' (see --help)",
            EXIT_USAGE,
        )


def launch_app(ctx: Context) -> int:
    demo = bool(ctx.args.demo)
    if demo:
        if ctx.args.home:
            raise CliError("--demo builds its own home; drop --home", EXIT_USAGE)
        _need_terminal()
        from hermes_tui.demo import build_demo_home

        home = build_demo_home()
        print(f"hermes-tui: demo home at {home.root}", file=sys.stderr)
    else:
        home = ctx.home
    settings = load_config(home.config_file)

    from hermes_tui.app import HermesApp
    from hermes_tui.keymap import validate_keys

    validate_keys(settings)
    home.ensure()
    if not demo:
        _need_terminal()
        # The demo home already shows a real pass in its log; an automatic one would
        # only rearrange what the demo wants to show.
        from hermes_tui.cli import start_auto_prune

        start_auto_prune(ctx)
    app = HermesApp(home, settings, demo=demo)
    # A closed terminal (SIGHUP) or a polite kill (SIGTERM) ends the app the normal way,
    # so its own clean-up (the demo's processes and temp home) still runs. Processes the
    # user started are never touched by this: they live in their own sessions.
    previous = {sig: signal.signal(sig, lambda *_: app.exit(return_code=129)) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        app.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if demo:
            from hermes_tui.demo import cleanup_demo_home

            cleanup_demo_home(home)
    return app.return_code or 0
