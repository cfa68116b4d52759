"""Whose launch is it: the home (and host) that claimed a card owns its launch.

A launch is resolved by its token (engine.kanban.registry_spawner.find_launch), and the
token names a process session in the *claiming home's* ``processes`` folder. Several
homes of one host may tick one board (``--db``, ``kanban.db``; or one host id on a
server board): each sees the others' claims as host-local, but only the claiming home
can find the session. Another home that looked the token up in its own folder found
nothing, "released" the launch and started the card again beside the live worker.

So the claim names its owner: the ``claimed`` event carries ``launch_home`` (the
claiming home's real path) and ``launcher_started_at`` (the claiming dispatcher's
fingerprint; its pid is the claim lock's). Only the owner adopts or releases its
launch. Another home of the host holds the card, unless its launch is proven dead from
here without writing into the owner's home: the claiming dispatcher is verified gone
(pid and start time), so nothing can be spawned for that token any more, and the
owner's folder, read only, shows no session of the token, a session never recorded,
or the wrapper's ``not_started`` mark. A session that was recorded (its worker may run)
is the owner's alone: held until the owner's next tick adopts it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine import identity
from engine.kanban.hosts import lock_host
from engine.kanban.models import load_payload
from engine.kanban.workers import LaunchLookup, LaunchState

_launcher_fp: str | None = None


def home_id(root: Path | str) -> str:
    """How a claim names its home: the home's real path (one home reached by two paths,
    a symlink, is one owner)."""
    return os.path.realpath(root)


def launcher_fingerprint() -> str:
    """This process's fingerprint (boot id and start time), written into its claims."""
    global _launcher_fp
    if _launcher_fp is None:
        _launcher_fp = identity.fingerprint(os.getpid())
    return _launcher_fp


def claim_owner_payload(home_root: Path | str) -> dict[str, str]:
    """What a claim's event records about its owner."""
    return {"launch_home": home_id(home_root), "launcher_started_at": launcher_fingerprint()}


@dataclass(frozen=True)
class LaunchOwner:
    """The owner of a launch, as its claim recorded it (``home`` None: a claim made
    before owners were recorded)."""

    home: str | None
    pid: int | None
    fingerprint: str | None

    @classmethod
    def of(cls, lock: str | None, claimed_payload: str | dict | None) -> LaunchOwner:
        payload = claimed_payload if isinstance(claimed_payload, dict) else load_payload(claimed_payload)
        home = payload.get("launch_home")
        fp = payload.get("launcher_started_at")
        pid_text = (lock or "").rpartition(":")[2] if lock_host(lock) else ""
        return cls(home if isinstance(home, str) and home else None, int(pid_text) if pid_text else None,
                   fp if isinstance(fp, str) else None)

    def is_home(self, root: Path | str) -> bool:
        """This home made the launch (a claim without a recorded home counts as this
        home's, as every claim of an older hermes-tui was resolved by any home)."""
        return self.home is None or self.home == home_id(root)

    def launcher(self) -> identity.Liveness:
        """Whether the claiming dispatcher still runs (UNVERIFIED_ALIVE when its identity
        was not recorded and its pid exists: it may be it)."""
        return identity.liveness(self.pid, self.fingerprint)

    def launcher_gone(self) -> bool:
        """The claiming dispatcher is verified gone: its pid is free or another process
        now, judged by the start time the claim recorded."""
        return identity.is_verifiable(self.fingerprint) and self.launcher() in (
            identity.Liveness.GONE, identity.Liveness.RECYCLED)

    def words(self) -> str:
        return f"home {self.home} (dispatcher pid {self.pid or '?'})"


def _exists(path: Path) -> bool | None:
    """True / False, or None when it cannot be told (no permission, an I/O error)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return True


def look_elsewhere(owner: LaunchOwner, token: str | None, task_id: str, run_id: int) -> LaunchLookup | None:
    """What another home of this host may conclude about ``owner``'s launch: None while
    the claiming dispatcher runs (it records its own launch); NOT_STARTED only when that
    is proven from here (see the module doc); otherwise UNCERTAIN (hold the card).
    Reads the owner's home, never writes into it. Called from a thread."""
    from engine.processes import session as sess
    from engine.processes.registry import is_session_id

    held = (f"it was claimed by {owner.words()}: only that home can look its worker up, so the card waits for "
            "that home's next dispatcher tick")
    if owner.launcher() is identity.Liveness.ALIVE:
        return None
    if not owner.launcher_gone() or not token or not is_session_id(token) or owner.home is None:
        return LaunchLookup(LaunchState.UNCERTAIN, held)
    root = Path(owner.home)
    folders = root / "processes"
    d = folders / token
    home_there, folders_there, session_there = _exists(root), _exists(folders), _exists(d)
    if not home_there or folders_there is None or (folders_there and session_there is None):
        return LaunchLookup(LaunchState.UNCERTAIN, held)
    dead = f"it was claimed by {owner.words()}, a dispatcher now gone,"
    if not session_there:
        return LaunchLookup(LaunchState.NOT_STARTED, f"{dead} and no session {token} exists there: "
                            "its worker never started, and nothing can start it now")
    if (d / sess.NOT_STARTED_FILE).exists():
        return LaunchLookup(LaunchState.NOT_STARTED, f"{dead} and its session {token} there ended at its gate: "
                            "its command never ran")
    try:
        sess.read_meta(d)
    except sess.SessionNotStarted:
        return LaunchLookup(LaunchState.NOT_STARTED, f"{dead} and its session {token} there was never recorded, "
                            "so its wrapper was never released")
    except (sess.SessionCorrupt, OSError):
        return LaunchLookup(LaunchState.UNCERTAIN, held)
    return LaunchLookup(LaunchState.UNCERTAIN, held)
