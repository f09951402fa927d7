#!/usr/bin/env python3
"""hostile_client.py SOCK CASE - misbehaving clients of the agent's socket.

  garbage    binary junk, broken JSON, wrong types, unknown commands: each
             answered with an error event, the connection still serves
             a status afterwards
  oversized  1 MiB without a newline: the agent closes the connection
  flood      40 connections left open and silent: a new one still gets
             a status
  stalled    subscribe and never read: prints "ready" and waits while
             the test makes the agent work; on SIGUSR1 it sends 3,000
             status commands, still without reading, then drains and
             checks the agent dropped it with bounded output
  refused    (run as another uid) the agent closes without answering
Exit 0 when the agent behaved; otherwise a message and exit 1.
"""
import json, os, signal, socket, sys, time

path, case = sys.argv[1], sys.argv[2]
TIMEOUT = 20


def conn():
    deadline = time.time() + TIMEOUT
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(TIMEOUT)
        try:
            s.connect(path)
            return s
        except BlockingIOError:  # the listen backlog is full: the
            s.close()            # agent has not accepted the others yet
            if time.time() > deadline:
                raise
            time.sleep(0.01)


def answers(s, n):
    """read n JSON lines"""
    buf, out = b"", []
    while len(out) < n:
        data = s.recv(65536)
        if not data:
            sys.exit("connection closed after %d of %d answers: %r" % (len(out), n, out))
        buf += data
        while b"\n" in buf and len(out) < n:
            line, buf = buf.split(b"\n", 1)
            out.append(json.loads(line))
    return out


def status_works(s=None):
    s = s or conn()
    s.sendall(b"status\n")
    a = answers(s, 1)[0]
    if a.get("event") != "status":
        sys.exit("no status: %r" % a)


def closed(s):
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


if case == "garbage":
    s = conn()
    junk = [b"\x00\xff\xfe\x01garbage", b"{not json", b'{"cmd": 5}', b"[1, 2]",
            b"unknowncmd arg", b'{"cmd": "states", "app": "' + b"a" * 5000 + b'"}',
            b"\xc3\x28 invalid utf-8"]
    s.sendall(b"\n".join(junk) + b"\n")
    got = answers(s, len(junk))
    bad = [a for a in got if a.get("event") != "error"]
    if bad:
        sys.exit("garbage not answered with errors: %r" % bad)
    status_works(s)
elif case == "oversized":
    s = conn()
    try:
        s.sendall(b"x" * (1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass
    if not closed(s):
        sys.exit("a 1 MiB line did not close the connection")
    status_works()
elif case == "flood":
    held = [conn() for _ in range(40)]
    status_works()
    # the most recent idle ones are still served
    status_works(held[-1])
elif case == "stalled":
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path)
    s.sendall(b"subscribe\n")
    go = []
    signal.signal(signal.SIGUSR1, lambda *a: go.append(1))
    print("ready", flush=True)
    while not go:
        time.sleep(0.05)
    # still not reading: ask for 3,000 status answers (~2 KiB each)
    try:
        s.sendall(b"status\n" * 3000)
    except (BrokenPipeError, ConnectionResetError):
        pass
    time.sleep(1)
    s.settimeout(5)
    total = 0
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            total += len(data)
    except socket.timeout:
        sys.exit("the stalled client was not dropped (%d bytes read)" % total)
    except ConnectionResetError:
        pass
    # what it could still read: the agent's bounded buffer plus the
    # kernel's socket buffers, not 3,000 answers
    if total > 2 * 1024 * 1024:
        sys.exit("a stalled client received %d bytes" % total)
    print("dropped after %d bytes" % total)
elif case == "refused":
    s = conn()
    try:
        s.sendall(b"status\n")
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(0)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        data = b""
    if data:
        sys.exit("another uid got an answer: %r" % data[:200])
else:
    sys.exit("unknown case " + case)
