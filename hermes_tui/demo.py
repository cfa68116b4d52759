"""The demo home: a fresh temporary home filled by real engine operations.

Each part of the product adds its own builder (real processes, real aged
directories, a real board); nothing here is canned text.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from engine.home import HomeLayout

DEMO_CONFIG = """\
# The demo home's config: every key not listed here has its default (docs/config.md).
ui:
  refresh_seconds: 1
"""

# Config steps run first, each adding its part's section to config.yaml. They are quick
# (no process, no board), so the app can load its settings and draw its first frame
# before the builders fill the home.
CONFIG_STEPS: list[tuple[str, Callable[[HomeLayout], None]]] = []

# Builders run in order on the new home: (name, function(home)).
BUILDERS: list[tuple[str, Callable[[HomeLayout], None]]] = []


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


# Cleanups run when the demo app exits: (name, function(home)).
CLEANUPS: list[tuple[str, Callable[[HomeLayout], None]]] = []


def cleanup_demo_home(home: HomeLayout) -> None:
    """Stop what the demo started and remove its temporary home."""
    for _name, clean in CLEANUPS:
        try:
            clean(home)
        except Exception:
            pass
    if home.root.name.startswith("hermes-demo-"):
        shutil.rmtree(home.root, ignore_errors=True)
import hermes_tui.demo_kanban  # noqa: E402,F401,I001  (registers the kanban builder and cleanup)
from hermes_tui import demo_scratch  # noqa: E402,F401  (registers the scratch builder and cleanup)
from hermes_tui import demo_processes  # noqa: E402,F401  (registers the processes builder and cleanup)
