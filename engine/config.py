"""``<home>/config.yaml`` -> typed, frozen settings.

Every key has a default, so a missing or empty file means "all defaults". Every
problem is reported as one line that names the file and the line (and column, for
YAML syntax), e.g. ``config.yaml:4: scratch.idle_hours must be a positive number,
got 'abc'``. Callers turn a :class:`ConfigError` into exit code 2.

The schema below is the single source of truth; ``docs/config.md`` documents it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from engine.hermes.config_keys import HERMES_KANBAN_KEYS, HERMES_SECTIONS

# PyYAML (~10 ms to import) is loaded only when there is a file to parse: a home
# without config.yaml, and every caller that only reads the defaults, never pays for it.
# typing is not imported at run time either (its import alone costs every CLI command
# a few ms); the annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import yaml

    from engine.kanban.backends.postgres.url import DatabaseUrl


class ConfigError(Exception):
    """One clear line: ``<file>:<line>[:<col>]: <what is wrong>``."""

    def __init__(self, path: Path | str, line: int | None, message: str, column: int | None = None):
        self.path = Path(path)
        self.line = line
        self.column = column
        self.message = message
        where = str(path)
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")


class ConfigDenied(ConfigError):
    """config.yaml may not be read by this user (another user's home, or a mode that
    shuts the user out): a failed operation (exit 1), as doctor says it, not bad input."""


# --------------------------------------------------------------------------------------
# Settings (frozen dataclasses, one per section)
# --------------------------------------------------------------------------------------


# Every settings class has a docstring: dataclass would otherwise write one with
# inspect.signature when this module is imported, which every command does.
@dataclass(frozen=True)
class ScratchSettings:
    """The ``scratch`` section: when an entry is idle, quarantined and pruned."""

    idle_hours: float = 24.0
    quarantine_hours: float = 12.0
    auto_prune: bool = True
    kill_grace_seconds: float = 3.0
    arrival_hours: float | None = None  # how long an entry's arrival counts as activity; None: idle_hours


@dataclass(frozen=True)
class ProcessSettings:
    """The ``processes`` section: process sessions, their output and their retention."""

    tail_bytes: int = 256 * 1024
    kill_grace_seconds: float = 2.0
    keep_finished_hours: float = 168.0
    max_finished: int = 200
    redact: bool = True
    shell: str = "/bin/sh"
    # A session's stored output is kept to about twice this: its head and its tail, with
    # a marker between (engine.processes.output_bound). 0: no bound.
    max_output_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class ProfileSettings:
    """A kanban worker profile: how a card assigned to ``name`` is worked."""

    name: str
    command: str
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    max_in_progress: int | None = None
    complete_on_exit: bool = False


@dataclass(frozen=True)
class KanbanSettings:
    """The ``kanban`` section: which board, how it is dispatched, the worker profiles."""

    db: Path | None = None
    # A PostgreSQL board (engine.kanban.backends.postgres.url.DatabaseUrl), or a path (an SQLite board
    # file, as ``db``); None keeps ``db``.
    database: DatabaseUrl | Path | None = None
    dispatch: bool = True
    dispatch_interval_seconds: float = 10.0
    max_in_progress: int = 4
    # None = key absent = any configured profile; () = explicitly none (fail closed).
    dispatch_profiles: tuple[str, ...] | None = None
    default_assignee: str | None = None
    claim_ttl_seconds: float = 900.0
    # A shared (PostgreSQL) board: a host whose dispatcher has not renewed its lease for
    # this long is taken for lost, and its running cards are reclaimed by another host.
    host_lease_seconds: float = 120.0
    crash_grace_seconds: float = 30.0
    rate_limit_cooldown_seconds: float = 300.0
    failure_limit: int = 2
    terminal_worker_grace_seconds: float = 120.0
    profiles: Mapping[str, ProfileSettings] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class UiSettings:
    """The ``ui`` section: the app's theme and refresh."""

    theme: str = "textual-dark"
    refresh_seconds: float = 1.0
    output_max_lines: int = 10_000
    notifications: bool = True


