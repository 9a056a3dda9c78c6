"""Fence a write with baton's token, for receivers of baton's HTTP jobs.

baton sends every request with Baton-Election and Baton-Token. A write
fenced by FileFence.write is refused (StaleToken) when a newer token of
the same election has written the same resource: a late request of a
term that has ended cannot overwrite a newer term's work. Tokens of
another election are refused (OtherElection), never compared.

    fence = FileFence("/var/lib/app/fence.json", election="billing")
    election, token = token_from_headers(request.headers)
    fence.write("invoices", election, token, lambda: save(...))

The fence file is shared by the processes of one host (a lock file
beside it orders them; the Node.js module locks otherwise: give each its
own fence file). Processes on several hosts need the fence where
the data is: a row in the same database, checked in the write's
transaction (see docs/fencing.md).

Standard library only; Python 3.8 and later.
"""

import fcntl
import json
import os
import select
import socket
import sys

__all__ = ["FileFence", "StaleToken", "OtherElection", "token_from_headers", "client_gone"]


class StaleToken(Exception):
    """A newer token has written the resource: answer 409 Conflict."""

    def __init__(self, resource, token, fence):
        super().__init__(f"stale token {token}: {fence} has written {resource}")
        self.resource, self.token, self.fence = resource, token, fence


class OtherElection(Exception):
    """The token was issued by another election than the fence's: 409."""

    def __init__(self, election, want):
        super().__init__(f"token of election {election!r}, fence of election {want!r}")
        self.election, self.want = election, want


def token_from_headers(headers):
    """Return (election, token) from baton's request headers.

    Raises ValueError, naming the header and its value, when either is
    missing or the token is not a decimal from 1: answer 400.
    """
    election = headers.get("Baton-Election") or ""
    raw = headers.get("Baton-Token") or ""
    if not election:
        raise ValueError("Baton-Election: missing")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"Baton-Token {raw!r}: want a decimal token from 1")
    return election, int(raw)


def client_gone(environ):
    """True once baton has closed the connection: it stopped waiting.

    WSGI has no disconnect event: this peeks at the socket that Werkzeug's
    server (werkzeug.socket) and Gunicorn's sync workers (gunicorn.socket)
    expose. Behind another server it returns False: rely on the fence.
    """
    sock = environ.get("werkzeug.socket") or environ.get("gunicorn.socket")
    if sock is None:
        return False
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class FileFence:
    """The highest token written per resource, for one election, in a file.

    write() holds an exclusive lock on path + ".lock" while it checks the
    token, records it, and runs the write: two processes' writes of one
    resource take turns, and the older token's write after the newer's is
    refused. The token is recorded (fsync, rename) before the write runs:
    a crash between them loses the write, never the fence.
    """

    def __init__(self, path, election):
        if not election:
            raise ValueError("FileFence: election: empty")
        self.path, self.election = path, election

    def _read(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _save(self, state):
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def write(self, resource, election, token, fn):
        """Run fn() if token is not older than resource's fence; return its result.

        Raises OtherElection for a token of another election and
        StaleToken when a newer token has written resource: fn does not
        run. A token equal to the fence's passes (a term writes many times).
        """
        if election != self.election:
            raise OtherElection(election, self.election)
        if not isinstance(token, int) or token < 1:
            raise ValueError(f"token {token!r}: want an int from 1")
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            key = f"{election}/{resource}"
            last = int(state.get(key, 0))
            if token < last:
                raise StaleToken(resource, token, last)
            if token != last:
                state[key] = str(token)  # a string: exact in any JSON reader
                self._save(state)
            return fn()

    def reset(self, resource):
        """Forget resource's fence: the operator's remedy when the
        election's token counter started over below it. Make sure the old
        term's processes are gone first."""
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            state.pop(f"{self.election}/{resource}", None)
            self._save(state)


def _main(argv):
    """fence-file fence-election token-election resource token data-file:
    write token to data-file under the fence (a test of the fence from
    the command line). Exit 0 written, 3 stale, 4 other election."""
    path, own, election, resource, token, data = argv
    fence = FileFence(path, own)

    def save():
        with open(data + ".tmp", "w", encoding="utf-8") as f:
            f.write(token)
        os.replace(data + ".tmp", data)

    try:
        fence.write(resource, election, int(token), save)
    except StaleToken as e:
        print(e, file=sys.stderr)
        return 3
    except OtherElection as e:
        print(e, file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
