#!/usr/bin/env python3
"""TEST ONLY: a git server over HTTPS for the git e2e check and the repository tests.

`git http-backend` (smart HTTP: clone, fetch and push, git-upload-pack and git-receive-pack)
behind a small HTTPS server on 127.0.0.1 that requires HTTP Basic with `--token` as the password
(any username, as GitHub, GitLab and Gitea take a token). A request without credentials gets 401
with `WWW-Authenticate: Basic` (git then asks its credential helper); a wrong password gets 401
too. Every password received is recorded (one line per request, `-` for none) in `--record`, so
a test can check that the real token arrived, and only from the proxy.

    python3 git_server.py --root DIR --token T --cert leaf.pem --key leaf.key --ready PORTFILE \
        [--record FILE]

Repositories are the bare repositories under `--root` (`DIR/org/repo.git`); pushes are allowed.
"""

import argparse
import base64
import http.server
import os
import ssl
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--record", default=os.devnull)
    args = parser.parse_args()
    backend = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    backend = os.path.join(backend, "git-http-backend")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def password(self):
            header = self.headers.get("authorization") or ""
            if not header.startswith("Basic "):
                return None
            try:
                pair = base64.b64decode(header[6:], validate=True).decode()
            except Exception:
                return None
            return pair.split(":", 1)[1] if ":" in pair else None

        def refuse(self):
            body = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="e2e git"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle_git(self):
            password = self.password()
            with open(args.record, "a") as record:
                record.write((password if password is not None else "-") + "\n")
            if password != args.token:
                self.refuse()
                return
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("content-length") or 0)
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self.rfile.readline().strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    body += self.rfile.read(size)
                    self.rfile.readline()
            else:
                body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": args.root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REMOTE_USER": "e2e",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("content-type") or "",
                "CONTENT_LENGTH": str(len(body)),
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.receivepack",
                "GIT_CONFIG_VALUE_0": "true",
            }
            if self.headers.get("content-encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["content-encoding"]
            if self.headers.get("git-protocol"):
                env["GIT_PROTOCOL"] = self.headers["git-protocol"]
            out = subprocess.run([backend], input=body, capture_output=True, env=env).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = out.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = handle_git

        def log_message(self, fmt, *rest):
            sys.stderr.write("git-server: " + (fmt % rest) + "\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    tmp = args.ready + ".tmp"
    with open(tmp, "w") as ready:
        ready.write(f"{server.server_address[1]}\n")
    os.replace(tmp, args.ready)
    server.serve_forever()


if __name__ == "__main__":
    main()
