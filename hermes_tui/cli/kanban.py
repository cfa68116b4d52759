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
from pathlib import Path

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

# Not `from typing import ...` (its import is a few ms of every verb); the describing
# and wording modules are imported by the verbs that print with them, so `create` and
# the other writes load neither.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

MAX_PRIORITY = 1_000_000_000
MAX_RETRIES = 1_000_000
MAX_TAIL_LINES = 1_000_000
VERBS = ("create", "list", "show", "assign", "complete", "block", "review", "heartbeat", "reclaim", "unblock",
         "archive", "comment", "dispatch", "daemon", "tail", "boards", "usage", "reassign", "schedule", "promote",
         "link", "unlink", "edit")
HERMES_ONLY = "hermes-agent's board only, through `hermes kanban`"
BOARD_HELP = "the board by name: hermes-agent's board SLUG, else hermes-tui's own (see `kanban boards`)"


def register(sub: argparse._SubParsersAction, words: Sequence[str] | None = None) -> None:
    """The ``kanban`` parser. Given ``words``, what follows ``kanban`` on the command line,
    only the verb among them gets its parser, as the CLI does for commands (building all
    of them was a few ms of every board command); every verb is built when there is no
    verb to be sure of (``kanban --help`` lists them all, an unknown verb's error names them)."""
    p = sub.add_parser(
        "kanban",
        help="the kanban board: create and move cards, dispatch workers, follow events",
        description="The kanban board of this home (or --db). Exit 0 ok, 1 failed/refused, 2 usage.",
    )
    p.add_argument("--db", metavar="PATH|URL", help="the board: a file, or a postgresql:// URL (default: "
                   "$HERMES_KANBAN_DB, $HERMES_KANBAN_DATABASE_URL, config kanban.database, kanban.db, "
                   "hermes-agent's <home>/kanban.db when there, else <home>/hermes-tui/board.db)")
    p.add_argument("--board", metavar="SLUG", help=BOARD_HELP)
    p.set_defaults(func=_need_verb)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    common = type(p)(add_help=False)  # the CLI's parser: argparse's own formatter would import shutil
    common.add_argument("--db", metavar="PATH|URL", default=argparse.SUPPRESS, help="the board file or URL")
    common.add_argument("--board", metavar="SLUG", default=argparse.SUPPRESS, help=BOARD_HELP)
    table = _verb_table()
    wanted = None if words is None else verb_in(words)
    for name, (help_, func, add_arguments, json_flag) in table.items():
        if wanted in (None, name):
            vp = verbs.add_parser(name, help=help_, description=help_, parents=[common])
            if json_flag:
                add_json_flag(vp)
            vp.set_defaults(func=func)
            add_arguments(vp)


# The options of the ``kanban`` parser itself (before the verb), and whether each takes a value.
_KANBAN_OPTIONS = {"-h": False, "--help": False, "--db": True, "--board": True}


def verb_in(words: Sequence[str]) -> str | None:
    """The verb in ``words`` (what follows ``kanban``) when argparse will surely take it
    as the verb; None when there is none, or when a word before it is not plainly one of
    the kanban parser's own options with its value (help, ``--``, an unknown option):
    then every verb's parser is built, as argparse may need any of them."""
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if not word.startswith("-"):
            return word if word in _verb_table() else None
        name = word.split("=", 1)[0]
        if name.startswith("--") and name not in _KANBAN_OPTIONS:  # argparse takes a unique prefix
            prefixed = [option for option in _KANBAN_OPTIONS if option.startswith(name)]
            name = prefixed[0] if len(prefixed) == 1 else name
        if not _KANBAN_OPTIONS.get(name):  # help, an unknown option, "--", or a value option's value missing
            return None
        skip = "=" not in word
    return None


