"""Masking secrets in text we show: notifications, poll previews, the output view.

The log file on disk keeps the raw bytes; only what is *displayed* is masked. The
shapes below are the common credential formats a command may print (API keys,
tokens, auth headers, ``password=...`` assignments and their JSON/YAML forms,
``--password x`` flags, credentials inside URLs, PEM private-key blocks). A mask
keeps a short prefix so the user can still tell which secret it was.

Every pattern is linear in the length of the line: a log line can be megabytes of
base64 without a newline, and a pattern that retries from every word boundary would
take minutes on it. Two rules keep that so:

- a pattern that must find something *after* a run of token characters starts only
  where such a run starts (a lookbehind on the run's characters), so each run is
  scanned from one place only, never again from each ``-`` inside it;
- runs are matched possessively or inside atomic groups, so a failed match gives up
  at once instead of backtracking through the run character by character.
"""

from __future__ import annotations

import re

from engine.text import escape_text

MASK = "***"

# Patterns are compiled when first needed, and a pattern is tried only on text that
# holds the literal every match of it contains: compiling all of them cost every CLI
# start-up ~3 ms, and a command line such as `make test` needs none of them.
_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(source: str) -> re.Pattern[str]:
    found = _compiled.get(source)
    if found is None:
        found = _compiled[source] = re.compile(source)
    return found


# Characters of a key, token or flag name (a "run").
_RUN = r"A-Za-z0-9_\-"
_RUN_START = rf"(?<![{_RUN}])"


def _word_starting(prefix: str, rest: str, before: str = "A-Za-z0-9_") -> tuple[str, str]:
    """(literal, pattern): ``prefix`` + ``rest`` where ``prefix`` starts a word (no
    ``before`` character in front of it). The literal comes first so the regex engine
    can jump from one occurrence of it to the next instead of trying the pattern at
    every position."""
    literal = re.escape(prefix)
    return prefix, f"{literal}(?<![{before}]{literal}){rest}"


# (a literal every match contains, pattern, how many leading characters of the match
# stay visible). Case-sensitive patterns: a text without the literal cannot match.
_TOKEN_SHAPES: tuple[tuple[str, str, int], ...] = tuple((*shape, keep) for shape, keep in (
    (_word_starting("sk-", r"(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}+"), 3),
    # Stripe secret (sk_live_) and restricted (rk_live_) keys; the match starts at "k_".
    (("k_", r"k_(?<![A-Za-z0-9_][sr]k_)(?<=[sr]k_)(?:live|test)_[A-Za-z0-9]{16,}+"), 7),
    (_word_starting("gh", r"[pousr]_[A-Za-z0-9]{20,}+"), 4),
    (_word_starting("github_pat_", r"[A-Za-z0-9_]{20,}+"), 11),
    (_word_starting("xox", r"[abposr]-[A-Za-z0-9\-]{10,}+"), 5),
    (_word_starting("A", r"(?:KIA|SIA)[0-9A-Z]{16}\b"), 4),
    (_word_starting("AIza", r"[0-9A-Za-z_\-]{35}\b"), 4),
    (_word_starting("glpat-", r"[A-Za-z0-9_\-]{20,}+"), 6),
    (_word_starting("hf_", r"[A-Za-z0-9]{30,}+"), 3),
    # JWT: three dot-separated parts, from the start of a run (see the module doc).
    (_word_starting("eyJ", rf"[{_RUN}]{{10,}}+\.[{_RUN}]{{10,}}+\.[{_RUN}]{{10,}}+", before=_RUN), 3),
))

# "Bearer <token>" / "Authorization: Basic <b64>": keep the scheme, mask the credential.
_AUTH_SCHEME = r"(?i)\b(bearer|basic|token)(\s++)([A-Za-z0-9_\-\.=:/+~]{8,}+)"

_SCHEMES = ("bearer", "basic", "token")

_SECRET_WORD = (
    r"(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|client[_\-]?secret|auth)"
)
# Every alternative of _SECRET_WORD contains one of these.
_SECRET_WORD_PARTS = ("passw", "pwd", "secret", "token", "key", "auth")

# A value after a key: a quoted string (quotes kept around the mask; a backslash-escaped
# quote inside it is part of it: "abc\"tail" is masked whole), the rest of the line when
# the separator is followed by a space or tab (``PASSWORD = spaced secret``, YAML's
# ``password: my secret``), or a bare word. A bare value never starts with "{" or "[":
# that is a nested JSON/YAML structure, not a secret (its own keys are looked at in turn).
# (A run of backslashes and the character after it are taken together: a quote behind
# them is inside the value also when the text was escaped once more, as a repr() of
# the line is: "abc\\"tail". That can run a value past its real end: more is masked.)
_QUOTED = r"\"(?P<dq>(?:[^\"\\\n]|\\++[^\n])++)\"|'(?P<sq>(?:[^'\\\n]|\\++[^\n])++)'"
_BARE = r"(?P<bare>[^\s\"'&;,{\[][^\s\"'&;,]*+)"
_VALUE = rf"(?:{_QUOTED}|(?P<line>(?<=[ \t])[^\s\"'{{\[][^\n]*+)|{_BARE})"
# A flag's value is one word (or quoted): ``--password x -u root`` keeps ``-u root``.
_FLAG_VALUE = rf"(?:{_QUOTED}|(?P<line>(?!))|{_BARE})"  # (no "line" value: it never matches)

