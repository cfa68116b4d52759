"""``hermes-tui attention``: what needs a person; ``hermes-tui watch``: say so as it comes."""

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
    print_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    for name in ("attention", "watch"):
        register_one(sub, name)


def register_one(sub: argparse._SubParsersAction, name: str) -> None:
    {"attention": _register_attention, "watch": _register_watch}[name](sub)


def _kind(text: str):
    from engine.attention.model import Kind

    try:
        return Kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown kind {text!r} (kinds: {', '.join(k.value for k in Kind)})") from None


def _register_attention(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attention",
        help="what needs a person: blocked cards, failed sessions, prunes due, home warnings; dismiss KEY",
        description="List the attention items of the home, newest first, grouped by kind (dismissed ones are "
        "left out; --all shows them). 'attention dismiss KEY...' dismisses items (kept across restarts; the "
        "same cause coming back is a new item). Reads only, except a dismissal.",
    )
    p.add_argument("verb", nargs="?", choices=["dismiss"], help="dismiss: dismiss the items KEY...")
    p.add_argument("keys", nargs="*", metavar="KEY", help="the keys to dismiss (see --json, or the key lines)")
    p.add_argument("--kind", action="append", type=_kind, metavar="K", help="only items of this kind (repeatable)")
    p.add_argument("--all", action="store_true", help="also list dismissed items; with dismiss: every item shown")
    p.add_argument("--board", metavar="SLUG", help="only the items of this board (every board of the home by default)")
    add_json_flag(p)
    p.set_defaults(func=run_attention)


def _register_watch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="print each new attention item as it comes and send its notices, until Ctrl+C",
        description="A notifier for a person without the app open (in tmux, under systemd --user, in CI): "
        "prints each new attention item as one line (--json: one JSON object per line) and sends the notices "
        "notify: configures (notify-send, notify.command, the bell on a terminal). Each item is notified once "
        "per home, whether the app, another watch or this one sees it first. INT or TERM stops it (exit 0).",
    )
    p.add_argument("--kind", action="append", type=_kind, metavar="K", help="only print items of this kind")
    p.add_argument("--board", metavar="SLUG", help="only print items of this board (notices still cover every board)")
    p.add_argument("--interval", type=_interval, metavar="S", help="seconds between looks (default notify.poll_seconds)")
    add_json_flag(p)
    p.set_defaults(func=run_watch)


def _interval(text: str) -> float:
    """Seconds between looks, in notify.poll_seconds' range (a floor: 1e-7 busy-looped)."""
    from engine.config import POLL_SECONDS_RANGE

    lo, hi = POLL_SECONDS_RANGE
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from {lo:g} to {hi:g}, got {text!r}")
    return value


# -- attention ------------------------------------------------------------------------------

def _board_arg(ctx: Context) -> str | None:
    """``--board SLUG``: checked against the home's boards (one usage line when it names none)."""
    slug = getattr(ctx.args, "board", None)
    if slug is None:
        return None
    from engine.kanban.boards import BadSlug, UnknownBoard, resolve_board

    try:
        resolve_board(ctx.home, slug)
    except (BadSlug, UnknownBoard) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    return slug.strip().lower()


def _only(found, a, board: str | None = None):
    """The items ``--kind`` and ``--board`` leave."""
    if a.kind:
        found = found.of_kind(a.kind)
    if board is not None:
        found = found.on_board(board)
    return found


def item_line(item, *, dismissed: bool = False) -> str:
    from engine.text import local_time

    when = local_time(item.since)[5:16] if item.since is not None else "           "
    tail = "  (dismissed)" if dismissed else ""
    return f"  {when}  {item.subject}: {item.why}{tail}\n                -> {item.action}\n                key {item.key}"


def _say_state_warnings() -> None:
    """What reading the attention state found wrong (a file set aside), once each."""
    from engine.attention import state

    for line in state.take_warnings():
        print(f"hermes-tui: warning: {line}", file=sys.stderr, flush=True)


def run_attention(ctx: Context) -> int:
    try:
        return _run_attention(ctx)
    finally:
        _say_state_warnings()


def _run_attention(ctx: Context) -> int:
    from engine.attention.collect import collect

    a = ctx.args
    if a.verb == "dismiss":
        return _dismiss(ctx)
    if a.keys:
        raise CliError(f"unexpected {a.keys[0]!r}: to dismiss, say 'hermes-tui attention dismiss KEY'", EXIT_USAGE)
    board = _board_arg(ctx)
    found = _only(collect(ctx.home, ctx.settings), a, board)
    if ctx.json:
        items = [i.to_json() | {"dismissed": False} for i in found.items]
        if a.all:
            items += [i.to_json() | {"dismissed": True} for i in found.dismissed]
        print_json({"items": items, "dismissed": len(found.dismissed), "problems": list(found.problems)})
        return EXIT_OK
    from engine.attention.model import grouped

    shown = list(found.items) + (list(found.dismissed) if a.all else [])
    lines = []
    if not shown:
        lines.append("Nothing needs you." + (f" ({len(found.dismissed)} dismissed; --all shows them)"
                                            if found.dismissed else ""))
    gone = {i.key for i in found.dismissed}
    for _kind, items in grouped(shown):
        lines.append(f"{items[0].heading} ({len(items)})")
        lines += [item_line(i, dismissed=i.key in gone) for i in items]
    if shown and found.dismissed and not a.all:
        lines.append(f"({len(found.dismissed)} dismissed; --all shows them)")
    lines += [f"could not read {p}" for p in found.problems]
    print("\n".join(lines))
    return EXIT_OK