def _verb_table() -> dict[str, tuple[str, Callable[[Context], int], Callable[[argparse.ArgumentParser], None], bool]]:
    """Every verb, in the order ``kanban --help`` lists them: its help line (also its
    description), its handler, what adds its arguments, and whether it takes --json."""
    return {
        "create": ("create a card (ready, or todo while a parent is not done)", run_create, _create_args, True),
        "list": ("list cards", run_list, _list_args, True),
        "show": ("a card with its runs and events", run_show, _id_arg, True),
        "assign": ("give a card to a profile ('-' unassigns); a new profile resets its failures", run_assign,
                   _assign_args, True),
        "complete": ("finish a card (done)", run_finish, _finish_args("--summary"), True),
        "block": ("block a card (ready/running -> blocked)", run_finish, _finish_args("--reason"), True),
        "review": ("send a card to review", run_finish, _finish_args("--summary"), True),
        "heartbeat": ("a worker says it is alive (extends its claim)", run_heartbeat, _id_arg, True),
        "reclaim": ("take a running card back: stop its worker, requeue it, reset its failures", run_reclaim,
                    _reclaim_args, True),
        "unblock": ("blocked -> ready (todo while a parent is open); resets its failures", run_unblock, _id_arg,
                    True),
        "archive": ("archive a card (a running card's worker is stopped)", run_archive, _id_arg, True),
        "comment": ("comment on a card (hermes-agent's board only)", run_comment, _comment_args, True),
        "dispatch": ("run one dispatch tick now", run_dispatch, _no_args, True),
        "daemon": ("tick until Ctrl+C", run_daemon, _daemon_args, False),
        "tail": ("print events as they come (all cards, or one), until Ctrl+C", run_tail, _tail_args, False),
        "usage": ("record a run's tokens and cost (a worker: its own current run; a person: the card's "
                  "latest run); the latest report of a run wins", run_usage, _usage_args, True),
        "reassign": (f"give a card to another profile, reclaiming it first with --reclaim ({HERMES_ONLY})", run_hermes_verb, _reassign_args, True),
        "schedule": (f"park a card in scheduled: waiting on time, not on a person ({HERMES_ONLY})", run_hermes_verb, _schedule_args, True),
        "promote": (f"todo/blocked -> ready by hand ({HERMES_ONLY})", run_hermes_verb, _promote_args, True),
        "link": (f"make CHILD wait for PARENT ({HERMES_ONLY})", run_hermes_verb, _link_args, True),
        "unlink": (f"remove the dependency PARENT -> CHILD ({HERMES_ONLY})", run_hermes_verb, _link_args, True),
        "edit": (f"backfill a done card's result and summary ({HERMES_ONLY})", run_hermes_verb, _edit_args, True),
        "boards": ("every board of the home (hermes-agent's and hermes-tui's own) with its counts; "
                   "`boards create SLUG` makes a hermes-tui board", run_boards, _boards_args, True),
    }


def _no_args(vp: argparse.ArgumentParser) -> None:
    pass


def _id_arg(vp: argparse.ArgumentParser) -> None:
    vp.add_argument("id")


def _create_args(c: argparse.ArgumentParser) -> None:
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


def _list_args(lp: argparse.ArgumentParser) -> None:
    lp.add_argument("--status", action="append", choices=_statuses(), help="only this status (repeatable)")
    lp.add_argument("--all", action="store_true", help="include archived cards")


def _assign_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("id")
    ap.add_argument("profile")


