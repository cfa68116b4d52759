"""What a home remembers about its attention items: dismissals and notice claims.

Two small JSON files in hermes-tui's own folder (``<home>/hermes-tui/``, the folder
hermes-agent never opens; for a home hermes-tui did not make, a folder of this user's
outside it: :func:`state_dir`), each replaced atomically, both changed only under one
``flock`` (``attention.lock``), so two processes of one home (the app and ``watch``, two
apps) never lose each other's writes:

- ``attention-dismissed.json``: key -> when it was dismissed;
- ``attention-notified.json``: key -> when a process claimed the right to notify it.
  A key is claimed once, ever, by one process: that is what makes a notice reach a
  person once per home, whoever has the home open.

A key is claimed (with the claiming process's pid and start-time fingerprint), then
sent, then marked sent. A claim whose owner is verifiably dead (that pid is gone or is
another process now) before it was marked sent is taken over and sent again by the next
notifier of the home: at least once, so a receiver may see an item twice (the item's
key is in the payload and in HERMES_ATTENTION_KEY to tell). A claim whose owner cannot
be verified is never taken over. Reading writes nothing (a guest home stays as it was); a file is written only by a
dismissal or a claim. Keys whose item has gone are forgotten after FORGET_AFTER_SECONDS,
but only by a process that looked at their kind (it knows they have gone).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.attention.model import Kind, kind_of_key
from engine.fsutil import atomic_write_json
from engine.home import HomeLayout
from engine.text import escape_text

DISMISSED_FILE = "attention-dismissed.json"
NOTIFIED_FILE = "attention-notified.json"
LOCK_FILE = "attention.lock"
FORGET_AFTER_SECONDS = 3600.0
VERSION = 1


class StateError(Exception):
    """The attention state cannot be written (one line: which file, why)."""


_GUEST: dict[str, bool] = {}


def state_dir(home: HomeLayout, environ: dict[str, str] | None = None) -> Path:
    """Where the home's attention state lives: hermes-tui's own folder of a home it
    made; for a guest home (hermes-agent's, anyone's: engine.hermes.guest) a folder of
    this user's, outside the home, named by the home's path
    (``$XDG_STATE_HOME/hermes-tui/homes/<name>-<hash>``, ``~/.local/state`` by default):
    a home hermes-tui did not make gets nothing written into it by a notice or a
    dismissal. Every process of the home finds the same folder (the path is resolved)."""
    import hashlib

    from engine.hermes.guest import home_owner

    root = os.path.realpath(home.root)
    guest = _GUEST.get(root)
    if guest is None:
        guest = _GUEST[root] = home_owner(Path(root), None).is_guest
    if not guest:
        return home.own_dir
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(root))[:40] or "home"
    return Path(base) / "hermes-tui" / "homes" / f"{name}-{hashlib.sha256(root.encode()).hexdigest()[:16]}"


def _path(home: HomeLayout, name: str) -> Path:
    return state_dir(home) / name


def ensure_state_dir(home: HomeLayout) -> Path:
    """The state folder, made when missing (only writers call this; a guest home's is
    made private to this user)."""
    folder = state_dir(home)
    if folder == home.own_dir:
        home.ensure_dir(home.own_dir)
    else:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


MAX_STATE_BYTES = 16 * 1024 * 1024  # a state file larger than this is set aside unread
WARNINGS: list[str] = []  # what a read found wrong, once per file version (callers show and clear it)
_WARNED: set[tuple[str, int, int]] = set()


def _finite(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)  # a 400-digit number: OverflowError
    except OverflowError:
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _set_aside(path: Path, why: str) -> None:
    """A state file that cannot be read: said once (per file version), and renamed to
    ``<name>.bad`` so the next write starts afresh and the bad one can be looked at. The
    state folder is always hermes-tui's own (a guest home's is outside the home)."""
    try:
        st = os.stat(path)
        version = (str(path), st.st_ino, st.st_mtime_ns)
    except OSError:
        version = (str(path), 0, 0)
    if version in _WARNED:
        return
    _WARNED.add(version)
    moved = path.with_name(path.name + ".bad")
    try:
        os.replace(path, moved)
        WARNINGS.append(f"{path} {why}; set aside as {moved.name}, read as empty")
    except OSError as exc:
        WARNINGS.append(f"{path} {why} (read as empty; could not set it aside: {exc.strerror or exc})")


def _read_all(path: Path) -> tuple[dict[str, float], dict[str, dict]]:
    """A state file's keys and (the notified file's) open claims. A missing file reads as
    empty; one too large, torn, or not ours is set aside (one warning) and reads as empty;
    a value no float holds (a 400-digit number) is dropped."""
    from engine.regular_file import read_regular

    try:
        raw = read_regular(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return {}, {}
    except OSError as exc:
        _set_aside(path, f"cannot be read ({exc.strerror or exc})")
        return {}, {}
    if len(raw) > MAX_STATE_BYTES:
        _set_aside(path, f"is larger than {MAX_STATE_BYTES // (1024 * 1024)} MiB")
        return {}, {}
    import json

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        _set_aside(path, "is not valid JSON")
        return {}, {}
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, dict):
        _set_aside(path, "is not an attention state file")
        return {}, {}
    claims = data.get("claims")
    claims = {str(k): v for k, v in claims.items() if isinstance(v, dict)} if isinstance(claims, dict) else {}
    out = {}
    for k, v in keys.items():
        f = _finite(v)
        if f is None:  # a 400-digit number, a string: not a file this code wrote
            _set_aside(path, f"holds a value that is not a time (key {escape_text(str(k))[:80]})")
            return {}, {}
        out[str(k)] = f
    return out, claims


def take_warnings() -> list[str]:
    out, WARNINGS[:] = list(WARNINGS), []
    return out


def _read(path: Path) -> dict[str, float]:
    return _read_all(path)[0]


def _write(path: Path, keys: dict[str, float], claims: dict[str, dict] | None = None) -> None:
    try:
        atomic_write_json(path, {"version": VERSION, "keys": keys, **({"claims": claims} if claims else {})})
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc.strerror or exc}") from None


@contextmanager
def _locked(home: HomeLayout) -> Iterator[None]:
    """The home's attention lock (creates hermes-tui's folder: only writers call this)."""
    from engine.home import HomeError

    try:
        ensure_state_dir(home)
        fd = os.open(_path(home, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except (OSError, HomeError) as exc:
        raise StateError(f"cannot lock {_path(home, LOCK_FILE)}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def dismissed(home: HomeLayout) -> dict[str, float]:
    """The dismissed keys (a read: writes nothing)."""
    return _read(_path(home, DISMISSED_FILE))


def notified(home: HomeLayout) -> dict[str, float]:
    """The keys marked sent."""
    return _read(_path(home, NOTIFIED_FILE))


def _owner_dead(claim: dict) -> bool:
    """Is the claim's owner verifiably gone (its pid gone, or another process now)?"""
    from engine import identity

    pid, fp = claim.get("pid"), claim.get("fp")
    if isinstance(pid, bool) or not isinstance(pid, int) or not identity.is_verifiable(fp):
        return False  # cannot tell: never taken over
    return identity.liveness(pid, fp) in (identity.Liveness.GONE, identity.Liveness.RECYCLED)


