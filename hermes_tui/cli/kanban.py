"""``hermes-tui kanban ...``: the board from the command line, for people and workers.

A worker (its environment carries HERMES_KANBAN_TASK and HERMES_KANBAN_RUN_ID) ends its
run with ``complete|block|review ID`` and may ``heartbeat ID``; such a call for any card
but its own current run is refused (exit 1, one line).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from engine.kanban.describe import (
    describe_task,
    mask_details,
    mask_event,
    mask_task,
    payload_text,
    plain_text,
)
from engine.kanban.wording import LOCKED, assign_words, change_words, held_back_words, skip_reason
from engine.text import human_duration, local_time
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

MAX_PRIORITY = 1_000_000_000
MAX_RETRIES = 1_000_000
MAX_TAIL_LINES = 1_000_000
VERBS = ("create", "list", "show", "assign", "complete", "block", "review", "heartbeat", "reclaim", "unblock",
         "archive", "comment", "dispatch", "daemon", "tail")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "kanban",
        help="the kanban board: create and move cards, dispatch workers, follow events",
        description="The kanban board of this home (or --db). Exit 0 ok, 1 failed/refused, 2 usage.",
    )
    p.add_argument("--db", metavar="PATH|URL", help="the board: a file, or a postgresql:// URL (default: "
                   "$HERMES_KANBAN_DB, $HERMES_KANBAN_DATABASE_URL, config kanban.database, kanban.db, "
                   "hermes-agent's <home>/kanban.db when there, else <home>/hermes-tui/board.db)")
    p.set_defaults(func=_need_verb)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="PATH|URL", default=argparse.SUPPRESS, help="the board file or URL")

    def verb(name: str, help_: str, func, json_flag: bool = True) -> argparse.ArgumentParser:
        vp = verbs.add_parser(name, help=help_, description=help_, parents=[common])
        if json_flag:
            add_json_flag(vp)
        vp.set_defaults(func=func)
        return vp

    c = verb("create", "create a card (ready, or todo while a parent is not done)", run_create)
    c.add_argument("title", nargs="?", help="the card's title (not with --stdin)")
    c.add_argument("--stdin", action="store_true",
                   help="one card per non-empty line of stdin, all in one transaction (all or none), with "
                        "the same options")
    c.add_argument("--body", default="", help="the card's text (reaches the worker as HERMES_KANBAN_BODY)")
    c.add_argument("--assignee", help="the worker profile (kanban.profiles) that works it")
    c.add_argument("--parent", action="append", default=[], metavar="ID", help="a card this one waits for")
    c.add_argument("--priority", type=bounded_int(-MAX_PRIORITY, MAX_PRIORITY, "priority"), default=0,
                   help="higher is dispatched first (default 0)")
    c.add_argument("--max-retries", type=bounded_int(1, MAX_RETRIES, "max retries"), help="failures before the card is blocked "
                   "(wins over kanban.failure_limit)")
    c.add_argument("--max-runtime", type=number_arg(unit="seconds"), metavar="S", help="seconds a run may take")

    lp = verb("list", "list cards", run_list)
    lp.add_argument("--status", action="append", choices=_statuses(), help="only this status (repeatable)")
    lp.add_argument("--all", action="store_true", help="include archived cards")

    verb("show", "a card with its runs and events", run_show).add_argument("id")
    ap = verb("assign", "give a card to a profile ('-' unassigns); a new profile resets its failures", run_assign)
    ap.add_argument("id")
    ap.add_argument("profile")
    for name, help_, text in (("complete", "finish a card (done)", "--summary"),
                              ("block", "block a card (ready/running -> blocked)", "--reason"),
                              ("review", "send a card to review", "--summary")):
        vp = verb(name, help_, run_finish)
        vp.add_argument("id")
        vp.add_argument(text, dest="text", metavar="TEXT", help="recorded on the run and the event")
    verb("heartbeat", "a worker says it is alive (extends its claim)", run_heartbeat).add_argument("id")
    rp = verb("reclaim", "take a running card back: stop its worker, requeue it, reset its failures", run_reclaim)
    rp.add_argument("id")
    rp.add_argument("--reason", default="", help="why (recorded on the event)")
    verb("unblock", "blocked -> ready (todo while a parent is open); resets its failures", run_unblock) \
        .add_argument("id")
    verb("archive", "archive a card (a running card's worker is stopped)", run_archive).add_argument("id")
    cp = verb("comment", "comment on a card (hermes-agent's board only)", run_comment)
    cp.add_argument("id")
    cp.add_argument("text")
    verb("dispatch", "run one dispatch tick now", run_dispatch)
    dp = verb("daemon", "tick until Ctrl+C", run_daemon, json_flag=False)
    dp.add_argument("--interval", type=number_arg(unit="seconds"), metavar="S",
                    help="seconds between ticks (default kanban.dispatch_interval_seconds)")
    tp = verb("tail", "print events as they come (all cards, or one), until Ctrl+C", run_tail, json_flag=False)
    tp.add_argument("id", nargs="?")
    tp.add_argument("--lines", type=bounded_int(0, MAX_TAIL_LINES, "lines"), default=10, metavar="N", help="earlier events to show first (default 10)")
    tp.add_argument("--interval", type=number_arg(unit="seconds"), default=0.5, metavar="S", help=argparse.SUPPRESS)


def _statuses() -> tuple[str, ...]:
    """Every status a board may hold: hermes-tui's, and hermes-agent's (triage, scheduled)."""
    from engine.hermes.board_file import HERMES_STATUSES
    from engine.kanban.statuses import STATUSES

    return STATUSES + tuple(s for s in HERMES_STATUSES if s not in STATUSES)






def bounded_int(low: int, high: int, what: str):
    """An argparse ``type=`` for a whole number in [low, high] (a value SQLite can store
    and a person could mean): anything else is a usage error naming the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{what} must be between {low} and {high}, got {text!r}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


