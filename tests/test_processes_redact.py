"""Secrets are masked in everything shown; the log file keeps the raw bytes."""

from __future__ import annotations

import pytest

from engine.processes.redact import MASK, redact, strip_ansi

SECRETS = [
    ("key sk-abcdefghijklmnopqrstuvwx12 end", "sk-abcdefghijklmnopqrstuvwx12"),
    ("sk-proj-AAAAbbbbCCCCddddEEEEffff", "AAAAbbbbCCCCddddEEEE"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ", "0123456789abcdefghij"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"),
    ("slack xoxb-123456789012-abcdefghijkl", "123456789012-abcdefghijkl"),
    ("aws AKIAIOSFODNN7EXAMPLE done", "IOSFODNN7EXAMPLE"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def-long-token", "eyJhbGciOiJIUzI1NiJ9"),
    ("curl -H 'Authorization: Bearer abcdef0123456789xyz'", "abcdef0123456789xyz"),
    ("password=hunter2hunter2", "hunter2hunter2"),
    ("DB_PASSWORD: 'swordfish!'", "swordfish!"),
    ("export API_KEY=\"12345abcdef\"", "12345abcdef"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\nxyz==\n-----END RSA PRIVATE KEY-----", "MIIEabc"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n(truncated", "b3BlbnNzaC1rZXk"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secret_shapes_are_masked(text, secret):
    out = redact(text)
    assert secret not in out
    assert MASK in out


@pytest.mark.parametrize("clean", [
    "build finished in 3.2s", "sk-short", "the skeleton key", "password policy updated",
    "ghp_ is a prefix", "12:30:01 INFO server listening on :8080",
])
def test_clean_text_is_untouched(clean):
    assert redact(clean) == clean


def test_auth_header_keeps_its_scheme():
    assert redact("Authorization: Bearer abcdef0123456789") == "Authorization: Bearer ***"


def test_redaction_is_idempotent():
    once = redact("password=abc123 and sk-abcdefghijklmnopqrstuvwx12")
    assert redact(once) == once


def test_strip_ansi():
    assert strip_ansi("\x1b[31mred\x1b[0m \x1b]0;title\x07ok") == "red ok"