def _finish_args(text: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(vp: argparse.ArgumentParser) -> None:
        vp.add_argument("id")
        vp.add_argument(text, dest="text", metavar="TEXT", help="recorded on the run and the event")

    return add


def _reclaim_args(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("id")
    rp.add_argument("--reason", default="", help="why (recorded on the event)")


def _comment_args(cp: argparse.ArgumentParser) -> None:
    cp.add_argument("id")
    cp.add_argument("text")


def _daemon_args(dp: argparse.ArgumentParser) -> None:
    dp.add_argument("--interval", type=number_arg(unit="seconds"), metavar="S",
                    help="seconds between ticks (default kanban.dispatch_interval_seconds)")


def _tail_args(tp: argparse.ArgumentParser) -> None:
    tp.add_argument("id", nargs="?")
    tp.add_argument("--lines", type=bounded_int(0, MAX_TAIL_LINES, "lines"), default=10, metavar="N", help="earlier events to show first (default 10)")
    tp.add_argument("--interval", type=number_arg(unit="seconds"), default=0.5, metavar="S", help=argparse.SUPPRESS)


def _usage_args(up: argparse.ArgumentParser) -> None:
    up.add_argument("id")
    up.add_argument("--input-tokens", type=bounded_int(0, 10**15, "input tokens"), required=True, metavar="N")
    up.add_argument("--output-tokens", type=bounded_int(0, 10**15, "output tokens"), required=True, metavar="N")
    up.add_argument("--cost-usd", type=number_arg(allow_zero=True, unit="US dollars"), metavar="X",
                    help="the run's estimated cost in US dollars")


def _reassign_args(rp2: argparse.ArgumentParser) -> None:
    rp2.add_argument("id")
    rp2.add_argument("profile", help="the new profile ('-' unassigns)")
    rp2.add_argument("--reclaim", action="store_true", help="release an active claim first")
    rp2.add_argument("--reason", default="", help="why (recorded by hermes)")


def _schedule_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("id")
    sp.add_argument("reason", nargs="?", default="", help="a reason or timing note (hermes adds it as a comment)")


def _promote_args(pp: argparse.ArgumentParser) -> None:
    pp.add_argument("id")
    pp.add_argument("reason", nargs="?", default="", help="recorded on hermes's event")
    pp.add_argument("--force", action="store_true", help="even while a parent is not done")


def _link_args(lk: argparse.ArgumentParser) -> None:
    lk.add_argument("parent")
    lk.add_argument("child")


def _edit_args(ep: argparse.ArgumentParser) -> None:
    ep.add_argument("id")
    ep.add_argument("--result", required=True, help="the card's result text")
    ep.add_argument("--summary", help="the handoff summary (hermes falls back to the result)")


def _boards_args(bp: argparse.ArgumentParser) -> None:
    bp.add_argument("action", nargs="?", choices=("list", "create"), default="list")
    bp.add_argument("slug", nargs="?", help="the new board's slug (create)")
    bp.add_argument("--name", help="the new board's display name (create)")


def _statuses() -> tuple[str, ...]:
    """Every status a board may hold: hermes-tui's, and hermes-agent's (triage, scheduled)."""
    from engine.kanban.backends.hermes.board_file import HERMES_STATUSES
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


def _warn_unknown_profile(ctx: Context, name: str | None, checks_profiles: bool) -> None:
    """A card for a profile this home does not have is still made (another home may
    serve it), but the person hears about it: a typo would otherwise wait forever.
    A board worked by someone else's profiles (hermes-agent's) is not checked here."""
    profiles = ctx.settings.kanban.profiles
    if name and name not in profiles and checks_profiles:
        known = ", ".join(sorted(profiles)) or "none are configured"
        print(f"warning: no profile here is called {name!r}; the profiles here: {known}", file=sys.stderr)


def _need_verb(ctx: Context) -> int:
    raise CliError(f"kanban needs a verb: {', '.join(VERBS)} (see hermes-tui kanban --help)", EXIT_USAGE)


# --------------------------------------------------------------------------------------
# Plumbing: open the board, run a coroutine, turn engine errors into one line
# --------------------------------------------------------------------------------------


class BoardAway(CliError):
    """The board's server cannot be reached now, or refused a statement for a reason of
    the moment (exit 1 for a one-shot verb; the daemon waits it out). ``retrying`` and
    ``back`` are the daemon's words for it."""

    def __init__(self, message: str, code: int = EXIT_FAILED, retrying: str = "retrying until it is back",
                 back: str = "is reachable again") -> None:
        super().__init__(message, code)
        self.retrying, self.back = retrying, back


class HostIdClash(CliError):
    """Another machine holds this host id's live lease: nothing is dispatched (exit 1;
    the daemon stops, it does not retry)."""


def _run(ctx: Context, body, spawner=None, create: bool = True, runner=None) -> Any:
    """Open the board service, run ``body(service)``, close it. Engine refusals -> exit 1,
    an unusable id -> exit 2. ``create``: a missing board file is made (False: refused).
    ``runner``: an ``asyncio.Runner`` whose one loop runs it (else a loop of its own)."""
    import asyncio

    return (runner.run if runner is not None else asyncio.run)(_with_service(ctx, body, spawner, create))


async def _with_service(ctx: Context, body, spawner, create: bool = True) -> Any:
    import sqlite3

    from engine.kanban.backend import BadId, StoreError
    from engine.kanban.backends.postgres.errors import BoardUnreachable, HostIdInUse, UnusableUrl
    from engine.kanban.backends.postgres.url import BadDatabaseUrl
    from engine.kanban.hosts import BadHostId, hostname
    from engine.kanban.service import BoardService

    override = board_override(ctx)
    try:
        hostname()  # this host's id is checked before any verb: a bad one is a usage error
    except BadHostId as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        path = BoardService.path_for(ctx.home, ctx.settings, override)
    except BadDatabaseUrl as exc:  # --db, $HERMES_KANBAN_DB or $HERMES_KANBAN_DATABASE_URL
        raise CliError(f"the board database URL {exc}", EXIT_USAGE) from None
    try:
        async with await BoardService.open(ctx.home, ctx.settings, override=override, create=create,
                                           spawner=spawner) as service:
            return await body(service)
    except (BadId, UnusableUrl) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except BoardUnreachable as exc:
        raise BoardAway(str(exc), EXIT_FAILED, exc.retrying, exc.back) from None
    except HostIdInUse as exc:
        raise HostIdClash(str(exc), EXIT_FAILED) from None
    except StoreError as exc:
        raise CliError(_full_disk_words(path) or str(exc), EXIT_FAILED) from None
    except sqlite3.DatabaseError as exc:  # damage found after opening, a full disk, ...
        raise CliError(_full_disk_words(path, exc) or f"the board {path} cannot be used: {exc}", EXIT_FAILED) from None


# What SQLite says when a write meets a full disk: SQLITE_FULL, an I/O error, or, on the
# read-only connection a read is given when the disk is full, SQLITE_READONLY.
_FULL_DISK_ERRORS = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CANTOPEN")


def _full_disk_words(path, exc: Exception | None = None) -> str | None:
    """The one line for a board write refused because its disk is full (a write said
    "attempt to write a readonly database"), or None when that is not why."""
    import os
    from pathlib import Path

    if not isinstance(path, Path):
        return None  # a PostgreSQL board: the server says for itself
    name = getattr(exc, "sqlite_errorname", None) if exc is not None else None
    if exc is not None and not (name or "").startswith(_FULL_DISK_ERRORS):
        return None
    try:
        full = os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return None
    if not full:
        return None
    return (f"the disk holding the board {path} is full: nothing was changed (free some space and try again; "
            "the board can still be read)")


def board_override(ctx: Context):
    """``--db`` as given, or the file ``--board SLUG`` names (not both: exit 2)."""
    db, board = getattr(ctx.args, "db", None), getattr(ctx.args, "board", None)
    if board is None:
        return db
    if db is not None:
        raise CliError("give --db or --board, not both", EXIT_USAGE)
    from engine.kanban.backends.postgres.url import BadDatabaseUrl
    from engine.kanban.boards import BadSlug, UnknownBoard, resolve_board
    from engine.kanban.service import BoardService

    if board.strip().lower() == "default":
        try:  # kanban.database (or its variable) names a server: its board is the default one
            if not isinstance(BoardService.path_for(ctx.home, ctx.settings), Path):
                return None
        except BadDatabaseUrl:
            pass  # said by the verb's own opening
    try:
        return resolve_board(ctx.home, board)
    except (BadSlug, UnknownBoard) as exc:
        raise CliError(f"--board: {exc}", EXIT_USAGE) from None


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
    from engine.text import human_duration

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
            return service.capabilities.checks_profiles, [await service.create(new[0])]
        if not service.capabilities.batch_create:  # hermes-agent's board: one `hermes kanban create` per card
            raise CliError("create --stdin needs hermes-tui's own board: hermes-agent's board takes one card "
                           "per `hermes kanban create`, never several in one transaction", EXIT_FAILED)
        return service.capabilities.checks_profiles, await service.create_many(new)

    checks_profiles, tasks = _run(ctx, body)
    _warn_unknown_profile(ctx, tasks[0].assignee, checks_profiles)
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
        tasks = await service.list_tasks(statuses)
        return board, tasks, await _hermes_knows(service, tasks), await service.usage()

    board, tasks, (reasons, gateway), usage = _run(ctx, body)
    from engine.kanban.describe import mask_task

    tasks = [mask_task(t, ctx.settings.processes.redact) for t in tasks]
    if ctx.json:
        listed = [t.to_json() for t in tasks]
        if gateway is not None:  # hermes-agent's board: why hermes does not spawn each card
            for item in listed:
                item["hermes_reasons"] = [r.to_json() for r in reasons.get(item["id"], [])]
        usage_json = {k: v for k, v in usage.to_json().items() if k != "runs"}  # the board's total
        print_json({"tasks": listed, "usage": usage_json,
                    **({"gateway": gateway.to_json()} if gateway is not None else {})})
        return EXIT_OK
    if gateway is not None and not gateway.running:
        print(gateway.words)
    if not tasks:
        print("No cards.")
        return EXIT_OK
    now = time.time()
    order = {s: i for i, s in enumerate(board)}
    for t in sorted(tasks, key=lambda t: order.get(t.status, 99)):
        fails = f"  failures={t.consecutive_failures}" if t.consecutive_failures else ""
        pid = f"  pid={t.worker_pid}" if t.worker_pid else ""
        print(f"{t.id}  {t.status:<8}  {(t.assignee or '-'):<12}  {_ago(now, t.created_at):>7}  {t.title}{fails}{pid}")
        for reason in reasons.get(t.id, []):
            print(f"    hermes: {reason.words}")
    print(f"Usage of the board: {usage.words()}")
    return EXIT_OK


async def _hermes_knows(service, tasks) -> tuple[dict, Any]:
    """hermes-agent's board: (card id -> why hermes does not spawn it, its gateway's
    state); ({}, None) for hermes-tui's own board."""
    if not service.capabilities.reports_reasons:
        return {}, None
    return await service.reasons(tasks), await service.gateway()


def run_show(ctx: Context) -> int:
    async def body(service):
        details = await service.details(await service.resolve(ctx.args.id))
        return details, await _hermes_knows(service, [details.task]), await service.usage(details.task.id)

    details, (reasons, gateway), usage = _run(ctx, body)
    from engine.kanban.describe import describe_task, mask_details, plain_text

    redact = ctx.settings.processes.redact
    if ctx.json:
        data = mask_details(details, redact).to_json()
        data["usage"] = usage.to_json()
        if gateway is not None:
            data["hermes_reasons"] = [r.to_json() for r in reasons.get(details.task.id, [])]
            data["gateway"] = gateway.to_json()
        print_json(data)
        return EXIT_OK
    from engine.kanban.usage import usage_lines
    from engine.processes.redact import maybe_redact

    print(plain_text(describe_task(details, time.time(), usage=usage_lines(usage), redact=redact)))
    for reason in reasons.get(details.task.id, []):
        print(f"hermes: {maybe_redact(reason.words, redact)}")
    if gateway is not None and not gateway.running and details.task.status in ("ready", "triage", "todo"):
        print(gateway.words)
    return EXIT_OK


def _report(ctx: Context, verb: str, result) -> int:
    if ctx.json:
        print_json(result.to_json())
    else:
        from engine.kanban.wording import change_words

        print(change_words(verb, result))
    return EXIT_OK


def run_assign(ctx: Context) -> int:
    profile = None if ctx.args.profile == "-" else ctx.args.profile

    async def body(service):
        return service.capabilities.checks_profiles, await service.assign(await service.resolve(ctx.args.id), profile)

    checks_profiles, result = _run(ctx, body)
    _warn_unknown_profile(ctx, profile, checks_profiles)
    if not ctx.json:
        from engine.kanban.wording import assign_words

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
        if not service.capabilities.dispatchable:
            await service.tick()

    _run(ctx, body)


def _tick(ctx: Context, spawner=None):
    async def body(service):
        return await service.tick()

    return _run(ctx, body, spawner)


class _DaemonBoard:
    """The board file a daemon ticks, as it was at its first tick: its path and identity
    (``st_dev``/``st_ino``). A board removed or replaced since is never ticked (nor made
    again): one line, exit 1. A server board has no identity (None).

    Every tick runs on one event loop, and the daemon holds the file board's service open
    from its first tick to its end (as the app does): the unlinked file stays open, so
    its inode number cannot be given to a new file at the same path, and the identity
    stays a sound test. A server board is opened anew every tick, as before."""

    def __init__(self) -> None:
        import asyncio

        self.path = None
        self.identity = None
        self.runner = asyncio.Runner()
        self._held = None

    def tick(self, ctx: Context, spawner):
        from engine.kanban.backend import BoardGone

        if self.identity is not None:
            self._check()

        async def body(service):
            if self.identity is not None and service.identity != self.identity:
                raise BoardGone(self._words(service.identity))
            result = await service.tick()
            if self.path is None:
                self.path, self.identity = service.path, service.identity
                if self.identity is not None:  # held to the end (see the class doc)
                    from engine.kanban.service import BoardService

                    self._held = await BoardService.open(ctx.home, ctx.settings, override=service.path,
                                                         create=False)
            return result

        return _run(ctx, body, spawner, create=self.identity is None, runner=self.runner)

    def _check(self) -> None:
        """Refused before anything opens the path (or resolves ``--board``) again."""
        from engine.kanban.backends.sqlite.store import file_identity

        now = file_identity(self.path)
        if now != self.identity:
            raise CliError(self._words(now), EXIT_FAILED)

    def _words(self, now) -> str:
        what = "removed" if now is None else "replaced by another file"
        return f"the board {self.path} was {what} since this daemon started: nothing more is dispatched there"

    def close(self) -> None:
        try:
            if self._held is not None:
                self.runner.run(self._held.close())
        finally:
            self.runner.close()


def dispatch_lines(result) -> list[str]:
    """The plain-text report of one tick."""
    from engine.kanban.wording import LOCKED, held_back_words, skip_reason

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
                       ("Spawn failed", result.spawn_failed), ("Launch adopted", result.launch_adopted),
                       ("Launch released", result.launch_released), ("Launch held", result.launch_held)):
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
    from engine.kanban.launch_guard import defer_during_launches

    restore = defer_during_launches()  # INT/TERM/HUP wait until a launch batch is recorded
    try:
        result = _tick(ctx)
    finally:
        restore()
    if ctx.json:
        print_json(result.to_json())
    else:
        print("\n".join(dispatch_lines(result)))
    return EXIT_OK


def run_daemon(ctx: Context) -> int:
    import signal

    from engine.kanban.registry_spawner import RegistrySpawner
    from engine.text import human_duration

    interval = ctx.args.interval or ctx.settings.kanban.dispatch_interval_seconds
    try:
        _refuse_undispatchable(ctx)
    except BoardAway:
        pass  # the loop below waits for the server
    spawner = RegistrySpawner(ctx.home, ctx.settings)  # one for all ticks: it reaps its children
    stop = {"now": False}

    def on_term(_sig, _frame):
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, on_term)
    from engine.kanban.launch_guard import defer_during_launches

    restore = defer_during_launches()  # INT/TERM/HUP wait until a launch batch is recorded
    print(f"Dispatching every {interval:g}s. Ctrl+C to stop.", flush=True)
    ticks = 0
    board = _DaemonBoard()
    last_held_back = ""
    away_since: float | None = None  # the board's server is unreachable (or refusing) since (monotonic)
    back_words = ""
    retries = 0
    try:
        while not stop["now"]:
            try:
                result = board.tick(ctx, spawner)
            except BoardAway as exc:
                # Once per outage, one line; then retry with a growing pause (0.5 s doubling
                # to 5 s), reaping this host's finished workers meanwhile, and tick as soon
                # as the server answers: the lease is renewed on that very tick. A statement
                # the server refused (lock_timeout, statement_timeout, a deadlock...) is
                # waited out the same way: exiting on one left this host's cards to others.
                if away_since is None:
                    away_since, back_words = time.monotonic(), exc.back
                    print(f"[{time.strftime('%H:%M:%S')}] {exc.message}; {exc.retrying}", flush=True)
                spawner.reap()
                _pause(stop, min(OUTAGE_RETRY_MAX_SECONDS, OUTAGE_RETRY_FIRST_SECONDS * 2 ** retries))
                retries += 1
                continue
            if away_since is not None:
                print(f"[{time.strftime('%H:%M:%S')}] The board {back_words} (after "
                      f"{human_duration(time.monotonic() - away_since)}).", flush=True)
                away_since, retries = None, 0
            ticks += 1
            busy = any(result.to_json()[k] for k in ("spawned", "reclaimed", "crashed", "timed_out", "promoted",
                                                      "reaped_terminal_workers", "protocol_violations",
                                                      "rate_limited", "auto_blocked", "completed_on_exit",
                                                      "warnings", "launch_adopted", "launch_released"))
            # A tick that only repeats the same "held back" line stays quiet.
            if busy or (result.held_back and result.held_back != last_held_back):
                stamp = time.strftime("%H:%M:%S")
                for line in dispatch_lines(result):
                    print(f"[{stamp}] {line}", flush=True)
            last_held_back = result.held_back
            _pause(stop, interval)
    except KeyboardInterrupt:
        pass
    # HostIdClash (another machine holds this host id's lease) goes on up: exit 1 with
    # its one line. Retrying would not help, and every tick must be refused anyway.
    finally:
        board.close()
        restore()
        signal.signal(signal.SIGTERM, previous)
    print(f"Stopped after {ticks} tick(s).", file=sys.stderr)
    return EXIT_OK


