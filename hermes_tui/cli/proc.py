"""Background processes from the command line: ``run``, ``ps`` and ``proc poll|log|wait|kill``.

All of them go through :class:`engine.processes.ProcessRegistry`, the same engine the
app uses; nothing here decides anything about processes on its own.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

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

POLL_PREVIEW_CHARS = 1000
DEFAULT_LOG_TAIL = 200


def register(sub: argparse._SubParsersAction) -> None:
    for name in ("run", "ps", "proc"):
        register_one(sub, name)


def register_one(sub: argparse._SubParsersAction, name: str) -> None:
    """The parser of one of this module's commands: the CLI builds only the one being run."""
    {"run": _register_run, "ps": _register_ps, "proc": _register_proc}[name](sub)


def _register_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run a command in its own session (foreground: Ctrl+Z backgrounds it, Ctrl+C stops it)",
        description="Run CMD with its output in <home>/processes/<id>/output.log. In the foreground the "
        "output streams live and the exit code is the command's (128+N for signal N); Ctrl+C terminates "
        "the command (exit 130); Ctrl+Z moves it to the background without signalling it and prints its "
        "id. One argument is run by the shell (processes.shell); several are run as an argv.",
    )
    run.add_argument("--bg", action="store_true", help="start in the background and print the id")
    run.add_argument("--notify", action="store_true", help="notify when it completes (background only)")
    run.add_argument("--watch", action="append", default=[], metavar="TEXT",
                     help="notify when an output line contains TEXT (repeatable; background only)")
    run.add_argument("--cwd", metavar="DIR", help="working directory (default: the current one)")
    run.add_argument("--name", metavar="NAME",
                     help="a name for the session, unique among running ones; usable wherever an id is")
    run.add_argument("--max-output", metavar="SIZE",
                     help="keep the stored output within about twice SIZE (head and tail; e.g. 64MiB, 0: "
                     "no bound; default: processes.max_output_bytes)")
    run.add_argument("--restart", choices=("no", "on-failure", "always"), default="no",
                     help="run the command again after it exits (background only; a manual kill ends it)")
    run.add_argument("--max-restarts", type=number_arg(integer=True, allow_zero=True), metavar="N",
                     help="at most N restarts (0..10000, default 5)")
    run.add_argument("--backoff", metavar="MIN..MAX",
                     help="seconds to wait before a restart, doubling from MIN up to MAX (0..86400, "
                     "default 1..60)")
    add_json_flag(run)
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]")
    run.set_defaults(func=cmd_run)


def _register_ps(sub: argparse._SubParsersAction) -> None:
    ps = sub.add_parser("ps", help="list process sessions (running; --all adds finished ones)",
                        description="List process sessions of the home, oldest first.")
    ps.add_argument("--all", action="store_true", help="include finished sessions")
    ps.add_argument("--wide", action="store_true",
                    help=f"show each COMMAND in full (else cut at {PS_COMMAND_WIDTH} characters, ending in …)")
    add_json_flag(ps)
    ps.set_defaults(func=cmd_ps)


