"""Plain-text phrasing shared by the CLI and the widgets: sizes, durations, times,
shortened lines and names made safe to show. The one home of these: no Textual and no
Rich here, so the CLI prints these strings as they are, and a widget wraps them in
``rich.text.Text`` itself."""

from __future__ import annotations

import re
import time

ELLIPSIS = "\u2026"


def human_bytes(n: int | float | None) -> str:
    """'512 B', '1.5 KiB', '3.2 GiB'; '?' for an unknown size."""
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30}


def parse_size(text: str | int) -> int:
    """Bytes from ``512``, ``64MiB``, ``1.5 GiB``, ``500k`` (k/m/g and KiB/MiB/GiB are powers
    of 1024, KB/MB/GB of 1000). Raises ValueError with the words to show."""
    if isinstance(text, bool):
        raise ValueError("must be a size in bytes, e.g. 1048576 or 64MiB")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("must be a size >= 0")
        return text
    raw = str(text).strip().lower().replace(" ", "")
    digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(digits):]
    if unit not in _SIZE_UNITS or not digits or len(digits) > 30:
        raise ValueError("must be a size in bytes, e.g. 1048576 or 64MiB")
    try:
        value = float(digits)
    except ValueError:
        raise ValueError("must be a size in bytes, e.g. 1048576 or 64MiB") from None
    if value < 0 or value != value or value * _SIZE_UNITS[unit] >= 1 << 62:
        raise ValueError("must be a size >= 0 and below 4 EiB")
    return int(value * _SIZE_UNITS[unit])


def human_duration(seconds: float | None) -> str:
    """Compact age: '42s', '5m 3s', '3h 4m', '3d 4h'; '?' for an unknown one."""
    if seconds is None:
        return "?"
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d {h}h" if h else f"{d}d"


def coarse_duration(seconds: float | None) -> str:
    """An age that changes at most once a minute past its first minute: '42s', '5m',
    '3h 4m', '3d 4h' (a table that shows it is not redrawn every second for it)."""
    if seconds is not None and seconds >= 60:
        seconds = seconds // 60 * 60
    return human_duration(seconds)


def local_time(ts: float | None) -> str:
    """An epoch time as local ``YYYY-MM-DD HH:MM:SS``; '-' for none."""
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def count_of(n: int, noun: str, plural: str | None = None) -> str:
    """'1 card', '2 cards', '0 cards' (``plural`` for a noun that takes more than an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def ellipsize(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis when
    anything was left out."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def one_line(text: str, limit: int) -> str:
    """``text`` with every run of whitespace (newlines too) as one space, then
    :func:`ellipsize`d: a command or output line as a one-line summary shows it."""
    return ellipsize(" ".join(text.split()), limit)


# C0 controls but newline and tab, DEL, and the C1 controls: on a terminal each can act
# (start a sequence, ring the bell, move the cursor) instead of being shown. And lone
# surrogates: a byte that is not UTF-8, decoded with surrogateescape (U+DC80-U+DCFF), would
# reach the terminal as that raw byte (0x9b is a CSI to a terminal in 8-bit mode).
_CONTROLS_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape_one(m: re.Match[str]) -> str:
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:
        return f"\\x{c - 0xDC00:02x}"  # the byte surrogateescape stands for
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_text(text: str, *, keep_lines: bool = False) -> str:
    r"""Outside text (a name, a path, a reason, a command, a process's output) as a terminal
    or a log may show it: never acted on. The one escape of the code base.

    By default every control character, lone surrogate and other unprintable character is
    written as its Python escape (``\n``, ``\x1b``, ``\udcff``, and a backslash doubled),
    so one line stays one line and the text can be read back exactly (the audit log).
    ``keep_lines``: a block of output, whose newlines and tabs are kept and whose other
    control characters are written as ``\x1b`` (a byte that is not UTF-8, decoded with
    surrogateescape, as ``\xff``); the rest, backslashes too, unchanged."""
    text = str(text)
    if keep_lines:
        return _CONTROLS_BUT_LINES.sub(_escape_one, text)
    if text.isprintable():
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    return repr(text)[1:-1]
