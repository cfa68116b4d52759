"""Why a tick held cards back, what a change to a card did, and what the board's confirm
dialogs and refusals say, in words a user reads (the one place that phrases them).

The dispatcher reports codes and counts (``Skip``) and a change reports a
``TransitionResult``; ``--json`` keeps those. The CLI's human output and the board pane
both phrase them here, so the two never drift apart. Plain text only, no UI dependency:
the CLI imports this without loading Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.kanban.models import ARCHIVED, BLOCKED, RUNNING, Task
from engine.kanban.tick_result import DispatchResult, HoldReason, Skip
from engine.text import count_of

if TYPE_CHECKING:  # the transitions load the store: the board pane's first frame does not wait for them
    from engine.kanban.transitions import StopPlan, TransitionResult
    from engine.kanban.workers import StopReport

LOCKED = "another dispatcher holds this board's lock"


def _cap(skip: Skip, whose: str) -> str:
    if skip.running is None or skip.limit is None:
        return f"waiting: {whose} cap reached"
    return f"waiting: {skip.running} of {skip.limit} running, {whose} cap"


def skip_reason(skip: Skip) -> str:
    """One held-back card's reason as a phrase, e.g. "waiting: 3 of 3 running, the profile's cap"."""
    profile = f" ({skip.profile})" if skip.profile else ""
    if skip.reason == HoldReason.AT_CAPACITY:
        return _cap(skip, "the board's")
    if skip.reason == HoldReason.PER_PROFILE_CAPPED:
        return _cap(skip, "the profile's") + profile
    if skip.reason == HoldReason.SKIPPED_UNASSIGNED:
        return "unassigned, and no default assignee is set"
    if skip.reason == HoldReason.SKIPPED_NONSPAWNABLE:
        if skip.profile:
            return f"assigned to {skip.profile!r}, not a profile this machine can spawn"
        return "assigned to a profile this machine cannot spawn"
    if skip.reason == HoldReason.RATE_LIMIT_COOLDOWN:
        return "cooling down after a rate limit"
    if skip.reason == HoldReason.AWAITING_HOST_STOP:
        return (f"waiting for host {skip.host or '?'} to stop its last worker"
                f"{f' (pid {skip.pid})' if skip.pid else ''} (awaiting_host_stop)")
    if skip.reason == HoldReason.LAST_RUN_ALIVE:
        return (f"its last run still runs here{f' (worker pid {skip.pid})' if skip.pid else ''}: held until "
                "nothing of it is left (last_run_alive)")
    return skip.reason.replace("_", " ")


def held_back_words(result: DispatchResult) -> str:
    """The tick's held-back line in words ("" when something spawned or nothing waited).

    Cards held for the same reason are counted together, in the order first seen.
    """
    if result.spawned:
        return ""
    if result.skipped_locked:
        return f"held back: {LOCKED}"
    counts: dict[str, int] = {}
    for skip in result.skipped:
        phrase = skip_reason(skip)
        counts[phrase] = counts.get(phrase, 0) + 1
    if not counts:
        return ""
    parts = [f"{count_of(n, 'card')} {phrase}" for phrase, n in counts.items()]
    return "held back: " + "; ".join(parts)


def failure_reset_words(failures: int) -> str:
    """What a reclaim or an unblock does to the failure counter: "" when it is already 0
    (nothing to reset is nothing to say)."""
    return f"its failure counter ({failures}) resets to 0" if failures else ""


# A change's verb -> how its result line starts.
_PAST = {"move": "Moved", "complete": "Completed", "block": "Blocked",
         "review": "Sent to review", "reclaim": "Reclaimed", "unblock": "Unblocked", "archive": "Archived",
         "heartbeat": "Heartbeat recorded for"}


def change_words(verb: str, result: TransitionResult) -> str:
    """What a change did to a card, in one line, e.g.
    "Archived t3  (running -> archived); worker pid 42 stopped"."""
    line = f"{_PAST[verb]} {result.task_id}"
    if result.from_status != result.to_status:
        line += f"  ({result.from_status} -> {result.to_status})"
    return line + _stop_words(result.stop, verb)


def assign_words(task_id: str, profile: str | None) -> str:
    """A reassignment's line ("Assigned t3 to nobody" when the assignee was removed)."""
    return f"Assigned {task_id} to {profile or 'nobody'}"


def _stop_words(stop: StopReport | None, verb: str) -> str:
    """What happened to the card's worker ("" when no worker pid is recorded)."""
    if stop is None or not stop.pid:
        return ""
    if not stop.host_local:  # its host stops it, at once (the dispatcher's terminal-worker reaper)
        line = f"; worker pid {stop.pid} not signalled: {stop.refused}; that host stops it on its next tick"
        if verb == "reclaim":  # the card is ready, and is not started again beside it meanwhile
            line += "; the card waits (awaiting_host_stop) until then, or until that host's lease lapses"
        return line
    if stop.attempted:
        if stop.stopped:
            return f"; worker pid {stop.pid} stopped"
        return f"; worker pid {stop.pid} SURVIVED ({', '.join(map(str, stop.survivors))})"
    if stop.refused:
        return f"; worker pid {stop.pid} not signalled: {stop.refused}"
    if stop.pid_recycled:
        return f"; worker pid {stop.pid} now belongs to another process: not signalled"
    return ""


# -- the board's refusals and confirm dialogs (the pane shows them as they are) ------------------


