"""``hermes-tui prune [--dry-run | --yes] [--idle-hours H] [--json]``."""

from __future__ import annotations

import argparse
import sys

from hermes_tui.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    add_json_flag,
    number_arg,
    print_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prune",
        help="prune idle scratch entries (shows the plan and asks; --dry-run / --yes for scripts)",
        description="Prune scratch entries nobody wrote to within the idle window: stray processes "
        "working inside get TERM (then KILL), entries go to quarantine (or are deleted when "
        "scratch.quarantine_hours is 0), every step is logged to logs/scratch-prune.log. On a "
        "terminal without a flag the plan is shown and you are asked (default No).",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the plan and change nothing")
    mode.add_argument("--yes", action="store_true", help="prune without asking")
    p.add_argument("--idle-hours", type=number_arg(unit="hours"), metavar="H", help="idle window in hours (default scratch.idle_hours)")
    add_json_flag(p)
    p.set_defaults(func=run)




def run(ctx: Context) -> int:
    from engine.processes.redact import shown
    from engine.scratch.audit import AuditWriteError
    from engine.scratch.entries import SurveyError
    from engine.scratch.execute import execute_plan
    from engine.scratch.plan import describe_plan, plan_prune
    from engine.scratch.result import PassFailed, PruneBusy, result_of_plan
    from engine.scratch.target import PruneOptions, PruneTarget

    args = ctx.args
    interactive = not (args.dry_run or args.yes)
    if interactive and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("prune needs --dry-run (show the plan) or --yes (prune) when not run on a terminal",
                       EXIT_USAGE)
    home = ctx.home
    redact = ctx.settings.processes.redact  # names, paths and reasons are outside text: masked as outputs are
    target = PruneTarget.of(home)
    options = PruneOptions.from_settings(home, ctx.settings, idle_hours=args.idle_hours)
    try:
        plan = plan_prune(target, options)
    except SurveyError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if args.dry_run:
        result = result_of_plan(plan)
        if ctx.json:
            _print_result_json(result.to_json(), redact)
        else:
            print("\n".join(describe_plan(plan, redact=redact)))
            print("(dry run: nothing was changed)")
        return EXIT_OK
    if interactive:
        out = sys.stderr if ctx.json else sys.stdout
        print("\n".join(describe_plan(plan, redact=redact)), file=out)
        if plan.is_empty:
            print("Nothing to prune.", file=out)
            if ctx.json:
                _print_result_json(result_of_plan(plan).to_json() | {"dry_run": False}, redact)
            return EXIT_OK
        out.write("Prune now? [y/N] ")
        out.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing was changed.", file=out)
            return EXIT_OK
    stop = _StopOnInterrupt()
    try:
        with stop:
            result = execute_plan(target, plan, options, just_planned=args.yes, should_stop=stop.requested.is_set)
    except PruneBusy as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except AuditWriteError as exc:  # the action whose record failed was not taken, nor any after it
        raise CliError(f"prune stopped: {exc}; the step it would have recorded was not taken", EXIT_FAILED) from None
    except PassFailed as exc:  # its line is in the log; the error itself is reported like any other
        raise exc.error from None
    if ctx.json:
        _print_result_json(result.to_json(), redact)
    else:
        print(result.summary(restore_hint="hermes-tui scratch restore NAME"))
        if result.stopped:  # what was done, one line each: everything else is as it was
            for r in result.removed:
                print(f"  removed {shown(r.path, redact)}")
            for q in result.quarantined:
                print(f"  quarantined {shown(q.path, redact)}")
            for s in result.signalled:
                print(f"  {s.signal} pid {s.pid} ({shown(s.name, redact)})")
        for f in result.failures:
            print(f"  {shown(f, redact)}")
        if result.process_error:
            print(f"  process check failed ({shown(result.process_error, redact)}): nothing was deleted")
        print(f"log: {home.prune_log}")
    if result.stopped:
        return 130
    return EXIT_OK if result.ok else EXIT_FAILED


def _print_result_json(doc: dict, redact: bool) -> None:
    """A pass's (or a plan's) JSON document, its paths, names and reasons masked."""
    from engine.processes.redact import redact_data

    print_json(redact_data(doc, redact))


class _StopOnInterrupt:
    """While a pass runs, Ctrl+C (SIGINT) asks it to stop at its next safe point instead
    of cutting it anywhere: the pass finishes the step it is in, records ``pass stopped``
    and returns what it did, which the command prints (exit 130)."""

    def __init__(self) -> None:
        import threading

        self.requested = threading.Event()
        self._previous = None

    def _on_int(self, _signum, _frame) -> None:
        if not self.requested.is_set():
            print("hermes-tui: stopping the prune at the next safe point...", file=sys.stderr, flush=True)
        self.requested.set()

    def __enter__(self):
        import signal

        self._previous = signal.signal(signal.SIGINT, self._on_int)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        signal.signal(signal.SIGINT, self._previous)
