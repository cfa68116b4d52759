"""``hermes-tui doctor [--json]``: is this home healthy?"""

from __future__ import annotations

import argparse

from hermes_tui.cli.common import EXIT_OK, EXIT_USAGE, Context, add_json_flag, print_json

NAMES_WIDTH = 100  # a line of names in the report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the home: config, scratch size, TMPDIR, big cache folders, pidfd",
        description="Report on the home without changing anything. Exit 2 when config.yaml is invalid.",
    )
    add_json_flag(p)
    p.set_defaults(func=run)


def _check_keys(report, settings) -> None:
    """``keys:`` is checked against the app's bindings here too, so doctor and the app
    give the same line. Only a config with ``keys:`` pays for importing the bindings."""
    if settings is None or not settings.keys:
        return
    from engine.config import ConfigError
    from hermes_tui.keymap import validate_keys

    try:
        validate_keys(settings)
    except ConfigError as exc:
        report.config_ok, report.config_error = False, str(exc)


def _owner_lines(report) -> list[str]:
    lines = []
    if report.is_guest:
        signs = ", ".join(report.guest_signs[:4]) + (", ..." if len(report.guest_signs) > 4 else "")
        lines.append(f"owner       a guest home (hermes-agent's or another program's: {signs}); "
                     "hermes-tui changes no modes here and starts no automatic prune unless "
                     "scratch.auto_prune: true is set")
    elif report.home_exists:
        lines.append("owner       hermes-tui's own home")
    if report.home_open_to_others:
        lines.append(f"mode        WARNING the home is {report.home_mode}: open to other users "
                     f"(hermes-tui leaves it so; chmod 700 {report.home} to close it)")
    return lines


def _config_lines(report) -> list[str]:
    if not report.config_ok:
        return [f"config      ERROR {report.config_error}"]
    if not report.config_exists:
        return [f"config      no config.yaml (defaults) - {report.config_file}"]
    lines = [f"config      OK ({report.config_file})"]
    lines += _names("hermes-agent's sections, left to it", report.hermes_sections)
    lines += _names("hermes-agent's kanban keys, left to it", report.hermes_keys)
    lines += _names("sections of another program, left alone", report.other_sections)
    return lines


def _names(label: str, names: list[str]) -> list[str]:
    """``label: a, b, c`` on one line when it fits; else counted, the names wrapped
    under it (a hermes home has ~70 sections: one line of them ran far off the screen)."""
    if not names:
        return []
    import textwrap

    indent = " " * 12
    one = f"{indent}{label}: {', '.join(names)}"
    if len(one) <= NAMES_WIDTH:
        return [one]
    return [f"{indent}{label} ({len(names)}):", *textwrap.wrap(
        ", ".join(names), NAMES_WIDTH, initial_indent=indent + "  ", subsequent_indent=indent + "  ",
        break_long_words=False, break_on_hyphens=False)]


def _shared_board_lines(board: dict | None) -> list[str]:
    """The PostgreSQL board: where (no password), what is there, this host's lease."""
    if board is None:
        return []
    head = "board       " + (f"{board['url']}: " if board.get("url") else "")
    if not board["usable"]:
        return [head + "ERROR " + board["state"]]
    lines = [head + board["state"]]
    lease = board.get("lease_expires_in")
    host = board.get("host_id")
    holder, here = board.get("lease_boot_id"), board.get("this_boot_id")
    if lease is not None and lease >= 0 and holder and here and holder != here:
        lines.append(f"            WARNING host {host}: its live lease ({lease:.0f}s left) is held by another "
                     f"machine (boot {holder!r}), not this one (boot {here!r}): two machines share this host id, "
                     "and this one's dispatcher refuses to run; give each machine its own HERMES_KANBAN_HOST_ID")
    elif lease is None:
        lines.append(f"            host {host}: no lease yet (the first dispatch tick takes one)")
    elif lease >= 0:
        lines.append(f"            host {host}: lease held, {lease:.0f}s left")
    else:
        lines.append(f"            host {host}: lease EXPIRED {-lease:.0f}s ago (another host may reclaim "
                     "this host's running cards)")
    return lines


def run(ctx: Context) -> int:
    from engine.doctor import run_doctor
    from engine.text import human_bytes

    report, settings = run_doctor(ctx.home)
    _check_keys(report, settings)
    if ctx.json:
        print_json(report.to_json())
        return EXIT_OK if report.ok else EXIT_USAGE
    lines = [f"home        {report.home}" + ("" if report.home_exists else "  (not created yet)")]
    lines += _owner_lines(report)
    lines += _config_lines(report)
    lines.append(f"scratch     {report.scratch_dir}  {human_bytes(report.scratch_bytes)}")
    lines.append(f"quarantine  {report.quarantine_dir}  {human_bytes(report.quarantine_bytes)}")
    lines.append(f"processes   {report.processes_dir}  {human_bytes(report.processes_bytes)} on disk "
                 "(each session's output kept within processes.max_output_bytes)")
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
    lines += _shared_board_lines(report.shared_board)
    if settings is None or settings.notify.desktop:
        lines.append(f"notices     {report.desktop_notices_why}")
    if not report.proc_readable:
        lines.append("/proc       NOT readable: no process is ever signalled, entries with processes are kept")
    print("\n".join(lines))
    return EXIT_OK if report.ok else EXIT_USAGE