@dataclass(frozen=True)
class Confirm:
    """A confirm dialog's words: what it asks, exactly what will happen, its yes button."""

    title: str
    body: str
    yes: str


def run_named(task: Task) -> str:
    """The run and worker a dialog names (and its approval carries)."""
    return f"run {task.current_run_id or '-'}, worker pid {task.worker_pid or '-'}"


def cannot_move_words(task: Task, step: int) -> str:
    """Why a card stays where it is (``step`` +1 right, -1 left), with where it may go."""
    from engine.kanban.transitions import MOVES

    direction = "right" if step > 0 else "left"
    return (f"{task.id} cannot move {direction} from {task.status} "
            f"(allowed: {', '.join(MOVES.get(task.status, ())) or 'none'})")


# A verb -> the one status it acts on, and what is said of a card in another one.
_ONLY_FROM = {
    "reclaim": (RUNNING, "{id} is {status}: only a running card can be reclaimed"),
    "unblock": (BLOCKED, "{id} is {status}, not blocked"),
}


def refused_words(verb: str, task: Task) -> str | None:
    """Why ``verb`` (reclaim, unblock, archive) cannot act on the card now, or None."""
    if verb == "archive":
        return f"{task.id} is already archived" if task.status == ARCHIVED else None
    status, words = _ONLY_FROM[verb]
    return None if task.status == status else words.format(id=task.id, status=task.status)


_STOP_PLAN_WORDS = {  # StopPlan's values
    "no_worker": "No worker process is recorded for it: nothing is signalled.",
    "other_host": ("Its worker pid {pid} runs on another host ({lock}): nothing is signalled from here; that "
                   "host's dispatcher stops it on its next tick."),
    "signal": ("Its worker pid {pid} (identity verified) gets SIGTERM to its process group, then "
               "SIGKILL after {grace:g}s if still alive."),
    "unverified": "Its worker pid {pid} was never verified: it is NOT signalled.",
    "recycled": "Pid {pid} now belongs to another process: it is NOT signalled.",
    "exited": "Its worker pid {pid} has already exited: nothing is signalled.",
}


def stop_plan_words(task: Task, plan: StopPlan, grace: float) -> str:
    """Exactly what a stop will do to the card's worker (``plan``: transitions.stop_plan)."""
    return _STOP_PLAN_WORDS[plan.value].format(pid=task.worker_pid, lock=task.claim_lock, grace=grace)


def move_running_confirm(task: Task, target: str, terminal_grace: float) -> Confirm:
    """Moving a running card ends its run; the dispatcher, not the move, stops the worker."""
    body = (f"{task.id} \"{task.title}\" is running ({run_named(task)}).\n\n"
            f"Moving it to {target} ends that run now. The worker is not signalled: if it is still "
            f"alive {terminal_grace:g}s after that, the dispatcher stops it (SIGTERM, then SIGKILL). "
            "If the card has moved on to another run by then, nothing is done.")
    return Confirm(f"Move {task.id} to {target}?", body, f"Move to {target}")


def move_done_confirm(task: Task) -> Confirm:
    """Moving a card to done: the board has no move out of done, so it asks first."""
    body = (f"{task.id} \"{task.title}\" moves from {task.status} to done.\n\n"
            "A done card cannot be moved back from the board: it stays done until it is archived.")
    return Confirm(f"Move {task.id} to done?", body, "Move to done")


def reclaim_confirm(task: Task, plan: StopPlan, grace: float, *, by_hermes: bool = False) -> Confirm:
    """A reclaim: back to ready, the failure counter reset, the worker stopped as ``plan``
    says (``by_hermes``: hermes-agent's board, whose own verb does it)."""
    if by_hermes:
        body = (f"{task.id} \"{task.title}\" ({run_named(task)}): hermes releases its worker's claim "
                "(`hermes kanban reclaim`); hermes-tui signals nothing.")
    else:
        reset = failure_reset_words(task.consecutive_failures)
        body = (f"{task.id} \"{task.title}\" ({run_named(task)}) goes back to ready"
                f"{' and ' + reset if reset else ''}.\n\n" + stop_plan_words(task, plan, grace))
        if plan.value == "other_host":
            body += (" The card waits (awaiting_host_stop) until that host has stopped it or its lease lapsed: "
                     "it is not started again beside it.")
    return Confirm(f"Reclaim {task.id}?", body, "Reclaim")


def archive_confirm(task: Task, plan: StopPlan, grace: float) -> Confirm:
    """An archive: hidden unless shown, a running card's worker stopped as ``plan`` says."""
    body = f"{task.id} \"{task.title}\" moves from {task.status} to archived (hidden unless 'show archived')."
    if task.status == RUNNING:
        body += f"\n\nIts {run_named(task)}. " + stop_plan_words(task, plan, grace)
    return Confirm(f"Archive {task.id}?", body, "Archive")


def unblock_confirm(task: Task) -> Confirm:
    """An unblock: back to ready (todo while a parent is open), the counter reset."""
    reset = failure_reset_words(task.consecutive_failures)
    body = (f"{task.id} \"{task.title}\" goes from blocked to ready (todo while a parent is open)"
            f"{', and ' + reset if reset else ''}, so the dispatcher may run it again.")
    if task.last_failure_error:
        body += f"\n\nLast failure: {task.last_failure_error}"
    return Confirm(f"Unblock {task.id}?", body, "Unblock")
