#!/usr/bin/env python3
"""gentree.py - deterministic source trees for tend's benchmarks.

  gentree.py gen DIR -n N [--seed S]
  gentree.py mutate DIR --round R [--modify K] [--delete D] [--rename R2] [--create C]

Shape (chosen to match the figures in the project's performance notes):
about 20 files per leaf directory, leaves at depth 3 to 5, a few files in
interior directories, sizes log-normal around a 4 KiB median (0.5 % are
1 MiB), text-like content with a unique first line per file so no two
files are equal. Same arguments, same tree.
"""
import argparse
import os
import random
import sys

WORDS = ("int char void return static struct if else for while buffer count "
         "index value state node tree path file entry table list map read write "
         "sync target source commit ref update remove insert").split()


def text_pool(rng, size=1 << 20):
    out, n = [], 0
    while n < size:
        line = " " * (4 * rng.randrange(4)) + " ".join(
            rng.choice(WORDS) for _ in range(2 + rng.randrange(9))) + ";\n"
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


def size_of(rng):
    if rng.random() < 0.005:
        return 1 << 20
    return max(0, min(512 * 1024, int(rng.lognormvariate(8.318, 1.2))))  # e^8.318 ~ 4096


def body(pool, rng, header, size):
    head = header.encode()
    if size <= len(head):
        return head[:size]
    chunks, left = [head], size - len(head)
    while left > 0:
        off = rng.randrange(len(pool) - 1)
        piece = pool[off:off + left]
        chunks.append(piece)
        left -= len(piece)
    return b"".join(chunks)


def layout(rng, n):
    """Yield (directory, number of files) pairs for n files."""
    dirs = []

    def split(rel, depth, count, target):
        if count <= 0:
            return
        if depth >= target or count <= 30:
            dirs.append((rel, count))
            return
        if depth >= 1 and count > 40 and rng.random() < 0.3:
            here = 1 + rng.randrange(3)
            dirs.append((rel, here))
            count -= here
        levels = target - depth
        k = max(2, round((count / 20.0) ** (1.0 / levels)))
        weights = [0.75 + 0.5 * rng.random() for _ in range(k)]
        total = sum(weights)
        parts = [int(count * w / total) for w in weights]
        parts[-1] += count - sum(parts)
        for i, p in enumerate(parts):
            split(os.path.join(rel, "d%02d" % i), depth + 1, p, target)

    for top in range(max(1, n // 20000)):
        share = n // max(1, n // 20000) + (n % max(1, n // 20000) if top == 0 else 0)
        split("t%02d" % top, 1, share, 3 + rng.randrange(3))
    return dirs


def gen(a):
    rng = random.Random(a.seed)
    pool = text_pool(random.Random(a.seed + 1))
    os.makedirs(a.dir, exist_ok=True)
    fid = 0
    for rel, count in layout(rng, a.n):
        d = os.path.join(a.dir, rel)
        os.makedirs(d, exist_ok=True)
        for _ in range(count):
            name = "f%06d%s" % (fid, (".c", ".h", ".txt", ".md", ".json")[fid % 5])
            with open(os.path.join(d, name), "wb") as f:
                f.write(body(pool, rng, "/* %s/%s */\n" % (rel, name), size_of(rng)))
            fid += 1
    print("gentree: %d files in %s" % (fid, a.dir), file=sys.stderr)


def files(root):
    out = []
    for dp, dn, fn in os.walk(root):
        # a repository inside the tree (git's side of bench/git.sh) is
        # not the tree: mutating its objects would corrupt it
        dn[:] = sorted(d for d in dn if d != ".git")
        out.extend(os.path.join(dp, f) for f in sorted(fn))
    return out


def mutate(a):
    rng = random.Random(a.seed * 1000003 + a.round)
    pool = text_pool(random.Random(a.seed + 1))
    all_files = files(a.dir)
    picks = rng.sample(all_files, a.modify + a.delete + a.rename)
    for p in picks[:a.modify]:
        size = os.path.getsize(p) + 1 + rng.randrange(64)
        with open(p, "wb") as f:
            f.write(body(pool, rng, "/* %s round %d */\n" % (p, a.round), size))
    for p in picks[a.modify:a.modify + a.delete]:
        os.unlink(p)
    for p in picks[a.modify + a.delete:]:
        os.rename(p, "%s.r%d" % (p, a.round))
    dirs = sorted({os.path.dirname(p) for p in all_files})
    for j in range(a.create):
        d = rng.choice(dirs)
        with open(os.path.join(d, "new_r%d_%d.c" % (a.round, j)), "wb") as f:
            f.write(body(pool, rng, "/* new %d %d */\n" % (a.round, j), 4096))


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    g = sp.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("-n", type=int, required=True)
    g.add_argument("--seed", type=int, default=1)
    m = sp.add_parser("mutate")
    m.add_argument("dir")
    m.add_argument("--round", type=int, required=True)
    m.add_argument("--seed", type=int, default=1)
    for opt in ("modify", "delete", "rename", "create"):
        m.add_argument("--" + opt, type=int, default=0)
    a = ap.parse_args()
    gen(a) if a.cmd == "gen" else mutate(a)


if __name__ == "__main__":
    main()
