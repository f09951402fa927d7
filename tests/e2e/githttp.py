#!/usr/bin/env python3
"""githttp.py - git's smart HTTP for the tests: git http-backend behind
HTTP Basic authentication, on 127.0.0.1.

  githttp.py ROOT PORTFILE USER PASSWORD

Serves the repositories under ROOT (http://127.0.0.1:PORT/NAME.git) to
whoever gives USER and PASSWORD (401 otherwise), pushes included. Binds a
free port and writes it to PORTFILE once it listens; runs until killed.
"""
import base64
import http.server
import os
import subprocess
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline().strip().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def serve(self):
        want = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode())
        if self.headers.get("Authorization", "") != "Basic " + want.decode():
            data = self.body()
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=ROOT, GIT_HTTP_EXPORT_ALL="1",
                   REQUEST_METHOD=self.command, PATH_INFO=path,
                   QUERY_STRING=query, REMOTE_USER=USER,
                   REMOTE_ADDR="127.0.0.1",
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   GIT_HTTP_MAX_REQUEST_BUFFER="100M")
        data = self.body()
        env["CONTENT_LENGTH"] = str(len(data))
        p = subprocess.run(["git", "http-backend"], input=data, env=env,
                           stdout=subprocess.PIPE)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = serve
    do_POST = serve


ROOT, PORTFILE, USER, PASSWORD = sys.argv[1:5]
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
