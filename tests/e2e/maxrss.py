#!/usr/bin/env python3
"""maxrss.py CMD... - run CMD, print its peak RSS in KiB on stderr's last
line as "maxrss KIB", exit with its exit code."""
import resource, subprocess, sys

rc = subprocess.call(sys.argv[1:])
print("maxrss %d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
      file=sys.stderr)
sys.exit(rc)
