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
from typing import TYPE_CHECKING, Any

# PyYAML (~10 ms to import) is loaded only when there is a file to parse: a home
# without config.yaml, and every caller that only reads the defaults, never pays for it.
if TYPE_CHECKING:
    import yaml


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


# --------------------------------------------------------------------------------------
# Settings (frozen dataclasses, one per section)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScratchSettings:
    idle_hours: float = 24.0
    quarantine_hours: float = 12.0
    auto_prune: bool = True
    kill_grace_seconds: float = 3.0


@dataclass(frozen=True)
class ProcessSettings:
    tail_bytes: int = 256 * 1024
    kill_grace_seconds: float = 2.0
    keep_finished_hours: float = 168.0
    max_finished: int = 200
    redact: bool = True
    shell: str = "/bin/sh"


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
    db: Path | None = None
    dispatch: bool = True
    dispatch_interval_seconds: float = 10.0
    max_in_progress: int = 4
    # None = key absent = any configured profile; () = explicitly none (fail closed).
    dispatch_profiles: tuple[str, ...] | None = None
    default_assignee: str | None = None
    claim_ttl_seconds: float = 900.0
    crash_grace_seconds: float = 30.0
    rate_limit_cooldown_seconds: float = 300.0
    failure_limit: int = 2
    terminal_worker_grace_seconds: float = 120.0
    profiles: Mapping[str, ProfileSettings] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class UiSettings:
    theme: str = "textual-dark"
    refresh_seconds: float = 1.0
    output_max_lines: int = 10_000
    notifications: bool = True


@dataclass(frozen=True)
class Settings:
    scratch: ScratchSettings = field(default_factory=ScratchSettings)
    processes: ProcessSettings = field(default_factory=ProcessSettings)
    kanban: KanbanSettings = field(default_factory=KanbanSettings)
    ui: UiSettings = field(default_factory=UiSettings)
    # binding id -> key(s), e.g. {"processes.background": "ctrl+g"}; validated against the
    # app's binding ids by the app layer (the engine does not know them).
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # binding id -> line in config.yaml, so the app can report an unknown id with its line.
    key_lines: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    source: Path | None = None



# --------------------------------------------------------------------------------------
# Value checkers: (value, dotted name) -> converted value, or raise _Bad("must be ...")
# --------------------------------------------------------------------------------------


class _Bad(Exception):
    pass


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def positive_number(value: Any) -> float:
    n = _num(value)
    if n is None or n <= 0:
        raise _Bad("must be a positive number")
    return n


def non_negative_number(value: Any) -> float:
    n = _num(value)
    if n is None or n < 0:
        raise _Bad("must be a number >= 0")
    return n


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _Bad("must be a positive integer")
    return value


def non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad("must be an integer >= 0")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("must be true or false")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad("must be a non-empty string")
    return value


def optional_text(value: Any) -> str | None:
    if value is None:
        return None
    return text(value)


def optional_path(value: Any) -> Path | None:
    if value is None:
        return None
    return Path(text(value)).expanduser()


def profile_list(value: Any) -> tuple[str, ...]:
    """A list of profile names or one comma-separated string; empty means none."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise _Bad("must be a list of profile names or a comma-separated string")


_SECTIONS: dict[str, tuple[type, dict[str, Callable[[Any], Any]]]] = {
    "scratch": (
        ScratchSettings,
        {
            "idle_hours": positive_number,
            "quarantine_hours": non_negative_number,
            "auto_prune": boolean,
            "kill_grace_seconds": positive_number,
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
        },
    ),
    "kanban": (
        KanbanSettings,
        {
            "db": optional_path,
            "dispatch": boolean,
            "dispatch_interval_seconds": positive_number,
            "max_in_progress": positive_int,
            "dispatch_profiles": profile_list,
            "default_assignee": optional_text,
            "claim_ttl_seconds": positive_number,
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
        return self.loader.construct_object(node, deep=True)

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
            raise self.fail(node, f"{dotted} {bad}, got {_show(raw)}") from None


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


def parse_config(text_: str, path: Path | str = "config.yaml") -> Settings:
    """Parse config text. Raises ConfigError with file:line on any problem."""
    import yaml

    path = Path(path)
    loader = yaml.SafeLoader(text_)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            problem = exc.problem or exc.context or "invalid YAML"
            if mark is None:
                raise ConfigError(path, None, problem) from None
            raise ConfigError(path, mark.line + 1, problem, column=mark.column + 1) from None
        except yaml.YAMLError as exc:
            raise ConfigError(path, None, f"invalid YAML: {exc}") from None
        if root is None:
            return Settings(source=path)
        reader = _Reader(path, loader)
        try:
            items = reader.mapping_items(root, "the top level")
        except ConfigError as exc:
            raise ConfigError(path, exc.line, "the top level must be a mapping of sections "
                              f"({', '.join(_SECTIONS)})") from None
        sections: dict[str, Any] = {}
        keys: dict[str, str] = {}
        key_lines: dict[str, int] = {}
        for section, key_node, value_node in items:
            if section not in _SECTIONS:
                raise reader.fail(key_node, f"unknown section '{section}' (known: {', '.join(_SECTIONS)})")
            cls, schema = _SECTIONS[section]
            if section == "keys":
                for bid, bkn, bvn in reader.mapping_items(value_node, "keys"):
                    raw = reader.value(bvn)
                    if not isinstance(raw, str) or not raw.strip():
                        raise reader.fail(bvn, f"keys.{bid} must be a key such as 'ctrl+b' "
                                          f"(several separated by commas), got {_show(raw)}")
                    keys[bid] = raw.strip()
                    key_lines[bid] = _line(bkn)
                continue
            values: dict[str, Any] = {}
            for key, kn, vn in reader.mapping_items(value_node, section):
                if key not in schema:
                    raise _unknown(reader, kn, key, section, list(schema))
                if section == "kanban" and key == "profiles":
                    values[key] = _read_profiles(reader, vn)
                else:
                    values[key] = reader.check(schema[key], vn, f"{section}.{key}")
            sections[section] = cls(**values)
        return Settings(
            **sections,
            keys=MappingProxyType(keys),
            key_lines=MappingProxyType(key_lines),
            source=path,
        )
    finally:
        loader.dispose()


def load_config(path: Path | str) -> Settings:
    """Read ``path``; a missing file means all defaults. Unreadable -> ConfigError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Settings(source=None)
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, expected a YAML file") from None
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text_ = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(path, line, "is not valid UTF-8") from None
    return parse_config(text_, path)
