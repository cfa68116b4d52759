"""A TCP forwarder that adds a fixed delay each way: a database "over a network" for the
benches, without touching the machine's network (no qdisc, no namespace, no root).

    python tests/bench/latency_forwarder.py --target 127.0.0.1:5432 --rtt-ms 1

It listens on 127.0.0.1 (a free port, printed as ``port N`` on stdout once it listens)
and forwards every connection to ``--target``. Each chunk of bytes is held for half of
``--rtt-ms`` in each direction, in order, so every request/answer exchange gains
``--rtt-ms``: a link with that round-trip time and no bandwidth limit. ``--rtt-ms 0``
forwards without delay (what the forwarder itself costs). A line ``turns`` on stdin is
answered ``turns N``: the round trips so far, every connection's client turns counted (a
turn: the client speaks after the server did). It stops when its stdin closes, so it
never outlives the bench that started it (that bench holds the pipe).

Why user space: netem (``tc qdisc ... netem delay``) is the usual tool, but a kernel may
lack it (this project's development machine does); a sleep here wakes within tens of
microseconds (the timer slack is set to 1 us on Linux), well below the delays measured.
"""

from __future__ import annotations

import argparse
import ctypes
import queue
import socket
import sys
import threading
import time

PR_SET_TIMERSLACK = 29


def _fine_timer() -> None:
    """Ask Linux to wake this thread's sleeps within 1 us (default: 50 us); elsewhere, nothing."""
    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class _Turns:
    """Who spoke last on each connection, and the client's turns over all of them."""

    def __init__(self) -> None:
        self.total = 0
        self._lock = threading.Lock()

    def spoke(self, pair: list[str], side: str) -> None:
        with self._lock:
            if side == "client" and pair[0] != "client":
                self.total += 1
            pair[0] = side


TURNS = _Turns()


def _reader(src: socket.socket, held: queue.SimpleQueue, delay: float, pair: list[str], side: str) -> None:
    _fine_timer()
    while True:
        try:
            data = src.recv(1 << 16)
        except OSError:
            data = b""
        if data:
            TURNS.spoke(pair, side)
        held.put((time.monotonic() + delay, data))
        if not data:
            return


def _writer(dst: socket.socket, held: queue.SimpleQueue, both: tuple[socket.socket, socket.socket]) -> None:
    _fine_timer()
    while True:
        due, data = held.get()
        while (left := due - time.monotonic()) > 0:
            time.sleep(left)
        if not data:
            break
        try:
            dst.sendall(data)
        except OSError:
            break
    for s in both:  # one side ended: end the other (the peer sees the close after the delay too)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _pair(client: socket.socket, target: tuple[str, int], delay: float) -> None:
    try:
        server = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    server.settimeout(None)
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    both = (client, server)
    pair = ["server"]  # who spoke last: the client's first bytes are a turn
    threads = []
    for src, dst, side in ((client, server, "client"), (server, client, "server")):
        held: queue.SimpleQueue = queue.SimpleQueue()
        threads += [threading.Thread(target=_reader, args=(src, held, delay, pair, side), daemon=True),
                    threading.Thread(target=_writer, args=(dst, held, both), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in both:
        s.close()


def _accept(listener: socket.socket, target: tuple[str, int], delay: float) -> None:
    while True:
        try:
            client, _addr = listener.accept()
        except OSError:
            return
        threading.Thread(target=_pair, args=(client, target, delay), daemon=True).start()


def parse_target(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--target must be HOST:PORT, not {text!r}")
    return host, int(port)


def parse_rtt(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"--rtt-ms must be a number of milliseconds from 0 to 1000, not {text!r}")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=parse_target, required=True, help="HOST:PORT to forward to")
    ap.add_argument("--rtt-ms", type=parse_rtt, required=True, help="round-trip time to add, in ms (0: none)")
    args = ap.parse_args()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=_accept, args=(listener, args.target, args.rtt_ms / 2000.0), daemon=True).start()
    print(f"port {listener.getsockname()[1]}", flush=True)
    for line in sys.stdin:  # until the parent closes the pipe (or dies)
        if line.strip() == "turns":
            print(f"turns {TURNS.total}", flush=True)
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
