"""``hermes-tui doctor [--json]``: is this home healthy?"""

from __future__ import annotations

import argparse

from hermes_tui.cli.common import EXIT_OK, EXIT_USAGE, Context, add_json_flag, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the home: config, scratch size, TMPDIR, big cache folders, pidfd",
        description="Report on the home without changing anything. Exit 2 when config.yaml is invalid.",
    )
    add_json_flag(p)
    p.set_defaults(func=run)


def run(ctx: Context) -> int:
    from engine.doctor import run_doctor
    from engine.fsutil import human_bytes

    report, _settings = run_doctor(ctx.home)
    if ctx.json:
        print_json(report.to_json())
        return EXIT_OK if report.ok else EXIT_USAGE
    lines = [f"home        {report.home}" + ("" if report.home_exists else "  (not created yet)")]
    if report.config_ok:
        lines.append(f"config      OK ({report.config_file})")
    else:
        lines.append(f"config      ERROR {report.config_error}")
    lines.append(f"scratch     {report.scratch_dir}  {human_bytes(report.scratch_bytes)}")
    lines.append(f"quarantine  {report.quarantine_dir}  {human_bytes(report.quarantine_bytes)}")
    if report.tmpdir_user_set:
        lines.append(
            f"TMPDIR      set by you to {report.tmpdir}: spawned commands keep it, so their "
            "temporary files land there and no pruner here covers it"
        )
    else:
        lines.append("TMPDIR      not set by you: spawned commands use the scratch dir")
    if report.large_cache_dirs:
        for d in report.large_cache_dirs:
            lines.append(f"cache       {d.path} holds {human_bytes(d.size_bytes)} and no pruner covers it")
    else:
        lines.append("cache       no unpruned folder over 1 GiB")
    lines.append(
        "signals     pidfd available: pid checks and signals cannot be split by pid reuse"
        if report.pidfd_available
        else "signals     no pidfd: falling back to check-then-kill (a tiny pid-reuse window remains)"
    )
    if not report.proc_readable:
        lines.append("/proc       NOT readable: no process is ever signalled, entries with processes are kept")
    print("\n".join(lines))
    return EXIT_OK if report.ok else EXIT_USAGE
