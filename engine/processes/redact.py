"""Masking secrets in text we show: notifications, poll previews, the output view.

The log file on disk keeps the raw bytes; only what is *displayed* is masked. The
shapes below are the common credential formats a command may print (API keys,
tokens, auth headers, ``password=...`` assignments, PEM private-key blocks). A mask
keeps a short prefix so the user can still tell which secret it was.
"""

from __future__ import annotations

import re

MASK = "***"

# (pattern, how many leading characters of the match stay visible)
_TOKEN_SHAPES: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"), 3),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), 4),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), 11),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), 5),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 4),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), 4),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), 6),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 3),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"), 3),  # JWT
)

# "Bearer <token>" / "Authorization: Basic <b64>": keep the scheme, mask the credential.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9_\-\.=:/+~]{8,})")

# key=value / key: value where the key names a secret. Quotes are kept around the mask.
_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Za-z0-9_\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|client[_\-]?secret|auth)[A-Za-z0-9_\-]*)"
    r"(\s*[=:]\s*)([\"']?)([^\s\"'&;,]{1,})"
)

_SCHEMES = ("bearer", "basic", "token")

_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.DOTALL
)


def _mask_keep(match: re.Match[str], keep: int) -> str:
    return match.group(0)[:keep] + MASK


def redact(text: str) -> str:
    """``text`` with every recognised secret masked. Idempotent and cheap on clean text."""
    if not text:
        return text
    text = _PRIVATE_KEY_BLOCK.sub(lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY----- {MASK}", text)
    for pattern, keep in _TOKEN_SHAPES:
        text = pattern.sub(lambda m, k=keep: _mask_keep(m, k), text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _ASSIGNMENT.sub(_mask_assignment, text)
    return text


def _mask_assignment(m: re.Match[str]) -> str:
    value = m.group(4)
    if value == MASK or value.endswith(MASK) or value.lower() in _SCHEMES:
        # "Authorization: Bearer ***" is already masked after the scheme word.
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{m.group(3)}{MASK}"


def maybe_redact(text: str, enabled: bool) -> str:
    return redact(text) if enabled else text


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Drop terminal escape sequences (colours, cursor moves, titles)."""
    return _ANSI.sub("", text) if "\x1b" in text else text
