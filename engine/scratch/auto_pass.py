"""Entry point of the detached automatic pass (see schedule.py). Not for users."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hermes-tui-auto-prune")
    parser.add_argument("--home", required=True)
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--idle-hours", type=float, required=True)
    parser.add_argument("--quarantine-hours", type=float, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--arrival-hours", type=float, default=None)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--lineage")
    group.add_argument("--lineage-unknown")
    args = parser.parse_args(argv)

    from engine.home import HomeLayout
    from engine.scratch.audit import open_audit
    from engine.scratch.target import PruneOptions, PruneTarget

    home = HomeLayout(Path(args.home))
    target = PruneTarget(home, Path(args.scratch))
    try:
        from engine import identity
        from engine.config import ConfigError, load_config
        from engine.scratch.execute import prune_pass
        from engine.scratch.registered import RegistryUnreadable, registry_provider
        from engine.scratch.result import PassFailed, PruneBusy

        lineage, lineage_error = None, args.lineage_unknown
        if args.lineage is not None:
            try:
                lineage = identity.parse_lineage(args.lineage)
            except ValueError as exc:
                lineage, lineage_error = None, str(exc)
        try:
            provider = registry_provider(home, load_config(home.config_file))
        except ConfigError as exc:
            def provider(exc=exc):
                raise RegistryUnreadable(f"config.yaml does not load ({exc})")
        options = PruneOptions(
            idle_hours=args.idle_hours,
            quarantine_hours=args.quarantine_hours,
            kill_grace_seconds=args.grace,
            arrival_hours=args.arrival_hours,
            lineage=lineage,
            lineage_error=lineage_error,
            registered=provider,
        )
        try:
            prune_pass(target, options)
        except PruneBusy:
            return 0  # already logged by execute_plan
        except PassFailed:
            return 1  # its line is in the log already
        return 0
    except Exception as exc:  # the pass's stderr is /dev/null: leave one line in the log
        try:
            with open_audit(target.log_file) as audit:
                audit.pass_failed(f"{type(exc).__name__}: {exc}")
        except Exception:
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
