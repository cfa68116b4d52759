"""``proc log ID --json`` streams its document (issue 20): the same JSON as before,
masked the same way, in memory that does not grow with the output (it held about 14x
the output: 1 GB of output ran out of memory)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from engine.config import Settings
from engine.processes import ProcessRegistry
from engine.processes import redact as redact_mod
from engine.processes.redact import redact, redact_stream

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretbody\nmore==\n-----END RSA PRIVATE KEY-----\n"
CORPUS = ("build step 1\npassword=hunter2hunter2 ok\nDB_PASSWORD:\n  s3cr3tvalue\n" + PEM
          + "Authorization: Bearer\n abcdefghij0123456789\nPASSWORD = spaced secret\n"
          + "token ghp_0123456789abcdefghijABCDEFGHIJ\nredis://:p4ss@host\n" + "plain line\n" * 40
          + "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nstill key\n")


@pytest.mark.parametrize("seed", range(20))
def test_masking_in_pieces_equals_masking_the_whole(monkeypatch, seed):
    """Cut into random pieces and masked a few lines at a time, the text comes out as
    :func:`redact` makes of it whole: no cut falls where a pattern crosses lines."""
    monkeypatch.setattr(redact_mod, "STREAM_CHUNK_CHARS", 40)  # a cut every few lines
    rnd = random.Random(seed)
    text = CORPUS * 3
    pieces, i = [], 0
    while i < len(text):
        n = rnd.randint(1, 90)
        pieces.append(text[i:i + n])
        i += n
    assert "".join(redact_stream(pieces)) == redact(text)
    assert "".join(redact_stream(pieces, enabled=False)) == text


def _session_with_output(home, command: str):
    reg = ProcessRegistry(home, Settings())
    s = reg.spawn(command, cwd=home.root, owner="test")
    return reg.wait(s.id, timeout=120)


def _proc_log_json(home, sid: str) -> tuple[bytes, int]:
    """(stdout, peak RSS in KiB) of ``hermes-tui proc log SID --json``, measured by the
    kernel for that child alone (wait4)."""
    env = {**os.environ, "HERMES_AUTO_PRUNE": "0"}
    env.pop("HERMES_HOME", None)
    out_path = home.root / f"doc-{sid}.json"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "proc", "log", sid,
                                 "--json"], stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return out_path.read_bytes(), usage.ru_maxrss


def test_the_document_is_what_it_was(home):
    s = _session_with_output(home, "printf 'line one\\npassword=hunter2hunter2\\n\\377 not utf-8\\n'")
    doc, _ = _proc_log_json(home, s.id)
    raw = s.output_path.read_bytes()
    expected = {"id": s.id, "output": redact(raw.decode("utf-8", errors="replace")), "total_bytes": len(raw),
                "cut_bytes": 0}
    assert json.loads(doc) == expected
    assert doc.decode() == json.dumps(expected, indent=2) + "\n"  # byte for byte what print_json wrote


@pytest.mark.slow
def test_memory_stays_flat_on_a_big_output(home):
    """64 MiB of output (with a secret on every line): the command's peak RSS stays within
    32 MiB of what the same command takes for a tiny output, where holding the output
    whole took about 14 times its size."""
    small = _session_with_output(home, "echo hello")
    _, baseline_kib = _proc_log_json(home, small.id)
    big = _session_with_output(home, "yes 'compiling module, password=hunter2hunter2 done' | head -c 67108864")
    assert os.path.getsize(big.output_path) == 64 << 20
    doc, peak_kib = _proc_log_json(home, big.id)
    print(f"peak RSS {peak_kib} KiB, baseline {baseline_kib} KiB")
    assert peak_kib - baseline_kib < 32 * 1024, (baseline_kib, peak_kib)
    parsed = json.loads(doc)
    assert parsed["total_bytes"] == 64 << 20 and "hunter2" not in parsed["output"]
    assert parsed["output"].count("password=***") == (64 << 20) // len("compiling module, password=hunter2hunter2 done\n")