def _register_proc(sub: argparse._SubParsersAction) -> None:
    proc = sub.add_parser("proc", help="poll, read, wait for or kill one process session",
                          description="ID is a session id or a unique prefix (at least 4 hex characters "
                          "after proc_; the bare hex works too).")
    psub = proc.add_subparsers(dest="proc_command", metavar="ACTION", parser_class=sub._parser_class)
    psub.required = True

    poll = psub.add_parser("poll", help="status and the last output of a session")
    poll.add_argument("id", metavar="ID")
    add_json_flag(poll)
    poll.set_defaults(func=cmd_poll)

    log = psub.add_parser("log", help="the output of a session (redacted unless --raw)")
    log.add_argument("id", metavar="ID")
    log.add_argument("--tail", type=number_arg(integer=True, allow_zero=True), metavar="N",
                     help=f"only the last N lines (default: all with --json, else {DEFAULT_LOG_TAIL})")
    log.add_argument("--raw", action="store_true", help="print the bytes as stored, without masking secrets")
    add_json_flag(log)
    log.set_defaults(func=cmd_log)

    wait = psub.add_parser("wait", help="wait until a session ends (exit 1 on timeout)")
    wait.add_argument("id", metavar="ID")
    wait.add_argument("--timeout", type=number_arg(unit="seconds"), metavar="S", help="give up after S seconds")
    add_json_flag(wait)
    wait.set_defaults(func=cmd_wait)

    kill = psub.add_parser("kill", help="terminate a session's process group (TERM, grace, KILL)")
    kill.add_argument("id", metavar="ID")
    kill.add_argument("--grace", type=number_arg(allow_zero=True, unit="seconds"), metavar="S",
                      help="seconds between TERM and KILL (default: processes.kill_grace_seconds)")
    add_json_flag(kill)
    kill.set_defaults(func=cmd_kill)

    restart = psub.add_parser("restart", help="run a session's command again as a new session (a running one "
                              "is stopped first)")
    restart.add_argument("id", metavar="ID")
    restart.add_argument("--grace", type=number_arg(allow_zero=True, unit="seconds"), metavar="S",
                         help="seconds between TERM and KILL when it runs (default: processes.kill_grace_seconds)")
    add_json_flag(restart)
    restart.set_defaults(func=cmd_restart)


# --------------------------------------------------------------------------------------


def _registry(ctx: Context):
    from engine.processes import ProcessRegistry

    return ProcessRegistry(ctx.home, ctx.settings)


def _lookup(reg, id_or_prefix: str):
    from engine.processes import ProcessLookupFailed
    from engine.processes.registry import id_argument_problem

    problem = id_argument_problem(id_or_prefix.strip())
    if problem:  # bad usage, before any file is looked at (300 characters: "File name too long")
        raise CliError(problem, EXIT_USAGE)
    try:
        return reg.get(id_or_prefix)
    except ProcessLookupFailed as exc:
        raise CliError(exc.message, EXIT_FAILED) from None


NO_OUTPUT = "{id} is a hermes-agent session: output not available (hermes-agent keeps none hermes-tui can read)"
NO_EXIT_RECORD = "{id} is a hermes-agent session: it leaves no exit record, so hermes-tui cannot wait for it"


def _own_session(ctx: Context, refusal: str = NO_OUTPUT):
    """The session of a poll/log/wait. A hermes-agent session has no output file and no
    exit record: ``refusal`` as one line, exit 1."""
    s = _lookup(_registry(ctx), ctx.args.id)
    if not s.output_available:
        raise CliError(refusal.format(id=s.id), EXIT_FAILED)
    return s


def _session_json(s, now: float | None = None, redact: bool = True) -> dict:
    from engine.processes.redact import maybe_redact

    data = s.to_json()
    data["command"] = maybe_redact(s.command, redact)
    runtime = s.runtime(now)
    data["runtime_seconds"] = None if runtime is None else round(runtime, 3)
    data["stored_bytes"] = _stored_bytes(s)
    if s.restart != "no":
        from engine.processes.restart import restart_state

        data.update(restart_state(s))
    else:
        data.update(restarts=0, max_restarts=0, next_attempt_at=None, attempts=[])
    return data


def _stored_bytes(s) -> int | None:
    """What the session's output really takes on disk (a cut output less than its size)."""
    if not s.output_available:
        return None
    try:
        st = os.stat(s.output_path)
    except OSError:
        return None
    return min(st.st_size, st.st_blocks * 512) if st.st_blocks or not st.st_size else st.st_size


# -- run --------------------------------------------------------------------------------


