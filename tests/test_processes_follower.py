"""The byte-offset follower and the bounded tail: split characters, shrinking files,
no re-reads."""

from __future__ import annotations

from engine.processes import ProcessRegistry
from engine.processes.follower import OutputFollower, read_tail
from tests.support import wait_until


def test_multibyte_char_split_across_two_writes_with_a_pause(home, settings, tmp_path):
    reg = ProcessRegistry(home, settings)
    # é is \303\251; the emoji 😀 is \360\237\230\200, split 1+3. Each part is written
    # only once the test has read the one before (gate files), so every split is read.
    first, second = tmp_path / "first", tmp_path / "second"
    s = reg.spawn(f"printf '\\303'; while [ ! -e '{first}' ]; do sleep 0.01; done; printf '\\251 \\360'; "
                  f"while [ ! -e '{second}' ]; do sleep 0.01; done; printf '\\237\\230\\200 end\\n'")
    f = OutputFollower(s.output_path)
    pieces = []

    def read_to(text: str, pending: int) -> bool:
        pieces.append(f.read().text)
        assert (f.offset - f.delivered_offset) <= 3
        return "".join(pieces) == text and (f.offset - f.delivered_offset) == pending

    wait_until(lambda: read_to("", 1), what="the first byte of é held back")
    first.touch()
    wait_until(lambda: read_to("é ", 1), what="é, and the first byte of the emoji held back")
    second.touch()
    wait_until(lambda: read_to("é 😀 end\n", 0), what="the whole text")
    assert reg.wait(s.id, timeout=30).finished
    pieces.append(f.read().text)
    text = "".join(pieces)
    assert text == "é 😀 end\n"
    assert "\ufffd" not in text
    assert f.bytes_read == len("é 😀 end\n".encode())  # every byte read exactly once


def test_held_back_bytes_are_delivered_once_complete(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"ab\xe2\x82")
    f = OutputFollower(path)
    first = f.read()
    assert first.text == "ab" and (f.offset - f.delivered_offset) == 2 and f.delivered_offset == 2
    with open(path, "ab") as fh:
        fh.write(b"\xac!")
    assert f.read().text == "€!"
    assert f.read().text == ""
    assert f.bytes_read == 6


def test_a_file_that_shrank_restarts_at_zero(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"first line\nsecond line\n")
    f = OutputFollower(path)
    assert f.read().text == "first line\nsecond line\n"
    path.write_bytes(b"new\n")  # truncated and rewritten in place
    chunk = f.read()
    assert chunk.reset and chunk.text == "new\n" and chunk.offset == 4


def test_a_replaced_file_is_followed_from_its_start(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"old old old old\n")
    f = OutputFollower(path)
    f.read()
    tmp = tmp_path / "new.log"
    tmp.write_bytes(b"a much longer replacement file\n")
    tmp.replace(path)
    chunk = f.read()
    assert chunk.reset and chunk.text == "a much longer replacement file\n"


def test_missing_file_reads_nothing(tmp_path):
    f = OutputFollower(tmp_path / "nope.log")
    assert f.read().text == ""


def test_invalid_bytes_become_replacement_characters_and_flush(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"x\xffy\xe2")
    f = OutputFollower(path)
    assert f.read().text == "x\ufffdy"
    assert f.flush() == "\ufffd"


def test_read_tail_skips_a_cut_character(tmp_path):
    path = tmp_path / "o.log"
    path.write_bytes("ééé".encode())
    tail = read_tail(path, 3)
    assert tail.total == 6 and tail.text == "é" and tail.cut == 4


def test_read_tail_lines_reads_only_the_tail(tmp_path):
    path = tmp_path / "o.log"
    for content in (b"", b"a\n", b"a\nb\nc\n", b"a\nb\nc", b"\n\n\n", b"x" * 100 + b"\n" + b"y" * 100):
        path.write_bytes(content)
        for n in (0, 1, 2, 5):
            tail = read_tail(path, lines=n, block=3)
            got, size = tail.data, tail.total
            assert size == len(content) and tail.cut == 0
            assert got == (b"".join(content.splitlines(keepends=True)[-n:]) if n else b""), (content, n)
    missing = read_tail(tmp_path / "missing", lines=3)
    assert (missing.data, missing.total) == (b"", 0)


def test_read_tail_lines_of_one_huge_line_reads_a_bounded_window(tmp_path):
    """A log without newlines: the tail is the window's worth of its end, starting on a
    character boundary, and says how much of the line it left out (before: the whole
    file was read, however big)."""
    path = tmp_path / "o.log"
    path.write_bytes("é".encode() * 1000 + b"z" * 10)
    tail = read_tail(path, 101, lines=5, block=7)
    assert tail.total == 2010
    assert tail.data.decode() == "é" * 45 + "z" * 10  # 101 bytes, less one cut continuation byte
    assert tail.cut == 2010 - len(tail.data)
    whole = read_tail(path, 1 << 20, lines=5)
    assert (whole.cut, whole.data) == (0, path.read_bytes())


def test_read_newest_decodes_only_the_newest_part_and_counts_the_rest(tmp_path):
    """Every byte is read once; only about the newest ``keep`` bytes are decoded, and
    they start on a character boundary although reads split characters."""
    path = tmp_path / "out.log"
    data = ("é€😀 line\n" * 5000).encode()
    path.write_bytes(data)
    f = OutputFollower(path, max_bytes_per_read=4099)  # odd: splits multi-byte characters
    shown = f.read_newest(keep=10_000)
    assert f.bytes_read == len(data) and shown.offset == len(data)
    assert 10_000 <= len(shown.text.encode()) < 10_000 + 4099
    assert "\ufffd" not in shown.text and data.decode().endswith(shown.text)
    assert shown.skipped + len(shown.text.encode()) == len(data)
    with open(path, "ab") as fh:
        fh.write("more é\n".encode())
    again = f.read_newest(keep=10_000)
    assert again.text == "more é\n" and again.skipped == 0 and not again.reset
    path.write_bytes(b"new\n")  # shrank: everything shown so far is stale
    assert f.read_newest(keep=10_000).reset
