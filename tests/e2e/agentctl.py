#!/usr/bin/env python3
"""agentctl.py - drive a running tend agent from tests, without sleeps.

  agentctl.py SOCK ready                  wait until the agent answers and
                                          has finished its catch-up pass
  agentctl.py SOCK until PRED -- ACTION   subscribe, run the shell ACTION,
                                          then after each pass_finished run
                                          the shell PRED until it succeeds
                                          (--no-ack: run ACTION without
                                          waiting for the subscription, for
                                          an agent stopped with SIGSTOP)
  agentctl.py SOCK send CMD               send a command, print the answer
Timeouts (TIMEOUT seconds, default 20) exit 1 with what was seen.
"""
import json, os, socket, subprocess, sys, time

TIMEOUT = float(os.environ.get("TIMEOUT", "20"))


def connect(path, deadline):
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return s
        except OSError:
            if time.time() > deadline:
                sys.exit("agentctl: no agent at " + path)
            time.sleep(0.01)  # the agent is starting: poll its socket


def lines(s, deadline):
    buf = b""
    while True:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            return
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    deadline = time.time() + TIMEOUT
    if cmd == "ready":
        while time.time() < deadline:
            s = connect(path, deadline)
            s.sendall(b"status\n")
            for ev in lines(s, deadline):
                if ev.get("event") == "status":
                    if ev["passes"] >= len(ev["apps"]):
                        return
                    break
            s.close()
            time.sleep(0.01)
        sys.exit("agentctl: agent not ready")
    if cmd == "send":
        s = connect(path, deadline)
        s.sendall((sys.argv[3] + "\n").encode())
        for ev in lines(s, deadline):
            print(json.dumps(ev))
            return
        sys.exit("agentctl: no answer")
    if cmd == "until":
        pred = sys.argv[3]
        action = sys.argv[sys.argv.index("--") + 1]
        s = connect(path, deadline)
        s.sendall(b"subscribe\n")
        seen = []

        def act():
            subprocess.run(action, shell=True, check=True)
            return subprocess.run(pred, shell=True).returncode == 0

        if "--no-ack" in sys.argv and act():
            return
        for ev in lines(s, deadline):
            if ev.get("event") == "subscribed":
                if "--no-ack" not in sys.argv and act():
                    return
                # a stopped agent may have run the pass before it read
                # the subscription: look once more
                if "--no-ack" in sys.argv and \
                        subprocess.run(pred, shell=True).returncode == 0:
                    return
                continue
            seen.append(ev)
            if ev.get("event") == "pass_finished" and \
                    subprocess.run(pred, shell=True).returncode == 0:
                return
        sys.exit("agentctl: timed out; events: " + json.dumps(seen[-5:]))
    sys.exit("agentctl: unknown command " + cmd)


main()
