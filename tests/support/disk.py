"""A real small filesystem for the tests that need a full disk: a tmpfs mounted on a
folder (skipped where mounting is not permitted), filled up on request."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """``where`` (created if missing) as a tmpfs of ``size`` (``64k``, ``1m``) for the
    block; unmounted after it. Skips the test when mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                                 capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(path: Path) -> None:
    """Write zeros to ``path`` until its filesystem has no room left."""
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


@contextmanager
def read_only(where: Path) -> Iterator[Path]:
    """``where`` made read-only for the block by a read-only bind mount of it onto itself
    (chmod does not stop root; this does). Skips the test when mounting is not allowed.
    Nothing may hold a file under ``where`` open for writing (the kernel refuses then)."""
    try:
        bound = subprocess.run(["mount", "--bind", str(where), str(where)], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if bound.returncode != 0:
        pytest.skip(f"a bind mount is not permitted here (the suite runs as root in CI): "
                    f"{bound.stderr.decode().strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], capture_output=True, timeout=30)
        assert ro.returncode == 0, ro.stderr.decode()
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
