"""A card's details in words: the one description ``hermes-tui kanban show`` prints and
the board's details dialog styles, so the two never drift apart (as
:func:`engine.scratch.plan.describe_plan` is for a prune plan).

A description is a list of lines; a line is a tuple of pieces, each a piece of plain
text with the :class:`Part` it plays (a field's name, the last failure, a run that
failed...). The CLI prints the text of each piece as it is; a widget picks a style per
part. No markup and no UI import here: outside text (titles, bodies, errors, names)
stays plain text all the way.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.kanban.models import Event, RunOutcome, Task, TaskDetails
from engine.processes.redact import maybe_redact, redact_data
from engine.text import human_duration, local_time

FIELD_WIDTH = 12  # the field names' column: "  status      ready"


class Part(enum.StrEnum):
    """What a piece of a line is, so that a UI can style it."""

    TEXT = "text"  # a value, a body line, a log line
    TITLE = "title"  # the card's id and title; a section's name
    LABEL = "label"  # a field's name, a time stamp
    NAME = "name"  # an event's kind, a comment's author
    ERROR = "error"  # the last failure
    EMPTY = "empty"  # "(empty)", "none yet": nothing to show there
    GOOD = "good"  # a run still open, or completed
    BAD = "bad"  # a run that ended any other way
    NOTE = "note"  # a run's error or summary


Piece = tuple[str, Part]
Line = tuple[Piece, ...]


# -- masking: a card's outside text as every surface shows it ------------------------------
# A worker's output reaches the card as its last error, its result, its runs' errors and
# summaries and its events' payloads; the processes pane masks the same bytes with
# engine.processes.redact. Every surface that shows a card (the board, its details dialog,
# ``kanban list/show/tail``, text and JSON) shows it through these, so a secret is masked
# everywhere or nowhere (``processes.redact: false``).


def mask_task(t: Task, enabled: bool = True) -> Task:
    """The card with secrets in its outside text masked."""
    if not enabled:
        return t

    def m(text: str | None) -> str | None:
        return None if text is None else maybe_redact(text, True)

    return replace(t, title=m(t.title), body=m(t.body), last_failure_error=m(t.last_failure_error),
                   result=m(t.result))


def mask_event(e: Event, enabled: bool = True) -> Event:
    return replace(e, payload=redact_data(e.payload)) if enabled else e


def mask_details(d: TaskDetails, enabled: bool = True) -> TaskDetails:
    """The card, its runs' errors and summaries, its comments and events, masked."""
    if not enabled:
        return d
    return replace(
        d, task=mask_task(d.task),
        runs=tuple(replace(r, error=maybe_redact(r.error, True) if r.error else r.error,
                           summary=maybe_redact(r.summary, True) if r.summary else r.summary) for r in d.runs),
        events=tuple(mask_event(e) for e in d.events),
        comments=tuple(replace(c, body=maybe_redact(c.body, True)) for c in d.comments),
    )


def payload_text(payload: dict[str, Any]) -> str:
    """An event's payload on one line: ``key=value`` pairs, sorted, empty values left out."""
    return " ".join(f"{k}={v}" for k, v in sorted(payload.items()) if v not in (None, "", [], {}))


def _field(name: str, value: str) -> Line:
    return (("  " + name.ljust(FIELD_WIDTH), Part.LABEL), (value, Part.TEXT))


def _section(title: str) -> list[Line]:
    return [(), ((title, Part.TITLE),)]


def _indented(text: str, part: Part = Part.TEXT) -> list[Line]:
    return [(("  " + line, part),) for line in text.splitlines() or [""]]


