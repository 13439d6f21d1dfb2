"""s3://bucket/key archives: the protocol flow against s3rver (an
S3-compatible test server from npm, installed into the build folder), and the
SigV4 signatures against an independent implementation of AWS's signing
algorithm (a small server in this file that refuses a wrong signature).

Where s3rver differs from S3 (design notes section 7, and its source): it
does not check SigV4 signatures at all (lib/middleware/authentication.js:
"Signature version 4 calculation is unimplemented"; it checks only the access
key id and the header's form, so a wrong secret passes), it answers the suffix
range bytes=-N with the first N+1 bytes (modelzip never sends suffix ranges),
has no UploadPartCopy, and needs x-amz-content-sha256 on signed requests (S3
does too; modelzip sends the empty payload's hash)."""
import datetime
import hashlib
import hmac
import http.server
import os
import threading
import urllib.parse

import pytest

import servers
from conftest import cli_env, run


@pytest.fixture(scope="module")
def s3(site, tmp_path_factory):
    exe = servers.install_s3rver(os.environ["MODELZIP_BUILD_DIR"])
    server = servers.S3rver(exe, tmp_path_factory.mktemp("s3rver"), "models")
    try:
        for name in ("qs.zip", "emb.zip", "golden.zip"):
            server.put(f"ckpt/{name}", site / name)
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("name,args", [
    ("qs.zip", ["tags"]),
    ("qs.zip", ["ls", "--json"]),
    ("qs.zip", ["cat", "fc.weight", "--tag", "step-1"]),
    ("qs.zip", ["verify"]),
    ("golden.zip", ["graph", "--json"]),
    ("emb.zip", ["similar", "words", "Berlin", "--tag", "words", "--json"]),
])
def test_same_answer_as_local(s3, site, name, args):
    url = f"s3://models/ckpt/{name}"
    local = run(args[0], site / name, *args[1:])
    remote = run(args[0], url, *args[1:], env=cli_env(**s3.env()))
    assert remote.stdout.replace(url.encode(), str(site / name).encode()) == local.stdout


def test_unknown_access_key_is_refused(s3):
    env = cli_env(**{**s3.env(), "AWS_ACCESS_KEY_ID": "NOBODY"})
    p = run("tags", "s3://models/ckpt/qs.zip", check=False, env=env)
    assert p.returncode == 1
    assert b"s3://models/ckpt/qs.zip" in p.stderr and b"HTTP 403" in p.stderr, p.stderr


