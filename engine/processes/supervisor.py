"""The supervising wrapper and the environment of every spawned command.

The wrapper is a few lines of POSIX ``/bin/sh``, not Python: a Python supervisor would
cost ~20 ms of interpreter start per spawn. It leads the session's process group, runs
the command as a foreground child, and writes ``"<code>\\n"`` to the exit record when
the command ends, so the exit is known even when no app or CLI is alive.

- ``trap 's=143' TERM`` (and HUP, INT: a handler that only notes the signal, not ``''``,
  so the child does NOT inherit an ignored disposition): a TERM to the group ends the
  command, while the wrapper, whose trap only runs once its foreground child has
  finished, lives on to record the exit.
- A signal that arrives before the command starts (a kill right after the spawn, while
  the wrapper waits at its gate or has just passed it) ends the wrapper there: it
  records ``128+N`` and never runs the command. Only the few steps between that check
  and the command's fork are left, and a kill's KILL after the grace covers those.
  A KILL to the group ends the wrapper too; :meth:`ProcessRegistry.kill` then writes the
  kill record itself.
- The record is one ``printf`` into a fresh file; its trailing newline is the commit
  mark (readers ignore a record without it). A rename would be the classic atomic
  write, but ``mv`` is a fork+exec that doubled the cost of a spawn (~1.2 ms).
- The command starts only once the spawner has recorded the session: the wrapper
  first reads ``go`` from its stdin (a pipe from the spawner), then points stdin at
  /dev/null and runs the command. A spawn that cannot record the session closes the
  pipe instead, and the wrapper exits (125) without running anything. So does a
  spawner that dies before it says ``go`` (its end of the pipe closes with it): a
  wrapper never released by its gate never runs the command, whenever it is looked at.
- Every way out before the command (no ``go``, a signal at the gate) first creates
  ``not_started`` in the session folder: proof that the command never ran, which the
  dispatcher uses to resolve a launch its own crash interrupted.
- ``$?`` of a command killed by signal N is 128+N: a plain ``exit 130`` reads the same
  as SIGINT. Kills made by us are recorded exactly in ``killed.json``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

WRAPPER_SHELL = "/bin/sh"

# $0 is the exit-record path; "$@" is the command's argv. stdin is the spawner's gate:
# it says "go" once the session is recorded; anything else (the spawner failed to
# record it, or died) ends the wrapper before the command ever runs.
WRAPPER_SCRIPT = (
    "s=; trap 's=129' HUP; trap 's=130' INT; trap 's=143' TERM\n"
    'IFS= read -r go\n'
    '[ -z "$s" ] || { : >"${0%/*}/not_started"; printf \'%s\\n\' "$s" >"$0"; exit "$s"; }\n'
    '[ "$go" = go ] || { : >"${0%/*}/not_started"; exit 125; }\n'
    'exec </dev/null\n'
    '"$@"\nrc=$?\nprintf \'%s\\n\' "$rc" >"$0"\nexit "$rc"\n'
)
GO = b"go\n"


def command_argv(command: str | Sequence[str], shell: str) -> tuple[list[str], str, list[str] | None]:
    """(argv to run, display text, argv to record or None for a shell string)."""
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("empty command")
        return [shell, "-c", command], command, None
    argv = [str(a) for a in command]
    if not argv or not argv[0]:
        raise ValueError("empty command")
    return argv, shlex.join(argv), argv


def wrapper_argv(exit_record: Path, argv: Sequence[str]) -> list[str]:
    return [WRAPPER_SHELL, "-c", WRAPPER_SCRIPT, str(exit_record), *argv]


def spawn_environment(
    *,
    home_root: Path,
    scratch_dir: Path | None,
    session_id: str,
    base: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a spawned command.

    TMPDIR/TMP/TEMP point at the scratch dir (marked by HERMES_SCRATCH_DIR) unless the
    user set TMPDIR themselves; pagers never block (PAGER=GIT_PAGER=cat); Python output
    is unbuffered so it reaches the log as it happens. ``extra`` wins over all of it.
    """
    env = dict(os.environ if base is None else base)
    from engine.doctor import tmpdir_is_users  # here: doctor (and sqlite3) stay out of a plain `ps`

    if scratch_dir is not None and not tmpdir_is_users(env):
        s = str(scratch_dir)
        env.update(TMPDIR=s, TMP=s, TEMP=s, HERMES_SCRATCH_DIR=s)
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    env["PYTHONUNBUFFERED"] = "1"
    env["HERMES_HOME"] = str(home_root)
    env["HERMES_PROCESS_ID"] = session_id
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env