# key=value, key: value, "key": "value" (JSON), key: value (YAML) where the key names a
# secret. The key is a whole run that contains a secret word.
_ASSIGNMENT = (
    rf"(?i){_RUN_START}(?P<key>(?>[{_RUN}]*?{_SECRET_WORD})[{_RUN}]*+)"
    rf"(?P<sep>[\"']?\s*+[=:]\s*+)"
    + _VALUE
)

# --password x / --api-key x / -token x (the "=" form is an assignment above).
_FLAG = rf"(?i)(?<![^\s\"'])(?P<key>--?(?>[{_RUN}]*?{_SECRET_WORD})[{_RUN}]*+)(?P<sep>[ \t]++)" + _FLAG_VALUE

# Flags that name where a secret is, not the secret: their value stays readable.
_FLAG_NOT_A_SECRET = r"(?i)[_\-](?:file|path|dir|env|var|name|id|type|length|len|url)$"

# scheme://user:password@host (postgres://, mysql://, https://, redis://, ...); the user
# may be empty (redis://:password@host).
_URL_CREDENTIALS = r"(?<![A-Za-z0-9+.\-])(?P<head>[A-Za-z][A-Za-z0-9+.\-]*+://[^\s:/@]*+:)(?P<pw>[^\s/@]++)@"

_PRIVATE_KEY_BLOCK = r"(?s)-----BEGIN ([A-Z0-9 ]{0,40}?)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)"


def _mask_keep(match: re.Match[str], keep: int) -> str:
    return match.group(0)[:keep] + MASK


