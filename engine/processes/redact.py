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
    r"private[_\-]?key|client[_\-]?secret|auth|cookie)"
)
# Every alternative of _SECRET_WORD contains one of these.
_SECRET_WORD_PARTS = ("passw", "pwd", "secret", "token", "key", "auth", "cookie")

# A value after a key: a quoted string (quotes kept around the mask; a backslash-escaped
# quote inside it is part of it: "abc\"tail" is masked whole), the rest of the line when
# the separator is followed by a space or tab (``PASSWORD = spaced secret``, YAML's
# ``password: my secret``), or a bare word. A bare value never starts with "{" or "[":
# that is a nested JSON/YAML structure, not a secret (its own keys are looked at in turn).
# Inside quotes a backslash escapes the one character after it, as in JSON: "k\\" is the
# value k\ and ends there, so ``{"api_key":"k\\"}, "next": "visible"`` keeps "next"
# readable. A quote behind an even run of backslashes that is followed by more of the
# value (not by , ; : ) ] } & a space or the end) is taken as inside it: the line was
# escaped once more, as a repr() of it is ("abc\\"tail"), and the value runs on.
_QUOTED = (r"\"(?P<dq>(?:[^\"\\\n]|\\[^\n]|(?<=\\\\)\"(?=[^\s,;:)\]}&]))++)\"|"
           r"'(?P<sq>(?:[^'\\\n]|\\[^\n]|(?<=\\\\)'(?=[^\s,;:)\]}&]))++)'")
_BARE = r"(?P<bare>[^\s\"'&;,{\[][^\s\"'&;,]*+)"
# The "line" value of a key inside quotes ('Cookie: s=abc' in a curl command) ends at
# that quote: what follows the quote is not the value.
_VALUE = rf"(?:{_QUOTED}|(?P<line>(?<=[ \t])[^\s\"'{{\[][^\n]*+)|{_BARE})"
_VALUE_IN_DQ = rf"(?:{_QUOTED}|(?P<line>(?<=[ \t])[^\s\"'{{\[][^\n\"]*+)|{_BARE})"
_VALUE_IN_SQ = rf"(?:{_QUOTED}|(?P<line>(?<=[ \t])[^\s\"'{{\[][^\n']*+)|{_BARE})"
# A flag's value is one word (or quoted): ``--password x -u root`` keeps ``-u root``.
_FLAG_VALUE = rf"(?:{_QUOTED}|(?P<line>(?!))|{_BARE})"  # (no "line" value: it never matches)

# key=value, key: value, "key": "value" (JSON), key: value (YAML) where the key names a
# secret. The key is a whole run that contains a secret word (and is not one of the
# look-alikes of _is_secret_key); the value is matched after the key is judged, so a key
# that is no secret costs nothing more than itself.
_ASSIGNMENT_KEY = (
    rf"(?i){_RUN_START}(?P<key>(?>[{_RUN}]*?{_SECRET_WORD})[{_RUN}]*+)"
    rf"(?P<sep>[\"']?\s*+[=:]\s*+)"
)

# --password x / --api-key x / -token x (the "=" form is an assignment above).
_FLAG_KEY = rf"(?i)(?<![^\s\"'])(?P<key>--?(?>[{_RUN}]*?{_SECRET_WORD})[{_RUN}]*+)(?P<sep>[ \t]++)"

# A user:password pair given to curl (-u, --user; -U, --proxy-user) and the like. Its
# password is masked; a pair of numbers is a uid:gid (``docker run -u 1000:1000``).
_USER_FLAG = (
    r"(?<![^\s\"'])(?P<head>(?:-u|-U|--user|--proxy-user)(?:[ \t]++|=)"
    r"(?:(?P<q>[\"'])(?P<quser>[^\s:\"']*+):(?P<qpw>(?:(?!(?P=q))[^\n])++)(?P=q)"
    r"|(?P<user>[^\s:\"']*+):(?P<pw>[^\s\"']++)))"
)
_USER_FLAG_LITERALS = ("-u", "-U")

# What a key is when it holds a secret word and no secret: a count of tokens
# (max_tokens, promptTokens), an identifier (launch_token, page_token, token_id), where a
# secret is (token_file, secret_name), its kind or lifetime (token_type, token_expires),
# the shell's working directory (PWD), an author. Judged by the key's words (split at
# "_", "-" and camelCase).
_NOT_SECRET_LAST_WORDS = frozenset((
    "id", "ids", "name", "names", "file", "files", "path", "paths", "dir", "dirs", "env", "var", "vars",
    "url", "urls", "uri", "endpoint", "type", "types", "kind", "length", "len", "count", "counts", "size",
    "limit", "limits", "used", "usage", "expires", "expiry", "expiration", "ttl", "timeout", "seconds",
    "at", "time", "enabled", "disabled", "required", "policy", "reset", "mode", "format", "prefix",
    "domain", "samesite", "httponly", "age", "hint", "field", "fields", "rotation"
))
_NOT_SECRET_QUALIFIERS = frozenset((
    "max", "min", "num", "total", "launch", "page", "next", "continuation", "pagination", "cursor", "sync"
))
_LOOKALIKE_WORD = r"tokens|tokeni[sz]\w*|author(?!i[sz])\w*|secretar\w*"

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
    if any(f in text for f in _USER_FLAG_LITERALS) and ":" in text:
        text = _pattern(_USER_FLAG).sub(_mask_user_flag, text)
    if _may_hold(text, _SECRET_WORD_PARTS):
        text = _mask_keyed(text, True)
        if "-" in text:
            text = _mask_keyed(text, False)
    return text


