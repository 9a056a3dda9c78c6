"""A small service in another language beside a `baton run` sidecar, for
the tests of the application health gate.

GET /healthz answers 200, or 503 while the file SICK exists. POST
/jobs/NAME appends one line per call to CALLS: "JOB TICK TOKEN INSTANCE
KIND UNIX_NANOS". It listens on PORT and prints "ready" once it does.

usage: app.py PORT CALLS SICK
"""
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, CALLS, SICK = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def answer(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path != "/healthz":
            self.answer(404)
        else:
            self.answer(503 if os.path.exists(SICK) else 200)

    def do_POST(self):
        h = self.headers
        self.rfile.read(int(h.get("Content-Length") or 0))
        line = "%s %s %s %s %s %d\n" % (h["Baton-Job"], h["Baton-Tick"], h["Baton-Token"],
                                         h["Baton-Instance"], h["Baton-Run-Kind"], time.time_ns())
        with lock:
            fd = os.open(CALLS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        self.answer(200)

    def log_message(self, *args):
        pass


ThreadingHTTPServer.allow_reuse_address = True
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
server.serve_forever()
