"""Home resolution and the permission policy, on real directories."""

from __future__ import annotations

import os
import stat

import pytest

from engine.home import HomeError, HomeLayout, home_mode, resolve_home


def mode_of(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_resolution_order(tmp_path):
    env = {"HERMES_HOME": str(tmp_path / "env")}
    assert resolve_home(str(tmp_path / "cli"), env) == tmp_path / "cli"
    assert resolve_home(None, env) == tmp_path / "env"
    assert resolve_home(None, {"HOME": "/x"}) == resolve_home(None, {})  # falls back to ~/.hermes
    assert str(resolve_home(None, {})).endswith("/.hermes")


def test_relative_home_becomes_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_home("rel", {}) == tmp_path / "rel"


def test_created_with_0700(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_HOME_MODE", raising=False)
    h = HomeLayout(tmp_path / "h").ensure()
    assert mode_of(h.root) == 0o700
    h.ensure_dir(h.scratch_dir)
    assert mode_of(h.cache_dir) == 0o700 and mode_of(h.scratch_dir) == 0o700


def test_an_existing_home_keeps_its_mode(tmp_path, monkeypatch):
    """Issue 12: an existing home's mode is never changed silently (it used to become
    0700); doctor warns about an open home instead. Changed assertion: was 0700."""
    monkeypatch.delenv("HERMES_HOME_MODE", raising=False)
    root = tmp_path / "h"
    root.mkdir()
    os.chmod(root, 0o755)
    (root / "logs").mkdir()
    os.chmod(root / "logs", 0o775)
    h = HomeLayout(root).ensure()
    h.ensure_dir(h.prune_log.parent)
    h.ensure_dir(h.scratch_dir)
    assert mode_of(root) == 0o755 and mode_of(root / "logs") == 0o775
    # what hermes-tui created itself gets the home's mode
    assert mode_of(h.cache_dir) == 0o700 and mode_of(h.scratch_dir) == 0o700


@pytest.mark.parametrize("shared_mode", [0o1777, 0o2775])
@pytest.mark.parametrize("link", ["cache/scratch", "logs", "cache"])
def test_a_symlinked_dir_keeps_mode_sticky_and_setgid(tmp_path, monkeypatch, shared_mode, link):
    """Issue 9: a directory reached through a symlink keeps its mode and special bits."""
    monkeypatch.delenv("HERMES_HOME_MODE", raising=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, shared_mode)
    h = HomeLayout(tmp_path / "h").ensure()
    (h.root / link).parent.mkdir(parents=True, exist_ok=True)
    (h.root / link).symlink_to(shared)
    h.ensure_dir(h.scratch_dir)
    h.ensure_dir(h.prune_log.parent)
    h.ensure_dir(h.quarantine_dir)
    assert mode_of(shared) == shared_mode


def test_a_symlink_to_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "f").write_text("x")
    h = HomeLayout(tmp_path / "h").ensure()
    (h.root / "logs").symlink_to(tmp_path / "f")
    with pytest.raises(HomeError, match="exists and is not a directory"):
        h.ensure_dir(h.prune_log.parent)


def test_home_mode_env_is_octal(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME_MODE", "0750")
    h = HomeLayout(tmp_path / "h").ensure()
    assert mode_of(h.root) == 0o750
    assert home_mode({"HERMES_HOME_MODE": "755"}) == 0o755
    for bad in ("rwx", "999", "0o7x"):
        with pytest.raises(HomeError, match="HERMES_HOME_MODE"):
            home_mode({"HERMES_HOME_MODE": bad})


def test_managed_home_is_never_chmodded(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_HOME_MODE", raising=False)
    root = tmp_path / "h"
    root.mkdir()
    os.chmod(root, 0o755)
    (root / ".managed").touch()
    h = HomeLayout(root).ensure()
    h.ensure_dir(h.logs_dir)
    assert mode_of(root) == 0o755


def test_a_file_in_the_way_is_a_clear_error(tmp_path):
    (tmp_path / "h").write_text("not a dir")
    with pytest.raises(HomeError, match="not a directory"):
        HomeLayout(tmp_path / "h").ensure()


def test_layout_paths(tmp_path):
    h = HomeLayout(tmp_path)
    assert h.scratch_dir == tmp_path / "cache" / "scratch"
    assert h.prune_log == tmp_path / "logs" / "scratch-prune.log"
    assert h.kanban_db == tmp_path / "hermes-tui" / "board.db"
    assert h.shared_kanban_db == tmp_path / "kanban.db"
    assert h.hermes_kanban_logs_dir == tmp_path / "kanban" / "logs"
    assert h.processes_dir == tmp_path / "processes"
    assert h.kanban_logs_dir == tmp_path / "logs" / "kanban"


def test_a_new_leaf_under_existing_parents_gets_the_home_mode_despite_the_umask(tmp_path, monkeypatch):
    """ensure_dir makes the leaf first when its parents exist: that directory is still
    chmod-ed to the home's mode (the umask cuts mkdir's), and nothing else is touched."""
    monkeypatch.setenv("HERMES_HOME_MODE", "0770")
    old = os.umask(0o077)
    try:
        h = HomeLayout(tmp_path / "h").ensure()
        h.ensure_dir(h.scratch_dir)
        os.chmod(h.scratch_dir, 0o1777)  # an owner's choice on an existing parent
        leaf = h.ensure_dir(h.scratch_dir / "worker-1")
    finally:
        os.umask(old)
    assert mode_of(leaf) == 0o770
    assert mode_of(h.scratch_dir) == 0o1777