@dataclass(frozen=True)
class NotifySettings:
    """Notices of new attention items (engine/attention/notify.py)."""

    bell: bool = True
    terminal: str = "auto"  # auto, osc9, osc777, off
    desktop: bool = True
    command: str | None = None
    command_timeout_seconds: float = 10.0
    kinds: tuple[str, ...] = ("blocked", "gave_up", "session_failed", "host_lost")
    rate_limit_seconds: float = 30.0
    poll_seconds: float = 5.0  # how often `hermes-tui watch` looks again


@dataclass(frozen=True)
class Settings:
    """A home's settings, one field per section of its config."""

    scratch: ScratchSettings = field(default_factory=ScratchSettings)
    processes: ProcessSettings = field(default_factory=ProcessSettings)
    kanban: KanbanSettings = field(default_factory=KanbanSettings)
    ui: UiSettings = field(default_factory=UiSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)
    # binding id -> key(s), e.g. {"processes.background": "ctrl+g"}; validated against the
    # app's binding ids by the app layer (the engine does not know them).
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # binding id -> line in config.yaml, so the app can report an unknown id with its line.
    key_lines: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    source: Path | None = None
    # Top-level sections hermes-tui does not use (hermes-agent's, or another program's),
    # kept as (name, line) so doctor can list them as someone else's.
    foreign_sections: tuple[tuple[str, int], ...] = ()
    # Keys inside a shared section that hermes-agent defines and hermes-tui leaves to it,
    # e.g. "kanban.dispatch_in_gateway".
    hermes_keys: tuple[str, ...] = ()
    # Every "section.key" the file sets, so a caller can tell "set to the default" from
    # "not set" (scratch.auto_prune must be set explicitly in a guest home).
    explicit_keys: frozenset[str] = frozenset()

    def is_set(self, dotted: str) -> bool:
        """True when config.yaml sets ``dotted`` (e.g. "scratch.auto_prune") itself."""
        return dotted in self.explicit_keys



# --------------------------------------------------------------------------------------
# Value checkers: (value, dotted name) -> converted value, or raise _Bad("must be ...")
# --------------------------------------------------------------------------------------


class _Bad(Exception):
    """A value the schema refuses. ``shown`` replaces the value in the message when the
    value itself must not be printed (a database URL's password)."""

    def __init__(self, message: str, shown: str | None = None) -> None:
        super().__init__(message)
        self.shown = shown


# Bounds for every number in the schema: far above any sensible value, far below what
# would overflow a float, a C int or a timer.
MAX_NUMBER = 1e9
MAX_INT = 2**31 - 1

# Control characters no value may hold (tab, newline and carriage return are allowed in
# text a user types; a path or a name gets none at all).
_CONTROL = "".join(chr(c) for c in range(32) if chr(c) not in "\t\n\r") + "\x7f"


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        raise _Bad(f"must be at most {MAX_NUMBER:.0f}")
    if isinstance(value, (int, float)) and math.isfinite(value):
        if abs(value) > MAX_NUMBER:
            raise _Bad(f"must be at most {MAX_NUMBER:.0f}")
        return float(value)
    return None


