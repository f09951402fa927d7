#!/usr/bin/env python3
"""maxrss.py CMD... - run CMD, print its peak RSS in KiB on stderr as
"maxrss KIB" and, sampled every 5 ms from /proc, the peak of its
anonymous part (the rest is file pages, such as the store's map) as
"maxanon KIB"; exit with its exit code."""
import resource, subprocess, sys, time

p = subprocess.Popen(sys.argv[1:])
anon = 0
while p.poll() is None:
    try:
        for line in open("/proc/%d/status" % p.pid):
            if line.startswith("RssAnon:"):
                anon = max(anon, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.005)
print("maxrss %d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
      file=sys.stderr)
print("maxanon %d" % anon, file=sys.stderr)
sys.exit(p.returncode)
