"""Real HTTP servers on 127.0.0.1 for the remote-archive tests and benchmark:
nginx (nginx-light) with a private configuration, Python's http.server (no
range support) and s3rver (S3 protocol). Every server gets a free port, is
waited for with a bounded loop and is stopped by stop()."""
import os
import signal
import socket
import subprocess
import sys
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
    bytes/s; with `tls=(cert, key)` it speaks HTTPS."""

    def __init__(self, workdir, root, slow_rate=200_000, tls=None):
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


def install_s3rver(build_dir):
    """s3rver 3.7.1 from npm into <build>/s3rver (once); its executable."""
    prefix = os.path.join(str(build_dir), "s3rver")
    exe = os.path.join(prefix, "node_modules", ".bin", "s3rver")
    if not os.path.exists(exe):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", prefix,
                        "s3rver@3.7.1"], check=True, capture_output=True, timeout=600)
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