def taken(home: HomeLayout) -> set[str]:
    """The keys no other notifier may send now: sent, or claimed by an owner not known
    to be dead (a read: writes nothing)."""
    keys, claims = _read_all(_path(home, NOTIFIED_FILE))
    return set(keys) | {k for k, c in claims.items() if not _owner_dead(c)}


def _me() -> dict:
    from engine import identity

    return {"pid": os.getpid(), "fp": identity.fingerprint(os.getpid())}


def mark_sent(home: HomeLayout, keys: Iterable[str], now: float | None = None) -> None:
    """``keys`` were sent: their claims become sent keys."""
    now = time.time() if now is None else now
    keys = list(keys)
    if not keys:
        return
    with _locked(home):
        sent, claims = _read_all(_path(home, NOTIFIED_FILE))
        for k in keys:
            claims.pop(k, None)
            sent.setdefault(k, now)
        _write(_path(home, NOTIFIED_FILE), sent, claims)


def _forget(keys: dict[str, float], present: set[str], covered: frozenset[Kind], now: float) -> dict[str, float]:
    """``keys`` without those whose item is gone (of a kind looked at) for long enough."""
    return {k: at for k, at in keys.items()
            if k in present or kind_of_key(k) not in covered or now - at < FORGET_AFTER_SECONDS}


def dismiss(home: HomeLayout, keys: Iterable[str], now: float | None = None) -> list[str]:
    """Dismiss ``keys``; returns those that were not dismissed before."""
    now = time.time() if now is None else now
    with _locked(home):
        current = dismissed(home)
        new = [k for k in dict.fromkeys(keys) if k not in current]
        if new:
            current.update({k: now for k in new})
            _write(_path(home, DISMISSED_FILE), current)
    return new


def claim(home: HomeLayout, keys: Iterable[str], *, present: Iterable[str] = (),
          covered: frozenset[Kind] = frozenset(), now: float | None = None) -> list[str]:
    """Claim the right to notify ``keys``: returns the ones no process had claimed
    (in order); those are this caller's to notify, and no other process will get them.
    ``present``/``covered``: what the caller's computation saw, to forget old keys."""
    now = time.time() if now is None else now
    wanted = list(dict.fromkeys(keys))
    me = _me()
    with _locked(home):
        current, claims = _read_all(_path(home, NOTIFIED_FILE))
        mine = [k for k in wanted if k not in current and (k not in claims or _owner_dead(claims[k]))]
        kept = _forget(current, set(present) | set(wanted), covered, now)
        seen = set(present) | set(wanted)
        open_claims = {k: c for k, c in claims.items()
                       if k in seen or kind_of_key(k) not in covered or not _owner_dead(c)}
        if mine or len(kept) != len(current) or len(open_claims) != len(claims):
            open_claims.update({k: {"at": now, **me} for k in mine})
            _write(_path(home, NOTIFIED_FILE), kept, open_claims)
            dismissals = dismissed(home)
            pruned = _forget(dismissals, set(present), covered, now)
            if len(pruned) != len(dismissals):
                _write(_path(home, DISMISSED_FILE), pruned)
    return mine