# ---- SigV4, checked independently -----------------------------------------
# AWS Signature Version 4 as documented ("Create a signed AWS API request"):
# canonical request -> string to sign -> HMAC-SHA256 chain from the secret.
KEY_ID, SECRET, TOKEN, REGION = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", \
    "session-token-1", "eu-central-1"


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def expected_signature(method, raw_path, headers, secret):
    """The signature AWS computes for a request with these headers (a dict
    of lower-case names), from the SignedHeaders its Authorization names."""
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 "), auth
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key_id, date, region, service, terminal = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    path, _, query = raw_path.partition("?")
    canonical_query = "&".join(sorted(query.split("&"))) if query else ""
    canonical = "\n".join([
        method, path, canonical_query,
        "".join(f"{h}:{' '.join(headers[h].split())}\n" for h in signed),
        ";".join(signed), headers["x-amz-content-sha256"]])
    scope = f"{date}/{region}/{service}/{terminal}"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers["x-amz-date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    k = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, terminal):
        k = _hmac(k, part)
    return dict(key_id=key_id, region=region, service=service, signed=signed,
                signature=fields["Signature"],
                expected=hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest())


class SigV4Handler(http.server.BaseHTTPRequestHandler):
    """Serves one object at /bucket/key with ranges, only to requests whose
    SigV4 signature is right (else 403, like S3's SignatureDoesNotMatch)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _check(self):
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            sig = expected_signature(self.command, self.path, headers, SECRET)
        except (KeyError, ValueError, AssertionError) as e:
            self.server.problems.append(f"malformed: {e!r}")
            return False
        self.server.seen.append((self.command, sig))
        stamp = datetime.datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
        fresh = abs((datetime.datetime.utcnow() - stamp).total_seconds()) < 900
        must_sign = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
        ok = (sig["signature"] == sig["expected"] and sig["key_id"] == KEY_ID and
              sig["region"] == REGION and sig["service"] == "s3" and fresh and
              must_sign <= set(sig["signed"]) and headers.get("x-amz-security-token") == TOKEN and
              urllib.parse.unquote(self.path) == "/models/ckpt/q s.zip")
        return ok

    def _send(self, status, body=b"", extra=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"s3-etag"')
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        if not self._check():
            return self._send(403)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.data)))
        self.send_header("ETag", '"s3-etag"')
        self.end_headers()

    def do_GET(self):
        if not self._check():
            return self._send(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        first, last = map(int, self.headers["Range"][len("bytes="):].split("-"))
        self._send(206, self.server.data[first:last + 1],
                   [("Content-Range", f"bytes {first}-{last}/{len(self.server.data)}")])


@pytest.fixture
def signing_server(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SigV4Handler)
    server.data = (site / "qs.zip").read_bytes()
    server.seen, server.problems = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def signing_env(server, secret):
    return cli_env(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=secret,
                   AWS_SESSION_TOKEN=TOKEN, AWS_REGION=REGION,
                   AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_address[1]}/")


def test_sigv4_signatures_are_right(signing_server, site):
    out = run("ls", "s3://models/ckpt/q s.zip", env=signing_env(signing_server, SECRET)).stdout
    assert out == run("ls", site / "qs.zip").stdout
    assert signing_server.problems == []
    methods = [m for m, _ in signing_server.seen]
    assert methods[0] == "HEAD" and methods.count("GET") >= 2
    assert all(s["signature"] == s["expected"] for _, s in signing_server.seen)
    # Range and If-Match are signed too when sent (else a proxy could alter them).
    gets = [s for m, s in signing_server.seen if m == "GET"]
    assert all({"range", "if-match"} <= set(s["signed"]) for s in gets), gets[0]["signed"]


def test_sigv4_wrong_secret_is_refused(signing_server):
    p = run("tags", "s3://models/ckpt/q s.zip", check=False,
            env=signing_env(signing_server, "not-the-secret"))
    # The HEAD's 403 has no body: one GET fetches the S3 error document that says why.
    assert p.returncode == 1 and b"HTTP 403 SignatureDoesNotMatch" in p.stderr, p.stderr
    assert [m for m, _ in signing_server.seen] == ["HEAD", "GET"]
    assert [s["signature"] != s["expected"] for _, s in signing_server.seen] == [True, True]


def test_refusal_text_from_the_server_is_made_printable(site):
    """The error document of a refused read is the server's text: a terminal
    escape or line break in its <Message> is shown escaped, and a long one cut."""
    message = b"denied \x1b[31mred\nnext line " + b"x" * 1000

    class Refusing(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, body):
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self):
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            self._send(b"<Error><Code>AccessDenied</Code><Message>" + message + b"</Message></Error>")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        p = run("tags", "s3://models/ckpt/qs.zip", check=False, env=signing_env(server, SECRET))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert p.returncode == 1, p.stderr
    assert b"HTTP 403 AccessDenied: denied \\x1b[31mred\\x0anext line xxx" in p.stderr, p.stderr
    assert b"\x1b" not in p.stderr and p.stderr.count(b"\n") == 1, p.stderr
    assert b"... (%d bytes)" % len(message) in p.stderr and len(p.stderr) < 600, p.stderr


def test_missing_key(s3):
    p = run("tags", "s3://models/ckpt/none.zip", check=False, env=cli_env(**s3.env()))
    assert p.returncode == 1, p.stderr
    assert p.stderr.endswith(b"s3://models/ckpt/none.zip: no such key 'ckpt/none.zip' in bucket "
                             b"'models' (HTTP 404 NoSuchKey)\n"), p.stderr


def test_missing_bucket(s3):
    p = run("tags", "s3://nobucket/ckpt/qs.zip", check=False, env=cli_env(**s3.env()))
    assert p.returncode == 1, p.stderr
    assert p.stderr.endswith(b"s3://nobucket/ckpt/qs.zip: no such bucket 'nobucket' "
                             b"(HTTP 404 NoSuchBucket)\n"), p.stderr


def test_bad_s3_url(s3):
    p = run("tags", "s3://Models", check=False, env=cli_env(**s3.env()))
    assert p.returncode == 1 and b"s3://BUCKET/KEY" in p.stderr, p.stderr


@pytest.mark.parametrize("key", ["x/../qs.zip", "./ckpt/qs.zip", "ckpt/..", "ckpt/."])
def test_dot_segments_in_keys_are_refused(s3, key):
    """libcurl removes dot segments: s3://models/x/../qs.zip would read (and
    a writer write) the key qs.zip, not the key the user named."""
    url = f"s3://models/{key}"
    p = run("tags", url, check=False, env=cli_env(**s3.env()))
    assert p.returncode == 1 and url.encode() in p.stderr and b"'..' path segment" in p.stderr, \
        p.stderr
