"""A PostgreSQL board's address. The password in it is a secret: everything that may be
shown (doctor, errors, ``--json``, the window title) uses :attr:`DatabaseUrl.shown`."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

SCHEMES = ("postgresql", "postgres")


class BadDatabaseUrl(ValueError):
    """Not a usable ``postgresql://`` URL: the message never holds the password."""


def looks_like_url(text: str | None) -> bool:
    """Whether a ``--db`` value, a variable or a config value names a server, not a file."""
    if not text:
        return False
    scheme = str(text).split(":", 1)[0].lower()
    return "://" in str(text) and scheme in SCHEMES


def _without_password(parts: urllib.parse.SplitResult) -> str:
    netloc = parts.hostname or ""
    if parts.hostname and ":" in parts.hostname:
        netloc = f"[{parts.hostname}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        netloc += f":{port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    query = "&".join(pair for pair in parts.query.split("&") if not pair.lower().startswith("password="))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


_USERINFO_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^@/?#:]*):[^/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def _cut_password(raw: str) -> str:
    """A URL that could not even be split, shown without what may be its password
    (``user:secret@``, ``password=``); control characters escaped."""
    shown = _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1:***@", raw))
    return "".join(c if ord(c) >= 32 and ord(c) != 127 else f"\\x{ord(c):02x}" for c in shown)


@dataclass(frozen=True)
class DatabaseUrl:
    """``postgresql://user[:password]@host[:port]/dbname[?sslmode=...]``.

    ``str()`` of it is the shown form (no password), so an f-string in an error message
    cannot leak the secret by accident; :attr:`secret` is for the driver and for the
    environment of the workers this home starts."""

    secret: str = field(repr=False)
    shown: str

    @classmethod
    def parse(cls, text: str) -> DatabaseUrl:
        raw = str(text).strip()
        try:
            parts = urllib.parse.urlsplit(raw)
        except ValueError as exc:  # "Invalid IPv6 URL": a bracket left open, ...
            raise BadDatabaseUrl(f"cannot be read ({exc}): {_cut_password(raw)}") from None
        if parts.scheme.lower() not in SCHEMES:
            raise BadDatabaseUrl("must start with postgresql://")
        shown = _without_password(parts)
        try:
            _ = parts.port
        except ValueError:
            raise BadDatabaseUrl(f"has a port that is not a number: {shown}") from None
        if not parts.hostname and "host=" not in parts.query:
            raise BadDatabaseUrl(f"names no server: {shown} (postgresql://user@host:port/dbname)")
        if not parts.path.strip("/"):
            raise BadDatabaseUrl(f"names no database: {shown} (postgresql://user@host:port/dbname)")
        if any(ord(c) < 32 for c in raw):
            raise BadDatabaseUrl(f"holds a control character: {shown!r}")
        return cls(secret=raw, shown=shown)

    @property
    def password(self) -> str | None:
        parts = urllib.parse.urlsplit(self.secret)
        found = parts.password
        for pair in parts.query.split("&"):
            if pair.lower().startswith("password="):
                found = urllib.parse.unquote(pair.split("=", 1)[1])
        return found or None

    def scrub(self, message: str) -> str:
        """A driver's message with the password (raw or URL-quoted) cut out."""
        password = self.password
        if not password:
            return message
        for form in {password, urllib.parse.quote(password, safe=""), urllib.parse.quote(password)}:
            message = message.replace(form, "***")
        return message

    def __str__(self) -> str:
        return self.shown