def _dismiss(ctx: Context) -> int:
    from engine.attention import state
    from engine.attention.collect import collect
    from engine.attention.model import kind_of_key

    a = ctx.args
    if not a.keys and not a.all:
        raise CliError("dismiss needs a KEY (hermes-tui attention lists them), or --all", EXIT_USAGE)
    bad = [k for k in a.keys if kind_of_key(k) is None]
    if bad:
        raise CliError(f"{bad[0]!r} is not an attention key (a key starts with its kind, e.g. blocked:...)",
                       EXIT_USAGE)
    found = _only(collect(ctx.home, ctx.settings), a, _board_arg(ctx))
    current = {i.key for i in found.items} | {i.key for i in found.dismissed}
    keys = list(a.keys) if a.keys else [i.key for i in found.items]
    missing = [k for k in keys if k not in current]
    if missing:
        raise CliError(f"no current item has the key {missing[0]!r} (it may have ended by itself)", EXIT_FAILED)
    try:
        new = state.dismiss(ctx.home, keys)
    except state.StateError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if ctx.json:
        print_json({"dismissed": new, "already_dismissed": [k for k in keys if k not in new]})
    else:
        print(f"Dismissed {len(new)} item(s)" + (f"; {len(keys) - len(new)} already were" if len(new) < len(keys)
                                                else ""))
    return EXIT_OK


# -- watch ------------------------------------------------------------------------------------

SCRATCH_EVERY_SECONDS = 60.0  # a scratch survey walks the entries: not on every look
HOME_EVERY_SECONDS = 600.0


def watch_line(item) -> str:
    import time

    return f"[{time.strftime('%H:%M:%S')}] {item.kind.value} {item.subject}: {item.why} -> {item.action}"


def run_watch(ctx: Context) -> int:
    import json
    import signal
    import threading
    import time

    from engine.attention import collect as col
    from engine.attention.boards import BoardsReader
    from engine.attention.notify import Notifier

    a = ctx.args
    settings = ctx.settings
    board = _board_arg(ctx)
    interval = a.interval or settings.notify.poll_seconds
    stop = threading.Event()

    def on_signal(_sig, _frame):
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    out = sys.stdout
    raw = getattr(out, "wrapped", None)  # the terminal itself (the guard escapes what we print)
    terminal = None
    if raw is not None:
        def terminal(seq: str) -> None:
            raw.write(seq)
            raw.flush()

    notifier = Notifier(ctx.home, settings, terminal=terminal,
                        on_failure=lambda line: print(f"hermes-tui watch: {line}", file=sys.stderr, flush=True))
    print(f"Watching {ctx.home.root} every {interval:g}s (Ctrl+C to stop).", file=sys.stderr, flush=True)
    printed: set[str] = set()
    reader = BoardsReader(ctx.home, settings)  # a board is read again only when it changed
    scratch, scratch_at = None, float("-inf")
    warnings, home_at = None, float("-inf")
    try:
        while not stop.is_set():
            now = time.time()
            problems = []
            boards = None
            try:
                boards, board_problems = _run_async(reader.read(now))
                problems += board_problems
            except Exception as exc:
                problems.append(f"boards: {exc}")
            sessions, watch_states = None, {}
            try:
                sessions, watch_states = col.session_facts(ctx.home, settings)
            except Exception as exc:
                problems.append(f"processes: {exc}")
            if now - scratch_at >= SCRATCH_EVERY_SECONDS:
                scratch, scratch_at = col.scratch_facts(ctx.home, settings), now
            if now - home_at >= HOME_EVERY_SECONDS:
                warnings, home_at = col.home_facts(ctx.home, settings), now
            from engine.attention import state

            found = col.compute(col.Facts(boards=boards, sessions=sessions, watch_states=watch_states,
                                          scratch=scratch, warnings=warnings, problems=tuple(problems)),
                                now, state.dismissed(ctx.home))
            shown = _only(found, a, board)
            for item in reversed(shown.items):  # oldest first: a log reads down
                if item.key in printed:
                    continue
                printed.add(item.key)
                print(json.dumps(item.to_json()) if ctx.json else watch_line(item), flush=True)
            notifier.offer(found)
            _say_state_warnings()
            due = notifier.due_at()
            wait = interval if due is None else max(0.0, min(interval, due - time.time()))
            if stop.wait(wait):
                break
            notifier.flush()
    except BrokenPipeError:
        return EXIT_FAILED
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        notifier.wait_idle(timeout=settings.notify.command_timeout_seconds + 2)
    print("Stopped.", file=sys.stderr, flush=True)
    return EXIT_OK


def _run_async(coro):
    import asyncio

    return asyncio.run(coro)