def cmd_run(ctx: Context) -> int:
    from engine.processes import SpawnFailed

    args = ctx.args
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError("run needs a command: hermes-tui run [--bg] -- CMD [ARG...]", EXIT_USAGE)
    if (args.notify or args.watch) and not args.bg:
        raise CliError("--notify and --watch apply to background runs: add --bg "
                       "(a foreground run yielded with Ctrl+Z notifies on completion by itself)", EXIT_USAGE)
    if any(not w for w in args.watch):
        raise CliError("--watch needs a non-empty TEXT", EXIT_USAGE)
    bound, policy = _bound_and_policy(args)
    if args.name is not None:
        from engine.processes.names import NameRefused, check_name

        try:
            check_name(args.name)
        except NameRefused as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    command = cmd[0] if len(cmd) == 1 else cmd
    reg = _registry(ctx)
    try:
        s = reg.spawn(command, cwd=args.cwd, owner="cli", notify=args.notify, watch=tuple(args.watch),
                      background=args.bg, name=args.name, max_output_bytes=bound, restart=policy)
    except SpawnFailed as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if args.bg:
        if ctx.json:
            print_json({"id": s.id, "pid": s.pid})
        else:
            print(s.id)
        return EXIT_OK
    return _run_foreground(ctx, reg, s)


def _bound_and_policy(args):
    """``--max-output`` and the restart flags, checked (exit 2 with one line)."""
    from engine.processes.restart import (
        DEFAULT_BACKOFF,
        DEFAULT_MAX_RESTARTS,
        RestartPolicy,
        parse_backoff,
        policy_problem,
    )
    from engine.text import parse_size

    bound = None
    if args.max_output is not None:
        try:
            bound = parse_size(args.max_output)
        except ValueError as exc:
            raise CliError(f"--max-output {args.max_output!r}: {exc}", EXIT_USAGE) from None
    if args.restart == "no":
        if args.max_restarts is not None or args.backoff is not None:
            raise CliError("--max-restarts and --backoff go with --restart on-failure|always", EXIT_USAGE)
        return bound, None
    if not args.bg:
        raise CliError("--restart applies to background runs: add --bg", EXIT_USAGE)
    try:
        lo, hi = parse_backoff(args.backoff) if args.backoff is not None else DEFAULT_BACKOFF
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    limit = DEFAULT_MAX_RESTARTS if args.max_restarts is None else int(args.max_restarts)
    problem = policy_problem(limit, lo, hi)  # a count the wrapper's shell cannot hold broke it
    if problem:
        raise CliError(problem, EXIT_USAGE)
    return bound, RestartPolicy(args.restart, limit, lo, hi)


