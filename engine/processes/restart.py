"""Restart policies: a session whose command is run again after it exits.

No daemon does it: the session's own supervising wrapper (a few lines of ``/bin/sh``,
like the plain one in :mod:`engine.processes.supervisor`) loops. After each attempt it
appends ``"<started> <ended> <exit code> <attempt number>"`` to the session's ``attempts``
file, then runs the command again when the policy covers that exit (``always``;
``on-failure``: a non-zero code) and the limit is not reached, after a backoff that
doubles from MIN up to MAX. While it waits, ``next_attempt`` holds ``"<since> <delay ms>"``.

The values are bounded (:data:`MAX_RESTARTS`, :data:`MAX_BACKOFF_SECONDS`): a count the
shell's arithmetic cannot hold broke the wrapper. So is the record: past
:data:`ATTEMPTS_KEPT` attempts the wrapper keeps only the last ones (each line carries
its number, so the count stays right), since a command that fails at once with a zero
backoff adds a line every few milliseconds, outside the output bound.

A manual stop ends the policy for good: ``proc kill`` (and the pane's kill) write the
kill record first and then TERM the group, and the wrapper looks at both (its trap
noted the signal; the record exists) before every new attempt, also after the
backoff's sleep, which the TERM ends at once. A stop that ends the backoff is recorded
as the signal that ended it (``143``), not as the last attempt's code: the session
reads "killed", never "ended on its own". A session without a policy keeps the plain
wrapper, so an ordinary spawn costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.processes import session as sess

DEFAULT_MAX_RESTARTS = 5
DEFAULT_BACKOFF = (1.0, 60.0)
MAX_RESTARTS = sess.MAX_RESTARTS  # --max-restarts 0..MAX_RESTARTS
MAX_BACKOFF_SECONDS = 86400  # --backoff MIN..MAX within 0..one day
ATTEMPTS_KEPT = 100  # the attempts file holds the last 100..200 attempts

# $0: the exit record; $1..$6: policy, max restarts, backoff min and max (ms), the session
# folder, attempts kept; then the command. The gate and the traps are the plain wrapper's.
RESTART_SCRIPT = (
    "s=; trap 's=129' HUP; trap 's=130' INT; trap 's=143' TERM\n"
    "p=$1; m=$2; d=$3; x=$4; f=$5; k=$6; shift 6\n"
    'IFS= read -r go\n'
    '[ -z "$s" ] || { : >"$f/not_started"; printf \'%s\\n\' "$s" >"$0"; exit "$s"; }\n'
    '[ "$go" = go ] || { : >"$f/not_started"; exit 125; }\n'
    'exec </dev/null\n'
    'n=0\n'
    'while :; do\n'
    '  t=$(date +%s.%N)\n'
    '  "$@"; rc=$?\n'
    '  a=$((n+1))\n'
    '  printf \'%s %s %s %s\\n\' "$t" "$(date +%s.%N)" "$rc" "$a" >>"$f/attempts"\n'
    '  if [ "$a" -gt "$k" ] && [ $((a%k)) -eq 0 ]; then\n'
    '    tail -n "$k" "$f/attempts" >"$f/.attempts" && mv -f "$f/.attempts" "$f/attempts"\n'
    '  fi\n'
    '  [ -z "$s" ] && [ ! -e "$f/killed.json" ] || break\n'
    '  [ "$p" = always ] || [ "$rc" -ne 0 ] || break\n'
    '  [ "$n" -lt "$m" ] || break\n'
    '  n=$((n+1))\n'
    '  printf \'%s %s\\n\' "$(date +%s.%N)" "$d" >"$f/next_attempt"\n'
    '  sleep "$((d/1000)).$(printf %03d $((d%1000)))"\n'
    '  rm -f "$f/next_attempt"\n'
    '  [ -z "$s" ] && [ ! -e "$f/killed.json" ] || { rc=${s:-$rc}; break; }\n'
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

    def __post_init__(self) -> None:
        problem = policy_problem(self.max_restarts, self.backoff_min, self.backoff_max)
        if problem:
            raise ValueError(problem)

    @property
    def active(self) -> bool:
        return self.policy != "no"

    def wrapper_args(self, session_dir: Path, keep: int = ATTEMPTS_KEPT) -> list[str]:
        lo = max(0, round(self.backoff_min * 1000))
        hi = max(lo, round(self.backoff_max * 1000))
        return [self.policy, str(self.max_restarts), str(lo), str(hi), str(session_dir), str(keep)]


def policy_problem(max_restarts, backoff_min, backoff_max) -> str | None:
    """Why these values cannot make a policy (None: they can), naming the allowed range."""
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or not 0 <= max_restarts <= MAX_RESTARTS:
        return f"--max-restarts must be a whole number in 0..{MAX_RESTARTS}, got {str(max_restarts)[:40]}"
    for value in (backoff_min, backoff_max):
        if not isinstance(value, int | float) or not 0 <= value <= MAX_BACKOFF_SECONDS:  # (NaN fails too)
            return (f"--backoff MIN..MAX must be seconds in 0..{MAX_BACKOFF_SECONDS} with MIN <= MAX, "
                    f"got {str(value)[:40]}")
    if backoff_min > backoff_max:
        return f"--backoff MIN..MAX needs MIN <= MAX, got {backoff_min:g}..{backoff_max:g}"
    return None


def parse_backoff(text: str) -> tuple[float, float]:
    """``MIN..MAX`` in seconds (``1..60``, ``0.5..10``); a single number is both."""
    lo_text, sep, hi_text = text.partition("..")
    try:
        lo = float(lo_text)
        hi = float(hi_text) if sep else lo
    except ValueError:
        raise ValueError(f"--backoff {text!r}: give MIN..MAX in seconds, e.g. 1..60") from None
    if not (0 <= lo <= hi <= MAX_BACKOFF_SECONDS):  # (NaN fails every comparison)
        raise ValueError(f"--backoff {text[:40]!r}: need 0 <= MIN <= MAX <= {MAX_BACKOFF_SECONDS} seconds")
    return lo, hi


@dataclass(frozen=True)
class Attempt:
    """One finished run of a restarting session's command."""

    started_at: float
    ended_at: float
    exit_code: int
    number: int = 0  # 1 for the first run of the command

    def to_json(self) -> dict:
        return {"started_at": self.started_at, "ended_at": self.ended_at, "exit_code": self.exit_code,
                "attempt": self.number}


# The wrapper keeps at most 2 * ATTEMPTS_KEPT lines; a file far bigger is not its own.
_ATTEMPTS_READ_BYTES = 1 << 20


def read_attempts(session_dir: Path) -> list[Attempt]:
    """The attempts recorded and kept so far (the last ones: see :data:`ATTEMPTS_KEPT`);
    a torn last line (a write in progress) is left out. A line without its number (a
    wrapper older than the bound) is numbered by its place."""
    try:
        with open(session_dir / sess.ATTEMPTS_FILE, "rb") as fh:
            raw = fh.read(_ATTEMPTS_READ_BYTES)
    except OSError:
        return []
    out: list[Attempt] = []
    for line in raw.split(b"\n")[:-1]:  # only lines with their newline are complete
        parts = line.split()
        try:
            number = int(parts[3]) if len(parts) > 3 else len(out) + 1
            out.append(Attempt(float(parts[0]), float(parts[1]), int(parts[2]), number))
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
    made = attempts[-1].number if attempts else 0  # the file keeps only the last ones
    if s.running and waiting is None:
        restarts = made  # each recorded attempt was followed by a new start
    else:
        restarts = max(0, made - 1)
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