def describe_task(details: TaskDetails, now: float, *, event_limit: int | None = None,
                  log_tail: Sequence[str] | None = None, usage: Sequence[str] | None = None,
                  redact: bool = True) -> list[Line]:
    """The card with its fields, last failure, body, runs, comments and events.

    ``now`` gives the card's age. ``event_limit`` is the limit the events were read
    with (the heading then says when they are only the last ones). ``log_tail``, the
    last lines of the card's worker log, adds a section when given (the dialog shows
    it; ``show`` leaves it out). With ``redact`` (the setting ``processes.redact``)
    secrets in all of it are masked (:func:`mask_details`).
    """
    details = mask_details(details, redact)
    if log_tail is not None and redact:  # masked as one text: a secret may span lines (a PEM block)
        log_tail = maybe_redact("\n".join(log_tail), True).split("\n") if log_tail else log_tail
    t = details.task
    lines: list[Line] = [((f"{t.id}  ", Part.TITLE), (t.title, Part.TITLE))]
    failures = f"{t.consecutive_failures}" + (f" of {t.max_retries}" if t.max_retries else "")
    lines += [
        _field("status", t.status),
        _field("assignee", t.assignee or "-"),
        _field("priority", str(t.priority)),
        _field("created", f"{local_time(t.created_at)} ({human_duration(now - t.created_at)} ago)"),
        _field("failures", failures),
    ]
    if t.worker_pid:
        lines.append(_field("worker", f"pid {t.worker_pid}  claim {t.claim_lock}  "
                                      f"expires {local_time(t.claim_expires)}"))
    if t.max_runtime_seconds:
        lines.append(_field("max runtime", f"{t.max_runtime_seconds:g}s"))
    if details.parents:
        lines.append(_field("parents", ", ".join(details.parents)))
    if details.children:
        lines.append(_field("children", ", ".join(details.children)))
    if t.result:
        lines.append(_field("result", t.result))
    if t.last_failure_error:
        lines += _section("Last failure") + _indented(t.last_failure_error, Part.ERROR)
    lines += _section("Body") + (_indented(t.body) if t.body else [(("  (empty)", Part.EMPTY),)])

    lines += _section(f"Runs ({len(details.runs)})")
    if not details.runs:
        lines.append((("  none yet", Part.EMPTY),))
    for r in details.runs:
        ok = r.outcome is None or r.outcome == RunOutcome.COMPLETED
        run: list[Piece] = [(f"  #{r.id:<4} {r.profile or '-':<10} {local_time(r.started_at)}  ", Part.TEXT),
                            (r.outcome or "open", Part.GOOD if ok else Part.BAD)]
        if r.worker_pid:
            run.append((f"  pid {r.worker_pid}", Part.TEXT))
        if r.error or r.summary:
            run.append((f"  {r.error or r.summary}", Part.NOTE))
        lines.append(tuple(run))

    if usage is not None:  # tokens and cost (engine.kanban.usage.usage_lines)
        lines += _section("Usage") + [(("  " + line, Part.TEXT),) for line in usage]

    if details.comments:
        lines += _section(f"Comments ({len(details.comments)})")
        lines += [((f"  {local_time(c.created_at)}  ", Part.LABEL), (c.author, Part.NAME), (f": {c.body}", Part.TEXT))
                  for c in details.comments]

    n = len(details.events)
    cut = event_limit is not None and n >= event_limit
    lines += _section(f"Events (last {n})" if cut else f"Events ({n})")
    if not details.events:
        lines.append((("  none yet", Part.EMPTY),))
    for e in details.events:
        payload = payload_text(e.payload)
        lines.append(((f"  {local_time(e.created_at)}  ", Part.LABEL), (e.kind, Part.NAME))
                     + (((f"  {payload}", Part.TEXT),) if payload else ()))

    if log_tail is not None:
        lines += _section("Worker log (tail)")
        lines += [(("  " + line, Part.TEXT),) for line in log_tail] or [(("  (no output yet)", Part.EMPTY),)]
    return lines


def plain_text(lines: Sequence[Line]) -> str:
    """The description as the CLI prints it: the pieces' text, one line each."""
    return "\n".join("".join(text for text, _part in line) for line in lines)