def _run_foreground(ctx: Context, reg, s) -> int:
    import signal
    import threading

    from engine.processes.foreground import ForegroundRun

    yield_requested = threading.Event()
    hung_up = threading.Event()
    reader_gone = threading.Event()
    out = sys.stderr if ctx.json else sys.stdout
    # The command runs in the user's terminal as if typed at the shell: its colours,
    # progress bars and prompts reach the terminal unchanged.
    out = getattr(out, "wrapped", out)

    def write(text: str) -> None:
        try:
            out.write(text)
            out.flush()
        except (BrokenPipeError, ValueError):
            reader_gone.set()  # e.g. `hermes-tui run -- yes | head`: whoever read us is gone

    def on_tstp(_signum, _frame) -> None:
        yield_requested.set()

    def on_hup(_signum, _frame) -> None:  # the terminal went away: keep the command, in the background
        hung_up.set()
        yield_requested.set()

    terminated = threading.Event()

    def on_term(_signum, _frame) -> None:  # we are asked to go (as the app on SIGTERM): the command stays,
        terminated.set()                   # recorded as a background session, never left unrecorded
        yield_requested.set()

    previous = {sig: signal.signal(sig, handler) for sig, handler in
                ((signal.SIGTSTP, on_tstp), (signal.SIGHUP, on_hup), (signal.SIGTERM, on_term))}
    try:
        outcome = ForegroundRun(reg, s).stream(
            write, lambda: yield_requested.is_set() or reader_gone.is_set())
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not cut the kill short
        report = reg.kill(s.id)
        if report.survivors:
            print(f"hermes-tui: interrupted; {s.id} still has survivors: "
                  f"{', '.join(map(str, report.survivors))}", file=sys.stderr)
        else:
            print(f"hermes-tui: interrupted; {s.id} {report.status}", file=sys.stderr)
        if ctx.json:
            print_json({"id": s.id, "pid": s.pid, "status": report.status, "exit_code": None,
                        "signal": "SIGINT", "yielded": False})
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    final = outcome.session
    if reader_gone.is_set() and not yield_requested.is_set():
        # Like a shell pipeline, the command would have got SIGPIPE: stop it.
        _silence_stdout()
        report = reg.kill(final.id)
        print(f"hermes-tui: output reader went away; {final.id} {report.status}", file=sys.stderr)
        return 128 + signal.SIGPIPE
    if hung_up.is_set():
        return EXIT_OK
    if outcome.yielded:
        why = " (hermes-tui got SIGTERM)" if terminated.is_set() else ""
        print(f"\nhermes-tui: moved to background as {final.id} (pid {final.pid}){why}; it keeps running. "
              f"Follow it with: hermes-tui proc log {final.id}", file=sys.stderr)
        if ctx.json:
            print_json({"id": final.id, "pid": final.pid, "status": final.status, "exit_code": None,
                        "signal": "SIGTERM" if terminated.is_set() else None, "yielded": True})
        return 128 + signal.SIGTERM if terminated.is_set() else EXIT_OK
    if ctx.json:
        print_json({"id": final.id, "pid": final.pid, "status": final.status, "exit_code": final.exit_code,
                    "signal": final.signal, "yielded": False})
    return _exit_code_of(final)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the exit flush cannot fail."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _exit_code_of(s) -> int:
    import signal as signal_mod

    if s.exit_code is not None:
        return s.exit_code if 0 <= s.exit_code <= 255 else EXIT_FAILED
    if s.signal:
        try:
            return 128 + signal_mod.Signals[s.signal].value
        except KeyError:
            return EXIT_FAILED
    return EXIT_FAILED  # lost: no exit code is invented


# -- ps ---------------------------------------------------------------------------------


PS_COMMAND_WIDTH = 80


def _ps_command(command: str, wide: bool) -> str:
    """COMMAND as ps shows it: whole with --wide, else at most PS_COMMAND_WIDTH characters,
    a cut always ending in … (the target of a redirect is never lost without a sign)."""
    if wide or len(command) <= PS_COMMAND_WIDTH:
        return command
    return command[:PS_COMMAND_WIDTH - 1] + "…"


