"""A small service in another language, for the sidecar e2e test.

Its job endpoints are called by `baton run`. It appends a start line and
an end line per run to RUNS, in the format of the shell jobs of the fault
suite, so that the same checker reads it; the job "flaky" records each
attempt in ATTEMPTS and answers 500 to its first FAIL_FIRST attempts.

"nap" works 1.5 s and notices its client's disconnect (a sidecar that
lost its term aborts the request): it then stops and ends its run at
once. "slow" ignores the disconnect and works 3 s; its side effect is
fenced with the shipped receiver module (receivers/python/baton_fence.py):
a FileFence in FENCE.json, shared by the apps, holds the highest token a
request to any of them carried (every request records its token there
when it arrives), and the effect is applied ("X", then "E") only if the
fence accepts the run's token, refused ("R", StaleToken) otherwise. Every
line is written under one lock shared by the apps (FENCE.lock), so the
lines' order is the fence's.

GET /healthz answers 200.

usage: app.py RUNS ATTEMPTS FAIL_FIRST FENCE [PORT]
(prints the port it listens on)
"""
import fcntl
import os
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "receivers", "python"))
from baton_fence import FileFence, StaleToken, token_from_headers  # noqa: E402

RUNS, ATTEMPTS, FAIL_FIRST, FENCE = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
PORT = int(sys.argv[5]) if len(sys.argv) > 5 else 0
lock = threading.Lock()


class fenced:
    """Holds the apps' shared lock (FENCE.lock), which orders the lines;
    the FileFence takes its own lock (FENCE.json.lock) inside it."""

    def __enter__(self):
        lock.acquire()
        self.fd = os.open(FENCE + ".lock", os.O_WRONLY | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        lock.release()


def write(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def append(path, line):
    with fenced():
        write(path, line)


def gone(conn):
    """Whether the client closed the connection."""
    r, _, _ = select.select([conn], [], [], 0)
    if not r:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        h = self.headers
        self.rfile.read(int(h.get("Content-Length") or 0))
        job, tick, token = h["Baton-Job"], h["Baton-Tick"], h["Baton-Token"]
        instance, attempt = h["Baton-Instance"], int(h["Baton-Attempt"])
        catch_up = "0"
        if h.get("Baton-Run-Kind") == "catch-up":
            # the first missed tick the run stands for
            catch_up = h.get("Baton-Catch-Up-From") or "1"

        def line(kind, last=catch_up):
            return "%s %s %s %s %s %d %s" % (kind, job, tick, token, instance, time.time_ns(), last)

        def record(kind, last=catch_up):
            append(RUNS, line(kind, last))

        election, tok = token_from_headers(h)
        fence = FileFence(FENCE + ".json", election)
        with fenced():
            try:
                fence.write("app", election, tok, lambda: None)  # records the token
            except StaleToken:
                pass  # a late request: its run still starts; slow's effect is refused
            if job != "flaky":
                write(RUNS, line("S"))
        code = 200
        if job == "flaky":
            append(ATTEMPTS, "%s %s %s %d %s" % (job, tick, token, attempt, instance))
            if attempt <= FAIL_FIRST:
                code = 500
        elif job == "nap":
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                if gone(self.connection):
                    record("E", "cancelled")
                    self.close_connection = True
                    return
                time.sleep(0.05)
            record("E")
        elif job == "slow":
            time.sleep(3)  # the disconnect ignored
            def apply():
                write(RUNS, line("X", "applied"))
                write(RUNS, line("E"))

            with fenced():
                try:
                    fence.write("app", election, tok, apply)
                except StaleToken:
                    write(RUNS, line("R", "stale"))
        else:
            record("E")
        body = b"not yet\n" if code == 500 else b""
        try:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (slow ignores that)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
