#!/usr/bin/env python3
"""torture.py - crash torture for tend.

  torture.py --tend PATH [--agent] [--iterations N] [--seed S] [--files F]
             [--keep] [--progress N]

Each iteration applies a random workload to a source tree (creates,
modifies, deletes, file and directory renames, executable bits, files
whose exec declaration fails, stray files in the target, and config
changes toggling lossy `file-mode`/`executable` and destructive
`exclusive`), then runs `tend sync` (sometimes --full) and SIGKILLs it:
either after a random delay, or exactly at an operation through a
failpoint (TEND_FAILPOINTS=POINT@N=kill: a write, a rename, an unlink, a
mkdir, the commit of pending records, the settling commit, a git object
write, a ref update, a push).

With --agent the workload is applied while a `tend watch` (debounce 0)
follows it, and the agent is SIGKILLed: after a random delay, at a
failpoint, or (a third of the time) with the settle of its last pass
still deferred (TEND_SETTLE_MS holds it open).

After every kill a clean `tend sync` must converge:
  - out/ holds exactly the sources (content, and the mode file-mode says),
    and every stray file made while the container was not exclusive;
  - gen/ holds "gen:" + content for every source whose declaration
    succeeds (a failing one keeps what it had), nothing for deleted ones;
  - the app's ref (pages or gh-pages, a knob) has exactly the sources
    under its prefix (site or web, a knob; blob ids, and modes as
    `executable` says), nothing of tend's is left elsewhere, every file
    another author committed under the prefix is still there (unless an
    exclusive container took it), someone else's tags are where they were,
    tend's tag is on the tip, `git count-objects` finds no garbage and
    `git fsck --strict` is clean; the app pushes (push = a file://
    remote): the remote's ref is the local tip, and it only ever moved
    forward (each converged tip a descendant of the one before);
  - `tend check` finds no drift (nor counters that disagree with the
    rows), `tend status` counts per app what `tend ls` lists, every
    tracked state has one record (no
    pending ones), no temporary file is left in a target or in staging;
  - one more sync applies nothing and makes no commit.

Exit 0 with a summary line when every iteration converged; on the first
failure, exit 1 with what differed (the workspace is kept with --keep).
The test suite runs 50 iterations (suite "torture"; 25 under the
sanitizers' setup, TORTURE_ITERS); the benchmark runs 1000:
bench/torture.py --tend build/agent/tend --iterations 1000.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

POINTS = ["write", "rename", "unlink", "mkdir", "lmdb-commit~write",
          "lmdb-commit~settle", "git-odb-write", "git-ref-update",
          "git-push"]
GEN = """c=$(cat)
case "$c" in FAIL*) echo "gen: $TEND_PATH asks to fail" >&2; exit 3;; esac
printf 'gen:%s\\n' "$c"
"""
# an exec writing several entries under $TEND_OUT: "a" always, "b" when
# the source has an even number of lines (entries come and go)
MULTI = """n=0 c=
while IFS= read -r l || [ -n "$l" ]; do n=$((n + 1)); c="$c$l
"; done
case "$c" in FAIL*) echo "multi: $TEND_PATH asks to fail" >&2; exit 3;; esac
d="$TEND_OUT/$TEND_PATH.d"
mkdir -p "$d"
printf 'a:%s' "$c" > "$d/a"
[ $((n % 2)) = 0 ] && printf 'b\\n' > "$d/b"
exit 0
"""


class Failed(Exception):
    pass


class Torture:
    def __init__(self, a):
        self.tend = os.path.abspath(a.tend)
        self.rng = random.Random(a.seed)
        self.ws = tempfile.mkdtemp(prefix="tend-torture-")
        self.src = os.path.join(self.ws, "src")
        self.knobs = {"file_mode": "0644", "site_exclusive": False,
                      "executable": "keep", "pages_exclusive": False,
                      "prefix": "site", "ref": "refs/heads/pages"}
        self.foreign = {}  # (ref, path) -> blob id: another author's
        self.strays = {}  # made while not exclusive: must survive
        # another author's files under an exclusive prefix: strays,
        # which check reports and sync --full removes
        self.git_strays = set()
        # where the git app's container was last synced: a drop deletes
        # tend's entries there, whatever tend.conf says now
        self.pages_synced = None
        self.nstray = 0
        self.durations = [0.05]
        self.stats = {"iterations": 0, "killed": 0, "finished": 0,
                      "by_timer": 0, "by_failpoint": 0, "full": 0,
                      "deferred": 0, "locks": 0, "drops": 0,
                      "conflicts": 0, "strays": 0, "git_strays": 0,
                      "moves": 0, "repacks": 0, "unsure": 0, "tags": 0}
        self.env = dict(os.environ, GIT_AUTHOR_NAME="t",
                        GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                        GIT_COMMITTER_EMAIL="t@t")
        self.env.pop("TEND_FAILPOINTS", None)
        os.makedirs(self.src)
        os.makedirs(os.path.join(self.ws, "tools"))
        with open(os.path.join(self.ws, "tools", "gen.sh"), "w") as f:
            f.write(GEN)
        with open(os.path.join(self.ws, "tools", "multi.sh"), "w") as f:
            f.write(MULTI)
        self.graveyard = []  # (path, content) of deleted sources
        self.dropped = None  # the app whose drop was killed
        subprocess.run(["git", "init", "-q", "--bare", "repo.git"],
                       cwd=self.ws, check=True)
        # the pages app's push remote, and its tips as last converged
        subprocess.run(["git", "init", "-q", "--bare", "remote.git"],
                       cwd=self.ws, check=True)
        self.remote_tips = {}
        # someone else's tags, on a commit of their own: never moved
        base = self.git("commit-tree", "-m", "base",
                        self.git("mktree", stdin=b"").strip()).strip()
        self.git("update-ref", "refs/heads/base", base)
        self.git("tag", "release", base)
        self.git("tag", "-a", "-m", "v1", "v1", base)
        self.their_tags = {t: self.git("rev-parse", "refs/tags/" + t).strip()
                           for t in ("release", "v1")}
        self.nfiles = a.files
        self.agent = a.agent
        self.progress = a.progress
        self.t0 = time.time()
        for _ in range(a.files):
            self.create()
        self.write_conf()

    def git(self, *args, stdin=None, check=True):
        p = subprocess.run(["git", "--git-dir", os.path.join(self.ws,
                            "repo.git"), *args], input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=self.env)
        if check and p.returncode:
            raise Failed("git %s: %s" % (" ".join(args),
                                         p.stderr.decode()[-300:]))
        return p.stdout.decode()

    def foreign_commit(self):
        """Another author commits a file under the app's prefix (a
        compare-and-swap: a pass of tend racing it wins, and then this
        does nothing)."""
        ref, prefix = self.knobs["ref"], self.knobs["prefix"]
        tip = self.git("rev-parse", "-q", "--verify", ref, check=False).strip()
        if not tip:
            return
        self.nforeign = getattr(self, "nforeign", 0) + 1
        path = "%s/foreign-%d.txt" % (prefix, self.nforeign)
        blob = self.git("hash-object", "-w", "--stdin",
                        stdin=b"foreign %d\n" % self.nforeign).strip()
        idx = os.path.join(self.ws, "foreign.idx")
        env = dict(self.env, GIT_INDEX_FILE=idx,
                   GIT_DIR=os.path.join(self.ws, "repo.git"))
        run = lambda *a: subprocess.run(["git", *a], env=env,
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        run("read-tree", tip)
        run("update-index", "--add", "--cacheinfo", "100644,%s,%s" %
            (blob, path))
        tree = run("write-tree").stdout.decode().strip()
        commit = run("commit-tree", tree, "-p", tip, "-m",
                     "another author").stdout.decode().strip()
        os.unlink(idx)
        if run("update-ref", ref, commit, tip).returncode != 0:
            return
        if self.knobs["pages_exclusive"]:
            self.git_strays.add((ref, path))
        else:
            self.foreign[(ref, path)] = blob

    def keep_strays(self):
        """Another author's files made under an exclusive prefix since
        the last sync are someone else's to keep from now on."""
        for rp in self.git_strays:
            self.foreign[rp] = self.git("rev-parse", "%s:%s" % rp).strip()
        self.git_strays.clear()

    def forget_foreign(self, ref, prefix):
        """An exclusive container of (ref, prefix) going or switched on
        may take them."""
        for k in [k for k in self.foreign
                  if k[0] == ref and k[1].startswith(prefix + "/")]:
            del self.foreign[k]

    # ---- the workspace

    def write_conf(self):
        k = self.knobs
        with open(os.path.join(self.ws, "tend.conf"), "w") as f:
            if self.agent:  # (a one-shot sync has no debounce)
                f.write("[tend]\n\tdebounce = 0\n")
            f.write(f"""[app "site"]
\tsource = src
\ttarget = dir:out
\tfile-mode = {k['file_mode']}
\texclusive = {str(k['site_exclusive']).lower()}
\tmax-delete = 1000000
[app "gen"]
\tsource = src
\tdeclare = exec sh ../tools/gen.sh
\ttarget = dir:gen
\tmax-delete = 1000000
[app "multi"]
\tsource = src
\tdeclare = exec sh ../tools/multi.sh
\ttarget = dir:multi
\tmax-delete = 1000000
[app "flat"]
\tsource = src
\ttarget = dir:flat
\tname = {{name}}
\tmax-delete = 1000000
[app "idx"]
\tsource = src
\tdeclare = exec cat
\ttarget = file:index.txt
\tmax-delete = 1000000
[app "pages"]
\tsource = src
\ttarget = git:repo.git
\tref = {k['ref']}
\tprefix = {k['prefix']}
\ttag = latest
\tpush = file://{self.ws}/remote.git
\texecutable = {k['executable']}
\texclusive = {str(k['pages_exclusive']).lower()}
\tmax-delete = 1000000
""")

    def files(self):
        out = []
        for root, dirs, names in os.walk(self.src):
            for n in names:
                out.append(os.path.relpath(os.path.join(root, n), self.src))
        return sorted(out)

    def dirs(self):
        out = [""]
        for root, dirs, _ in os.walk(self.src):
            for d in dirs:
                out.append(os.path.relpath(os.path.join(root, d), self.src))
        return out

    def text(self):
        r = self.rng
        words = "tend sync state record commit tree blob file dir".split()
        return "".join(" ".join(r.choice(words) for _ in range(r.randrange(1, 8)))
                       + "\n" for _ in range(r.randrange(1, 12)))

    def put(self, rel, data):
        p = os.path.join(self.src, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(data)

    def create(self):
        r = self.rng
        d = r.choice(self.dirs())
        if r.random() < 0.3 or not d:
            d = os.path.join(d, "d%d" % r.randrange(12))
        self.put(os.path.join(d, "f%d.txt" % r.randrange(100000)),
                 self.text())

    def mutate(self):
        r = self.rng
        ops = []
        for _ in range(r.randrange(1, 16)):
            fs = self.files()
            op = r.choice(["create", "create", "modify", "modify", "delete",
                           "rename", "rename_dir", "fail", "unfail", "chmod",
                           "stray", "restore", "restore", "collide",
                           "foreign"])
            if op == "restore" and not self.graveyard:
                op = "delete"
            if op not in ("create", "stray", "restore") and len(fs) < 20:
                op = "create"
            if op == "create" and len(fs) > 2 * self.nfiles:
                op = "delete"  # keep the tree near its size
            f = r.choice(fs) if fs else None
            p = os.path.join(self.src, f) if f else None
            if op == "create":
                self.create()
            elif op == "modify":
                with open(p, "a") as fh:
                    fh.write(self.text())
            elif op == "delete":
                self.graveyard.append((f, open(p).read()))
                self.graveyard = self.graveyard[-40:]
                os.unlink(p)
            elif op == "restore":
                # the same bytes back: under the same name (a deleted
                # entry's pending delete must not hide it), or another
                rel, data = self.graveyard.pop(r.randrange(len(self.graveyard)))
                if r.random() < 0.4 or os.path.exists(
                        os.path.join(self.src, rel)):
                    rel = os.path.join(r.choice(self.dirs()),
                                       "r%d.txt" % r.randrange(100000))
                if not os.path.exists(os.path.join(self.src, rel)):
                    self.put(rel, data)
            elif op == "rename":
                d = r.choice(self.dirs())
                dst = os.path.join(self.src, d, "r%d.txt" % r.randrange(100000))
                os.rename(p, dst)
            elif op == "rename_dir":
                ds = [d for d in self.dirs() if d]
                if not ds:
                    continue
                d = r.choice(ds)
                new = os.path.join(os.path.dirname(d), "m%d" % r.randrange(1000))
                if os.path.exists(os.path.join(self.src, new)):
                    continue
                os.rename(os.path.join(self.src, d), os.path.join(self.src, new))
            elif op == "fail":
                data = open(p).read()
                if not data.startswith("FAIL"):
                    self.put(f, "FAIL " + data)
            elif op == "unfail":
                data = open(p).read()
                if data.startswith("FAIL"):
                    self.put(f, data[5:])
            elif op == "foreign":
                self.foreign_commit()
            elif op == "collide":
                # another file of the same name elsewhere: two
                # declarations of one flat/ entry
                d = r.choice(self.dirs())
                dst = os.path.join(self.src, d, os.path.basename(f))
                if not os.path.exists(dst):
                    self.put(os.path.join(d, os.path.basename(f)),
                             self.text())
            elif op == "chmod":
                os.chmod(p, os.stat(p).st_mode ^ 0o100)
            elif op == "stray":
                out = os.path.join(self.ws, "out")
                if os.path.isdir(out):
                    self.nstray += 1
                    name = "stray-%d" % self.nstray
                    with open(os.path.join(out, name), "w") as fh:
                        fh.write(name)
                    if not self.knobs["site_exclusive"]:
                        self.strays[name] = name
            ops.append(op)
        if r.random() < 0.2:
            knob = r.choice(list(self.knobs))
            k = self.knobs
            if k["pages_exclusive"] and knob in ("prefix", "ref"):
                # the exclusive container that goes deletes tend's
                # entries only: another author's files stay there
                self.keep_strays()
            if knob == "file_mode":
                k[knob] = "0600" if k[knob] == "0644" else "0644"
            elif knob == "executable":
                k[knob] = "never" if k[knob] == "keep" else "keep"
            elif knob == "prefix":
                k[knob] = "web" if k[knob] == "site" else "site"
            elif knob == "ref":
                k[knob] = "refs/heads/gh-pages" \
                    if k[knob] == "refs/heads/pages" else "refs/heads/pages"
            else:
                k[knob] = not k[knob]
            if knob == "pages_exclusive" and k[knob] or \
                    k["pages_exclusive"] and knob in ("prefix", "ref"):
                # switched on, or moved to a place that is exclusive
                # now: what is there is not declared, check says so,
                # and sync --full removes it
                self.forget_foreign(k["ref"], k["prefix"])
            if knob == "pages_exclusive" and not k[knob]:
                # no sync ran since they were made: they are there, and
                # now someone else's to keep
                self.keep_strays()
            self.stats["moves"] += knob in ("prefix", "ref")
            if knob == "site_exclusive" and k[knob]:
                self.strays.clear()  # destructive: they may go now
            self.write_conf()
            ops.append("config:" + knob)
        return ops

    def keep_unowned_pages(self):
        """A drop deletes tend's entries only, exclusive or not: what
        else is under its prefix now is someone else's, and stays (the
        model may have forgotten it at an exclusive switch, expecting a
        --full)."""
        if not self.pages_synced:
            return
        ref, prefix = self.pages_synced[:2]
        rc, out, _ = self.tend_run("ls", "pages")
        if rc:
            return
        mine = set()
        for line in out.splitlines():
            head = line.split("  ")[0]
            if head.startswith("git(") and "):" in head:
                name = head.split("):", 1)[1]
                mine.add(prefix + "/" + name if prefix else name)
        tree = self.git("ls-tree", "-r", ref, prefix + "/", check=False)
        for line in tree.splitlines():
            meta, path = line.split("\t", 1)
            if path not in mine:
                self.foreign[(ref, path)] = meta.split()[2]

    # ---- running tend

    def tend_run(self, *args, env=None):
        p = subprocess.run([self.tend, *args], cwd=self.ws, env=env or self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300)
        return p.returncode, p.stdout.decode(errors="replace"), \
            p.stderr.decode(errors="replace")

    def killed_run(self):
        r = self.rng
        args = ["sync", "--allow-delete"]
        if r.random() < 0.1:
            # a drop killed halfway: converge() runs it again
            self.dropped = r.choice(["site", "gen", "multi", "pages",
                                     "flat", "idx"])
            if self.dropped == "pages":
                self.keep_strays()
                self.keep_unowned_pages()
            args = ["drop", self.dropped]
            self.stats["drops"] += 1
        elif r.random() < 0.2:
            args.append("--full")
            self.stats["full"] += 1
        env = dict(self.env)
        timer = r.random() < 0.5
        if not timer:
            # mostly early hits: an incremental pass has few operations
            n = 1 + int(r.expovariate(1 / 4.0))
            env["TEND_FAILPOINTS"] = "%s@%d=kill" % (r.choice(POINTS), n)
        p = subprocess.Popen([self.tend, *args], cwd=self.ws, env=env,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        if timer:
            d = sorted(self.durations)[len(self.durations) // 2]
            time.sleep(r.uniform(0, d * 1.5))
            p.send_signal(signal.SIGKILL)
        rc = p.wait(timeout=300)
        if rc == -signal.SIGKILL:
            self.stats["killed"] += 1
            self.stats["by_timer" if timer else "by_failpoint"] += 1
        else:
            self.stats["finished"] += 1

    def agent_ready(self, p, deadline):
        """The agent answers and has finished its catch-up passes."""
        path = os.path.join(self.ws, ".tend", "agent.sock")
        while time.time() < deadline and p.poll() is None:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(max(0.05, deadline - time.time()))
                s.connect(path)
                s.sendall(b"status\n")
                buf = b""
                while b"\n" not in buf:
                    data = s.recv(65536)
                    if not data:
                        break
                    buf += data
                s.close()
                st = json.loads(buf.split(b"\n")[0])
                if st.get("event") == "status" and \
                        st["passes"] >= len(st["apps"]):
                    return True
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        return False

    def killed_agent(self):
        """Mutate under a running agent, then SIGKILL it."""
        r = self.rng
        env = dict(self.env)
        how = r.choice(["timer", "failpoint", "deferred"])
        if how == "failpoint":
            n = 1 + int(r.expovariate(1 / 3.0))
            env["TEND_FAILPOINTS"] = "%s@%d=kill" % (r.choice(POINTS), n)
        if how == "deferred":
            env["TEND_SETTLE_MS"] = "600000"
        p = subprocess.Popen([self.tend, "watch", "--allow-delete"],
                             cwd=self.ws, env=env,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        ops = []
        if self.agent_ready(p, time.time() + 60):
            sub = None
            if how == "deferred":
                # commands commit the settle: subscribe first, then
                # follow the passes without a command until they stop
                sub = socket.socket(socket.AF_UNIX)
                sub.connect(os.path.join(self.ws, ".tend", "agent.sock"))
                sub.sendall(b"subscribe\n")
                sub.settimeout(10)
                sub.recv(65536)
            ops = self.mutate()
            if sub:
                sub.settimeout(0.2)
                try:
                    while sub.recv(65536):
                        pass
                except OSError:
                    pass
                sub.close()
            else:
                time.sleep(r.uniform(0, 0.05))
        died = p.poll() is not None
        p.send_signal(signal.SIGKILL)
        rc = p.wait(timeout=300)
        if rc == -signal.SIGKILL:
            self.stats["killed"] += 1
            self.stats["by_failpoint" if died else "by_timer"] += 1
            self.stats["deferred"] += how == "deferred"
        else:
            self.stats["finished"] += 1
        return ops

    # ---- checks

    def expect(self, cond, what):
        if not cond:
            raise Failed(what)

    def check_dir(self, name, want):
        root = os.path.join(self.ws, name)
        have = {}
        for dp, dirs, names in os.walk(root):
            for n in names:
                rel = os.path.relpath(os.path.join(dp, n), root)
                self.expect(not n.startswith(".tend-"),
                            "%s: temporary file %s" % (name, rel))
                have[rel] = os.path.join(dp, n)
        for rel, (data, mode) in want.items():
            self.expect(rel in have, "%s/%s missing" % (name, rel))
            got = open(have[rel], "rb").read()
            if data is not None:
                self.expect(got == data, "%s/%s: content %r, want %r" %
                            (name, rel, got[:60], data[:60]))
            if mode is not None:
                m = stat.S_IMODE(os.stat(have[rel]).st_mode)
                self.expect(m == mode, "%s/%s: mode %o, want %o" %
                            (name, rel, m, mode))
        return have

    def redrop(self):
        """The killed drop, run again, must finish: nothing of the app is
        tracked or left in its target (but strays)."""
        app, self.dropped = self.dropped, None
        rc, out, err = self.tend_run("drop", app)
        self.expect(rc == 0, "drop %s again: exit %d: %s" % (app, rc, err[-300:]))
        rc, out, err = self.tend_run("ls", "--json", app)
        left = [s["path"] for s in json.loads(out)["states"]]
        self.expect(not left, "drop %s again left tracked %s" % (app, left[:5]))
        if app == "idx":
            left = ["index.txt"] if os.path.exists(
                os.path.join(self.ws, "index.txt")) else []
        elif app == "pages":
            # where the dropped container was (tend.conf may name
            # another place since)
            ref, prefix = self.pages_synced[:2] if self.pages_synced \
                else (self.knobs["ref"], self.knobs["prefix"])
            ls = subprocess.run(["git", "-C", "repo.git", "ls-tree", "-r",
                                 "--name-only", ref, prefix + "/"],
                                cwd=self.ws, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
            left = [p for p in ls.stdout.decode().split()
                    if (ref, p) not in self.foreign]
        else:
            root = os.path.join(self.ws, {"site": "out"}.get(app, app))
            left = []
            for dp, _, names in os.walk(root):
                for n in names:
                    rel = os.path.relpath(os.path.join(dp, n), root)
                    if not (app == "site" and n.startswith("stray-")):
                        left.append(rel)
        self.expect(not left, "drop %s again left %s" % (app, left[:5]))
        if app == "pages" and self.knobs["pages_exclusive"]:
            # the app comes back exclusive: its new container may take
            # what keep_unowned_pages kept
            self.forget_foreign(self.knobs["ref"], self.knobs["prefix"])
        if app == "site" and not self.nstray:
            self.expect(not os.path.exists(os.path.join(self.ws, "out")),
                        "drop site left out/")

    def converge(self, it):
        if self.dropped:
            self.redrop()
        t0 = time.time()
        rc, out, err = self.tend_run("sync", "--allow-delete", "--full"
                                     if it % 10 == 0 else "--allow-delete")
        self.durations.append(time.time() - t0)
        self.durations = self.durations[-20:]
        srcs = {f: open(os.path.join(self.src, f), "rb").read()
                for f in self.files()}
        failing = {f for f, d in srcs.items() if d.startswith(b"FAIL")}
        byname = {}
        for f in srcs:
            byname.setdefault(os.path.basename(f), []).append(f)
        collide = {n for n, fs in byname.items() if len(fs) > 1}
        errs = [l for l in err.splitlines() if l.strip()]
        # a kill inside libgit2's ref update leaves the ref's lock,
        # which the next tend clears and says so
        expected = [l for l in errs if l.startswith(("tend: gen: ",
                    "tend: multi: ")) and ("asks to fail" in l or
                                           "more entries failed" in l)]
        expected += [l for l in errs if l.startswith("tend: flat: conflict: ")
                     and any("flat/%s is declared" % n in l for n in collide)]
        locks = [l for l in errs if l.startswith("tend: removed ") and
                 "left by an interrupted tend" in l]
        # a tag a kill left behind its commit is moved, and said; a
        # container that goes (a prefix or ref move) keeps another
        # author's files, and says so
        caught = [l for l in errs if l.startswith("tend: pages: ") and
                  ": note: tag latest moved from " in l]
        kept = [l for l in errs if l.startswith(("tend: pages: ",
                "tend: site: ")) and ": note: stays, with what tend did not write" in l]
        bad = [l for l in errs if l not in expected and l not in locks
               and l not in caught and l not in kept]
        self.stats["locks"] += len(locks)
        self.stats["tags"] += len(caught)
        self.expect(not bad, "clean sync: unexpected errors: %s" % bad[:5])
        self.expect(rc == (1 if failing or collide else 0),
                    "clean sync: exit %d (%d failing sources, %d names "
                    "collide): %s" % (rc, len(failing), len(collide),
                                      err[-500:]))
        if collide:
            self.stats["conflicts"] += 1
        self.expect(all(any("flat/%s is declared" % n in l for l in errs)
                        for n in collide),
                    "a collision not reported: %s" % sorted(collide)[:5])
        # exclusive: strays made since are drift, and sync --full
        # removes them (a plain sync never reads the target)
        out = os.path.join(self.ws, "out")
        left = sorted(n for n in (os.listdir(out) if os.path.isdir(out)
                                  else []) if n.startswith("stray-")
                      and n not in self.strays)
        if left and self.knobs["site_exclusive"]:
            rc2, o2, e2 = self.tend_run("check")
            self.expect(rc2 == 1 and all("out/%s: not declared" % n in o2
                                         for n in left),
                        "check: exclusive strays %s not reported: %s" %
                        (left, o2[-300:]))
            rc2, o2, e2 = self.tend_run("sync", "--full", "--allow-delete")
            self.expect(rc2 == rc, "sync --full for strays: exit %d" % rc2)
            self.stats["strays"] += len(left)
        # the same for another author's files under an exclusive prefix
        ref, prefix = self.knobs["ref"], self.knobs["prefix"]
        if self.knobs["pages_exclusive"]:
            ls = subprocess.run(["git", "-C", "repo.git", "ls-tree", "-r",
                                 "--name-only", ref, prefix + "/"],
                                cwd=self.ws, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
            left = sorted(p for p in ls.stdout.decode().split()
                          if p[len(prefix) + 1:] not in srcs and
                          (ref, p) not in self.foreign)
            if left:
                rc2, o2, e2 = self.tend_run("check")
                self.expect(rc2 == 1 and all(
                    ":%s: not declared" % p[len(prefix) + 1:] in o2
                    for p in left),
                    "check: strays %s under an exclusive prefix not "
                    "reported: %s" % (left, o2[-300:]))
                rc2, o2, e2 = self.tend_run("sync", "--full",
                                            "--allow-delete")
                self.expect(rc2 == rc, "sync --full for git strays: exit %d"
                            % rc2)
                self.stats["git_strays"] += len(left)
        self.git_strays.clear()
        # idx: every source, concatenated in path order (`exec cat`)
        got = open(os.path.join(self.ws, "index.txt"), "rb").read() \
            if os.path.exists(os.path.join(self.ws, "index.txt")) else None
        self.expect(got == b"".join(srcs[f] for f in sorted(srcs)),
                    "index.txt is not the sources in order (%r...)" %
                    (got[:60] if got else got))
        # flat: one source per name applied; a collision keeps what
        # was there (whatever it is), nothing else
        want = {n: (srcs[fs[0]], None) for n, fs in byname.items()
                if len(fs) == 1}
        have = self.check_dir("flat", want)
        extra = [h for h in have if h not in byname]
        self.expect(not extra, "flat: entries of no source %s" % extra[:5])
        # out: the sources, with file-mode, plus the strays that must live
        fmode = int(self.knobs["file_mode"], 8)
        want = {f: (d, fmode) for f, d in srcs.items()}
        for s, d in self.strays.items():
            want[s] = (d.encode(), None)
        have = self.check_dir("out", want)
        extra = [h for h in have if h not in want and not h.startswith("stray-")]
        self.expect(not extra, "out: undeclared entries %s" % extra[:5])
        # gen: "gen:" + content; a failing one keeps what it had
        want = {f: (b"gen:" + d.rstrip(b"\n") + b"\n", None)
                for f, d in srcs.items() if f not in failing}
        have = self.check_dir("gen", want)
        extra = [h for h in have if h not in srcs]
        self.expect(not extra, "gen: entries of deleted sources %s" % extra[:5])
        # multi: f.d/a always, f.d/b for an even number of lines
        want = {}
        for f, d in srcs.items():
            if f in failing:
                continue
            lines = d.split(b"\n")
            if lines[-1] == b"":
                lines.pop()
            want[f + ".d/a"] = (b"a:" + b"".join(l + b"\n" for l in lines),
                                None)
            if len(lines) % 2 == 0:
                want[f + ".d/b"] = (b"b\n", None)
        have = self.check_dir("multi", want)
        extra = [h for h in have if h not in want and
                 h[:-4] not in failing]
        self.expect(not extra, "multi: undeclared entries %s" % extra[:5])
        # git: the tree under the prefix of the app's ref, blob ids and
        # modes; nothing of tend's anywhere else; no foreign file or tag
        # lost; tend's tag on the tip; no garbage in objects/pack
        ref, prefix = self.knobs["ref"], self.knobs["prefix"]
        trees = {}
        for r in ("refs/heads/pages", "refs/heads/gh-pages"):
            ls = subprocess.run(["git", "-C", "repo.git", "ls-tree", "-r",
                                 r], cwd=self.ws, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
            tree = {}
            for line in ls.stdout.decode().splitlines():
                meta, path = line.split("\t", 1)
                mode, _, oid = meta.split()
                tree[path] = (mode, oid)
            trees[r] = tree
        for (r, path), blob in self.foreign.items():
            self.expect(trees[r].get(path, (None, None))[1] == blob,
                        "a foreign file lost: %s %s" % (r, path))
        tree = {p: v for p, v in trees[ref].items()
                if p.startswith(prefix + "/") and (ref, p) not in self.foreign}
        want = {}
        for f, d in srcs.items():
            x = os.stat(os.path.join(self.src, f)).st_mode & 0o100
            mode = "100755" if x and self.knobs["executable"] == "keep" \
                else "100644"
            oid = hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest()
            want[prefix + "/" + f] = (mode, oid)
        if tree != want:
            diff = sorted(set(tree.items()) ^ set(want.items()))
            raise Failed("git tree differs: %s" % diff[:6])
        for r, t in trees.items():
            left = [p for p in t if (r, p) not in self.foreign and
                    not (r == ref and p.startswith(prefix + "/"))]
            self.expect(not left, "tend's entries left in %s: %s" %
                        (r, left[:5]))
        for t, oid in self.their_tags.items():
            self.expect(self.git("rev-parse", "refs/tags/" + t,
                                 check=False).strip() == oid,
                        "someone else's tag %s moved or lost" % t)
        if trees[ref]:
            # on tend's newest commit of the ref: another author's
            # commits on top of it do not move tend's tag (tend's next
            # commit does)
            mine = self.git("log", "-1", "--format=%H", "--grep=^tend: ",
                            ref, check=False).strip()
            self.expect(self.git("rev-parse", "refs/tags/latest",
                                 check=False).strip() == mine,
                        "tag latest is not on tend's newest commit of %s"
                        % ref)
        # push: the converging sync pushed the local tip; no remote
        # update went backwards or sideways since the last convergence
        rgit = ["git", "--git-dir", os.path.join(self.ws, "remote.git")]
        for r in ("refs/heads/pages", "refs/heads/gh-pages"):
            lt = self.git("rev-parse", "-q", "--verify", r,
                          check=False).strip()
            rt = subprocess.run(rgit + ["rev-parse", "-q", "--verify", r],
                                stdout=subprocess.PIPE).stdout.decode().strip()
            if r == ref and lt:
                self.expect(rt == lt, "remote %s is %s, local %s" %
                            (r, rt[:12], lt[:12]))
            old = self.remote_tips.get(r)
            if old and rt != old:
                self.expect(subprocess.run(rgit + ["merge-base",
                            "--is-ancestor", old, rt]).returncode == 0,
                            "remote %s moved %s -> %s: not a fast-forward"
                            % (r, old[:12], rt[:12]))
            if rt:
                self.remote_tips[r] = rt
        garbage = [l for l in self.git("count-objects", "-v").splitlines()
                   if l.startswith("garbage:")]
        self.expect(garbage == ["garbage: 0"], "objects: %s" % garbage)
        fsck = subprocess.run(["git", "-C", "repo.git", "fsck", "--strict"],
                              cwd=self.ws, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        self.expect(fsck.returncode == 0, "git fsck: %s" %
                    fsck.stdout.decode()[-500:])
        # a user's `git gc` between passes: tend must read packed objects
        # as well as loose ones, and fsck of a few packs stays cheap where
        # thousands of loose objects made each iteration slower than the
        # last (1.7 s at first, 7 s by iteration 600)
        if it % 50 == 49:
            self.git("repack", "-a", "-d", "-q")
            self.git("prune-packed")
            self.stats["repacks"] += 1
        # the store: no drift, one record per state, staging swept
        # an apply interrupted by a kill stays unsettled while its
        # source's declaration fails (nothing declares a value to
        # settle it with); check says so, and the next pass that runs
        # the declaration settles it. Nothing else may be unsettled.
        def of_failing(path):
            app, _, rel = path.partition("/")
            if app == "multi":
                rel = rel.rsplit(".d/", 1)[0]
            return app in ("gen", "multi") and rel in failing
        rc, out, err = self.tend_run("check", "-q")
        drift = [l for l in out.splitlines() if l.startswith("drift ")]
        unsure = [l for l in drift if l.endswith(
            ": a failed or interrupted apply: the next sync retries it")
            and of_failing(l[len("drift "):].split(": ", 1)[0])]
        self.expect(rc == (1 if unsure else 0) and len(unsure) == len(drift),
                    "check: exit %d: %s %s" % (rc, out[-400:], err[-200:]))
        rc, out, err = self.tend_run("ls", "--json")
        self.expect(rc == 0, "ls: exit %d" % rc)
        states = json.loads(out)["states"]
        pend = [s["path"] for s in states
                if s["pending"] and not of_failing(s["path"])]
        self.expect(not pend, "states with more than one record: %s" % pend[:5])
        self.stats["unsure"] += len(unsure)
        # the counters tend status reads: what ls lists, app by app
        rc, out, err = self.tend_run("status", "--json")
        self.expect(rc == 0, "status: exit %d: %s" % (rc, err[-200:]))
        for a in json.loads(out)["apps"] if rc == 0 else []:
            rc, o2, e2 = self.tend_run("ls", "--json", a["app"])
            s = json.loads(o2)["states"] if rc == 0 else []
            want = (len(s), sum(1 for x in s if x["pending"]))
            self.expect((a["states"], a["pending"]) == want,
                        "status counts %s: %s states, %s unsettled; ls "
                        "lists %s, %s" % ((a["app"], a["states"],
                                           a["pending"]) + want))
        for d in ("staging", "tmp"):
            staging = os.path.join(self.ws, ".tend", d)
            left = os.listdir(staging) if os.path.isdir(staging) else []
            self.expect(not left, "%s not swept: %s" % (d, left))
        # converged: one more pass applies nothing, commits nothing
        tip = subprocess.run(["git", "-C", "repo.git", "rev-parse",
                              ref], cwd=self.ws,
                             stdout=subprocess.PIPE).stdout
        rc, out, err = self.tend_run("sync", "--json")
        for app in json.loads(out)["apps"]:
            res = app["result"]
            n = res["created"] + res["updated"] + res["deleted"]
            self.expect(n == 0, "%s: a second clean pass applied %d" %
                        (app["app"], n))
        tip2 = subprocess.run(["git", "-C", "repo.git", "rev-parse",
                               ref], cwd=self.ws,
                              stdout=subprocess.PIPE).stdout
        self.expect(tip == tip2, "a second clean pass made a commit")
        rc, out, err = self.tend_run("plan")
        self.expect(rc == (1 if failing or collide else 0) and
                    ("failed, nothing planned" in out and
                     "0 to create, 0 to update, 0 to delete" in out
                     if failing or collide else "No changes" in out),
                    "plan after converging: exit %d: %s %s" %
                    (rc, out[-400:], err[-200:]))
        k = self.knobs
        self.pages_synced = (k["ref"], k["prefix"], k["pages_exclusive"])

    def run(self, iterations):
        for it in range(1, iterations + 1):
            # a third of the time, batches of a few components: kills
            # and container deletes cross batch boundaries
            self.env["TEND_BATCH"] = self.rng.choice(["", "", "32"])
            if self.agent:
                ops = self.killed_agent()
            else:
                ops = self.mutate()
                self.killed_run()
            try:
                self.converge(it)
            except Failed as e:
                raise Failed("iteration %d (ops %s, knobs %s): %s" %
                             (it, ops, self.knobs, e))
            self.stats["iterations"] = it
            if self.progress and it % self.progress == 0:
                print("torture: %d iterations converged, %.0f s" %
                      (it, time.time() - self.t0), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--tend", required=True)
    ap.add_argument("--iterations", type=int, default=None,
                    help="default: $TORTURE_ITERS, else --default-iterations")
    ap.add_argument("--default-iterations", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--progress", type=int, default=0, metavar="N",
                    help="a line every N converged iterations")
    ap.add_argument("--agent", action="store_true",
                    help="kill a running `tend watch` instead of `tend sync`")
    a = ap.parse_args()
    if a.iterations is None:
        a.iterations = int(os.environ.get("TORTURE_ITERS",
                                          a.default_iterations))
    t = Torture(a)
    t0 = time.time()
    ok = True
    try:
        t.run(a.iterations)
    except Failed as e:
        print("FAIL (seed %d): %s" % (a.seed, e), file=sys.stderr)
        ok = False
    s = t.stats
    deferred = ", %d with a deferred settle open" % s["deferred"] \
        if a.agent else ""
    print("torture%s: seed %d, %d iterations converged, tend killed %d "
          "times (%d by timer, %d at a failpoint%s), %d runs finished "
          "before the kill, %d --full, %d drops, %d ref locks left and "
          "cleared, %d tags caught up, %d converged with name conflicts, %d exclusive strays "
          "removed by --full (%d of them git), %d prefix or ref moves, %d foreign files "
          "kept, %d repacks, %.1f s" %
          (" --agent" if a.agent else "", a.seed, s["iterations"],
           s["killed"], s["by_timer"], s["by_failpoint"], deferred,
           s["finished"], s["full"], s["drops"], s["locks"], s["tags"],
           s["conflicts"], s["strays"] + s["git_strays"], s["git_strays"],
           s["moves"], len(t.foreign), s["repacks"],
           time.time() - t0))
    if ok or not a.keep:
        shutil.rmtree(t.ws, ignore_errors=True)
    else:
        print("workspace kept: " + t.ws, file=sys.stderr)
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
