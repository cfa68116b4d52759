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


# -- the shapes added by issue 10 ------------------------------------------------------

NEW_SECRETS = [
    ('{"password": "my secret phrase", "user": "bob"}', "my secret phrase", '{"password": "***", "user": "bob"}'),
    ('{"api_key":"abc123def456"}', "abc123def456", '{"api_key":"***"}'),
    ("token: abcdef123456", "abcdef123456", "token: ***"),
    ('{"auth": {"token": "t0k3n"}}', "t0k3n", '{"auth": {"token": "***"}}'),
    ("  db_password: s3cr3t-value", "s3cr3t-value", "  db_password: ***"),
    ("postgres://app:hunter2@db.internal:5432/app", "hunter2", "postgres://app:***@db.internal:5432/app"),
    ("mysql://root:pa55@localhost/x", "pa55", "mysql://root:***@localhost/x"),
    ("fetch https://bob:tok3n@example.com/a", "tok3n", "fetch https://bob:***@example.com/a"),
    ("mysql --password hunter2 -u root", "hunter2", "mysql --password *** -u root"),
    ("tool --token abcdef --api-key 'k e y'", "abcdef", "tool --token *** --api-key '***'"),
    ("charge sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "charge sk_live_***"),
    ("rk_live_51HqLyjWDarjtT1zdp7dcXYZ ok", "51HqLyjWDarjtT1zdp7dcXYZ", "rk_live_*** ok"),
    ("xoxp-1234567890-abcdefghij", "1234567890-abcdefghij", "xoxp-***"),
    # issue 20: an escaped quote inside the value, an empty user, a spaced value to the line's end
    ('{"password": "abc\\"tail", "user": "bob"}', "tail", '{"password": "***", "user": "bob"}'),
    ("redis://:pass@host:6379/0", "pass@", "redis://:***@host:6379/0"),
    ("PASSWORD = spaced secret\nnext line", "spaced secret", "PASSWORD = ***\nnext line"),
    ("db_password: my secret phrase", "secret phrase", "db_password: ***"),
]


@pytest.mark.parametrize(("text", "secret", "shown"), NEW_SECRETS)
def test_json_yaml_url_flag_and_provider_secrets_are_masked(text, secret, shown):
    out = redact(text)
    assert secret not in out
    assert out == shown
    assert redact(out) == out


@pytest.mark.parametrize("clean", [
    "tool --token-file /etc/hermes/token", "see https://example.com/a:b@c", "password-reset page",
    "pk_live_publishable_key_is_public_0000", "unsk_live_abcdefghijklmnopqrstu",
])
def test_near_misses_of_the_new_shapes_stay_readable(clean):
    assert redact(clean) == clean


def test_pathological_lines_are_masked_linearly_and_correctly():
    """The old assignment pattern retried from every word boundary of a run: these
    lines took seconds to minutes. The result is asserted, not the time (a quadratic
    pattern makes this test run for minutes, which the suite's timeout reports)."""
    import base64

    repeated = "password-" * 4000
    assert redact(repeated) == repeated
    blob = base64.urlsafe_b64encode(bytes(range(256)) * 3073).decode()[: 1 << 20]
    assert len(blob) == 1 << 20
    assert redact(blob) == blob
    line = blob + " password=hunter2 " + "eyJ-" * 50_000
    assert redact(line) == blob + " password=*** " + "eyJ-" * 50_000
