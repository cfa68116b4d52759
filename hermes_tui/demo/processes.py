"""The processes part of the demo home: real background sessions started through the
registry, exactly as ``hermes-tui run --bg`` would.

- ``build-and-test``: already finished with an error (exit 1), with notify-on-complete,
  so the first app start shows its completion once; its output holds a token that the
  view masks;
- ``pytest -q``: finished successfully;
- ``ingest worker``: prints a progress line steadily (CPU and RSS move in the table);
- ``queue monitor``: watched for ``WARN``, which it prints every few seconds.

The demo's cleanup terminates whatever of these still runs when the demo app exits.
"""

from __future__ import annotations

from engine.config import load_config
from engine.home import HomeLayout

OWNER = "demo"

FAILED_BUILD = (
    'echo "building hermes-demo (3 targets)"; sleep 0.2; '
    'echo "fetching deps with token sk-demo0123456789abcdefghij"; '
    'echo "compiling core ... ok"; echo "compiling cli ... ok"; '
    'echo "error: test_sync_conflict failed: expected 3 rows, got 2" >&2; exit 1'
)
PASSED_TESTS = 'echo "collected 42 items"; echo "........................................ [100%]"; echo "42 passed"'
# The demo's endless-looking processes end by themselves: when the demo home is gone
# (the app removes it on quit) or after about 30 minutes, so a demo killed with its
# terminal never leaves a process running for long.
STEADY = (
    'i=0; while [ "$i" -lt 3600 ] && [ -d "$HERMES_HOME" ]; do i=$((i+1)); '
    'echo "$(date +%H:%M:%S) ingest: batch $i, $((i*250)) records, last id r-$((100000+i*7))"; '
    "sleep 0.5; done"
)
WATCHED = (
    'n=0; while [ "$n" -lt 300 ] && [ -d "$HERMES_HOME" ]; do n=$((n+1)); '
    'echo "$(date +%H:%M:%S) queue depth $((n*13 % 90)) ok"; sleep 2; '
    'echo "$(date +%H:%M:%S) WARN queue depth $((100 + n*7)) above threshold 100"; sleep 4; done'
)


def build(home: HomeLayout) -> None:
    from engine.processes import ProcessRegistry

    reg = ProcessRegistry(home, load_config(home.config_file))
    failed = reg.spawn(FAILED_BUILD, owner=OWNER, notify=True, cwd=home.root)
    passed = reg.spawn(PASSED_TESTS, owner=OWNER, cwd=home.root)
    reg.wait(failed.id, timeout=10)
    reg.wait(passed.id, timeout=10)
    reg.spawn(STEADY, owner=OWNER, cwd=home.root)
    reg.spawn(WATCHED, owner=OWNER, cwd=home.root, watch=("WARN",))


def cleanup(home: HomeLayout) -> None:
    from engine.processes import ProcessRegistry

    reg = ProcessRegistry(home, load_config(home.config_file))
    for s in reg.list(include_finished=False):
        if s.owner == OWNER:
            reg.kill(s.id, grace=0.5)
