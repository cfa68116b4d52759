"""The processes demo builder starts real sessions, and its cleanup stops them."""

from __future__ import annotations

from engine.config import Settings
from engine.processes import ProcessRegistry
from hermes_tui.demo import processes as demo_processes


def test_demo_builder_starts_real_sessions_and_cleanup_stops_them(home):
    demo_processes.build(home)
    try:
        sessions = ProcessRegistry(home, Settings()).list()
        by_status = {}
        for s in sessions:
            by_status.setdefault(s.status, []).append(s)
        failed = [s for s in by_status["exited"] if s.exit_code == 1]
        assert len(failed) == 1 and failed[0].notify
        assert "error:" in failed[0].output_path.read_text()
        assert len(by_status["running"]) == 2
        assert [s.watch for s in by_status["running"] if s.watch] == [("WARN",)]
    finally:
        demo_processes.cleanup(home)
    assert ProcessRegistry(home, Settings()).list(include_finished=False) == []
