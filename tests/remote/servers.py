"""Real HTTP servers on 127.0.0.1 for the remote-archive tests and benchmark:
nginx (nginx-light) with a private configuration, Python's http.server (no
range support), s3rver (S3 protocol) and its fork @20minutes/s3rver (S3 with
UploadPartCopy, for writers), and S3Proxy, a recording and fault-injecting
proxy in front of either (which can enforce the conditions s3rver ignores). Every server gets a free port, is waited for with a
bounded loop and is stopped by stop()."""
import fcntl
import http.client
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time

# One access-log line per request: what was asked and what was sent.
LOG_FORMAT = '$request|$http_range|$http_if_match|$status|$bytes_sent|$body_bytes_sent'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no server on port {port} after {seconds} s")


def stop_process(proc, sig=signal.SIGTERM):
    """Stops a server process: `sig`, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class Nginx:
    """nginx serving `root` on a free port: / normally, /slow/ at `slow_rate`
    bytes/s; with `tls=(cert, key)` it speaks HTTPS; `extra` is added to its
    server block (more locations)."""

    def __init__(self, workdir, root, slow_rate=200_000, tls=None, extra=""):
        self.workdir = str(workdir)
        self.root = str(root)
        self.port = free_port()
        self.access_log = os.path.join(self.workdir, "access.log")
        os.makedirs(self.workdir, exist_ok=True)
        listen = f"127.0.0.1:{self.port}" + (" ssl" if tls else "")
        tls_lines = f"ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};" if tls else ""
        w = self.workdir
        conf = f"""
daemon off;
master_process on;
worker_processes 1;
user root;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{ worker_connections 256; }}
http {{
  log_format probe '{LOG_FORMAT}';
  access_log {self.access_log} probe;
  client_body_temp_path {w}/client_body;
  proxy_temp_path {w}/proxy;
  fastcgi_temp_path {w}/fastcgi;
  uwsgi_temp_path {w}/uwsgi;
  scgi_temp_path {w}/scgi;
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  server {{
    listen {listen};
    {tls_lines}
    root {self.root};
    location /slow/ {{ alias {self.root}/; limit_rate {slow_rate}; }}
    {extra}
  }}
}}
"""
        self.conf = os.path.join(self.workdir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["nginx", "-p", self.workdir, "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.proc)
        self.scheme = "https" if tls else "http"

    def url(self, name, slow=False):
        return f"{self.scheme}://127.0.0.1:{self.port}/{'slow/' if slow else ''}{name}"

    def log_lines(self):
        """Access-log records as dicts (nginx writes a line when a request ends)."""
        if not os.path.exists(self.access_log):
            return []
        out = []
        with open(self.access_log) as f:
            for line in f:
                request, rng, if_match, status, sent, body = line.rstrip("\n").split("|")
                out.append(dict(request=request, range=rng, if_match=if_match, status=int(status),
                                bytes_sent=int(sent), body_bytes_sent=int(body)))
        return out

    def clear_log(self):
        # nginx keeps the file open and appends: truncating keeps that working.
        if os.path.exists(self.access_log):
            os.truncate(self.access_log, 0)

    def stop(self):
        stop_process(self.proc)


class PlainHttpServer:
    """Python's http.server: answers every GET with the whole file (200)."""

    def __init__(self, root):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
             "--directory", str(root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc)

    def url(self, name):
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self):
        stop_process(self.proc)


def npm_install_once(prefix, package, installed):
    """`npm install package` into `prefix` unless the file `installed` exists, under an
    exclusive lock on <prefix>.lock: the meson tests remote_* run at the same time and install
    into the same build folder."""
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    with open(prefix + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(installed):
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", prefix,
                            package], check=True, capture_output=True, timeout=600)


def install_s3rver(build_dir):
    """s3rver 3.7.1 from npm into <build>/s3rver (once); its executable."""
    prefix = os.path.join(str(build_dir), "s3rver")
    exe = os.path.join(prefix, "node_modules", ".bin", "s3rver")
    npm_install_once(prefix, "s3rver@3.7.1", exe)
    return exe


