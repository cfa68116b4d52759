"""Real bind mounts for the tests that need one (issue 35.1).

``mount --bind`` needs root (CAP_SYS_ADMIN); the suite runs as root in CI. Where it
cannot mount, a test skips and says why. Every mount is undone in a ``finally``,
wherever it has moved since (a bug may have moved its entry into quarantine): it is
found again by its mount id in /proc/self/mountinfo.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.scratch.mounts import MOUNTINFO, _unescape


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root: this test runs where the suite is root (as in CI)")


def _mounts() -> list[tuple[int, str]]:
    """(mount id, mount point) of every line of the mount table, in its order."""
    with open(MOUNTINFO, "rb") as fh:
        return [(int(f[0]), os.fsdecode(_unescape(f[4]))) for f in (line.split(b" ") for line in fh.read().split(b"\n"))
                if len(f) >= 5]


def _mount_point_of(mount_id: int) -> str | None:
    return next((point for mid, point in _mounts() if mid == mount_id), None)


def bind(src: Path, dst: Path) -> int:
    """Bind-mount ``src`` on ``dst`` (skip the test when mounting is not permitted);
    returns the new mount's id. The caller undoes it with :func:`unbind`."""
    _need_root()
    done = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here: {done.stderr.strip() or done.returncode}")
    point = os.path.realpath(dst)
    return [mid for mid, p in _mounts() if p == point][-1]  # the newest mount on it (read from the table itself)


def unbind(mount_id: int) -> None:
    """Undo the mount ``mount_id``, wherever its mount point is now."""
    point = _mount_point_of(mount_id)
    if point is None:
        return
    if subprocess.run(["umount", point], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", point], capture_output=True)


@contextlib.contextmanager
def bound(src: Path, dst: Path) -> Iterator[int]:
    """``src`` bind-mounted on ``dst`` (made if missing) for the block."""
    dst.mkdir(parents=True, exist_ok=True)
    mount_id = bind(src, dst)
    try:
        yield mount_id
    finally:
        unbind(mount_id)


def precious(root: Path) -> Path:
    """Somebody's data outside scratch: a directory with files at two depths."""
    p = root / "precious"
    (p / "src").mkdir(parents=True)
    (p / "notes.txt").write_text("keep me\n")
    (p / "src" / "main.py").write_text("print('keep me')\n")
    return p


def intact(p: Path) -> bool:
    return ((p / "notes.txt").read_text() == "keep me\n"
            and (p / "src" / "main.py").read_text() == "print('keep me')\n")