def _mask_keyed(text: str, assignments: bool) -> str:
    """Every value after a key that names a secret masked (assignments, else flags).

    One ``sub`` of key, separator and value does it, unless a key that holds no secret
    took a value that may hold more (``max_tokens: 4096 password: x``: the rest of the
    line), or a value runs past the quote its key stands in: then :func:`_mask_keyed_slowly`
    judges each key before it matches the value."""
    redo = False

    def one(m: re.Match[str]) -> str:
        nonlocal redo
        key = m.group("key")
        if _is_secret_key(key):
            line = m.group("line")
            start = m.start()
            if line is not None and start and text[start - 1] in "\"'" and text[start - 1] in line:
                redo = True
                return m.group(0)
            return _masked(key, m.group("sep"), m, m.end("sep"))
        if _may_hold(m.group(0)[len(key):], _SECRET_WORD_PARTS):
            redo = True
        return m.group(0)

    masked = _pattern(_ASSIGNMENT_KEY + _VALUE if assignments else _FLAG_KEY + _FLAG_VALUE).sub(one, text)
    return _mask_keyed_slowly(text, assignments) if redo else masked


def _mask_keyed_slowly(text: str, assignments: bool) -> str:
    """:func:`_mask_keyed` one key at a time: the key and its separator are matched and
    judged (:func:`_is_secret_key`) first, and only then is the value matched there, so
    a key that holds no secret leaves the text after it to be looked at in turn, and a
    value inside quotes ends at its key's quote."""
    keys = _pattern(_ASSIGNMENT_KEY if assignments else _FLAG_KEY)
    quotes_bound = assignments
    out: list[str] = []
    pos = 0
    done = 0
    if quotes_bound:
        values = {'"': _pattern(_VALUE_IN_DQ), "'": _pattern(_VALUE_IN_SQ), "": _pattern(_VALUE)}
    else:
        values = dict.fromkeys(('"', "'", ""), _pattern(_FLAG_VALUE))
    search = keys.search
    while (m := search(text, pos)) is not None:
        start, pos = m.span()
        key = m.group("key")
        if not _is_secret_key(key):
            continue
        before = text[start - 1] if start else ""
        v = values.get(before, values[""]).match(text, pos)
        if v is None:
            continue
        out.append(text[done:start])
        out.append(_masked(key, m.group("sep"), v, pos))
        pos = done = v.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _mask_user_flag(m: re.Match[str]) -> str:
    if m.group("q") is not None:
        return f"{m.group('head')[:m.start('qpw') - m.start()]}{MASK}{m.group('q')}"
    user, pw = m.group("user"), m.group("pw")
    if (user.isdigit() and pw.isdigit()) or pw == MASK:  # uid:gid, or masked already
        return m.group(0)
    return f"{m.group('head')[:m.start('pw') - m.start()]}{MASK}"


def _mask_url(m: re.Match[str]) -> str:
    return f"{m.group('head')}{MASK}@"


def _masked(key: str, sep: str, v: re.Match[str], at: int) -> str:
    """The key, its separator and its value masked (quotes kept): ``v`` matched the
    value's groups, which starts at ``at`` and runs to its end."""
    quoted = v.group("dq") if v.group("dq") is not None else v.group("sq")
    value = quoted if quoted is not None else (v.group("line") if v.group("line") is not None else v.group("bare"))
    if value == MASK or value.endswith(MASK) or value.lower() in _SCHEMES or (
            v.group("line") is not None and value.split(None, 1)[0].lower() in _SCHEMES):
        # "Authorization: Bearer ***" is already masked after the scheme word.
        return f"{key}{sep}{v.string[at:v.end()]}"
    if quoted is not None:
        quote = '"' if v.group("dq") is not None else "'"
        return f"{key}{sep}{quote}{MASK}{quote}"
    return f"{key}{sep}{MASK}"


def maybe_redact(text: str, enabled: bool) -> str:
    return redact(text) if enabled else text


def shown(text: str, enabled: bool = True) -> str:
    """Outside text (an entry's name, a path, a reason quoting them) as a line shows it:
    secrets masked (when ``enabled``, the setting ``processes.redact``), then control
    characters escaped."""
    return escape_text(maybe_redact(text, enabled))


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


_secret_keys: dict[str, bool] = {}  # key -> _is_secret_key(key): a log repeats its keys


def _is_secret_key(key: str) -> bool:
    found = _secret_keys.get(key)
    if found is None:
        found = _judge_key(key)
        if len(_secret_keys) >= 4096:
            _secret_keys.clear()
        _secret_keys[key] = found
    return found


def _judge_key(key: str) -> bool:
    """Does ``key`` (a run, a flag, a JSON key) name a secret? It holds a secret word,
    outside the words that only look like one (tokens, tokenizer, author, secretary), and
    is not a count, identifier or description of one (see _NOT_SECRET_LAST_WORDS,
    _NOT_SECRET_QUALIFIERS): ``launch_token`` and ``max_tokens`` are no secrets."""
    if not _pattern(rf"(?i)[{_RUN}]*?{_SECRET_WORD}[{_RUN}]*+").fullmatch(key):
        return False
    words = [w for w in re.split(r"[_\-]+", _pattern(r"([a-z0-9])([A-Z])").sub(r"\1_\2", key).lower()) if w]
    if not words or words == ["pwd"] or words == ["oldpwd"]:  # the shell's working directory
        return False
    if words[-1] in _NOT_SECRET_LAST_WORDS or not _NOT_SECRET_QUALIFIERS.isdisjoint(words):
        return False
    lookalike = _pattern(_LOOKALIKE_WORD)
    rest = "_".join(w for w in words if not lookalike.fullmatch(w))
    return bool(rest) and _pattern(rf"(?i){_SECRET_WORD}").search(rest) is not None


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