class S3rver:
    """s3rver on a free port with bucket `bucket`; credentials S3RVER/S3RVER
    (its fixed pair). Objects are uploaded with signed PUTs (curl)."""
    ACCESS_KEY = SECRET_KEY = "S3RVER"

    def __init__(self, exe, workdir, bucket):
        self.port = free_port()
        self.bucket = bucket
        os.makedirs(str(workdir), exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "-d", str(workdir), "-a", "127.0.0.1", "-p", str(self.port), "--silent",
             "--configure-bucket", bucket],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.proc, seconds=60)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def env(self):
        return {"AWS_ACCESS_KEY_ID": self.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
                "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint}

    def put(self, key, path):
        subprocess.run(["curl", "-sSf", "--max-time", "60", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{self.ACCESS_KEY}:{self.SECRET_KEY}",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "-T", str(path), f"{self.endpoint}/{self.bucket}/{key}"],
                       check=True, capture_output=True, timeout=90)

    def stop(self):
        stop_process(self.proc)


S3RVER_FORK = "@20minutes/s3rver@4.0.4"


def install_s3rver_fork(build_dir):
    """@20minutes/s3rver 4.0.4 from npm into <build>/s3rver-fork (once): the
    folder whose node_modules holds it. It implements multipart upload with
    UploadPartCopy (ranges included) and checks SigV4 signatures; it has no
    AbortMultipartUpload (405 MethodNotAllowed), no ListMultipartUploads (501
    NotImplemented) and ignores If-Match / If-None-Match on completion."""
    prefix = os.path.join(str(build_dir), "s3rver-fork")
    module = os.path.join(prefix, "node_modules", "@20minutes", "s3rver", "package.json")
    npm_install_once(prefix, S3RVER_FORK, module)
    return prefix


class S3rverFork(S3rver):
    """@20minutes/s3rver on a free port with bucket `bucket` (it ships no
    command line: started through node -e). Same credentials as s3rver."""

    def __init__(self, prefix, workdir, bucket):  # noqa: super().__init__ starts 3.7.1
        self.port = free_port()
        self.bucket = bucket
        os.makedirs(str(workdir), exist_ok=True)
        script = ("new (require('@20minutes/s3rver'))({port: %d, address: '127.0.0.1', "
                  "silent: true, directory: %r, configureBuckets: [{name: %r}]}).run()"
                  % (self.port, str(workdir), bucket))
        self.proc = subprocess.Popen(["node", "-e", script], cwd=prefix,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.proc, seconds=60)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def get(self, key):
        """The object's bytes (a signed GET with curl)."""
        return subprocess.run(
            ["curl", "-sSf", "--max-time", "60", "--aws-sigv4", "aws:amz:us-east-1:s3",
             "--user", f"{self.ACCESS_KEY}:{self.SECRET_KEY}",
             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", f"{self.endpoint}/{self.bucket}/{key}"],
            check=True, capture_output=True, timeout=90).stdout


class HostileHttp:
    """A server on 127.0.0.1 for one object (`data`, a bytes object the test
    may replace) that answers HEAD as a real server does and each GET as the
    next entry of `plan` says (then "ok"), where every misbehaviour is
    bounded in time (at most `max_seconds` per answer):

      "ok"              206 with exactly the range asked
      "whole"           200 with the whole object (Range ignored)
      "whole+1"         200 with one byte more than the object
      "offset+1"        206 whose Content-Range (and body) start one byte later
      "total+1"         206 whose Content-Range names a larger object
      "range-garbage"   206 whose Content-Range has text after the total
      "no-range"        206 without Content-Range
      "longer"          206 with 10 bytes more than the range
      "etag"            206 of the range but with another ETag
      "error-stream"    500 whose body never ends (until the client leaves)
      "huge-header"     206 with a 1 MiB header line
      "trickle"         headers sent one byte a second
      "slow"            206 with exactly the range asked, its body sent at
                        `rate` bytes a second (in eighths of it)
      "endless-headers" a 206 status line, then header lines of 64 bytes
                        without end, 2 KiB a second
      "redirect-loop"   302 to the same URL
      "busy"            503 with Retry-After: 2
      "replaced"        the object replaced (same size, other bytes, later
                        Last-Modified; ETag too unless etag=None) before a
                        206 of the new bytes (If-Match and
                        If-Unmodified-Since are ignored)

    With etag=None no ETag is sent (Last-Modified only). `gets` counts GETs."""

    def __init__(self, data, etag='"v1"', last_modified="Sat, 28 Nov 2026 10:00:00 GMT",
                 max_seconds=30, rate=2048):
        self.data, self.etag, self.last_modified = data, etag, last_modified
        self.plan, self.gets, self.max_seconds, self.rate = [], 0, max_seconds, rate
        self.get_times = []  # time.monotonic() of each GET
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _head(self, status, length, extra=(), etag=None):
                self.send_response(status)
                if length is not None:
                    self.send_header("Content-Length", str(length))
                if owner.etag is not None:
                    self.send_header("ETag", etag or owner.etag)
                self.send_header("Last-Modified", owner.last_modified)
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()

            def do_HEAD(self):
                self._head(200, len(owner.data))

            def _stream(self, chunk, pause, body=None):
                """Writes `chunk` every `pause` seconds (the pieces of `body`
                if given, then stops) for at most max_seconds."""
                deadline = time.monotonic() + owner.max_seconds
                pieces = None if body is None else [body[i:i + len(chunk)]
                                                    for i in range(0, len(body), len(chunk))]
                try:
                    while time.monotonic() < deadline:
                        self.wfile.write(chunk if pieces is None else pieces.pop(0))
                        self.wfile.flush()
                        if pieces == []:
                            break
                        time.sleep(pause)
                except OSError:
                    pass
                self.close_connection = True

            def do_GET(self):
                data = owner.data
                owner.gets += 1
                owner.get_times.append(time.monotonic())
                mode = owner.plan.pop(0) if owner.plan else "ok"
                if mode == "busy":
                    self._head(503, 0, [("Retry-After", "2")])
                    return
                first, last = self.headers["Range"][len("bytes="):].split("-")
                first, last = int(first), int(last)
                n = len(data)
                if mode == "replaced":
                    owner.data = data = bytes(b ^ 0x5A for b in data)
                    owner.last_modified = "Sat, 28 Nov 2026 11:00:00 GMT"
                    if owner.etag is not None:
                        owner.etag = '"v2"'
                if mode == "redirect-loop":
                    self._head(302, 0, [("Location", self.path)])
                    return
                if mode == "error-stream":
                    self.send_response(500)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self._stream(b"x" * 65536, 0.01)
                    return
                if mode == "trickle":
                    self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
                    self._stream(b"X", 1.0)
                    return
                if mode == "endless-headers":
                    self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
                    self._stream(b"X-Pad: " + b"p" * 55 + b"\r\n", 64 / 2048)
                    return
                if mode in ("whole", "whole+1"):
                    body = data + (b"x" if mode == "whole+1" else b"")
                    self._head(200, len(body))
                    self.wfile.write(body)
                    return
                body = data[first:last + 1]
                ranges = {"offset+1": f"bytes {first + 1}-{last + 1}/{n}",
                          "total+1": f"bytes {first}-{last}/{n + 1}",
                          "range-garbage": f"bytes {first}-{last}/{n} garbage"}
                extra = [] if mode == "no-range" else [
                    ("Content-Range", ranges.get(mode, f"bytes {first}-{last}/{n}"))]
                if mode == "offset+1":
                    body = data[first + 1:last + 2]
                if mode == "longer":
                    body += b"y" * 10
                if mode == "huge-header":
                    extra.append(("X-Huge", "h" * (1 << 20)))
                self._head(206, len(body), extra, etag='"other"' if mode == "etag" else None)
                if mode == "slow":
                    step = max(1, owner.rate // 8)
                    self._stream(b"s" * step, step / owner.rate, body)
                    return
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.port = self.server.server_address[1]

    def url(self, name="a.zip"):
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class SharedLock:
    """A readers-writer lock: many holders of shared(), or one of exclusive()."""

    def __init__(self):
        self.cond = threading.Condition()
        self.readers = 0
        self.writing = False

    def acquire(self, exclusive):
        with self.cond:
            if exclusive:
                self.cond.wait_for(lambda: not self.writing and self.readers == 0)
                self.writing = True
            else:
                self.cond.wait_for(lambda: not self.writing)
                self.readers += 1

    def release(self, exclusive):
        with self.cond:
            if exclusive:
                self.writing = False
            else:
                self.readers -= 1
            self.cond.notify_all()


def _unquoted(etag):
    return (etag or "").strip().removeprefix("W/").strip('"')


class S3Proxy:
    """An HTTP proxy on 127.0.0.1 in front of an S3 server: records every
    request (method, path with query, headers, body bytes, status, and
    time.monotonic() when it arrived and when its answer was known) and can
    answer the next requests that match with an injected failure instead of
    forwarding them. Clients are pointed at the proxy; the Host header they
    signed (SigV4) is passed through unchanged, so the server checks the
    signature the client made.

    With enforce_conditions=True it also enforces the conditions that
    s3rver ignores, as AWS S3 does: CompleteMultipartUpload with If-Match
    (the key's current ETag) or If-None-Match: * (no such key), UploadPartCopy
    with x-amz-copy-source-if-match, and GET/HEAD with If-Match, each
    refused with 412 PreconditionFailed (record["refused"] = True); and it
    makes a completion atomic for the other requests (s3rver writes the
    object in place): completions run one at a time, with no read or copy
    forwarded meanwhile. The current ETag comes from an unsigned HEAD
    (s3rver serves requests without credentials)."""

    def __init__(self, upstream_port, enforce_conditions=False):
        self.upstream_port = upstream_port
        self.enforce = enforce_conditions
        self.versions = SharedLock()
        self.port = free_port()
        self.log = []
        self.faults = []  # [match(method, path) -> bool, kind, remaining]
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                start = time.monotonic()
                length = int(self.headers.get("Content-Length", "0") or 0)
                if self.headers.get("Expect", "").lower() == "100-continue":
                    self.send_response_only(100)
                    self.end_headers()
                body = self.rfile.read(length) if length else b""
                record = dict(method=self.command, path=self.path, body=len(body),
                              headers={k.lower(): v for k, v in self.headers.items()},
                              start=start)
                fault = proxy._take_fault(self.command, self.path, record["headers"])
                if isinstance(fault, tuple) and fault[0] == "delay":
                    time.sleep(fault[1])
                    fault = None
                if isinstance(fault, tuple) and fault[0] == "hold":
                    fault[1].set()
                    fault[2].wait(fault[3])
                    fault = None
                if fault == "lose":  # forwarded, then the connection closed unanswered
                    proxy._forward(self, body, record)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "reset":
                    record["status"] = "reset"
                    proxy._record(record)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None and fault[0] != "answer":  # (status, S3 error code)
                    status, code = fault
                    fault = ("answer", status,
                             (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                              f"<Message>injected by the test proxy</Message></Error>").encode())
                if fault is not None:
                    _, status, payload, *headers = fault
                    record["status"] = status
                    proxy._record(record)
                    self.send_response(status)
                    for k, v in (headers[0] if headers else []):
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if proxy.enforce:
                    answer = proxy._forward_conditional(self, body, record)
                else:
                    answer = proxy._forward(self, body, record)
                self.send_response(answer[0])
                for k, v in answer[1]:
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(answer[2])
                    except OSError:  # the client left without the body (an error's)
                        self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

        class Server(http.server.ThreadingHTTPServer):
            # Python's default backlog (5) drops the connections of a burst
            # of parallel requests beyond it, which the client's TCP then
            # retries after 1 s: a delay no real server adds.
            request_queue_size = 128

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _forward(self, handler, body, record):
        """Sends the request to the server; (status, headers to pass on, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in ("expect", "connection")}
            conn.request(handler.command, handler.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            record["status"] = answer.status
            self._record(record)
            out = [(k, v) for k, v in answer.getheaders()
                   if k.lower() not in ("transfer-encoding", "connection", "content-length")]
            # A HEAD's Content-Length is the object's, not the (empty) body's.
            out.append(("Content-Length", answer.getheader("Content-Length", "0")
                        if handler.command == "HEAD" else str(len(data))))
            return answer.status, out, data
        finally:
            conn.close()

    def _current_etag(self, path):
        """The ETag of the object at `path` (no query) now, or None if none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        try:
            conn.request("HEAD", path)
            answer = conn.getresponse()
            answer.read()
            return answer.getheader("ETag") if answer.status == 200 else None
        finally:
            conn.close()

    def _forward_conditional(self, handler, body, record):
        """_forward with the conditions enforced (see the class)."""
        method, path = handler.command, handler.path
        headers = {k.lower(): v for k, v in handler.headers.items()}
        key_path, _, query = path.partition("?")
        complete = method == "POST" and "uploadId=" in query
        copy = method == "PUT" and "x-amz-copy-source" in headers
        reads = method in ("GET", "HEAD")
        if not (complete or copy or reads):
            return self._forward(handler, body, record)
        self.versions.acquire(complete)
        try:
            refused = False
            if complete:
                now = self._current_etag(key_path)
                if "if-match" in headers:
                    refused = now is None or _unquoted(now) != _unquoted(headers["if-match"])
                if headers.get("if-none-match", "").strip() == "*":
                    refused = refused or now is not None
            elif copy and "x-amz-copy-source-if-match" in headers:
                source = "/" + headers["x-amz-copy-source"].lstrip("/")
                now = self._current_etag(source)
                refused = now is None or (_unquoted(now) !=
                                          _unquoted(headers["x-amz-copy-source-if-match"]))
            if not refused:
                answer = self._forward(handler, body, record)
                if not (reads and "if-match" in headers and 200 <= answer[0] < 300):
                    return answer
                etag = next((v for k, v in answer[1] if k.lower() == "etag"), None)
                if _unquoted(etag) == _unquoted(headers["if-match"]):
                    return answer
                with self.lock:
                    self.log.remove(record)
            payload = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed'
                       b'</Code><Message>At least one of the pre-conditions you specified did '
                       b'not hold (enforced by the test proxy)</Message></Error>')
            record.update(status=412, refused=True)
            self._record(record)
            return 412, [("Content-Type", "application/xml"),
                         ("Content-Length", str(len(payload)))], b"" if method == "HEAD" else payload
        finally:
            self.versions.release(complete)

    def _record(self, record):
        record["end"] = time.monotonic()
        with self.lock:
            self.log.append(record)

    def _take_fault(self, method, path, headers):
        with self.lock:
            for fault in self.faults:
                match, kind, remaining = fault
                takes_headers = match.__code__.co_argcount == 3
                if remaining > 0 and (match(method, path, headers) if takes_headers
                                      else match(method, path)):
                    fault[2] -= 1
                    return kind
        return None

    def inject(self, match, kind, count):
        """Answers the next `count` requests for which match(method, path) (or
        match(method, path, headers), headers by lower-case name) is true
        with `kind`: "reset" (the connection is closed unanswered),
        "lose" (forwarded, then the connection closed unanswered),
        (status, S3 error code), ("answer", status, body bytes[, [(header,
        value)...]]) (that answer instead of the server's), ("delay", seconds) (forwarded after that
        pause), or ("hold", arrived, release, seconds) (arrived.set(), then
        forwarded once release is set, or after that many seconds; both
        threading.Event)."""
        with self.lock:
            self.faults.append([match, kind, count])

    def clear(self):
        with self.lock:
            self.log.clear()
            self.faults.clear()

    def requests(self):
        with self.lock:
            return list(self.log)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
