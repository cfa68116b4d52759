"""Why hermes-agent did not spawn a card, in words, from what hermes recorded.

Facts from hermes-agent 0.19.0 (``hermes_cli/kanban_db.py``, ``kanban_diagnostics.py``,
``gateway/status.py``); the words are hermes-tui's own:

- **The respawn guard.** Before claiming a ready card hermes's dispatcher may defer it and
  records a ``respawn_guarded`` event with ``{"reason": ...}``: ``rate_limit_cooldown`` (its
  last run hit a provider's rate limit), ``blocker_auth`` (its last failure reads like a
  quota or authentication error), ``recent_success`` (a run completed recently),
  ``active_pr`` (a recent comment links a pull request). The card stays ready.
- **The breaker.** After ``failure_limit`` failures (the card's ``max_retries`` wins) hermes
  blocks the card with a ``gave_up`` event (``failures``, ``effective_limit``,
  ``limit_source``, ``error``, ``trigger_outcome``).
- **Cards hermes's dispatcher skips**: a ready card without an assignee (and no
  ``kanban.default_assignee``), a card whose assignee is no hermes profile (``default``, or a
  folder ``profiles/<name>/``: hermes never spawns those, they are pulled by terminals).
- **Diagnostics** hermes computes on demand (``hermes kanban diagnostics``, never stored);
  hermes-tui reads the one that keeps cards from leaving triage from the same config:
  ``triage_aux_unavailable`` (a triage card, and neither the auxiliary slot hermes needs
  — ``auxiliary.kanban_decomposer`` with ``kanban.auto_decompose`` on, the default, else
  ``auxiliary.triage_specifier`` — is set explicitly nor is a main model configured).
- **The gateway.** hermes's dispatcher runs inside its gateway (``hermes gateway start``);
  the gateway writes ``<home>/gateway.pid``, JSON ``{"pid", "kind": "hermes-gateway",
  "argv", "start_time"}`` (``start_time``: field 22 of ``/proc/<pid>/stat``). The gateway
  is running only when that pid is alive with those start ticks (a bare pid, or one whose
  start ticks differ, is not trusted). Without it no card is ever spawned.

Everything here reads: nothing is written, locked, or signalled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import identity
from engine.kanban.models import Event, Task

GUARD_SHORT = {"rate_limit_cooldown": "rate-limit cooldown", "blocker_auth": "auth/quota error",
               "recent_success": "recent success", "active_pr": "open pull request"}
GUARD_WORDS = {
    "rate_limit_cooldown": "its last run hit a provider's rate limit; hermes waits for the cooldown",
    "blocker_auth": "its last failure reads like a quota or authentication error; hermes retries it later "
                    "and blocks it after kanban.failure_limit failures",
    "recent_success": "a run of it completed recently; hermes waits for a review before running it again",
    "active_pr": "a recent comment links a pull request; hermes will not open a second one",
}
# Events after which an earlier guard or give-up no longer says why a card waits.
SUPERSEDING = ("claimed", "spawned", "completed", "unblocked", "promoted", "reclaimed", "status", "assigned",
               "edited", "reassigned")
REASON_EVENTS = ("respawn_guarded", "gave_up") + SUPERSEDING
GATEWAY_KIND = "hermes-gateway"
MAX_PID_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class HermesReason:
    """One reason, with hermes's own code (``respawn_guarded:blocker_auth``, ``gave_up``,
    ``triage_aux_unavailable``, ``unassigned``, ``no_profile``)."""

    code: str
    words: str
    short: str = ""  # a few words for the card itself

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "words": self.words, "short": self.short or self.words}


# --------------------------------------------------------------------------------------
# Config and profiles (read-only)
# --------------------------------------------------------------------------------------


_CONFIG_CACHE: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def read_hermes_config(root: Path) -> dict[str, Any]:
    """hermes's ``config.yaml`` as a mapping ({} when missing or unreadable). Parsed
    again only when the file changed (the board pane asks on every refresh)."""
    path = Path(root) / "config.yaml"
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _CONFIG_CACHE.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        import yaml

        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh)
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    except Exception:  # yaml.YAMLError: a broken config reads as none
        return {}
    config = raw if isinstance(raw, dict) else {}
    _CONFIG_CACHE[path] = (stamp, config)
    return config


def _slot_explicit(slot: Any) -> bool:
    if not isinstance(slot, dict):
        return False
    provider = str(slot.get("provider") or "").strip().lower()
    return (bool(provider) and provider != "auto") or any(str(slot.get(k) or "").strip()
                                                          for k in ("model", "base_url", "api_key"))


def _main_model(config: dict[str, Any]) -> bool:
    model = config.get("model")
    if isinstance(model, dict):
        name = model.get("default") or model.get("model") or model.get("name")
        return bool(str(model.get("provider") or "").strip() and str(name or "").strip())
    return bool(str(model or "").strip())


def triage_blocker(config: dict[str, Any]) -> str | None:
    """Why no triage card can leave triage (hermes's ``triage_aux_unavailable``), or None."""
    if not config:
        return None
    kanban = config.get("kanban") if isinstance(config.get("kanban"), dict) else {}
    aux = config.get("auxiliary") if isinstance(config.get("auxiliary"), dict) else {}
    auto = bool(kanban.get("auto_decompose", True))
    slot = "kanban_decomposer" if auto else "triage_specifier"
    if _slot_explicit(aux.get(slot)) or _main_model(config):
        return None
    return (f"no model can triage it: auxiliary.{slot} is not set and no main model is configured "
            f"(`hermes config set auxiliary.{slot}.provider ...` or set model)")


def profile_exists(root: Path, name: str) -> bool:
    return name == "default" or (Path(root) / "profiles" / name).is_dir()


def profiles(root: Path) -> list[tuple[str, Path]]:
    """hermes's profiles with their own homes (``profiles/<name>/``)."""
    try:
        entries = sorted(os.scandir(Path(root) / "profiles"), key=lambda e: e.name)
    except OSError:
        return []
    return [(e.name, Path(e.path)) for e in entries if e.is_dir(follow_symlinks=False)]


# --------------------------------------------------------------------------------------
# Reasons per card
# --------------------------------------------------------------------------------------


def _gave_up_words(payload: dict[str, Any]) -> str:
    failures, limit = payload.get("failures"), payload.get("effective_limit")
    source = {"task": "the card's max_retries", "dispatcher": "kanban.failure_limit"}.get(
        str(payload.get("limit_source")), "its limit")
    words = f"hermes gave up after {failures} failure(s) (limit {limit}, from {source})"
    if payload.get("error"):
        words += f": {payload['error']}"
    return words


def card_reasons(task: Task, last_event: Event | None, root: Path, config: dict[str, Any]) -> list[HermesReason]:
    """What keeps hermes from spawning ``task``: the latest guard or give-up event when
    nothing has happened to the card since, and the skips and diagnostics hermes's
    dispatcher would apply to it now."""
    out: list[HermesReason] = []
    kind = last_event.kind if last_event is not None else None
    payload = last_event.payload if last_event is not None and isinstance(last_event.payload, dict) else {}
    if task.status == "ready" and kind == "respawn_guarded":
        code = str(payload.get("reason") or "unknown")
        words = GUARD_WORDS.get(code, f"hermes's respawn guard: {code}")
        out.append(HermesReason(f"respawn_guarded:{code}", f"held back by hermes's respawn guard: {words}",
                                f"guarded: {GUARD_SHORT.get(code, code)}"))
    if task.status == "blocked" and kind == "gave_up":
        out.append(HermesReason("gave_up", _gave_up_words(payload), f"gave up after {payload.get('failures')}"))
    if task.status == "ready":
        kanban = config.get("kanban") if isinstance(config.get("kanban"), dict) else {}
        if not task.assignee and not kanban.get("default_assignee"):
            out.append(HermesReason("unassigned", "no assignee: hermes's dispatcher skips it (and "
                                                  "kanban.default_assignee is not set)", "not spawned: no assignee"))
        elif task.assignee and not profile_exists(root, task.assignee):
            out.append(HermesReason("no_profile", f"no hermes profile {task.assignee!r} (profiles/"
                                                  f"{task.assignee}/): hermes never spawns it", "not spawned: no profile"))
    if task.status == "triage":
        blocker = triage_blocker(config)
        if blocker is not None:
            out.append(HermesReason("triage_aux_unavailable", blocker, "triage: no model"))
    return out


# --------------------------------------------------------------------------------------
# The gateway (hermes's dispatcher)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatewayState:
    """Whether hermes's gateway runs, verified from its pid file."""

    running: bool
    pid: int | None
    words: str

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "pid": self.pid, "words": self.words}


