"""The board's attention items: blocked cards, cards the breaker blocked, cards in
review, stale claims and lost hosts of a shared board.

:func:`read_board` does the reads (three queries, whatever the board's size: the
blocked, review and running cards, the newest block or review event of each, and the
recent ``host_lost`` events); :func:`board_items` turns them into items, pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.attention.model import Item, Kind
from engine.attention.words import outside, plural
from engine.kanban.models import EventKind
from engine.kanban.statuses import BLOCKED, REVIEW, RUNNING
from engine.text import human_duration

# A lost host stays an item this long after its last host_lost event.
HOST_LOST_WINDOW_SECONDS = 3600.0
# A claim counts as stale only once a dispatcher has had time to take it back.
STALE_CLAIM_GRACE_SECONDS = 60.0

BLOCK_EVENTS = (EventKind.BLOCKED, EventKind.GAVE_UP)
REVIEW_EVENTS = (EventKind.REVIEW_REQUESTED,)


@dataclass(frozen=True)
class BoardFacts:
    """What the board items are made from (see :func:`read_board`)."""

    tasks: tuple  # blocked, review and running cards (engine.kanban.models.Task)
    latest: dict  # card id -> its newest block/review event
    host_events: tuple  # host_lost events of the window
    dispatch_interval: float = 10.0
    board: str | None = None  # its slug (engine.attention.boards), None: a board with no slug
    selector: str = ""  # what names it on the command line (``--board ops``), "" when it is the default
    named: bool = False  # the home has more than one board: the words say which


def _command(facts: BoardFacts, verb: str, card: str) -> str:
    """The command that answers an item, naming the board when the home has several."""
    where = f"{facts.selector} " if facts.named and facts.selector else ""
    return f"hermes-tui kanban {where}{verb} {card}"


async def read_board(service, now: float, dispatch_interval: float = 10.0) -> BoardFacts:
    """The facts of :func:`board_items`, read through a board service (the board's
    name is the caller's to add: engine.attention.boards)."""
    tasks = await service.list_tasks([BLOCKED, REVIEW, RUNNING])
    latest = await service.latest_events(BLOCK_EVENTS + REVIEW_EVENTS, [BLOCKED, REVIEW]) if any(
        t.status != RUNNING for t in tasks) else {}
    hosts = await service.events_since((EventKind.HOST_LOST,), now - HOST_LOST_WINDOW_SECONDS)
    return BoardFacts(tuple(tasks), latest, tuple(hosts), dispatch_interval)


def board_items(facts: BoardFacts, now: float) -> list[Item]:
    """The board's items, each carrying its board: its slug in ``board`` and at the end
    of its key (``blocked:t_1:12@ops``: the same card id on two boards is two items, and
    a key does not change when a board is added), its answer naming the board and its
    words starting with it when the home has more than one."""
    items: list[Item] = []
    for task in facts.tasks:
        event = facts.latest.get(task.id)
        if task.status == BLOCKED:
            items.append(_blocked(facts, task, event if event is not None and event.kind in BLOCK_EVENTS else None))
        elif task.status == REVIEW:
            items.append(_review(facts, task, event if event is not None and event.kind in REVIEW_EVENTS else None))
        elif task.status == RUNNING:
            item = _stale(facts, task, now, facts.dispatch_interval)
            if item is not None:
                items.append(item)
    items.extend(_hosts_lost(facts.host_events))
    if facts.board is None and not facts.named:
        return items
    return [_on_board(facts, item) for item in items]


def _on_board(facts: BoardFacts, item: Item) -> Item:
    return on_board(item, facts.board, facts.board or facts.selector if facts.named else None)


def on_board(item: Item, board: str | None, named: str | None = "") -> Item:
    """``item`` carrying its board: ``board`` (a slug) in its key and field, and ``named``
    (what the words call the board; "": the slug; None: nothing) before its words."""
    from dataclasses import replace

    key = f"{item.key}@{board}" if board is not None else item.key
    name = board if named == "" else named
    why = f"board {outside(name, 80)}: {item.why}" if name else item.why
    return replace(item, key=key, why=why, board=board)


def _title(task) -> str:
    return outside(task.title, 60)


def _blocked(facts: BoardFacts, task, event) -> Item:
    occurrence = event.id if event is not None else int(task.completed_at or task.created_at)
    since = event.created_at if event is not None else None
    payload = event.payload if event is not None else {}
    if event is not None and event.kind == EventKind.GAVE_UP:
        failures, limit = payload.get("failures"), payload.get("effective_limit")
        counted = f"after {failures} of {limit} failed attempts" if failures and limit else "after its failures"
        last = outside(task.last_failure_error or payload.get("error"))
        why = f"{_title(task)}: the breaker blocked it {counted}" + (f"; last failure: {last}" if last else "")
        return Item(f"{Kind.GAVE_UP}:{task.id}:{occurrence}", Kind.GAVE_UP, task.id, since, why,
                    f"read its log and fix the cause, then unblock it ({_command(facts, 'unblock', task.id)})")
    reason = outside(payload.get("reason"))
    by = payload.get("by")
    who = "its worker" if by == "worker" else "a person" if by == "operator" else "someone"
    why = f"{_title(task)}: blocked by {who}" + (f": {reason}" if reason else " (no reason given)")
    return Item(f"{Kind.BLOCKED}:{task.id}:{occurrence}", Kind.BLOCKED, task.id, since, why,
                f"answer what it needs, then unblock it ({_command(facts, 'unblock', task.id)})")


def _review(facts: BoardFacts, task, event) -> Item:
    occurrence = event.id if event is not None else int(task.created_at)
    summary = outside((event.payload.get("summary") if event is not None else None) or task.result)
    why = f"{_title(task)}: waiting for review" + (f": {summary}" if summary else "")
    return Item(f"{Kind.REVIEW}:{task.id}:{occurrence}", Kind.REVIEW, task.id,
                event.created_at if event is not None else None, why,
                f"review it: complete it ({_command(facts, 'complete', task.id)}) or send it back to ready")


def _stale(facts: BoardFacts, task, now: float, interval: float) -> Item | None:
    expires = task.claim_expires
    if expires is None or now < expires + max(STALE_CLAIM_GRACE_SECONDS, 2 * interval):
        return None
    pid = f" (worker pid {task.worker_pid})" if task.worker_pid else ""
    why = (f"{_title(task)}: its claim ran out {human_duration(now - expires)} ago{pid} "
           "and no dispatcher has taken it back")
    return Item(f"{Kind.STALE_CLAIM}:{task.id}:{task.current_run_id}", Kind.STALE_CLAIM, task.id, expires, why,
                "run a dispatcher (the app, or hermes-tui kanban daemon), or reclaim it "
                f"({_command(facts, 'reclaim', task.id)})")


def _hosts_lost(events) -> list[Item]:
    """One item per lost host: its host_lost events of the window, counted."""
    by_host: dict[str, list] = {}
    for e in events:
        host = str(e.payload.get("host") or "?")
        by_host.setdefault(host, []).append(e)
    items = []
    for host, evs in sorted(by_host.items()):
        first = min(evs, key=lambda e: e.id)
        cards = len({e.task_id for e in evs})
        why = (f"host {outside(host, 80)} stopped renewing its lease: "
               f"{plural(cards, 'running card')} taken back and requeued")
        items.append(Item(f"{Kind.HOST_LOST}:{host}:{first.id}", Kind.HOST_LOST, host, first.created_at, why,
                          f"check {outside(host, 80)} (is its dispatcher running?); its cards run elsewhere"))
    return items
