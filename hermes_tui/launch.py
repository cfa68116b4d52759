"""Opening the full-screen app (the only place the CLI imports Textual)."""

from __future__ import annotations

import os
import signal
import sys
import threading

from engine.config import load_config
from hermes_tui.cli.common import EXIT_USAGE, CliError, Context

# How long a signalled app may take to shut its UI down before it is left behind.
SHUTDOWN_GRACE_SECONDS = 3.0


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

        # Not printed: the header names it while the app runs, and once the app quits
        # the demo home is removed, so a printed path would point at nothing.
        home = build_demo_home()
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
    ui_done = threading.Event()

    def clean_up() -> None:
        if demo:
            from hermes_tui.demo import cleanup_demo_home

            cleanup_demo_home(home)

    def on_signal(signum, _frame) -> None:
        """A closed terminal (SIGHUP) or a polite kill (SIGTERM): end the app the normal
        way, so its own clean-up (the demo's processes and temp home) runs. When the
        terminal is really gone the UI may never finish shutting down (its writes have
        nowhere to go), so after a grace period clean up here and leave. Processes the
        user started are never touched: they live in their own sessions."""
        app.exit(return_code=128 + signum)

        def watchdog() -> None:
            if ui_done.wait(SHUTDOWN_GRACE_SECONDS):
                return  # the normal path finished the UI and does the clean-up
            clean_up()
            os._exit(128 + signum)

        threading.Thread(target=watchdog, name="hermes-shutdown-watchdog", daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        app.run()
    finally:
        ui_done.set()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        clean_up()
    return app.return_code or 0
