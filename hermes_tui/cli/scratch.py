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
    from engine.processes.redact import redact_data, shown
    from engine.text import human_bytes

    survey, options = _survey(ctx)
    redact = ctx.settings.processes.redact  # names and reasons are outside text: masked as outputs are
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
        print_json_streamed(redact_data({
            "scratch_dir": str(survey.target.scratch_dir),
            "idle_hours": survey.idle_hours,
            "process_error": survey.process_error,
        }, redact), "entries", (redact_data(e.to_json(), redact) for e in survey.entries),
            {"quarantined": redact_data(quarantine, redact)})
        return EXIT_OK
    print(f"{shown(str(survey.target.scratch_dir), redact)}  (pruned after {survey.idle_hours:g}h idle)")
    # The columns are as wide as their widest value: only each row's text is held.
    rows = [("NAME", "STATE", "IDLE", "SIZE", "PIDS", "WHY KEPT")]
    for e in survey.entries:
        rows.append((
            shown(e.name, redact), e.state, e.age_text if e.idle_seconds is not None else "-",
            human_bytes(e.size_bytes) if e.size_bytes is not None else "?",
            ",".join(map(str, e.pids)) or "-", shown(e.kept_reason or "", redact),
        ))
    if len(rows) == 1:
        print("no entries")
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5])
    if survey.process_error:
        print(f"processes: {shown(survey.process_error, redact)} (nothing would be deleted)")
    if quarantine:
        print(f"\nquarantine ({shown(str(survey.target.quarantine_dir), redact)}): "
              "restore with 'hermes-tui scratch restore NAME'")
        for q in survey.quarantine:
            print(f"  {shown(q.file_name, redact)}")
    return EXIT_OK


def run_restore(ctx: Context) -> int:
    from engine.processes.redact import redact_data, shown
    from engine.scratch.execute import restore
    from engine.scratch.quarantine import RestoreError
    from engine.scratch.target import PruneTarget

    try:
        rec = restore(PruneTarget.of(ctx.home), ctx.args.name)
    except RestoreError as exc:
        raise CliError(shown(str(exc), ctx.settings.processes.redact), EXIT_FAILED) from None
    redact = ctx.settings.processes.redact
    if ctx.json:
        print_json(redact_data({"path": rec.path, "from": rec.from_path}, redact))
    else:
        print(f"restored {shown(rec.path, redact)} (from {shown(rec.from_path, redact)})")
    return EXIT_OK
