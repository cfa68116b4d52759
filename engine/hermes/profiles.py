"""hermes-agent's profiles, as a hermes home holds them.

A profile is a Hermes home of its own: the home itself is the ``default`` profile, and
every other one is a folder ``<home>/profiles/<name>/`` whose name hermes accepts
(``^[a-z0-9][a-z0-9_-]{0,63}$``). hermes's board assigns cards to these names, so its
new-card form and its assign dialog offer them. Reading them is a directory listing:
nothing is opened, nothing written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_PROFILE = "default"
PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def hermes_profiles(root: Path) -> tuple[str, ...]:
    """``default`` and the named profiles under ``root/profiles``, sorted (a listing
    that fails reads as no named profile)."""
    names = set()
    try:
        with os.scandir(Path(root) / "profiles") as entries:
            for entry in entries:
                if PROFILE_NAME.match(entry.name) and entry.is_dir(follow_symlinks=False):
                    names.add(entry.name)
    except OSError:
        pass
    names.discard(DEFAULT_PROFILE)
    return (DEFAULT_PROFILE, *sorted(names))
