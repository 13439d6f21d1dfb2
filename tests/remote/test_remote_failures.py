"""Remote archives when things go wrong: a missing object, a server that
stops, a slow or silent server, one without range support, one that cuts
answers short or fails for a while, a replaced object, HTTPS trust."""
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

import servers
from conftest import cli_env, run


def failing(args, env=None, seconds=30):
    """Runs modelzip, expecting exit status 1 within `seconds`; returns stderr."""
    start = time.monotonic()
    p = run(*args, check=False, env=env or cli_env(), timeout=seconds + 30)
    took = time.monotonic() - start
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert took < seconds, f"took {took:.1f} s"
    return p.stderr.decode()


def test_404_names_url_and_status(nginx):
    url = nginx.url("no-such.zip")
    err = failing(["tags", url])
    assert url in err and "HTTP 404" in err


@pytest.mark.parametrize("name,value", [("MODELZIP_CACHE_LIMIT", "10X"),
                                        ("MODELZIP_CONNECT_TIMEOUT", "ten"),
                                        ("MODELZIP_LOW_SPEED_TIME", "-3"),
                                        ("MODELZIP_REQUEST_TIMEOUT", "0"),
                                        ("MODELZIP_NO_CACHE", "yes")])
def test_malformed_settings_are_refused_not_ignored(nginx, tmp_path, name, value):
    url = nginx.url("qs.zip")
    err = failing(["tags", url], env=cli_env(tmp_path / "cache", **{name: value}))
    assert url in err and f"{name}='{value}'" in err, err


def test_connection_refused(tmp_path):
    url = f"http://127.0.0.1:{servers.free_port()}/a.zip"
    err = failing(["tags", url], seconds=15)
    assert url in err and "refused" in err.lower(), err


def test_silent_server_times_out():
    """A server that accepts connections but never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/a.zip"
        err = failing(["tags", url], env=cli_env(MODELZIP_LOW_SPEED_TIME=1,
                                                 MODELZIP_CONNECT_TIMEOUT=1), seconds=15)
    assert "timed out" in err, err


def test_slow_link(nginx, site):
    """/slow/ sends 200 KB/s: a small read works and answers as locally;
    /crawl/-like rates under 1 KiB/s time out after MODELZIP_LOW_SPEED_TIME."""
    out = run("ls", nginx.url("qs.zip", slow=True), env=cli_env()).stdout
    assert out == run("ls", site / "qs.zip").stdout
    out = run("cat", nginx.url("qs.zip", slow=True), "embedding", "--tag", "step-1",
              env=cli_env()).stdout
    assert out == run("cat", site / "qs.zip", "embedding", "--tag", "step-1").stdout


def test_too_slow_link_times_out(site, tmp_path):
    server = servers.Nginx(tmp_path / "nginx", site, slow_rate=300)
    try:
        err = failing(["tags", server.url("qs.zip", slow=True)],
                      env=cli_env(MODELZIP_LOW_SPEED_TIME=2), seconds=20)
        assert "timed out" in err and "1 KiB/s" in err, err
    finally:
        server.stop()


def test_server_stopped_mid_read(site, tmp_path):
    server = servers.Nginx(tmp_path / "nginx", site, slow_rate=2_000_000)
    try:
        proc = subprocess.Popen(
            [os.environ["MODELZIP_CLI"], "cat", server.url("big.zip", slow=True), "big0", "--tag", "t1",
             "--npy"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env())
        # Wait (bounded) until the tensor's data is being fetched.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                r["status"] == 206 for r in server.log_lines()):
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, "finished before the server stopped"
    finally:
        server.stop()
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("modelzip did not give up after the server stopped")
    assert proc.returncode == 1
    err = err.decode()
    assert server.url("big.zip", slow=True) in err and "attempts" in err, err


def test_server_without_ranges(site, tmp_path):
    server = servers.PlainHttpServer(site)
    try:
        # Small objects are read whole (one GET), with the same answers.
        out = run("ls", server.url("qs.zip"), env=cli_env()).stdout
        assert out == run("ls", site / "qs.zip").stdout
        err = failing(["tags", server.url("big.zip")], seconds=20)
        assert "does not support range requests" in err and "curl -o" in err, err
    finally:
        server.stop()


class FlakyHandler(http.server.BaseHTTPRequestHandler):
    """Serves one file with ranges, failing as the server's `plan` says:
    'ok', '503', or 'short' (half the body, then the connection closes)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _head(self, status, length, extra=()):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", '"v1"')
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self):
        self._head(200, len(self.server.data))

    def do_GET(self):
        data = self.server.data
        self.server.gets += 1
        mode = self.server.plan.pop(0) if self.server.plan else "ok"
        if mode == "503":
            self._head(503, 0)
            return
        first, last = self.headers["Range"][len("bytes="):].split("-")
        first, last = int(first), int(last)
        body = data[first:last + 1]
        self._head(206, len(body), [("Content-Range", f"bytes {first}-{last}/{len(data)}")])
        if mode == "short":
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)


@pytest.fixture
def flaky(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
    server.data = (site / "qs.zip").read_bytes()
    server.plan, server.gets = [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/qs.zip"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_transient_errors_are_retried(flaky, site):
    server, url = flaky
    server.plan = ["503", "short"]  # the tail request fails twice, then works
    out = run("ls", url, env=cli_env()).stdout
    assert out == run("ls", site / "qs.zip").stdout
    assert server.gets >= 3


def test_truncated_answers_fail_after_bounded_retries(flaky):
    server, url = flaky
    server.plan = ["short"] * 10
    err = failing(["tags", url], seconds=20)
    assert "truncated response" in err and "4 attempts" in err, err
    assert server.gets == 4


def test_https_self_signed(site, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    server = servers.Nginx(tmp_path / "nginx", site, tls=(cert, key))
    try:
        url = server.url("qs.zip")
        assert url.startswith("https://")
        err = failing(["tags", url])
        assert "certificate" in err.lower(), err
        out = run("ls", url, env=cli_env(MODELZIP_CA_FILE=cert)).stdout
        assert out == run("ls", site / "qs.zip").stdout
    finally:
        server.stop()


def test_object_replaced_between_reads(nginx, site, tmp_path):
    """The archive replaced on the server after a first read: a second
    process pinned to the old version gets the changed-archive error, never
    a mix (checked here through the cache of the first)."""
    www = site
    shutil.copyfile(www / "qs.zip", www / "moving.zip")
    cache = tmp_path / "cache"
    # First read: the old version's tail and tables are cached.
    run("tags", nginx.url("moving.zip"), env=cli_env(cache))
    # Replace with another archive (new ETag) and read again: a new version,
    # read fresh, gives the new answer.
    shutil.copyfile(www / "emb.zip", www / "moving.tmp")
    os.replace(www / "moving.tmp", www / "moving.zip")
    out = run("tags", nginx.url("moving.zip"), env=cli_env(cache)).stdout
    assert out == run("tags", www / "emb.zip").stdout