def cmd_ps(ctx: Context) -> int:
    reg = _registry(ctx)
    listing = reg.list_with_hermes(include_finished=ctx.args.all)
    sessions = listing.sessions
    for problem in listing.problems:  # one line each; every other session is listed
        print(f"hermes-tui: {problem.message}; not listed", file=sys.stderr)
    if listing.hermes_problem:
        print(f"hermes-tui: {listing.hermes_problem} are not listed", file=sys.stderr)
    now = time.time()
    if ctx.json:
        _print_json_rows([_session_json(s, now, ctx.settings.processes.redact) for s in sessions])
        return EXIT_OK
    if not sessions:
        print("no process sessions" if ctx.args.all else "no running process sessions (--all shows finished ones)")
        return EXIT_OK
    from engine.processes.redact import maybe_redact
    from engine.text import human_duration

    redact = ctx.settings.processes.redact
    from engine.text import human_bytes

    rows = [("ID", "NAME", "STATUS", "PID", "RUNTIME", "OUTPUT", "OWNER", "COMMAND")]
    for s in sessions:  # STATUS in the pane's words: running, exit 2, killed (SIGTERM), lost
        status = s.status_text()
        if s.restart != "no":
            from engine.processes.restart import restart_summary

            status += f" ({restart_summary(s, now)})"
        stored = _stored_bytes(s)
        rows.append((s.id, s.name or "-", status, str(s.pid), human_duration(s.runtime(now)),
                     "-" if stored is None else human_bytes(stored), s.owner,
                     _ps_command(maybe_redact(" ".join(s.command.split()), redact), ctx.args.wide)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r, s in zip(rows, [None, *sessions], strict=True):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
        owner = s.hermes_owner.words() if s is not None and s.hermes_owner is not None else ""
        if owner:  # hermes-agent's: the card, chat and session it is for (outside text)
            print(f"    for {owner}")
    return EXIT_OK


def _print_json_rows(rows: list[dict]) -> None:
    """A JSON array with one session per line: the same document as print_json's, but
    each row goes through json's C encoder (an indented dump of hundreds of sessions
    takes the pure-Python path and was the biggest part of ``ps --json``)."""
    import json

    body = ",\n".join("  " + json.dumps(row, default=str) for row in rows)
    sys.stdout.write(f"[\n{body}\n]\n" if rows else "[]\n")
    sys.stdout.flush()


# -- proc poll / log / wait / kill ------------------------------------------------------


def _preview(s, redact: bool, chars: int = POLL_PREVIEW_CHARS) -> tuple[str, int]:
    from engine.processes.follower import read_tail
    from engine.processes.redact import maybe_redact, strip_ansi

    tail = read_tail(s.output_path, chars * 4)
    return maybe_redact(strip_ansi(tail.text), redact)[-chars:], tail.total


def _mark_seen(s) -> None:
    """The user saw this ending: the app will not toast it again."""
    if s.finished:
        from engine.processes.session import claim_notification

        claim_notification(s.dir)


def cmd_poll(ctx: Context) -> int:
    s = _own_session(ctx)
    preview, size = _preview(s, ctx.settings.processes.redact)
    _mark_seen(s)
    if ctx.json:
        data = _session_json(s, redact=ctx.settings.processes.redact)
        data.update(output_preview=preview, total_bytes=size)
        print_json(data)
        return EXIT_OK
    from engine.text import human_bytes, human_duration

    print(f"{s.id}  {s.exit_text()}  pid {s.pid}  {human_duration(s.runtime())}  "
          f"{human_bytes(size)} of output  owner {s.owner}")
    from engine.processes.redact import maybe_redact

    print(f"command: {maybe_redact(s.command, ctx.settings.processes.redact)}")
    if preview:
        print("--- last output ---")
        print(preview, end="" if preview.endswith("\n") else "\n")
    return EXIT_OK


def cmd_log(ctx: Context) -> int:
    from engine.processes.follower import Tail, read_tail
    from engine.processes.redact import maybe_redact

    s = _own_session(ctx)
    redact = ctx.settings.processes.redact and not ctx.args.raw
    tail = ctx.args.tail if ctx.args.tail is not None else (None if ctx.json else DEFAULT_LOG_TAIL)
    if tail is None:  # --json without --tail: the whole output, streamed
        return _log_json_streamed(s, redact)
    try:
        shown = read_tail(s.output_path, lines=tail)  # only the tail is read, and at most 1 MiB
    except FileNotFoundError:
        shown = Tail(b"", 0)
    except OSError as exc:
        raise CliError(f"cannot read {s.output_path}: {exc.strerror or exc}") from None
    if ctx.json:
        print_json({"id": s.id, "output": maybe_redact(shown.text, redact), "total_bytes": shown.total,
                    "cut_bytes": shown.cut})
        return EXIT_OK
    if shown.cut:
        print(f"hermes-tui: the first line shown is only the end of a longer one "
              f"({shown.cut} bytes before it left out)", file=sys.stderr)
    if ctx.args.raw:
        sys.stdout.buffer.write(shown.data)
        sys.stdout.flush()
        return EXIT_OK
    # Masked, and otherwise the stored bytes: bytes that are not UTF-8 go through as they
    # are (surrogateescape), not as U+FFFD. A terminal gets the text, whose stream shows
    # control characters and those bytes as visible escapes.
    text = maybe_redact(shown.data.decode("utf-8", errors="surrogateescape"), redact)
    from hermes_tui.cli.common import TerminalSafeStream

    if isinstance(sys.stdout, TerminalSafeStream):
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8", errors="surrogateescape"))
    sys.stdout.flush()
    return EXIT_OK


def _log_json_streamed(s, redact: bool) -> int:
    """``proc log ID --json`` of the whole output, the document print_json would write,
    written as it is read: a block of the file, decoded, masked (redact_stream) and
    JSON-escaped at a time, so memory stays flat whatever the output's size."""
    import json

    from engine.processes.follower import OutputFollower
    from engine.processes.redact import redact_stream

    # Data only: a cut output (engine.processes.output_bound) reads head, marker, tail.
    fh = OutputFollower(s.output_path) if os.path.lexists(s.output_path) else None
    total = 0

    def blocks():
        nonlocal total
        if fh is None:
            return
        while True:
            chunk = fh.read()  # at most 1 MiB, cut at a character boundary
            if not chunk.data:
                break
            yield chunk.text
        yield fh.flush()
        try:
            total = os.stat(s.output_path).st_size
        except OSError:
            pass

    out = sys.stdout
    out.write('{\n  "id": ' + json.dumps(s.id) + ',\n  "output": "')
    try:
        for text in redact_stream(blocks(), redact):
            out.write(json.dumps(text)[1:-1])
    except OSError as exc:  # the document is left unfinished: the error says why
        out.flush()
        raise CliError(f"cannot read {s.output_path}: {exc.strerror or exc}") from None
    finally:
        if fh is not None:
            fh.close()
    out.write(f'",\n  "total_bytes": {total},\n  "cut_bytes": 0\n}}\n')
    out.flush()
    return EXIT_OK


def cmd_wait(ctx: Context) -> int:
    reg = _registry(ctx)
    s = _own_session(ctx, NO_EXIT_RECORD)
    try:
        s = reg.wait(s.id, ctx.args.timeout)
    except KeyboardInterrupt:
        raise CliError(f"stopped waiting; {s.id} keeps running", 130) from None
    if ctx.json:
        data = _session_json(s, redact=ctx.settings.processes.redact)
        data["timed_out"] = s.running
        print_json(data)
    if s.running:
        if not ctx.json:
            print(f"hermes-tui: {s.id} is still running after {ctx.args.timeout:g}s (not an error in "
                  "itself: wait again, or proc kill it)", file=sys.stderr)
        return EXIT_FAILED
    _mark_seen(s)
    if not ctx.json:
        print(f"{s.id} {s.exit_text()}")
    return EXIT_OK


def cmd_kill(ctx: Context) -> int:
    reg = _registry(ctx)
    s = _lookup(reg, ctx.args.id)
    report = reg.kill(s.id, ctx.args.grace)
    if ctx.json:
        print_json(report.to_json())
    else:
        sent = ", ".join(f"{sig} {pid}" for pid, sig in report.signals) or "no signal sent"
        line = f"{report.id} {report.outcome}: {sent}"
        if report.detail:
            line += f" ({report.detail})"
        if report.survivors:
            line += f"; still alive: {', '.join(map(str, report.survivors))}"
        print(line, file=sys.stdout if report.ok else sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_restart(ctx: Context) -> int:
    from engine.processes import SpawnFailed

    reg = _registry(ctx)
    s = _lookup(reg, ctx.args.id)
    try:
        done = reg.restart(s.id, ctx.args.grace)
    except SpawnFailed as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if ctx.json:
        print_json({"id": done.new.id, "restarted_from": done.old.id, "pid": done.new.pid,
                    "stopped": done.stopped.to_json() if done.stopped else None,
                    "environment_recorded": done.env_recorded})
        return EXIT_OK
    if done.stopped is not None:
        print(f"stopped {done.old.id} ({done.stopped.outcome})", file=sys.stderr)
    if not done.env_recorded:
        print(f"hermes-tui: {done.old.id} kept no record of its environment (it is older than restarts): "
              "the new session has this shell's", file=sys.stderr)
    print(done.new.id)
    return EXIT_OK
