"""What the provider stand-ins share: TLS, the command line, request bodies, SSE, the record.

TEST TOOLS ONLY. A stand-in is a local HTTPS server speaking just enough of one provider's API
for a real harness (Claude Code, Codex) to run a turn offline. It binds loopback only. Python 3
standard library only.

A stand-in module defines a `Handler(StandinHandler)` with `do_POST`/`do_GET`/... and calls
`main(Handler, description)`.
"""

import argparse
import gzip
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Headers copied into every record line, as received (lower-case names).
RECORDED_HEADERS = (
    "host",
    "x-api-key",
    "authorization",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "originator",
    "user-agent",
    "version",
    "content-type",
    "accept",
    "upgrade",
)

# `write FILE CONTENT`: FILE is one word, CONTENT the rest of that line.
WRITE_RE = re.compile(r"\bwrite\s+(\S+)\s+([^\r\n]+)")


def parse_write(text):
    """(file, content) if `text` asks for `write FILE CONTENT`, else None."""
    m = WRITE_RE.search(text or "")
    if not m:
        return None
    return m.group(1), m.group(2).strip()


# The prompt agenthold sends to resume a parked turn (core/src/supervisor/parking.rs,
# `resuming_prompt`): "[agenthold] The sandbox stopped … "<title>" was approved (it is allowed once
# when you try it again) … Continue the task where you left off."
RESUMING_PREFIX = "[agenthold]"


def acted_on(texts):
    """The user text to act on, of a conversation's user texts in order: the latest, except that
    agenthold's resuming prompt with an approval tries the interrupted request again (the latest
    earlier text that is not agenthold's), as a model continuing the task would. A resuming prompt
    that approved nothing (a denial) is acted on as it is: an echo."""
    if not texts:
        return ""
    text = texts[-1]
    if text.lstrip().startswith(RESUMING_PREFIX) and "was approved" in text:
        for earlier in reversed(texts[:-1]):
            if not earlier.lstrip().startswith(RESUMING_PREFIX):
                return earlier
    return text


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


class Recorder:
    """Appends one JSON object per line to a file; thread-safe; also logs to stderr."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def write(self, entry):
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        with self.lock:
            if self.path:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


class StandinHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; bodies read whole; SSE written as chunked responses."""

    protocol_version = "HTTP/1.1"
    server_version = "agenthold-standin/1"
    # TCP_NODELAY, as a provider's front end sets it: with Nagle's algorithm each SSE chunk
    # after the headers waited for the client's delayed ACK (~40 ms on Linux), a stall that was
    # the stand-in's, not the harness's or agenthold's.
    disable_nagle_algorithm = True
    # Filled by main().
    recorder = None
    record_body = False
    provider = "?"

    # -- logging ---------------------------------------------------------------------------

    def log_message(self, fmt, *args):  # noqa: N802 (stdlib name)
        log(self.provider, self.address_string(), fmt % args)

    # -- request ---------------------------------------------------------------------------

    def parse_request(self):
        # One handler serves every request of a keep-alive connection: forget the last body.
        self._body = None
        return super().parse_request()

    def read_body(self):
        """The request body as bytes (Content-Length or chunked; gzip/deflate/zstd undone)."""
        if getattr(self, "_body", None) is not None:
            return self._body
        data = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until an empty line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            data = b"".join(chunks)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "deflate":
            data = zlib.decompress(data)
        elif encoding == "zstd":
            # Codex signed in with ChatGPT compresses its requests with zstd; Python 3.11 has no
            # zstd module, the zstd command line (Debian's `zstd`) undoes it.
            data = subprocess.run(["zstd", "-dcq"], input=data, capture_output=True, check=True, timeout=30).stdout
        elif encoding:
            log(self.provider, "WARNING: request body Content-Encoding", encoding, "not understood")
        self._body = data
        return data

    def json_body(self):
        raw = self.read_body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def record(self, **extra):
        """One record line: method, path, the headers of interest, plus `extra`."""
        entry = {
            "time": time.time(),
            "provider": self.provider,
            "method": self.command,
            "path": self.path,
            "headers": {h: self.headers.get(h) for h in RECORDED_HEADERS if self.headers.get(h) is not None},
        }
        if self.record_body:
            body = self.read_body()
            if body:
                try:
                    entry["body"] = json.loads(body)
                except ValueError:
                    entry["body_text"] = body.decode("utf-8", "replace")
        else:
            self.read_body()  # keep-alive: the body must be consumed either way
        entry.update(extra)
        self.recorder.write(entry)
        return entry

    # -- responses -------------------------------------------------------------------------

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def start_sse(self, headers=None):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self.wfile.flush()

    def sse(self, event, data):
        """One SSE event (`event:` line plus one JSON `data:` line)."""
        payload = ""
        if event:
            payload += "event: %s\n" % event
        payload += "data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))
        self._chunk(payload.encode())

    def end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main(handler_cls, description):
    parser = argparse.ArgumentParser(description=description + " (TEST TOOL: a provider stand-in)")
    parser.add_argument("--cert", required=True, help="PEM certificate (chain) to serve")
    parser.add_argument("--key", required=True, help="PEM private key")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (loopback only; default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (0 = any free port)")
    parser.add_argument("--ready", help="file to write the port into once listening")
    parser.add_argument("--record", help="JSON-lines file: one line per request")
    parser.add_argument("--record-body", action="store_true", help="also record each whole request body")
    args = parser.parse_args()

    if args.host not in ("127.0.0.1", "::1", "localhost"):
        parser.error("stand-ins bind loopback only")

    handler_cls.recorder = Recorder(args.record)
    handler_cls.record_body = args.record_body

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    ctx.set_alpn_protocols(["http/1.1"])

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def get_request(self):
            sock, addr = super().get_request()
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        def finish_request(self, request, client_address):
            try:
                request.do_handshake()
            except ssl.SSLEOFError:
                return  # a client closed a spare connection before using it
            except (ssl.SSLError, OSError) as e:
                log(handler_cls.provider, "TLS handshake failed:", e)
                return
            super().finish_request(request, client_address)

        def handle_error(self, request, client_address):
            e = sys.exc_info()[1]
            if isinstance(e, (ConnectionError, ssl.SSLError, TimeoutError)):
                log(handler_cls.provider, "connection error:", repr(e))
                return
            super().handle_error(request, client_address)

    server = Server((args.host, args.port), handler_cls)
    port = server.server_address[1]
    log(handler_cls.provider, "listening on https://%s:%d" % (args.host, port))
    if args.ready:
        tmp = args.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.ready)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
