"""The demo home: a fresh temporary home filled by real engine operations.

Each part of the product has its own module (real processes, real aged directories,
a real board); the lists below name their steps in the order they run. Nothing here
is canned text.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from engine.home import HomeLayout
from hermes_tui.demo import kanban as demo_kanban
from hermes_tui.demo import processes as demo_processes
from hermes_tui.demo import scratch as demo_scratch

DEMO_CONFIG = """\
# The demo home's config: every key not listed here has its default (docs/config.md).
ui:
  refresh_seconds: 1
"""

Step = tuple[str, Callable[[HomeLayout], None]]

# Config steps run first, each adding its part's section to config.yaml. They are quick
# (no process, no board), so the app can load its settings and draw its first frame
# before the builders fill the home.
CONFIG_STEPS: tuple[Step, ...] = (
    ("kanban", demo_kanban.append_config),
    ("scratch", demo_scratch.append_config),
)

# Builders run in this order on the new home (the app runs them after its first frame).
BUILDERS: tuple[Step, ...] = (
    ("kanban", demo_kanban.build),
    ("scratch", demo_scratch.build),
    ("processes", demo_processes.build),
)

# Cleanups run when the demo app exits, in this order.
CLEANUPS: tuple[Step, ...] = (
    ("kanban", demo_kanban.cleanup),
    ("scratch", demo_scratch.cleanup),
    ("processes", demo_processes.cleanup),
)


def prepare_demo_home(root: Path | None = None) -> HomeLayout:
    """The demo home with its whole config.yaml and nothing else yet."""
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="hermes-demo-"))
    home = HomeLayout(Path(root)).ensure()
    if not home.config_file.exists():
        home.config_file.write_text(DEMO_CONFIG, encoding="utf-8")
    for _name, step in CONFIG_STEPS:
        step(home)
    return home


def fill_demo_home(home: HomeLayout) -> None:
    """Everything the demo shows (real processes, aged folders, a board): the slow part,
    which the app runs in a thread after its first frame."""
    for _name, build in BUILDERS:
        build(home)


def build_demo_home(root: Path | None = None) -> HomeLayout:
    home = prepare_demo_home(root)
    fill_demo_home(home)
    return home


def cleanup_demo_home(home: HomeLayout) -> None:
    """Stop what the demo started and remove its temporary home."""
    for _name, clean in CLEANUPS:
        try:
            clean(home)
        except Exception:
            pass
    if home.root.name.startswith("hermes-demo-"):
        shutil.rmtree(home.root, ignore_errors=True)