def _warn_unknown_profile(ctx: Context, name: str | None, board_kind: str = "hermes-tui") -> None:
    """A card for a profile this home does not have is still made (another home may
    serve it), but the person hears about it: a typo would otherwise wait forever.
    hermes-agent's board is worked by hermes's profiles: not checked here."""
    profiles = ctx.settings.kanban.profiles
    if name and name not in profiles and board_kind == "hermes-tui":
        known = ", ".join(sorted(profiles)) or "none are configured"
        print(f"warning: no profile here is called {name!r}; the profiles here: {known}", file=sys.stderr)


def _need_verb(ctx: Context) -> int:
    raise CliError(f"kanban needs a verb: {', '.join(VERBS)} (see hermes-tui kanban --help)", EXIT_USAGE)


# --------------------------------------------------------------------------------------
# Plumbing: open the board, run a coroutine, turn engine errors into one line
# --------------------------------------------------------------------------------------


def _run(ctx: Context, body, spawner=None) -> Any:
    """Open the board service, run ``body(service)``, close it. Engine refusals -> exit 1,
    an unusable id -> exit 2."""
    import asyncio

    return asyncio.run(_with_service(ctx, body, spawner))


async def _with_service(ctx: Context, body, spawner) -> Any:
    import sqlite3

    from engine.kanban.pg.url import BadDatabaseUrl
    from engine.kanban.service import BoardService
    from engine.kanban.store import BadId, StoreError

    try:
        path = BoardService.path_for(ctx.home, ctx.settings, getattr(ctx.args, "db", None))
    except BadDatabaseUrl as exc:  # --db, $HERMES_KANBAN_DB or $HERMES_KANBAN_DATABASE_URL
        raise CliError(f"the board database URL {exc}", EXIT_USAGE) from None
    try:
        async with await BoardService.open(ctx.home, ctx.settings, override=getattr(ctx.args, "db", None),
                                           spawner=spawner) as service:
            return await body(service)
    except BadId as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except StoreError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except sqlite3.DatabaseError as exc:  # damage found after opening, a full disk, ...
        raise CliError(f"the board {path} cannot be used: {exc}", EXIT_FAILED) from None


