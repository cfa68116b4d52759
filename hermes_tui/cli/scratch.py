"""``hermes-tui scratch [--json]`` and ``hermes-tui scratch restore NAME``."""

from __future__ import annotations

import argparse

from hermes_tui.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    Context,
    add_json_flag,
    print_json,
    print_json_streamed,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scratch",
        help="list scratch entries (state, idle age, size, why kept, processes inside); restore from quarantine",
        description="List the entries of <home>/cache/scratch and what the prune would think of each. "
        "'scratch restore NAME' puts a quarantined entry back.",
    )
    add_json_flag(p)
    p.set_defaults(func=run_list)
    actions = p.add_subparsers(dest="scratch_action", metavar="ACTION")
    r = actions.add_parser(
        "restore",
        help="move a quarantined entry back into the scratch folder",
        description="NAME is the entry's original name (its newest quarantine is restored) or the "
        "quarantined name as listed (name.YYYYmmddTHHMMSSZ). Never replaces an existing entry.",
    )
    r.add_argument("name", metavar="NAME")
    add_json_flag(r)
    r.set_defaults(func=run_restore)


def _survey(ctx: Context):
    """The survey as a stream (entries one at a time) and the options it used."""
    from engine.scratch.entries import SurveyError, stream_survey
    from engine.scratch.target import PruneOptions, PruneTarget

    target = PruneTarget.of(ctx.home)
    options = PruneOptions.from_settings(ctx.home, ctx.settings)
    try:
        return stream_survey(target, options, with_sizes=True), options
    except SurveyError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def run_list(ctx: Context) -> int:
    from engine.text import escape_text, human_bytes

    survey, options = _survey(ctx)
    quarantine = [
        {
            "name": q.name,
            "quarantine_name": q.file_name,
            "path": q.path,
            "quarantined_at": q.quarantined_at,
            "expires_at": q.expires_at(options.quarantine_hours),
        }
        for q in survey.quarantine
    ]
    if ctx.json:
        # Streamed: each entry is written as its walk ends (100,000 entries are never held).
        print_json_streamed({
            "scratch_dir": str(survey.target.scratch_dir),
            "idle_hours": survey.idle_hours,
            "process_error": survey.process_error,
        }, "entries", (e.to_json() for e in survey.entries), {"quarantined": quarantine})
        return EXIT_OK
    print(f"{survey.target.scratch_dir}  (pruned after {survey.idle_hours:g}h idle)")
    # The columns are as wide as their widest value: only each row's text is held.
    rows = [("NAME", "STATE", "IDLE", "SIZE", "PIDS", "WHY KEPT")]
    for e in survey.entries:
        rows.append((
            escape_text(e.name), e.state, e.age_text if e.idle_seconds is not None else "-",
            human_bytes(e.size_bytes) if e.size_bytes is not None else "?",
            ",".join(map(str, e.pids)) or "-", escape_text(e.kept_reason or ""),
        ))
    if len(rows) == 1:
        print("no entries")
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5])
    if survey.process_error:
        print(f"processes: {escape_text(survey.process_error)} (nothing would be deleted)")
    if quarantine:
        print(f"\nquarantine ({survey.target.quarantine_dir}): restore with 'hermes-tui scratch restore NAME'")
        for q in survey.quarantine:
            print(f"  {escape_text(q.file_name)}")
    return EXIT_OK


def run_restore(ctx: Context) -> int:
    from engine.scratch.execute import restore
    from engine.scratch.quarantine import RestoreError
    from engine.scratch.target import PruneTarget
    from engine.text import escape_text

    try:
        rec = restore(PruneTarget.of(ctx.home), ctx.args.name)
    except RestoreError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if ctx.json:
        print_json({"path": rec.path, "from": rec.from_path})
    else:
        print(f"restored {escape_text(rec.path)} (from {escape_text(rec.from_path)})")
    return EXIT_OK
