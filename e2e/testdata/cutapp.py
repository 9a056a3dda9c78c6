"""The service beside a sidecar in TestSidecarRetryCut.

Every job request is recorded in REQUESTS as it arrives, before any work,
one line "instance job tick token attempt", appended with O_APPEND (the
apps of a test share the file). POST /jobs/quick answers 200 at once;
POST /jobs/hang answers 200 after 60 s (the test kills the app first).
GET /healthz answers 200.

usage: cutapp.py REQUESTS
(prints the port it listens on)
"""
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUESTS = sys.argv[1]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        h = self.headers
        self.rfile.read(int(h.get("Content-Length") or 0))
        line = "%s %s %s %s %s\n" % (h["Baton-Instance"], h["Baton-Job"], h["Baton-Tick"], h["Baton-Token"], h["Baton-Attempt"])
        fd = os.open(REQUESTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        if self.path == "/jobs/hang":
            time.sleep(60)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
