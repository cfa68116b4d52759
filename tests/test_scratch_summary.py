"""The one-line prune summary the CLI prints and the scratch pane toasts."""

from __future__ import annotations

from engine.scratch.result import KeptRecord, PruneResult, QuarantineMove, RemovedEntry, SignalRecord


def test_summary_names_everything_that_happened():
    result = PruneResult(
        dry_run=False,
        removed=(RemovedEntry("/s/a", 1024),),
        quarantined=(QuarantineMove("/s/b", "/q/b.1", 2048),),
        kept=(KeptRecord("/s/c", "touched since selection"), KeptRecord("/s/d", ".scratch-keep marker")),
        signalled=(SignalRecord(7, "sleep", "/s/a", "SIGTERM"), SignalRecord(7, "sleep", "/s/a", "SIGKILL")),
        failures=("could not fully remove /s/e",),
    )
    text = result.summary(restore_hint="u restores")
    assert text == ("2 entries pruned, 3.0 KiB freed; 1 in quarantine (u restores); 1 process(es) signalled; "
                    "1 rescued (written to since the plan); 1 failed (see the prune log)")


def test_summary_of_a_pass_that_did_nothing_and_one_whose_process_check_failed():
    assert PruneResult(dry_run=False).summary() == "0 entries pruned, 0 B freed"
    assert PruneResult(dry_run=False, process_error="boom").summary().endswith("process check failed: nothing deleted")
    assert PruneResult(dry_run=False, removed=(RemovedEntry("/s/a", 10),)).summary().startswith("1 entry pruned")
