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


# -- issue 35.8: credentials given as a user:password pair or a cookie; a value's end; look-alikes --

PAIRS_AND_COOKIES = [
    ("curl -u admin:adminpw https://example.com", "adminpw", "curl -u admin:*** https://example.com"),
    ("curl --user admin:adminpw https://example.com", "adminpw", "curl --user admin:*** https://example.com"),
    ("curl --user=admin:adminpw", "adminpw", "curl --user=admin:***"),
    ("curl -u 'admin:my admin pw' x", "my admin pw", "curl -u 'admin:***' x"),
    ("curl -U proxy:pr0xypw -x http://p", "pr0xypw", "curl -U proxy:*** -x http://p"),
    ("Cookie: session=s3ss10n; theme=dark", "s3ss10n", "Cookie: ***"),
    ("Set-Cookie: sid=s3ss10n; Path=/; HttpOnly", "s3ss10n", "Set-Cookie: ***"),
    ("curl -H 'Cookie: session=s3ss10n' https://example.com", "s3ss10n",
     "curl -H 'Cookie: ***' https://example.com"),
    ('{"cookie": "session=s3ss10n"}', "s3ss10n", '{"cookie": "***"}'),
    ("curl --cookie session=s3ss10n https://example.com", "s3ss10n", "curl --cookie *** https://example.com"),
]


@pytest.mark.parametrize(("text", "secret", "shown"), PAIRS_AND_COOKIES)
def test_credentials_as_a_user_password_pair_or_a_cookie_are_masked(text, secret, shown):
    """Redaction (issue 35.8): curl's ``-u user:password`` and a ``Cookie:`` header were
    shown whole."""
    out = redact(text)
    assert secret not in out
    assert out == shown
    assert redact(out) == out


@pytest.mark.parametrize(("text", "shown"), [
    ('{"api_key":"k\\\\"}, "next": "visible"', '{"api_key":"***"}, "next": "visible"'),
    ("{'token': 'k\\\\'}, 'next': 'visible'", "{'token': '***'}, 'next': 'visible'"),
    ('{"password": "a\\\\\\\\", "user": "bob"}', '{"password": "***", "user": "bob"}'),
    # escaped once more (a repr() of a JSON line): the quote inside runs the value on
    ('"password": "abc\\\\"tail", "user": "bob"', '"password": "***", "user": "bob"'),
    ("curl -H 'X-Api-Key: k3y' https://example.com/visible", "curl -H 'X-Api-Key: ***' https://example.com/visible"),
])
def test_a_quoted_value_ends_where_it_ends_and_what_follows_stays_readable(text, shown):
    """Redaction over-masking (issue 35.8): a run of backslashes took the closing quote
    with it, so ``{"api_key":"k\\\\"}, "next": "visible"`` masked the text after the value;
    a header inside quotes masked the rest of the command line."""
    assert redact(text) == shown


@pytest.mark.parametrize("clean", [
    "launch_token=f00dfeed1234", '{"launch_token": "f00dfeed1234"}', "launchToken=f00dfeed1234",
    "max_tokens=4096", "prompt_tokens: 12", '{"usage": {"total_tokens": 99, "completion_tokens": 3}}',
    "tool --max-tokens 4096", "next_page_token=abc123", "token_type: refresh", "token_id=tok_42",
    "author: Jane Doe", "PWD=/home/me/project", "tokenizer: cl100k_base", "cookie_name=sid",
    "docker run -u 1000:1000 image", "git push -u origin main", "sort -u names.txt",
])
def test_keys_that_only_look_like_secrets_stay_readable(clean):
    """Redaction look-alikes (issues 34 "Words", 35.8): ``launch_token=***`` hid the
    dispatcher's launch id; token counts, ids, kinds, an author and $PWD are no secrets."""
    assert redact(clean) == clean


def test_a_key_that_holds_no_secret_leaves_the_rest_of_its_line_looked_at():
    assert redact("prompt_tokens: 12 password: hunter2") == "prompt_tokens: 12 password: ***"
    assert redact('{"launch_token": "t1", "password": "p4ss"}') == '{"launch_token": "t1", "password": "***"}'
    many = "max_tokens: " * 20000 + "password: x"
    assert redact(many) == "max_tokens: " * 20000 + "password: ***"


def test_json_documents_judge_their_keys_alike():
    from engine.processes.redact import redact_data

    data = {"launch_token": "f00d", "max_tokens": "4096", "cookie": "sid=1", "api_key": "k",
            "claim": {"launch_token": "f00d", "password": "p"}}
    assert redact_data(data) == {"launch_token": "f00d", "max_tokens": "4096", "cookie": MASK, "api_key": MASK,
                                 "claim": {"launch_token": "f00d", "password": MASK}}


def test_every_proc_surface_masks_the_pair_and_the_cookie_and_keeps_the_launch_token(home):
    """The shared redaction reaches the CLI's surfaces: ``proc log`` (text and --json),
    ``proc poll``'s preview and ``ps``'s command."""
    import json

    from tests.support.cli import run_cli

    env = {"HERMES_HOME": str(home.root)}
    script = ("echo launch_token=f00dfeed1234; echo 'curl -u admin:adminpw x'; "
              "echo 'Cookie: session=s3ss10n'")  # (ps shows the first 80 characters)
    sid = run_cli("run", "--bg", "--", script, env=env).stdout.strip()
    assert run_cli("proc", "wait", sid, "--timeout", "60", env=env).returncode == 0
    shown = {"log": run_cli("proc", "log", sid, env=env).stdout,
             "log --json": json.loads(run_cli("proc", "log", sid, "--json", env=env).stdout)["output"],
             "poll": run_cli("proc", "poll", sid, env=env).stdout,
             "ps": run_cli("ps", "--all", env=env).stdout}
    for where, text in shown.items():
        assert "adminpw" not in text and "s3ss10n" not in text, (where, text)
        assert "admin:***" in text and "launch_token=f00dfeed1234" in text, (where, text)