def _may_hold(text: str, words: tuple[str, ...]) -> bool:
    """Could a case-insensitive pattern needing one of ``words`` match ``text``? For
    ASCII text exactly when its lower case holds one; other text is always tried
    (Unicode case folding lets e.g. U+212A KELVIN SIGN match "k")."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(w in lowered for w in words)


def redact(text: str) -> str:
    """``text`` with every recognised secret masked. Idempotent; linear in its length."""
    if not text:
        return text
    if "PRIVATE KEY-----" in text:
        text = _pattern(_PRIVATE_KEY_BLOCK).sub(lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY----- {MASK}", text)
    for literal, pattern, keep in _TOKEN_SHAPES:
        if literal in text:
            text = _pattern(pattern).sub(lambda m, k=keep: _mask_keep(m, k), text)
    if "://" in text:
        text = _pattern(_URL_CREDENTIALS).sub(_mask_url, text)
    if _may_hold(text, _SCHEMES):
        text = _pattern(_AUTH_SCHEME).sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    if _may_hold(text, _SECRET_WORD_PARTS):
        text = _pattern(_ASSIGNMENT).sub(_mask_value, text)
        if "-" in text:
            text = _pattern(_FLAG).sub(_mask_flag, text)
    return text


def _mask_url(m: re.Match[str]) -> str:
    return f"{m.group('head')}{MASK}@"


def _mask_value(m: re.Match[str]) -> str:
    """Mask the value of a key/value match, keeping the key, separator and quotes."""
    quoted = m.group("dq") if m.group("dq") is not None else m.group("sq")
    value = quoted if quoted is not None else (m.group("line") if m.group("line") is not None else m.group("bare"))
    if value == MASK or value.endswith(MASK) or value.lower() in _SCHEMES or (
            m.group("line") is not None and value.split(None, 1)[0].lower() in _SCHEMES):
        # "Authorization: Bearer ***" is already masked after the scheme word.
        return m.group(0)
    if quoted is not None:
        quote = '"' if m.group("dq") is not None else "'"
        return f"{m.group('key')}{m.group('sep')}{quote}{MASK}{quote}"
    return f"{m.group('key')}{m.group('sep')}{MASK}"


def _mask_flag(m: re.Match[str]) -> str:
    if _pattern(_FLAG_NOT_A_SECRET).search(m.group("key")):
        return m.group(0)
    return _mask_value(m)


def maybe_redact(text: str, enabled: bool) -> str:
    return redact(text) if enabled else text


# -- a big text, a piece at a time -----------------------------------------------------

STREAM_CHUNK_CHARS = 1 << 20  # what redact_stream masks at once (at least)
STREAM_MAX_LINE_CHARS = 8 << 20  # a line longer than this is cut at its last whitespace
_PEM_BEGIN = r"-----BEGIN ([A-Z0-9 ]{0,40}?)PRIVATE KEY-----"
# A text that ends like this may have its value on the next line ("password=\n  x").
_OPEN_ENDS = ("=", ":")


def redact_stream(pieces, enabled: bool = True):
    """:func:`redact` over a text given in pieces (a file read a block at a time),
    yielding the masked text in pieces; memory stays at a few chunks whatever the size.

    The text is masked a chunk of whole lines at a time, each cut at a newline that no
    pattern can cross: not after a line ending in ``=``, ``:`` or a scheme word, whose
    value may follow on the next line. A PEM private-key block that a cut leaves open is
    masked through its END line in the chunks after (as :func:`redact` masks it whole).
    Only a line longer than STREAM_MAX_LINE_CHARS is cut inside, at its last whitespace
    (a secret holds none); the result is then the same as masking it whole except for a
    match that would have crossed that cut."""
    carry = ""
    in_key: str | None = None  # the kind of an open private-key block ("RSA ")
    for piece in pieces:
        if not enabled:
            if piece:
                yield piece
            continue
        carry += piece
        if len(carry) < STREAM_CHUNK_CHARS:
            continue
        cut = _safe_cut(carry)
        if cut is None:
            if len(carry) < STREAM_MAX_LINE_CHARS:
                continue
            space = max(carry.rfind(" "), carry.rfind("\t"))
            cut = space + 1 if space > 0 else len(carry)
        out, in_key = _redact_part(carry[:cut], in_key)
        carry = carry[cut:]
        if out:
            yield out
    if carry:
        out, _ = _redact_part(carry, in_key)
        if out:
            yield out


def _safe_cut(text: str) -> int | None:
    """Just after the last newline of ``text`` that no pattern crosses; None: none."""
    end = len(text)
    for _ in range(64):
        p = text.rfind("\n", 0, end)
        if p < 0:
            return None
        before = text[max(0, p - 64):p].rstrip()
        if not (before.endswith(_OPEN_ENDS) or before.lower().endswith(_SCHEMES)):
            return p + 1
        end = p
    return None


def _redact_part(text: str, in_key: str | None) -> tuple[str, str | None]:
    """One chunk masked; ``in_key``: the kind of a private-key block left open by an
    earlier chunk, which runs on until its own END line (as in _PRIVATE_KEY_BLOCK).
    Returns the masked chunk and the kind of the block open at its end, if any."""
    if in_key is not None:
        end = text.find(f"-----END {in_key}PRIVATE KEY-----")
        if end < 0:
            return "", in_key
        text = text[end + len(f"-----END {in_key}PRIVATE KEY-----"):]
    open_kind = None
    if "PRIVATE KEY-----" in text:  # the blocks as redact() pairs them: each BEGIN with its own END
        pos = 0
        begin = _pattern(_PEM_BEGIN)
        while (m := begin.search(text, pos)) is not None:
            close = text.find(f"-----END {m.group(1)}PRIVATE KEY-----", m.end())
            if close < 0:
                open_kind = m.group(1)
                break
            pos = close + 1
    return redact(text), open_kind


def _is_secret_key(key: str) -> bool:
    return bool(_pattern(rf"(?i)[{_RUN}]*?{_SECRET_WORD}[{_RUN}]*+").fullmatch(key))


def redact_data(value, enabled: bool = True):
    """A JSON-like value (dicts, lists, strings) with every string :func:`redact`-ed and
    a string under a key that names a secret (``{"password": "x"}``) masked whole: what
    a ``--json`` document shows of outside text. Other values pass unchanged."""
    if not enabled:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: (MASK if isinstance(v, str) and v and isinstance(k, str) and _is_secret_key(k)
                    else redact_data(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


_ANSI = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"


def strip_ansi(text: str) -> str:
    """Drop terminal escape sequences (colours, cursor moves, titles)."""
    return _pattern(_ANSI).sub("", text) if "\x1b" in text else text


_SGR = r"(\x1b\[[0-9;:]*m)"


def keep_colours_only(text: str) -> str:
    """``text`` for a view that renders SGR colours: every other escape sequence is
    dropped (titles, clipboard writes, cursor moves, screen clears) and any control
    character left over is shown as a visible escape."""
    if "\x1b" in text:
        sgr = _pattern(_SGR)
        text = _pattern(_ANSI).sub(lambda m: m.group() if sgr.fullmatch(m.group()) else "", text)
        if "\x1b" in text:
            parts = sgr.split(text)  # odd items are the colour sequences themselves
            return "".join(p if i % 2 else escape_text(p, keep_lines=True) for i, p in enumerate(parts))
    return escape_text(text, keep_lines=True)