def _worker_call():
    """The caller's identity from its environment (a worker), or a person."""
    from engine.kanban.transitions import WorkerCall

    task = os.environ.get("HERMES_KANBAN_TASK") or None
    raw_run = os.environ.get("HERMES_KANBAN_RUN_ID") or None
    run_id = None
    if raw_run is not None:
        try:
            run_id = int(raw_run)
        except ValueError:
            raise CliError(f"HERMES_KANBAN_RUN_ID must be a run number, got {raw_run!r}", EXIT_USAGE) from None
    return WorkerCall(task, run_id)


def _ago(now: float, then: float | None) -> str:
    return "-" if then is None else human_duration(now - then)


# --------------------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------------------


def run_create(ctx: Context) -> int:
    from engine.kanban.models import NewTask

    a = ctx.args
    if a.stdin == (a.title is not None):
        raise CliError("create needs a TITLE, or --stdin to read one title per line (not both)", EXIT_USAGE)
    for what, text in (("TITLE", a.title), ("--body", a.body), ("--assignee", a.assignee)):
        _utf8_arg(what, text)
    if not a.stdin and not a.title.strip():
        raise CliError("create: the TITLE is empty (a card needs a title)", EXIT_USAGE)
    titles = _stdin_titles() if a.stdin else [a.title]
    new = [NewTask(title=title, body=a.body, assignee=a.assignee, parents=tuple(a.parent), priority=a.priority,
                   max_retries=a.max_retries, max_runtime_seconds=a.max_runtime) for title in titles]

    async def body(service):
        if not a.stdin:
            return service.kind, [await service.create(new[0])]
        if service.kind != "hermes-tui":  # hermes-agent's board: one `hermes kanban create` per card
            raise CliError("create --stdin needs hermes-tui's own board: hermes-agent's board takes one card "
                           "per `hermes kanban create`, never several in one transaction", EXIT_FAILED)
        return service.kind, await service.create_many(new)

    kind, tasks = _run(ctx, body)
    _warn_unknown_profile(ctx, tasks[0].assignee, kind)
    if ctx.json:
        print_json({"tasks": [{"id": t.id, "status": t.status} for t in tasks]} if a.stdin
                   else {"id": tasks[0].id, "status": tasks[0].status})
    else:
        for task in tasks:
            print(f"Created {task.id}  ({task.status}, assignee={task.assignee or '-'})")
    return EXIT_OK


