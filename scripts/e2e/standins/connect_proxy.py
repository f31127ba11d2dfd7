#!/usr/bin/env python3
"""TEST TOOL: a tiny HTTP CONNECT proxy that sends chosen hosts to loopback stand-ins.

    python3 connect_proxy.py --map api.anthropic.com:443=127.0.0.1:PORT [--map …] \
        [--port 0] --ready PORTFILE --log CONNECTS.jsonl

For trying a harness with its *default* provider URL on the host, the way it runs in a sandbox
behind agenthold's egress proxy (HTTPS_PROXY=http://127.0.0.1:PORT): every CONNECT is logged
(one JSON line: host, port, allowed), a mapped host:port is tunnelled to its stand-in (the TLS
inside is end to end between the harness and the stand-in, whose certificate names the host),
anything else is refused with 403. Plain-HTTP proxy requests are refused and logged too. This is
not agenthold's proxy: it injects nothing and reads nothing inside the tunnel.
"""

import argparse
import json
import os
import select
import socket
import socketserver
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--map", action="append", default=[], help="HOST:PORT=127.0.0.1:PORT (repeatable)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ready")
    p.add_argument("--log")
    a = p.parse_args()
    routes = {}
    for m in a.map:
        src, dst = m.split("=", 1)
        host, port = dst.rsplit(":", 1)
        if host not in ("127.0.0.1", "localhost", "::1"):
            p.error("stand-ins are loopback only")
        routes[src.lower()] = (host, int(port))
    lock = threading.Lock()

    def log(entry):
        entry["time"] = time.time()
        line = json.dumps(entry, sort_keys=True)
        print(line, file=sys.stderr, flush=True)
        if a.log:
            with lock, open(a.log, "a") as f:
                f.write(line + "\n")

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            line = self.rfile.readline(65536).decode("latin-1").strip()
            headers = []
            while True:
                h = self.rfile.readline(65536)
                if h in (b"\r\n", b"\n", b""):
                    break
                headers.append(h.decode("latin-1").strip())
            parts = line.split()
            if len(parts) < 2 or parts[0].upper() != "CONNECT":
                log({"method": parts[0] if parts else "", "target": parts[1] if len(parts) > 1 else "", "allowed": False})
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            target = parts[1].lower()
            dst = routes.get(target)
            log({"method": "CONNECT", "target": target, "allowed": dst is not None})
            if dst is None:
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection(dst, timeout=10)
            except OSError:
                self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            client = self.connection
            upstream.settimeout(None)
            # (a client sends nothing after CONNECT before the 200, so nothing is left in rfile)
            socks = [client, upstream]
            try:
                while True:
                    ready, _, _ = select.select(socks, [], [], 600)
                    if not ready:
                        break
                    for s in ready:
                        data = s.recv(65536)
                        if not data:
                            return
                        (upstream if s is client else client).sendall(data)
            except OSError:
                pass
            finally:
                upstream.close()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", a.port), Handler)
    port = server.server_address[1]
    print("connect proxy on http://127.0.0.1:%d" % port, file=sys.stderr, flush=True)
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.replace(a.ready + ".tmp", a.ready)
    server.serve_forever()


if __name__ == "__main__":
    main()
