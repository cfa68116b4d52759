"""What an attention item is: a kind, a subject, since when, why in words, what answers it.

Plain frozen records and one enum; no I/O here (the sources read the home, the state
module keeps dismissals and claims).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from engine.text import escape_text


class Kind(enum.StrEnum):
    """What needs a person. The values are what ``attention --json`` prints, what
    ``--kind`` and ``notify.kinds`` take, and the first word of every key."""

    # the board
    BLOCKED = "blocked"  # a worker or a person blocked the card
    GAVE_UP = "gave_up"  # the breaker tripped: the card was blocked after its failures
    REVIEW = "review"  # a card waits in review
    HELD_BACK = "held_back"  # a ready card the app's dispatcher held back tick after tick
    STALE_CLAIM = "stale_claim"  # a running card's claim ran out and no dispatcher took it back
    DISPATCH_FAILING = "dispatch_failing"  # the app's dispatcher ticks keep failing
    HOST_LOST = "host_lost"  # a shared board's host stopped renewing its lease
    # process sessions
    SESSION_FAILED = "session_failed"  # exited non-zero, killed, or lost
    WATCH_MATCHED = "watch_matched"  # a watch pattern matched its output
    WATCH_DISABLED = "watch_disabled"  # watching stopped at a cap
    # scratch
    PRUNE_DUE = "prune_due"  # an idle entry the next pass takes
    QUARANTINE_EXPIRING = "quarantine_expiring"  # a quarantined entry deleted within hours
    PASS_FAILED = "pass_failed"  # the last pass failed
    DISK_NEARLY_FULL = "disk_nearly_full"  # the scratch folder's disk
    # the home
    DOCTOR = "doctor"  # what `hermes-tui doctor` warns about


class Pane(enum.StrEnum):
    """Where an item's subject is shown in the app (Enter on the item goes there)."""

    BOARD = "board"
    PROCESSES = "processes"
    SCRATCH = "scratch"
    PRUNE_LOG = "prune-log"
    HOME = "home"  # no pane: doctor's report


# Each kind: its heading in the app's view (kinds are grouped in this order) and its pane.
KIND_INFO: dict[Kind, tuple[str, Pane]] = {
    Kind.BLOCKED: ("Blocked cards", Pane.BOARD),
    Kind.GAVE_UP: ("Cards the breaker blocked", Pane.BOARD),
    Kind.HOST_LOST: ("Shared-board hosts lost", Pane.BOARD),
    Kind.DISPATCH_FAILING: ("Dispatcher failing", Pane.BOARD),
    Kind.STALE_CLAIM: ("Stale claims", Pane.BOARD),
    Kind.REVIEW: ("Cards in review", Pane.BOARD),
    Kind.HELD_BACK: ("Cards held back", Pane.BOARD),
    Kind.SESSION_FAILED: ("Sessions that failed", Pane.PROCESSES),
    Kind.WATCH_MATCHED: ("Watch patterns matched", Pane.PROCESSES),
    Kind.WATCH_DISABLED: ("Watches stopped", Pane.PROCESSES),
    Kind.PASS_FAILED: ("Prune passes that failed", Pane.PRUNE_LOG),
    Kind.DISK_NEARLY_FULL: ("Scratch disk nearly full", Pane.SCRATCH),
    Kind.QUARANTINE_EXPIRING: ("Quarantined entries expiring", Pane.SCRATCH),
    Kind.PRUNE_DUE: ("Entries due for prune", Pane.SCRATCH),
    Kind.DOCTOR: ("Home warnings", Pane.HOME),
}

# What notifies unless notify.kinds says otherwise.
DEFAULT_NOTIFY_KINDS: tuple[Kind, ...] = (Kind.BLOCKED, Kind.GAVE_UP, Kind.SESSION_FAILED, Kind.HOST_LOST)

# The groups a computation can cover (see Coverage): a process that did not read a
# source says nothing about the items of its kinds.
BOARD_KINDS = frozenset({Kind.BLOCKED, Kind.GAVE_UP, Kind.REVIEW, Kind.STALE_CLAIM, Kind.HOST_LOST})
DISPATCH_KINDS = frozenset({Kind.HELD_BACK, Kind.DISPATCH_FAILING})
PROCESS_KINDS = frozenset({Kind.SESSION_FAILED, Kind.WATCH_MATCHED, Kind.WATCH_DISABLED})
SCRATCH_KINDS = frozenset({Kind.PRUNE_DUE, Kind.QUARANTINE_EXPIRING, Kind.PASS_FAILED, Kind.DISK_NEARLY_FULL})
HOME_KINDS = frozenset({Kind.DOCTOR})


def kind_of_key(key: str) -> Kind | None:
    """The kind a key names (its first word), None for a key of no known kind."""
    try:
        return Kind(key.split(":", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class Item:
    """One thing that needs a person.

    ``key`` is stable for one occurrence (it holds the event id, the session id, the
    entry's last write...), so it is noticed once and a dismissal sticks; the same cause
    coming back later is a new key. ``subject`` names what it is about (a card id, a
    session id, an entry name, a host, a doctor check). ``since`` is when it began (None
    when the cause has no start time of its own). ``why`` and ``action`` are words for a
    person, outside text in them already masked (secrets) and made one line. ``board``
    names the board a board item is about (its slug, as ``--board`` takes it; None for an
    item of no board, or of a board with no slug: a ``--db`` file, a server)."""

    key: str
    kind: Kind
    subject: str
    since: float | None
    why: str
    action: str
    board: str | None = None

    def __post_init__(self) -> None:
        # Every text field reaches terminals (watch, watch | tee), notify.command's stdin
        # and HERMES_ATTENTION_KEY, webhooks: whatever a source put in (an entry name, a
        # card id of another program's board, a host id), no control character, newline
        # or lone surrogate survives (escaped: one line, valid UTF-8). The sources mask
        # secrets in what they take from outside; this is the last line for the family.
        # escape_text leaves escaped text as it is, so this costs nothing twice.
        for name in ("key", "subject", "why", "action"):
            value = getattr(self, name)
            clean = escape_text(value)
            if clean is not value:
                object.__setattr__(self, name, clean)

    @property
    def pane(self) -> Pane:
        return KIND_INFO[self.kind][1]

    @property
    def heading(self) -> str:
        return KIND_INFO[self.kind][0]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind.value, "subject": self.subject, "since": self.since,
                "why": self.why, "action": self.action, "pane": self.pane.value, "board": self.board}


def newest_first(items: list[Item] | tuple[Item, ...]) -> list[Item]:
    """Newest first (an item without a start time last), then by key: a stable order."""
    return sorted(items, key=lambda i: (-(i.since if i.since is not None else float("-inf")), i.key))


def grouped(items: list[Item] | tuple[Item, ...]) -> list[tuple[Kind, list[Item]]]:
    """The items by kind, kinds in the view's order, each group newest first."""
    by_kind: dict[Kind, list[Item]] = {}
    for item in items:
        by_kind.setdefault(item.kind, []).append(item)
    return [(kind, newest_first(by_kind[kind])) for kind in KIND_INFO if kind in by_kind]
