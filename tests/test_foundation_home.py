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


def test_existing_dirs_get_fixed_mode(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_HOME_MODE", raising=False)
    root = tmp_path / "h"
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    HomeLayout(root).ensure()
    assert mode_of(root) == 0o700


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
    assert h.last_prune_stamp == tmp_path / "cache" / "scratch" / ".last_prune"
    assert h.prune_log == tmp_path / "logs" / "scratch-prune.log"
    assert h.kanban_db == tmp_path / "kanban.db"
    assert h.processes_dir == tmp_path / "processes"
    assert h.kanban_logs_dir == tmp_path / "logs" / "kanban"