def gateway_state(root: Path, config: dict[str, Any] | None = None) -> GatewayState:
    """Read ``gateway.pid`` and verify the pid it names (alive, not a zombie, its start
    ticks equal the recorded ``start_time``, its command line a gateway's)."""
    path = Path(root) / "gateway.pid"
    stopped = "ready cards wait until it runs (`hermes gateway start`)"
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_PID_FILE_BYTES)
    except FileNotFoundError:
        return GatewayState(False, None, f"hermes's gateway is not running (no gateway.pid): {stopped}")
    except OSError as exc:
        return GatewayState(False, None, f"hermes's gateway cannot be checked ({exc.strerror or exc}): {stopped}")
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        record = None
    if not isinstance(record, dict) or isinstance(record.get("pid"), bool) or not isinstance(record.get("pid"), int):
        return GatewayState(False, None, f"hermes's gateway is not verified running (gateway.pid holds no pid "
                                         f"with a start time): {stopped}")
    pid, start = record["pid"], record.get("start_time")
    if isinstance(start, bool) or not isinstance(start, int):
        return GatewayState(False, pid, f"hermes's gateway pid {pid} cannot be verified (no start time "
                                        f"recorded): {stopped}")
    stat = identity.read_stat(pid)
    if stat is None or stat.is_zombie or stat.start_ticks != start:
        return GatewayState(False, pid, f"hermes's gateway is not running (pid {pid} in gateway.pid has "
                                        f"{'exited' if stat is None or stat.is_zombie else 'been reused'}): {stopped}")
    if record.get("kind") not in (None, GATEWAY_KIND) or not _looks_like_gateway(pid):
        return GatewayState(False, pid, f"pid {pid} in gateway.pid is not hermes's gateway: {stopped}")
    kanban = (config or {}).get("kanban") if isinstance((config or {}).get("kanban"), dict) else {}
    if kanban.get("dispatch_in_gateway") is False:
        return GatewayState(True, pid, f"hermes's gateway runs (pid {pid}) but does not dispatch "
                                       "(kanban.dispatch_in_gateway: false)")
    return GatewayState(True, pid, f"hermes's gateway runs (pid {pid}) and dispatches")


def _looks_like_gateway(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read(64 * 1024).split(b"\0")
    except OSError:
        return False
    return b"gateway" in b" ".join(argv).lower()
