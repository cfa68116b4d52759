"""The scratch part of the demo home is built by real engine operations."""

from __future__ import annotations

from engine.config import load_config
from engine.scratch.audit import LogTail
from engine.scratch.entries import survey_scratch
from engine.scratch.target import PruneOptions, PruneTarget
from hermes_tui.demo import scratch as demo_scratch


def test_demo_home_has_every_kind_of_entry_and_a_real_pass_in_the_log(home):
    demo_scratch.append_config(home)  # the demo's config: its entries' arrival does not count
    demo_scratch.build(home)  # only the scratch builder (other parts add their own entries)
    try:
        survey = survey_scratch(PruneTarget.of(home), PruneOptions.from_settings(home, load_config(home.config_file)))
        states = {e.name: e.state for e in survey.entries}
        assert states == {
            "lane-build-cache": "active",
            "lane-long-compile": "kept",
            "lane-refactor-auth": "idle",
            "parked-experiment": "kept",
        }
        reasons = {e.name: e.kept_reason for e in survey.entries}
        # whose it is: the demo's session is hermes-tui's own, not hermes-agent's
        assert reasons["lane-long-compile"].startswith("live process pid=")
        assert " of hermes-tui session proc_" in reasons["lane-long-compile"]
        assert [q.name for q in survey.quarantine] == ["finished-run"]
        actions = [r.action for r in LogTail(home.prune_log).start()]
        assert "TERM" in actions and "quarantined" in actions and "kept" in actions
    finally:
        demo_scratch.cleanup(home)
    assert str(home.root) not in demo_scratch._sessions  # the demo session was stopped