def _utf8_arg(what: str, text: str | None) -> None:
    """Bytes in argv that are not UTF-8 reach Python as lone surrogates: a usage error,
    named by its first byte, before anything is written."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = os.fsencode(text[exc.start:exc.end])[:1].hex()
        raise CliError(f"create: {what} is not UTF-8 text (byte 0x{byte} at character {exc.start})",
                       EXIT_USAGE) from None


def _stdin_titles() -> list[str]:
    """The titles of ``create --stdin``: every line of stdin with something on it. No
    titles, or bytes that are not UTF-8, is a usage error (nothing is created)."""
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"create --stdin: stdin is not UTF-8 text (byte {exc.start})", EXIT_USAGE) from None
    titles = [line for line in text.splitlines() if line.strip()]
    if not titles:
        raise CliError("create --stdin: no titles on stdin (one card per non-empty line)", EXIT_USAGE)
    return titles


def run_list(ctx: Context) -> int:
    a = ctx.args

    async def body(service):
        board = await service.statuses()
        statuses = a.status or [s for s in board if a.all or s != "archived"]
        return board, await service.list_tasks(statuses)

    board, tasks = _run(ctx, body)
    tasks = [mask_task(t, ctx.settings.processes.redact) for t in tasks]
    if ctx.json:
        print_json({"tasks": [t.to_json() for t in tasks]})
        return EXIT_OK
    if not tasks:
        print("No cards.")
        return EXIT_OK
    now = time.time()
    order = {s: i for i, s in enumerate(board)}
    for t in sorted(tasks, key=lambda t: order.get(t.status, 99)):
        fails = f"  failures={t.consecutive_failures}" if t.consecutive_failures else ""
        pid = f"  pid={t.worker_pid}" if t.worker_pid else ""
        print(f"{t.id}  {t.status:<8}  {(t.assignee or '-'):<12}  {_ago(now, t.created_at):>7}  {t.title}{fails}{pid}")
    return EXIT_OK


def run_show(ctx: Context) -> int:
    async def body(service):
        return await service.details(await service.resolve(ctx.args.id))

    details = _run(ctx, body)
    redact = ctx.settings.processes.redact
    if ctx.json:
        print_json(mask_details(details, redact).to_json())
        return EXIT_OK
    print(plain_text(describe_task(details, time.time(), redact=redact)))
    return EXIT_OK


def _report(ctx: Context, verb: str, result) -> int:
    if ctx.json:
        print_json(result.to_json())
    else:
        print(change_words(verb, result))
    return EXIT_OK


def run_assign(ctx: Context) -> int:
    profile = None if ctx.args.profile == "-" else ctx.args.profile

    async def body(service):
        return service.kind, await service.assign(await service.resolve(ctx.args.id), profile)

    kind, result = _run(ctx, body)
    _warn_unknown_profile(ctx, profile, kind)
    if not ctx.json:
        print(assign_words(result.task_id, profile))
        return EXIT_OK
    return _report(ctx, "assign", result)


def run_finish(ctx: Context) -> int:
    verb = ctx.args.verb
    call = _worker_call()

    async def body(service):
        func = {"complete": service.complete, "block": service.block, "review": service.review}[verb]
        task_id = ctx.args.id if call.is_worker else await service.resolve(ctx.args.id)
        return await func(task_id, ctx.args.text, call=call)

    return _report(ctx, verb, _run(ctx, body))


def run_heartbeat(ctx: Context) -> int:
    call = _worker_call()

    async def body(service):
        return await service.heartbeat(ctx.args.id, call)

    return _report(ctx, "heartbeat", _run(ctx, body))


def run_reclaim(ctx: Context) -> int:
    async def body(service):
        return await service.reclaim(await service.resolve(ctx.args.id), reason=ctx.args.reason)

    return _report(ctx, "reclaim", _run(ctx, body))


def run_unblock(ctx: Context) -> int:
    async def body(service):
        return await service.unblock(await service.resolve(ctx.args.id))

    return _report(ctx, "unblock", _run(ctx, body))


def run_archive(ctx: Context) -> int:
    async def body(service):
        return await service.archive(await service.resolve(ctx.args.id))

    return _report(ctx, "archive", _run(ctx, body))


def run_comment(ctx: Context) -> int:
    async def body(service):
        return await service.comment(await service.resolve(ctx.args.id), ctx.args.text)

    result = _run(ctx, body)
    if ctx.json:
        print_json(result.to_json())
    else:
        print(f"Commented on {result.task_id}")
    return EXIT_OK


def _refuse_undispatchable(ctx: Context) -> None:
    """Refuse before a daemon starts ticking a board hermes-tui must not dispatch."""

    async def body(service):
        if not service.dispatchable:
            await service.tick()

    _run(ctx, body)


def _tick(ctx: Context, spawner=None):
    async def body(service):
        return await service.tick()

    return _run(ctx, body, spawner)


def dispatch_lines(result) -> list[str]:
    """The plain-text report of one tick."""
    if result.skipped_locked:
        return [f"Skipped: {LOCKED}."]
    lines = []
    for label, ids in (("Reaped terminal workers", result.reaped_terminal_workers),
                       ("Claims extended", result.extended), ("Reclaim deferred", result.deferred),
                       ("Reclaimed", result.reclaimed), ("Crashed", result.crashed),
                       ("Protocol violations", result.protocol_violations),
                       ("Rate-limited", result.rate_limited), ("Completed on exit", result.completed_on_exit),
                       ("Timed out", result.timed_out), ("Auto-blocked", result.auto_blocked),
                       ("Promoted", result.promoted), ("Auto-assigned", result.auto_assigned),
                       ("Spawn failed", result.spawn_failed)):
        if ids:
            lines.append(f"{label + ':':<24}{len(ids)}  {', '.join(ids)}")
    lines.append(f"{'Spawned:':<24}{len(result.spawned)}")
    lines += [f"  - {s.task_id}  ->  {s.assignee}  pid {s.pid if s.pid else '-'}" for s in result.spawned]
    by_reason: dict[str, list[str]] = {}  # in words (the codes are in --json)
    for skip in result.skipped:
        by_reason.setdefault(skip_reason(skip), []).append(skip.task_id)
    for reason, ids in by_reason.items():
        lines.append(f"Held back ({reason}): {', '.join(ids)}")
    lines += [f"Warning: {w}" for w in result.warnings]
    words = held_back_words(result)
    if words:
        lines.append("Last tick " + words)
    return lines


def run_dispatch(ctx: Context) -> int:
    result = _tick(ctx)
    if ctx.json:
        print_json(result.to_json())
    else:
        print("\n".join(dispatch_lines(result)))
    return EXIT_OK


def run_daemon(ctx: Context) -> int:
    import signal

    from engine.kanban.registry_spawner import RegistrySpawner

    interval = ctx.args.interval or ctx.settings.kanban.dispatch_interval_seconds
    _refuse_undispatchable(ctx)
    spawner = RegistrySpawner(ctx.home, ctx.settings)  # one for all ticks: it reaps its children
    stop = {"now": False}

    def on_term(_sig, _frame):
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, on_term)
    print(f"Dispatching every {interval:g}s. Ctrl+C to stop.", flush=True)
    ticks = 0
    last_held_back = ""
    try:
        while not stop["now"]:
            result = _tick(ctx, spawner)
            ticks += 1
            busy = any(result.to_json()[k] for k in ("spawned", "reclaimed", "crashed", "timed_out", "promoted",
                                                      "reaped_terminal_workers", "protocol_violations",
                                                      "rate_limited", "auto_blocked", "completed_on_exit",
                                                      "warnings"))
            # A tick that only repeats the same "held back" line stays quiet.
            if busy or (result.held_back and result.held_back != last_held_back):
                stamp = time.strftime("%H:%M:%S")
                for line in dispatch_lines(result):
                    print(f"[{stamp}] {line}", flush=True)
            last_held_back = result.held_back
            deadline = time.monotonic() + interval
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"Stopped after {ticks} tick(s).", file=sys.stderr)
    return EXIT_OK


def run_tail(ctx: Context) -> int:
    import asyncio

    a = ctx.args
    redact = ctx.settings.processes.redact

    async def follow(service) -> None:
        task_id = await service.resolve(a.id) if a.id else None
        print(f"Tailing events for {task_id or 'all cards'}. Ctrl+C to stop.", flush=True)
        earlier = await service.events(task_id, limit=a.lines) if a.lines > 0 else []
        last = await service.last_event_id()
        for e in earlier:
            _print_event(mask_event(e, redact))
        while True:
            for e in await service.events(task_id, after_id=last):
                _print_event(mask_event(e, redact))
                last = e.id
            await asyncio.sleep(a.interval)

    try:
        _run(ctx, follow)
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def _print_event(e) -> None:
    print(f"[{local_time(e.created_at)}] {e.task_id} {e.kind} {payload_text(e.payload)}".rstrip(), flush=True)