OUTAGE_RETRY_FIRST_SECONDS = 0.5
OUTAGE_RETRY_MAX_SECONDS = 5.0


def _pause(stop: dict, seconds: float) -> None:
    """Sleep ``seconds``, or less when a stop was asked for."""
    deadline = time.monotonic() + seconds
    while not stop["now"] and time.monotonic() < deadline:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def run_tail(ctx: Context) -> int:
    import asyncio

    from engine.kanban.describe import mask_event

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
    from engine.kanban.describe import payload_text
    from engine.text import local_time

    print(f"[{local_time(e.created_at)}] {e.task_id} {e.kind} {payload_text(e.payload)}".rstrip(), flush=True)


def run_boards(ctx: Context) -> int:
    """``kanban boards``: every board with its counts; ``boards create SLUG``: a new
    hermes-tui board (hermes-agent's boards are made by ``hermes kanban boards create``)."""
    import asyncio

    from engine.kanban.boards import BadSlug, create_own_board, list_boards

    a = ctx.args
    if a.action == "create":
        if not a.slug:
            raise CliError("boards create needs a SLUG", EXIT_USAGE)
        try:
            path = create_own_board(ctx.home, a.slug, a.name)
        except BadSlug as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except OSError as exc:
            raise CliError(f"cannot create the board: {exc.strerror or exc}", EXIT_FAILED) from None
        ctx.args.db, ctx.args.board = str(path), None

        async def body(service):
            return service.path

        _run(ctx, body)  # the board service creates the database, with its schema
        if ctx.json:
            print_json({"slug": a.slug.strip().lower(), "path": str(path)})
        else:
            print(f"Created board {a.slug.strip().lower()} ({path})")
        return EXIT_OK
    if a.slug:
        raise CliError("boards lists every board: it takes no SLUG (`boards create SLUG` makes one)", EXIT_USAGE)
    boards = asyncio.run(list_boards(ctx.home, ctx.settings))
    if ctx.json:
        print_json({"boards": [b.to_json() for b in boards],
                    "current": next((b.slug for b in boards if b.current), None)})
        return EXIT_OK
    if not boards:
        print("No boards yet (the first `kanban create` makes hermes-tui's default board).")
        return EXIT_OK
    for b in boards:
        mark = "*" if b.current else " "
        counts = b.error or (", ".join(f"{s}={n}" for s, n in sorted(b.counts.items())) or "no cards")
        extra = " (hermes's current board)" if b.hermes_current and not b.current else ""
        extra += " (archived)" if b.archived else ""
        print(f"{mark} {b.slug:<20} {b.kind:<10} {b.name:<24} {counts}{extra}")
    print("* the board hermes-tui shows without --board")
    return EXIT_OK


