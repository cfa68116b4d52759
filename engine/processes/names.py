"""Session names (``run --bg --name NAME``): unique among running sessions.

``processes/.names/<name>`` is a symbolic link to the session id that holds the name.
A name is claimed under ``.names/.lock`` (an ``flock``) before the command starts, so two
spawns asking for one name at once cannot both get it; a name whose session has ended
passes to the next spawn that asks for it (the ended session keeps showing it).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable
from pathlib import Path

from engine.processes.session import ID_PREFIX

NAMES_DIR = ".names"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HEX = re.compile(r"[0-9a-fA-F]+")


class NameRefused(ValueError):
    """The name cannot be used: not valid, or held by a running session."""


def check_name(name: str) -> str:
    """The name if it may name a session, else :class:`NameRefused` with the reason."""
    if not NAME_RE.fullmatch(name or ""):
        raise NameRefused(f"name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                          "or digit")
    if name.startswith(ID_PREFIX) or _HEX.fullmatch(name):
        raise NameRefused(f"name {name!r} reads as a session id or id prefix; pick one with other letters")
    return name


def holder(root: Path, name: str) -> str | None:
    """The session id that holds ``name`` (it may have ended since), or None."""
    if not NAME_RE.fullmatch(name or ""):
        return None
    try:
        target = os.readlink(root / NAMES_DIR / name)
    except OSError:
        return None
    return target if target.startswith(ID_PREFIX) and "/" not in target else None


def claim(root: Path, name: str, session_id: str, is_running: Callable[[str], bool]) -> None:
    """Give ``name`` to ``session_id``; :class:`NameRefused` when a running session has it."""
    check_name(name)
    folder = root / NAMES_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = holder(root, name)
        if current and current != session_id and is_running(current):
            raise NameRefused(f"name {name!r} is taken by running session {current}")
        tmp = folder / f".{name}.{os.getpid()}"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(session_id, tmp)
        os.replace(tmp, folder / name)
    finally:
        os.close(fd)


def release(root: Path, name: str, session_id: str) -> None:
    """Drop the name if ``session_id`` still holds it (a spawn that failed)."""
    if holder(root, name) == session_id:
        try:
            os.unlink(root / NAMES_DIR / name)
        except OSError:
            pass
