"""Restart policies: a session whose command is run again after it exits.

No daemon does it: the session's own supervising wrapper (a few lines of ``/bin/sh``,
like the plain one in :mod:`engine.processes.supervisor`) loops. After each attempt it
appends ``"<started> <ended> <exit code>"`` to the session's ``attempts`` file, then runs
the command again when the policy covers that exit (``always``; ``on-failure``: a
non-zero code) and the limit is not reached, after a backoff that doubles from MIN up
to MAX. While it waits, ``next_attempt`` holds ``"<since> <delay ms>"``.

A manual stop ends the policy for good: ``proc kill`` (and the pane's kill) write the
kill record first and then TERM the group, and the wrapper looks at both (its trap
noted the signal; the record exists) before every new attempt, also after the
backoff's sleep, which the TERM ends at once. A session without a policy keeps the
plain wrapper, so an ordinary spawn costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.processes import session as sess

DEFAULT_MAX_RESTARTS = 5
DEFAULT_BACKOFF = (1.0, 60.0)

# $0: the exit record; $1..$5: policy, max restarts, backoff min and max (ms), the session
# folder; then the command. The gate and the traps are the plain wrapper's.
RESTART_SCRIPT = (
    "s=; trap 's=129' HUP; trap 's=130' INT; trap 's=143' TERM\n"
    "p=$1; m=$2; d=$3; x=$4; f=$5; shift 5\n"
    'IFS= read -r go\n'
    '[ -z "$s" ] || { : >"$f/not_started"; printf \'%s\\n\' "$s" >"$0"; exit "$s"; }\n'
    '[ "$go" = go ] || { : >"$f/not_started"; exit 125; }\n'
    'exec </dev/null\n'
    'n=0\n'
    'while :; do\n'
    '  t=$(date +%s.%N)\n'
    '  "$@"; rc=$?\n'
    '  printf \'%s %s %s\\n\' "$t" "$(date +%s.%N)" "$rc" >>"$f/attempts"\n'
    '  [ -z "$s" ] && [ ! -e "$f/killed.json" ] || break\n'
    '  [ "$p" = always ] || [ "$rc" -ne 0 ] || break\n'
    '  [ "$n" -lt "$m" ] || break\n'
    '  n=$((n+1))\n'
    '  printf \'%s %s\\n\' "$(date +%s.%N)" "$d" >"$f/next_attempt"\n'
    '  sleep "$((d/1000)).$(printf %03d $((d%1000)))"\n'
    '  rm -f "$f/next_attempt"\n'
    '  [ -z "$s" ] && [ ! -e "$f/killed.json" ] || break\n'
    '  d=$((d*2)); [ "$d" -le "$x" ] || d=$x\n'
    'done\n'
    'printf \'%s\\n\' "$rc" >"$0"\n'
    'exit "$rc"\n'
)


@dataclass(frozen=True)
class RestartPolicy:
    """How a session's command is run again (``run --restart``)."""

    policy: str = "no"  # no | on-failure | always
    max_restarts: int = DEFAULT_MAX_RESTARTS
    backoff_min: float = DEFAULT_BACKOFF[0]
    backoff_max: float = DEFAULT_BACKOFF[1]

    @property
    def active(self) -> bool:
        return self.policy != "no"

    def wrapper_args(self, session_dir: Path) -> list[str]:
        lo = max(0, round(self.backoff_min * 1000))
        hi = max(lo, round(self.backoff_max * 1000))
        return [self.policy, str(self.max_restarts), str(lo), str(hi), str(session_dir)]


def parse_backoff(text: str) -> tuple[float, float]:
    """``MIN..MAX`` in seconds (``1..60``, ``0.5..10``); a single number is both."""
    lo_text, sep, hi_text = text.partition("..")
    try:
        lo = float(lo_text)
        hi = float(hi_text) if sep else lo
    except ValueError:
        raise ValueError(f"--backoff {text!r}: give MIN..MAX in seconds, e.g. 1..60") from None
    if not (0 <= lo <= hi <= 86400) or lo != lo or hi != hi:
        raise ValueError(f"--backoff {text!r}: need 0 <= MIN <= MAX <= 86400 seconds")
    return lo, hi


@dataclass(frozen=True)
class Attempt:
    """One finished run of a restarting session's command."""

    started_at: float
    ended_at: float
    exit_code: int

    def to_json(self) -> dict:
        return {"started_at": self.started_at, "ended_at": self.ended_at, "exit_code": self.exit_code}


def read_attempts(session_dir: Path) -> list[Attempt]:
    """The attempts recorded so far; a torn last line (a write in progress) is left out."""
    try:
        raw = (session_dir / sess.ATTEMPTS_FILE).read_bytes()
    except OSError:
        return []
    out = []
    for line in raw.split(b"\n")[:-1]:  # only lines with their newline are complete
        parts = line.split()
        try:
            out.append(Attempt(float(parts[0]), float(parts[1]), int(parts[2])))
        except (IndexError, ValueError):
            continue
    return out


def next_attempt_at(session_dir: Path) -> float | None:
    """When a session waiting in its backoff runs its command again (None: not waiting)."""
    try:
        since, delay = (session_dir / sess.NEXT_ATTEMPT_FILE).read_text().split()
        return float(since) + int(delay) / 1000
    except (OSError, ValueError):
        return None


def restart_state(s: sess.ProcessSession) -> dict:
    """What ``ps --json``/``poll --json`` say of a session's restarts."""
    attempts = read_attempts(s.dir) if s.restart != "no" else []
    waiting = next_attempt_at(s.dir) if s.running and s.restart != "no" else None
    if s.running and waiting is None:
        restarts = len(attempts)  # each recorded attempt was followed by a new start
    else:
        restarts = max(0, len(attempts) - 1)
    return {"restarts": restarts, "max_restarts": s.max_restarts if s.restart != "no" else 0,
            "next_attempt_at": waiting, "attempts": [a.to_json() for a in attempts]}


def restart_summary(s: sess.ProcessSession, now: float) -> str:
    """A short word on a restarting session's state for a table cell: ``restarts 2/5``,
    ``restart in 4s (2/5)``; empty without a policy."""
    if s.restart == "no":
        return ""
    state = restart_state(s)
    count = f"{state['restarts']}/{state['max_restarts']}"
    waiting = state["next_attempt_at"]
    if waiting is not None:
        return f"restart in {max(0, round(waiting - now))}s ({count})"
    return f"restarts {count}"