def run_usage(ctx: Context) -> int:
    """``kanban usage ID --input-tokens N --output-tokens N [--cost-usd X]``: a run's usage
    (a worker's call is fenced by its run id, like ``complete``)."""
    a = ctx.args
    call = _worker_call()

    async def body(service):
        task_id = a.id if call.is_worker else await service.resolve(a.id)
        await service.report_usage(task_id, input_tokens=a.input_tokens, output_tokens=a.output_tokens,
                                   cost_usd=a.cost_usd, call=call)
        return task_id, await service.usage(task_id)

    task_id, usage = _run(ctx, body)
    if ctx.json:
        print_json({"id": task_id, "usage": usage.to_json()})
    else:
        print(f"Recorded usage of {task_id}: {usage.words()}")
    return EXIT_OK


def run_hermes_verb(ctx: Context) -> int:
    """reassign, schedule, promote, link, unlink, edit: hermes-agent's verbs, run by
    ``hermes kanban --board SLUG VERB`` (refused in one line on hermes-tui's own board, or
    when ``hermes`` is not on PATH)."""
    a, verb = ctx.args, ctx.args.verb

    async def body(service):
        if not service.capabilities.hermes_verbs:
            hint = {"reassign": " (use assign, and reclaim first)", "promote": " (use unblock)"}.get(verb, "")
            raise CliError(f"{verb} is a verb of hermes-agent's board; hermes-tui's own board has none{hint}",
                           EXIT_FAILED)
        if verb in ("link", "unlink"):
            return await service.link(await service.resolve(a.parent), await service.resolve(a.child),
                                      unlink=verb == "unlink")
        task_id = await service.resolve(a.id)
        if verb == "reassign":
            return await service.reassign(task_id, None if a.profile == "-" else a.profile, reclaim=a.reclaim,
                                          reason=a.reason)
        if verb == "schedule":
            return await service.schedule(task_id, a.reason)
        if verb == "promote":
            return await service.promote(task_id, a.reason, force=a.force)
        return await service.edit(task_id, a.result, a.summary)

    result = _run(ctx, body)
    if ctx.json:
        print_json(result.to_json())
    elif verb in ("link", "unlink"):
        print(f"{'Linked' if verb == 'link' else 'Unlinked'} {a.parent} -> {a.child}"
              + (f": {result.message}" if result.message else ""))
    else:
        done = {"reassign": "Reassigned", "schedule": "Scheduled", "promote": "Promoted", "edit": "Edited"}[verb]
        print(f"{done} {result.task_id}  ({result.from_status} -> {result.to_status})")
    return EXIT_OK