def _bounded_int(value: Any, floor: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < floor:
        raise _Bad(what)
    if value > MAX_INT:
        raise _Bad(f"must be at most {MAX_INT}")
    return value


def _no_control(value: str, also: str = "") -> str:
    bad = next((ch for ch in value if ch in _CONTROL or ch in also), None)
    if bad is not None:
        raise _Bad(f"must not contain the control character {bad!r}")
    return value


def positive_number(value: Any) -> float:
    n = _num(value)
    if n is None or n <= 0:
        raise _Bad("must be a positive number")
    return n


def number_in(lo: float, hi: float, unit: str = "seconds") -> Callable[[Any], float]:
    """A number from ``lo`` to ``hi`` (a floor: a poll of 1e-7 s is a busy loop; a ceiling:
    a quit never waits days). The message names the range."""

    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not lo <= value <= hi:  # a NaN is in no range; a huge int compares exactly
            raise _Bad(f"must be a number of {unit} from {lo:g} to {hi:g}")
        return float(value)

    check.__name__ = f"number_in_{lo:g}_{hi:g}"
    return check


# The notifier's bounds (engine/attention/notify.py, hermes-tui watch).
POLL_SECONDS_RANGE = (0.1, 86400.0)
COMMAND_TIMEOUT_RANGE = (0.1, 3600.0)


def non_negative_number(value: Any) -> float:
    n = _num(value)
    if n is None or n < 0:
        raise _Bad("must be a number >= 0")
    return n


def byte_size(value: Any) -> int:
    from engine.text import parse_size

    if not isinstance(value, int | str):
        raise _Bad("must be a size in bytes, e.g. 67108864 or 64MiB")
    try:
        return parse_size(value)
    except ValueError as exc:
        raise _Bad(str(exc)) from None


def positive_int(value: Any) -> int:
    return _bounded_int(value, 1, "must be a positive integer")


def non_negative_int(value: Any) -> int:
    return _bounded_int(value, 0, "must be an integer >= 0")


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("must be true or false")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad("must be a non-empty string")
    return _no_control(value)


def optional_text(value: Any) -> str | None:
    """A string, or nothing: null and '' (hermes-agent writes ``default_assignee: ''``)."""
    if value is None or value == "":
        return None
    return text(value)


def optional_path(value: Any) -> Path | None:
    if value is None:
        return None
    return Path(_no_control(text(value), "\t\n\r")).expanduser()


def database_url(value: Any) -> DatabaseUrl | Path | None:
    """``postgresql://user@host:port/dbname`` (its password is never echoed back), or a
    path, which keeps an SQLite board."""
    from engine.kanban.backends.postgres.url import BadDatabaseUrl, DatabaseUrl, looks_like_url

    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Bad("must be a postgresql:// URL or a path")
    if "://" not in value:
        return optional_path(value)
    if not looks_like_url(value):
        raise _Bad("must be a postgresql:// URL or a path", shown="a URL of another kind")
    try:
        return DatabaseUrl.parse(value)
    except BadDatabaseUrl as exc:
        raise _Bad(str(exc), shown="a URL that is not usable") from None


def profile_list(value: Any) -> tuple[str, ...]:
    """A list of profile names or one comma-separated string; empty means none."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise _Bad("must be a list of profile names or a comma-separated string")


def terminal_notice(value: Any) -> str:
    if value is False:
        return "off"
    if isinstance(value, str) and value in ("auto", "osc9", "osc777", "off"):
        return value
    raise _Bad("must be one of auto, osc9, osc777, off")


def attention_kinds(value: Any) -> tuple[str, ...]:
    """A list of attention kinds (or one comma-separated string); empty: none notify."""
    from engine.attention.model import Kind

    if value is None:
        names: tuple[str, ...] = ()
    elif isinstance(value, str):
        names = tuple(p.strip() for p in value.split(",") if p.strip())
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = tuple(v.strip() for v in value if v.strip())
    else:
        raise _Bad("must be a list of attention kinds or a comma-separated string")
    known = [k.value for k in Kind]
    bad = [n for n in names if n not in known]
    if bad:
        raise _Bad(f"must list attention kinds ({', '.join(known)})", shown=repr(bad[0]))
    return names


_SECTIONS: dict[str, tuple[type, dict[str, Callable[[Any], Any]]]] = {
    "scratch": (
        ScratchSettings,
        {
            "idle_hours": positive_number,
            "quarantine_hours": non_negative_number,
            "auto_prune": boolean,
            "kill_grace_seconds": positive_number,
            "arrival_hours": non_negative_number,
        },
    ),
    "processes": (
        ProcessSettings,
        {
            "tail_bytes": positive_int,
            "kill_grace_seconds": positive_number,
            "keep_finished_hours": positive_number,
            "max_finished": non_negative_int,
            "redact": boolean,
            "shell": text,
            "max_output_bytes": byte_size,
        },
    ),
    "kanban": (
        KanbanSettings,
        {
            "db": optional_path,
            "database": database_url,
            "dispatch": boolean,
            "dispatch_interval_seconds": positive_number,
            "max_in_progress": positive_int,
            "dispatch_profiles": profile_list,
            "default_assignee": optional_text,
            "claim_ttl_seconds": positive_number,
            "host_lease_seconds": positive_number,
            "crash_grace_seconds": non_negative_number,
            "rate_limit_cooldown_seconds": non_negative_number,
            "failure_limit": positive_int,
            "terminal_worker_grace_seconds": non_negative_number,
            "profiles": None,  # special-cased: a mapping of profile mappings
        },
    ),
    "ui": (
        UiSettings,
        {
            "theme": text,
            "refresh_seconds": positive_number,
            "output_max_lines": positive_int,
            "notifications": boolean,
        },
    ),
    "notify": (
        NotifySettings,
        {
            "bell": boolean,
            "terminal": terminal_notice,
            "desktop": boolean,
            "command": optional_text,
            "command_timeout_seconds": number_in(*COMMAND_TIMEOUT_RANGE),
            "kinds": attention_kinds,
            "rate_limit_seconds": non_negative_number,
            "poll_seconds": number_in(*POLL_SECONDS_RANGE),
        },
    ),
    "keys": (dict, {}),  # special-cased: binding id -> key string
}

_PROFILE_KEYS: dict[str, Callable[[Any], Any]] = {
    "command": text,
    "env": None,  # special-cased: mapping of str -> scalar
    "max_in_progress": positive_int,
    "complete_on_exit": boolean,
}

# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return repr(value)


class _Reader:
    def __init__(self, path: Path, loader: yaml.SafeLoader):
        self.path = path
        self.loader = loader

    def fail(self, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(self.path, _line(node), message)

    def value(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except ValueError:  # an integer over Python's 4,300-digit limit (int() refuses it)
            raise self.fail(node, "a number too long to read (more than 4300 digits)") from None

    def mapping_items(self, node: yaml.Node, where: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        import yaml

        if isinstance(node, yaml.ScalarNode) and self.value(node) is None:
            return []  # "scratch:" with nothing under it
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{where} must be a mapping, got {_show(self.value(node))}")
        items = []
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str):
                raise self.fail(key_node, f"keys in {where} must be strings, got {_show(key)}")
            if key in seen:
                raise self.fail(key_node, f"duplicate key '{key}' in {where} (first on line {seen[key]})")
            seen[key] = _line(key_node)
            items.append((key, key_node, value_node))
        return items

    def check(self, checker: Callable[[Any], Any], node: yaml.Node, dotted: str) -> Any:
        raw = self.value(node)
        try:
            return checker(raw)
        except _Bad as bad:
            got = bad.shown if bad.shown is not None else _show(raw)
            raise self.fail(node, f"{dotted} {bad}, got {got}") from None


def _unknown(reader: _Reader, key_node: yaml.Node, key: str, where: str, known: list[str]) -> ConfigError:
    return reader.fail(key_node, f"unknown key '{key}' in '{where}' (known: {', '.join(known)})")


def _read_profiles(reader: _Reader, node: yaml.Node) -> Mapping[str, ProfileSettings]:
    import yaml

    profiles: dict[str, ProfileSettings] = {}
    for name, name_node, value_node in reader.mapping_items(node, "kanban.profiles"):
        where = f"kanban.profiles.{name}"
        if isinstance(value_node, yaml.ScalarNode) and isinstance(reader.value(value_node), str):
            # Short form: "name: some command"
            profiles[name] = ProfileSettings(name=name, command=reader.check(text, value_node, where))
            continue
        values: dict[str, Any] = {}
        for key, key_node, vnode in reader.mapping_items(value_node, where):
            if key not in _PROFILE_KEYS:
                raise _unknown(reader, key_node, key, where, list(_PROFILE_KEYS))
            if key == "env":
                env: dict[str, str] = {}
                for ename, _ekn, evn in reader.mapping_items(vnode, f"{where}.env"):
                    raw = reader.value(evn)
                    if isinstance(raw, (dict, list)) or raw is None:
                        raise reader.fail(evn, f"{where}.env.{ename} must be a string, got {_show(raw)}")
                    env[ename] = raw if isinstance(raw, str) else _show(raw)
                values["env"] = MappingProxyType(env)
            else:
                values[key] = reader.check(_PROFILE_KEYS[key], vnode, f"{where}.{key}")
        if "command" not in values:
            raise reader.fail(name_node, f"{where} needs a 'command'")
        profiles[name] = ProfileSettings(name=name, **values)
    return MappingProxyType(profiles)


# Limits checked before and while parsing, so any file answers within a second with
# one line: hermes-agent's own full config is ~20 KiB, ~2,000 values, 5 levels deep.
MAX_CONFIG_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_VALUES = 50_000

# The only tags a value may carry: the ones YAML gives plain text by itself. Anything
# else (``!foo``, ``!!python/object/...``, ``!!binary``, ``!!set``) is refused.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
)


def _check_characters(text_: str, path: Path) -> None:
    """No NUL or other control character anywhere in the file (tab and newlines aside)."""
    for lineno, line in enumerate(text_.split("\n"), start=1):
        bad = next((ch for ch in line if ch in _CONTROL and ch != "\t"), None)
        if bad is not None:
            raise ConfigError(path, lineno, f"contains the control character {bad!r}; "
                              "config.yaml must be plain text")


def _check_tree(root: yaml.Node, path: Path) -> None:
    """Walk the composed nodes (without recursion): refuse tags, too deep nesting and
    too many values (which is also how an alias bomb shows itself)."""
    import yaml

    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(path, _line(node), f"holds more than {MAX_VALUES} values; refusing to read further")
        if depth > MAX_DEPTH:
            raise ConfigError(path, _line(node), f"is nested more than {MAX_DEPTH} levels deep")
        if node.tag not in _PLAIN_TAGS:
            raise ConfigError(path, _line(node), f"the YAML tag {node.tag!r} is not allowed; "
                              "write plain values")
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                stack.append((key_node, depth + 1))
                stack.append((value_node, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def _compose(text_: str, path: Path) -> tuple[Any, yaml.Node | None]:
    """(loader, root node) with every YAML problem turned into one ConfigError line."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: fast, no recursion
    loader = loader_class(text_)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        loader.dispose()
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is None:
            raise ConfigError(path, None, problem) from None
        raise ConfigError(path, mark.line + 1, problem, column=mark.column + 1) from None
    except RecursionError:
        loader.dispose()
        line = getattr(loader, "line", None)
        raise ConfigError(path, None if line is None else line + 1,
                          f"is nested more than {MAX_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        loader.dispose()
        raise ConfigError(path, None, f"invalid YAML: {exc}") from None
    return loader, root


def _close_section_name(name: str) -> str | None:
    import difflib

    ours = [s for s in _SECTIONS]
    match = difflib.get_close_matches(name, ours, n=1, cutoff=0.75)
    return match[0] if match else None


def _read_foreign_section(reader: _Reader, name: str, key_node: yaml.Node) -> tuple[str, int]:
    """A top-level section hermes-tui does not use: someone else's, unless it looks
    like a misspelling of one of ours (then it is the error it always was)."""
    if name not in HERMES_SECTIONS:
        near = _close_section_name(name)
        if near is not None:
            raise reader.fail(key_node, f"unknown section '{name}' (did you mean '{near}'? "
                              f"hermes-tui's sections: {', '.join(_SECTIONS)})")
    return name, _line(key_node)


def _read_section(reader: _Reader, section: str, value_node: yaml.Node, explicit: set[str],
                  hermes_keys: list[str]) -> Any:
    """One of hermes-tui's sections -> its settings object; hermes-agent's keys in a
    shared section are accepted (honoured where they mean the same, else kept for it)."""
    cls, schema = _SECTIONS[section]
    values: dict[str, Any] = {}
    for key, kn, vn in reader.mapping_items(value_node, section):
        if key not in schema:
            if section == "kanban" and key in HERMES_KANBAN_KEYS:
                hermes_keys.append(f"kanban.{key}")
                continue
            raise _unknown(reader, kn, key, section, list(schema))
        explicit.add(f"{section}.{key}")
        if section == "kanban" and key == "profiles":
            values[key] = _read_profiles(reader, vn)
        else:
            values[key] = reader.check(schema[key], vn, f"{section}.{key}")
    return cls(**values)


def _read_keys(reader: _Reader, value_node: yaml.Node) -> tuple[dict[str, str], dict[str, int]]:
    keys: dict[str, str] = {}
    key_lines: dict[str, int] = {}
    for bid, bkn, bvn in reader.mapping_items(value_node, "keys"):
        raw = reader.value(bvn)
        if not isinstance(raw, str) or not raw.strip():
            raise reader.fail(bvn, f"keys.{bid} must be a key such as 'ctrl+b' "
                              f"(several separated by commas), got {_show(raw)}")
        keys[bid] = reader.check(text, bvn, f"keys.{bid}").strip()
        key_lines[bid] = _line(bkn)
    return keys, key_lines


def parse_config(text_: str, path: Path | str = "config.yaml") -> Settings:
    """Parse config text. Raises ConfigError with file:line on any problem."""
    path = Path(path)
    if len(text_) > MAX_CONFIG_BYTES:
        raise ConfigError(path, None, f"is {len(text_)} characters long; config.yaml may hold at most "
                          f"{MAX_CONFIG_BYTES // 1024} KiB")
    _check_characters(text_, path)
    loader, root = _compose(text_, path)
    try:
        if root is None:
            return Settings(source=path)
        _check_tree(root, path)
        reader = _Reader(path, loader)
        try:
            items = reader.mapping_items(root, "the top level")
        except ConfigError as exc:
            raise ConfigError(path, exc.line, "the top level must be a mapping of sections "
                              f"({', '.join(_SECTIONS)})") from None
        sections: dict[str, Any] = {}
        keys: dict[str, str] = {}
        key_lines: dict[str, int] = {}
        foreign: list[tuple[str, int]] = []
        explicit: set[str] = set()
        hermes_keys: list[str] = []
        for section, key_node, value_node in items:
            if section not in _SECTIONS:
                foreign.append(_read_foreign_section(reader, section, key_node))
            elif section == "keys":
                keys, key_lines = _read_keys(reader, value_node)
            else:
                sections[section] = _read_section(reader, section, value_node, explicit, hermes_keys)
        return Settings(
            **sections,
            keys=MappingProxyType(keys),
            key_lines=MappingProxyType(key_lines),
            source=path,
            foreign_sections=tuple(foreign),
            hermes_keys=tuple(hermes_keys),
            explicit_keys=frozenset(explicit),
        )
    finally:
        loader.dispose()


def load_config(path: Path | str) -> Settings:
    """Read ``path``; a missing file means all defaults. Unreadable -> ConfigError."""
    from engine.regular_file import read_regular

    path = Path(path)
    try:
        data = read_regular(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return Settings(source=None)
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, expected a YAML file") from None
    except PermissionError as exc:
        raise ConfigDenied(path, None, f"cannot read: {exc.strerror or exc}") from None
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(path, None, f"is larger than {MAX_CONFIG_BYTES // 1024} KiB; "
                          "config.yaml may hold at most that")
    try:
        text_ = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(path, line, "is not valid UTF-8") from None
    return parse_config(text_, path)
