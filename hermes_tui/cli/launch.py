"""Opening the full-screen app (the only place the CLI imports Textual)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from engine.config import load_config
from hermes_tui.cli.common import EXIT_USAGE, CliError, Context

# How long a signalled app may take to shut its UI down before it is left behind.
SHUTDOWN_GRACE_SECONDS = 3.0
# How long the demo's clean-up waits for the home being filled to end.
FILL_WAIT_SECONDS = 90.0


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(
            "the app needs a terminal; for scripts use a command such as 'hermes-tui doctor' (see --help)",
            EXIT_USAGE,
        )


def launch_app(ctx: Context) -> int:
    demo = bool(ctx.args.demo)
    if not demo:
        return _run_app(ctx, ctx.home, demo=False)
    if ctx.args.home:
        raise CliError("--demo builds its own home; drop --home", EXIT_USAGE)
    _need_terminal()
    import tempfile
    from pathlib import Path

    from engine.home import HomeLayout
    from hermes_tui.demo.home import cleanup_demo_home, prepare_demo_home

    # The temp root exists before anything is built in it, and a hang-up while the demo
    # is being built ends the build by an exception: either way the finally below
    # knows what to remove and which processes to stop.
    home = HomeLayout(Path(tempfile.mkdtemp(prefix="hermes-demo-")))
    previous = {sig: signal.signal(sig, _end_start_up) for sig in _ENDING_SIGNALS}
    try:
        # Its path is not printed: the header names it while the app runs, and once the
        # app quits the demo home is removed, so a printed path would point at nothing.
        # Only its config here: the app draws at once and fills the home in a thread.
        prepare_demo_home(home.root)
        return _run_app(ctx, home, demo=True)
    except _EndedDuringStartUp as ended:
        return 128 + ended.signum
    finally:
        # Whatever ended the app (a closed terminal included), the demo's processes and
        # its temporary home go with it, and a second hang-up cannot cut that short.
        # Idempotent: the app's own path may have run it already.
        for sig in _ENDING_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        cleanup_demo_home(home)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_ENDING_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


class _EndedDuringStartUp(Exception):
    """SIGHUP or SIGTERM arrived before the app could handle it itself."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _end_start_up(signum, _frame) -> None:
    raise _EndedDuringStartUp(signum)


def _run_app(ctx: Context, home, *, demo: bool) -> int:
    settings = load_config(home.config_file)

    from hermes_tui.app import HermesApp
    from hermes_tui.keymap import validate_keys

    validate_keys(settings, HermesApp)
    from engine.kanban.workers import hostname

    hostname()  # a bad host id (HERMES_KANBAN_HOST_ID) is refused before the app starts: exit 2
    home.ensure()
    if not demo:
        _need_terminal()
        # The demo home already shows a real pass in its log; an automatic one would
        # only rearrange what the demo wants to show.
        from hermes_tui.cli.auto_prune import start_auto_prune

        start_auto_prune(ctx)
    fill_home = None
    if demo:
        from hermes_tui.demo.home import fill_demo_home as fill_home
    app = HermesApp(home, settings, demo=demo, fill_home=fill_home)
    ui_done = threading.Event()
    cleaning = threading.Lock()
    cleaned = threading.Event()

    def clean_up() -> None:
        """Once, from whichever path gets there first; a second caller (another signal's
        watchdog) waits until it is finished, so no one exits halfway through it."""
        with cleaning:
            # A notice claimed just before quitting still goes out (its command has its limit).
            app.attention.notifier.wait_idle(timeout=settings.notify.command_timeout_seconds + 1)
            if demo and not cleaned.is_set():
                from hermes_tui.demo.home import cleanup_demo_home

                # A fill still running would start processes after the clean-up: let
                # it end first (its steps are bounded; the kanban one by its deadline).
                app.wait_for_fill(FILL_WAIT_SECONDS)
                cleanup_demo_home(home)
                cleaned.set()

    def on_signal(signum, _frame) -> None:
        """A closed terminal (SIGHUP, or a hang-up seen by the monitor) or a polite kill
        (SIGTERM): end the app the normal way, so its own clean-up (the demo's processes
        and temp home) runs. When the terminal is really gone the UI may never finish
        shutting down (its writes have nowhere to go), so after a grace period clean up
        here and leave. Processes the user started are never touched: they live in
        their own sessions."""
        app.exit(return_code=128 + signum)

        def watchdog() -> None:
            if ui_done.wait(SHUTDOWN_GRACE_SECONDS):
                return  # the normal path finished the UI and does the clean-up
            clean_up()
            os._exit(128 + signum)

        threading.Thread(target=watchdog, name="hermes-shutdown-watchdog", daemon=True).start()

    from engine.kanban.launch_guard import deferring

    # A launch batch of the app's dispatcher in flight is recorded first (docs/kanban.md).
    previous = {sig: signal.signal(sig, deferring(on_signal)) for sig in _ENDING_SIGNALS}
    stop_watching = _watch_for_hangup()
    try:
        app.run()
    finally:
        ui_done.set()
        stop_watching.set()
        # Still under our handlers: a hang-up now must not kill the clean-up halfway.
        clean_up()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _exit_even_if_threads_hang(app.return_code or 0)
    return app.return_code or 0


# The hang-up monitor sleeps in poll() (which returns at once on a hang-up); this only
# bounds how long it lingers after the app has stopped it.
HANGUP_POLL_MS = 5000


def _watch_for_hangup() -> threading.Event:
    """Watch the app's terminal for a hang-up and treat one as SIGHUP.

    A terminal can go away without a SIGHUP reaching us (we are not in its foreground
    process group, or the signal is ignored): reads then return nothing forever, and
    Textual's input thread would spin on them while the app never learns. The poll
    asks for no events and blocks, so it reports only POLLHUP/POLLERR/POLLNVAL, never
    competes with Textual for input and costs nothing while the terminal is there.
    Returns the event that stops the monitor."""
    import select

    stop = threading.Event()
    fds = []
    for stream in (sys.__stdin__, sys.__stdout__):
        try:
            fds.append(stream.fileno())
        except (AttributeError, ValueError, OSError):
            pass
    if not fds:
        return stop

    def watch() -> None:
        poller = select.poll()
        for fd in set(fds):
            poller.register(fd, 0)
        # Blocking in poll costs no wake-ups while the terminal is there (an idle app
        # must not tick); only hang-up, error or a closed fd can end the wait early.
        while not stop.is_set():
            if poller.poll(HANGUP_POLL_MS) and not stop.is_set():
                os.kill(os.getpid(), signal.SIGHUP)
                return

    threading.Thread(target=watch, name="hermes-hangup-monitor", daemon=True).start()
    return stop


def _exit_even_if_threads_hang(code: int) -> None:
    """After the app and its clean-up are done, the interpreter waits for every other
    thread; Textual's input thread never ends on a terminal that is gone. Give them a
    grace period, then leave anyway (a daemon thread: it does not hold the exit up)."""

    def leave() -> None:
        time.sleep(SHUTDOWN_GRACE_SECONDS)
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os._exit(code)

    threading.Thread(target=leave, name="hermes-exit-watchdog", daemon=True).start()
