"""A small service in another language, for the sidecar e2e test.

Its job endpoints are called by `baton run`. It appends a start line and
an end line per run to RUNS, in the format of the shell jobs of the fault
suite, so that the same checker reads it; the job "flaky" records each
attempt in ATTEMPTS and answers 500 to its first FAIL_FIRST attempts.

usage: app.py RUNS ATTEMPTS FAIL_FIRST   (prints the port it listens on)
"""
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUNS, ATTEMPTS, FAIL_FIRST = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = threading.Lock()


def append(path, line):
    with lock:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        h = self.headers
        self.rfile.read(int(h.get("Content-Length") or 0))
        job, tick, token = h["Baton-Job"], h["Baton-Tick"], h["Baton-Token"]
        instance, attempt = h["Baton-Instance"], int(h["Baton-Attempt"])
        catch_up = "1" if h.get("Baton-Run-Kind") == "catch-up" else "0"

        def record(kind):
            append(RUNS, "%s %s %s %s %s %d %s" % (kind, job, tick, token, instance, time.time_ns(), catch_up))

        code = 200
        if job == "flaky":
            append(ATTEMPTS, "%s %s %s %d %s" % (job, tick, token, attempt, instance))
            if attempt <= FAIL_FIRST:
                code = 500
        else:
            record("S")
            if job == "nap":
                time.sleep(1.5)
            record("E")
        body = b"not yet\n" if code == 500 else b""
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
