"""A hostile or broken server is untrusted input like a file: whatever it
answers, a read gets the right bytes or an error naming the URL and what is
wrong, within the documented time-outs, and a write fails without damaging
the object that was there. HTTP answers come from servers.HostileHttp (one
object, each GET answered as its plan says), redirects from nginx, S3
answers from the recording proxy (servers.S3Proxy) in front of
@20minutes/s3rver."""
import re
import signal
import subprocess
import sys
import time

import pytest

import servers
from conftest import CLI, cli_env, env_for, run
from test_remote_failures import failing
from test_s3_multipart import probe
from test_s3_writes import tensors  # noqa: F401


@pytest.fixture
def hostile(site):
    server = servers.HostileHttp((site / "qs.zip").read_bytes())
    yield server
    server.stop()


def test_a_server_ignoring_range_is_read_whole(hostile, site):
    hostile.plan = ["whole"] * 100
    out = run("ls", hostile.url(), env=cli_env()).stdout
    assert out == run("ls", site / "qs.zip").stdout


@pytest.mark.parametrize("mode,expected", [
    ("whole+1", "archive changed on the server while reading"),
    ("total+1", "archive changed on the server while reading"),
    ("etag", "archive changed on the server while reading"),
    ("replaced", "archive changed on the server while reading"),
    ("offset+1", "Content-Range 'bytes "),
    ("range-garbage", "with a malformed Content-Range 'bytes "),
    ("no-range", "with 206 but no Content-Range"),
    ("longer", "the server sent more bytes than asked for bytes "),
    ("redirect-loop", "redirects"),
    ("huge-header", "cannot fetch for bytes "),
])
def test_a_wrong_answer_is_an_error_naming_url_and_fault(hostile, mode, expected):
    hostile.plan = [mode] * 100
    err = failing(["ls", hostile.url()], seconds=20)
    assert hostile.url() in err and expected in err, err


def test_a_replaced_object_without_etag_is_told_by_its_last_modified(site):
    """No ETag: the version pinned is the Last-Modified of the HEAD; a GET
    answered from an object modified since (the server ignores
    If-Unmodified-Since) is refused, not handed out."""
    server = servers.HostileHttp((site / "qs.zip").read_bytes(), etag=None)
    try:
        server.plan = ["replaced"]
        err = failing(["ls", server.url()], seconds=20)
        assert server.url() in err and "archive changed on the server while reading" in err, err
    finally:
        server.stop()


def test_an_endless_error_page_does_not_hold_the_read(hostile):
    """A 500 whose body never ends: each attempt stops reading it after
    64 KiB; the status is retried as any 5xx, then reported."""
    hostile.plan = ["error-stream"] * 100
    err = failing(["ls", hostile.url()], seconds=20)
    assert hostile.url() in err and "HTTP 500" in err and "4 attempts" in err, err
    assert hostile.gets == 4


def test_retry_after_is_honoured(hostile, site):
    """503 with Retry-After: 2: the next attempt waits 2 s (not 250 ms)."""
    hostile.plan = ["busy"]
    out = run("ls", hostile.url(), env=cli_env()).stdout
    assert out == run("ls", site / "qs.zip").stdout
    assert hostile.get_times[1] - hostile.get_times[0] >= 1.9, hostile.get_times


OPEN_IN_PYTHON = """
import sys, modelzip
try:
    modelzip.open(sys.argv[1])
except KeyboardInterrupt as e:
    print("KeyboardInterrupt", *getattr(e, "__notes__", []), flush=True)
    sys.exit(42)
"""


def test_ctrl_c_during_a_python_read_that_fails_is_raised_not_lost(hostile):
    """Ctrl-C while a Python open waits to retry a busy server (503,
    Retry-After: 2): KeyboardInterrupt is raised, with a note naming the
    read it cancelled (the read's error was raised as a RuntimeError in its
    place, and the interrupt lost; later the interrupt waited for the
    retries to give up)."""
    pytest.importorskip("modelzip")
    hostile.plan = ["busy"] * 100
    p = subprocess.Popen([sys.executable, "-c", OPEN_IN_PYTHON, hostile.url()], env=cli_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while hostile.gets < 1:
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 42, (out, err)
    assert b"KeyboardInterrupt modelzip: " in out and b"read cancelled (SIGINT)" in out, out


def test_headers_trickled_a_byte_a_second_time_out(hostile):
    hostile.plan = ["trickle"] * 100
    err = failing(["ls", hostile.url()], env=cli_env(MODELZIP_LOW_SPEED_TIME=2), seconds=15)
    assert hostile.url() in err and "timed out" in err, err


def test_a_body_trickled_above_the_low_speed_limit_ends_at_the_request_deadline(hostile):
    """2 KiB/s passes the low-speed check (1 KiB/s) forever: the request
    deadline ends it, and the time-out is reported at once, not retried."""
    hostile.plan = ["slow"] * 100
    err = failing(["ls", hostile.url()], env=cli_env(MODELZIP_REQUEST_TIMEOUT=2), seconds=12)
    assert hostile.url() in err and "MODELZIP_REQUEST_TIMEOUT" in err, err
    # The tail, some 64 KiB: about 4 KiB of it came.
    told = re.search(r"bytes (\d+)-(\d+) not done within 2 s: (\d+) of (\d+) bytes received", err)
    assert told, err
    first, last, received, expected = map(int, told.groups())
    assert last == len(hostile.data) - 1 and expected == last - first + 1, err
    assert 0 < received < 16 << 10, err
    assert hostile.gets == 1


def test_endless_headers_end_at_the_request_deadline(hostile):
    hostile.plan = ["endless-headers"] * 100
    err = failing(["ls", hostile.url()], env=cli_env(MODELZIP_REQUEST_TIMEOUT=2), seconds=12)
    assert hostile.url() in err and "not done within 2 s" in err, err
    assert "MODELZIP_REQUEST_TIMEOUT" in err, err


def test_a_slow_but_steady_server_is_read_within_the_default_deadline(site):
    """4 KiB/s, every answer: slow, but no request is cut (each is a few
    seconds, the default deadline 600 s)."""
    data = (site / "golden.zip").read_bytes()
    server = servers.HostileHttp(data, rate=4096)
    try:
        server.plan = ["slow"] * 100
        out = run("ls", server.url(), env=cli_env(MODELZIP_LOW_SPEED_TIME=2)).stdout
        assert out == run("ls", site / "golden.zip").stdout
        assert server.gets >= 1
    finally:
        server.stop()


def test_redirects_never_leave_https_for_http(nginx, site, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    server = servers.Nginx(
        tmp_path / "nginx", site, tls=(cert, key),
        extra=(f"location /down/ {{ return 302 {nginx.url('qs.zip')}; }} "
               f"location /moved/ {{ return 302 https://127.0.0.1:$server_port/qs.zip; }}"))
    try:
        env = cli_env(MODELZIP_CA_FILE=cert)
        # To https (another path) the redirect is followed.
        out = run("ls", server.url("moved/qs.zip"), env=env).stdout
        assert out == run("ls", site / "qs.zip").stdout
        url = server.url("down/qs.zip")
        err = failing(["ls", url], env=env)
        assert url in err and "from https:// only to https://" in err, err
    finally:
        server.stop()


# --- S3 answers --------------------------------------------------------------

def is_create(method, path):
    return method == "POST" and path.endswith("?uploads=")


@pytest.mark.parametrize("answer,expected", [
    (b"<InitiateMultipartUploadResult><UploadId>abc", "no UploadId in the answer"),
    (b"<InitiateMultipartUploadResult><s3:UploadId>abc</s3:UploadId>"
     b"</InitiateMultipartUploadResult>", "no UploadId in the answer"),
    (b"<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>",
     "no UploadId in the answer"),
    (b"<R>" + b"x" * (2 << 20) + b"</R>", "with an answer larger than 1 MiB"),
    (b"<?xml version='1.0'?><!DOCTYPE r [<!ENTITY e 'boom'>]><Error><Code>&e;</Code></Error>",
     "HTTP 200 &e;"),
], ids=["truncated", "namespaced", "empty-id", "huge", "entity"])
def test_a_malformed_s3_answer_is_an_error_naming_url(s3, tmp_path, answer, expected):
    fork, proxy = s3
    data = tmp_path / "d.bin"
    data.write_bytes(b"z" * 100)
    proxy.inject(is_create, ("answer", 200, answer), 1)
    p = probe(proxy, "upload", "s3://models/hostile.bin", f"file:{data}:0:100", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/hostile.bin" in err, err
    assert "S3 CreateMultipartUpload failed" in err and expected in err, err
    assert len(proxy.requests()) == 1  # a malformed answer is not retried


def test_an_upload_id_with_odd_characters_is_sent_encoded(s3, tmp_path):
    fork, proxy = s3
    data = tmp_path / "d.bin"
    data.write_bytes(b"z" * 100)
    answer = (b"<InitiateMultipartUploadResult><UploadId>a b&amp;c=d/+%&#39;"
              b"</UploadId></InitiateMultipartUploadResult>")
    proxy.inject(is_create, ("answer", 200, answer), 1)
    p = probe(proxy, "upload", "s3://models/odd-id.bin", f"file:{data}:0:100", check=False)
    err = p.stderr.decode()
    # The server knows no such upload; the id went out as one query value.
    assert p.returncode == 1 and "s3://models/odd-id.bin" in err, err
    part = [r for r in proxy.requests() if r["method"] == "PUT"][0]
    assert part["path"].endswith("uploadId=a%20b%26c%3Dd%2F%2B%25%27"), part["path"]


@pytest.mark.parametrize("status,code,not_found", [(404, "NoSuchBucket", True),
                                                   (403, "AccessDenied", False)])
def test_s3_error_answers_are_named_and_not_retried(s3, tmp_path, status, code, not_found):
    fork, proxy = s3
    data = tmp_path / "d.bin"
    data.write_bytes(b"z" * 100)
    proxy.inject(is_create, (status, code), 1)
    p = probe(proxy, "upload", "s3://models/denied.bin", f"file:{data}:0:100", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/denied.bin" in err
    assert f"S3 CreateMultipartUpload failed: HTTP {status} {code}" in err, err
    assert len(proxy.requests()) == 1


@pytest.mark.parametrize("answer", [
    b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>",
    b"<CompleteMultipartUploadResult><ETag>" + b"e" * (2 << 20),
], ids=["error-in-200", "huge"])
def test_a_failed_completion_leaves_the_old_archive(s3, tensors, answer):  # noqa: F811
    fork, proxy = s3
    key = f"w/kept-{len(answer)}.zip"
    url = "s3://models/" + key
    env = env_for(proxy)
    run("import", url, "--tag", "t1", tensors / "small.npy", env=env)
    before = fork.get(key)
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, ("answer", 200, answer), 1)
    p = run("import", url, "--tag", "t2", tensors / "small.npy", env=env, check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and url in err and "CompleteMultipartUpload" in err, err
    assert fork.get(key) == before
    assert run("tags", url, env=env).stdout.split() == [b"t1"]


def test_listed_keys_are_decoded_before_they_are_compared(s3, tensors):  # noqa: F811
    """ListMultipartUploads as servers write it: character references for
    some characters (Go's encoder, as MinIO's, writes ' as &#39;), CDATA,
    and entries to ignore (no id, a malformed time, another key)."""
    fork, proxy = s3
    key = "w/it's.zip"
    old = "2020-01-01T00:00:00.000Z"
    listing = (
        '<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult><Bucket>models</Bucket>'
        "<IsTruncated>false</IsTruncated>"
        f"<Upload><Key>w/it&#39;s.zip</Key><UploadId>stale-1</UploadId><Initiated>{old}</Initiated></Upload>"
        f"<Upload><Key><![CDATA[w/it's.zip]]></Key><UploadId>stale-2</UploadId><Initiated>{old}</Initiated></Upload>"
        f"<Upload><Key>w/it&#39;s.zip</Key><UploadId></UploadId><Initiated>{old}</Initiated></Upload>"
        "<Upload><Key>w/it&#39;s.zip</Key><UploadId>odd-time</UploadId><Initiated>2020-13-01T00:00:00Z</Initiated></Upload>"
        f"<Upload><Key>w/it&#39;s.zip.bak</Key><UploadId>other</UploadId><Initiated>{old}</Initiated></Upload>"
        "<Upload><Key>unterminated"
        "</ListMultipartUploadsResult>").encode()
    proxy.inject(lambda m, p: m == "GET" and "uploads=" in p, ("answer", 200, listing), 1)
    url = "s3://models/" + key
    run("import", url, "--tag", "t", tensors / "small.npy", env=env_for(proxy))
    aborted = [r["path"].split("uploadId=")[1] for r in proxy.requests()
               if r["method"] == "DELETE" and "uploadId=" in r["path"]]
    assert sorted(aborted) == ["stale-1", "stale-2"], aborted
    assert run("tags", url, env=env_for(proxy)).stdout.split() == [b"t"]


def test_a_listing_whose_pages_do_not_advance_ends(s3):
    """IsTruncated with the same NextKeyMarker / NextUploadIdMarker every
    time: the second page naming the markers again ends the listing with an
    error, not 10000 requests."""
    fork, proxy = s3
    page = (b"<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
            b"<NextKeyMarker>k</NextKeyMarker><NextUploadIdMarker>i</NextUploadIdMarker>"
            b"</ListMultipartUploadsResult>")
    proxy.inject(lambda m, p: m == "GET" and "uploads=" in p, ("answer", 200, page), 100_000)
    p = probe(proxy, "list", "s3://models/loop.zip", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/loop.zip" in err, err
    assert "S3 ListMultipartUploads failed" in err and "twice" in err, err
    assert len(proxy.requests()) == 2


def test_server_text_in_errors_is_printable_and_bounded(s3, tmp_path):
    """An S3 error message with terminal escapes, a line break and 100 KB:
    the error shows control characters as \\xNN and the first 256 bytes."""
    fork, proxy = s3
    data = tmp_path / "d.bin"
    data.write_bytes(b"z" * 100)
    message = b"\x1b[31mred\n" + b"m" * 100_000
    proxy.inject(is_create, ("answer", 403, b"<Error><Code>AccessDenied</Code><Message>" +
                             message + b"</Message></Error>"), 1)
    p = probe(proxy, "upload", "s3://models/escape.bin", f"file:{data}:0:100", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/escape.bin" in err
    assert "HTTP 403 AccessDenied: \\x1b[31mred\\x0am" in err, err[:500]
    assert "\x1b" not in err and f"... ({len(message)} bytes)" in err and len(err) < 1000, err[:500]


def test_s3_retry_after_is_honoured(s3, tmp_path):
    fork, proxy = s3
    data = tmp_path / "d.bin"
    data.write_bytes(b"z" * 100)
    slow_down = (b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate."
                 b"</Message></Error>")
    proxy.inject(is_create, ("answer", 503, slow_down, [("Retry-After", "2")]), 1)
    probe(proxy, "upload", "s3://models/busy.bin", f"file:{data}:0:100")
    assert fork.get("busy.bin") == b"z" * 100
    first, second = [r for r in proxy.requests() if is_create(r["method"], r["path"])]
    assert second["start"] - first["start"] >= 1.9


# A child that reads `url` by `how` once told to on stdin, and says whether
# Ctrl-C raised KeyboardInterrupt, whether Python threads are left and
# whether SIGINT's handler is the one it had before the read (libc's
# sigaction: no handler of modelzip left installed).
READ_UNTIL_CTRL_C = r"""
import ctypes, signal, sys, threading, modelzip
libc = ctypes.CDLL(None, use_errno=True)
def sigint_handler():
    action = ctypes.create_string_buffer(256)
    assert libc.sigaction(signal.SIGINT, None, action) == 0
    return action.raw[:8]
how, url = sys.argv[1], sys.argv[2]
before = sigint_handler()
archive = modelzip.open(url) if how in ("load", "tensor") else None
print("ready", flush=True)
sys.stdin.readline()
try:
    if how == "load":
        archive.load("t")
    elif how == "tensor":
        archive.tensor("w")
    elif how == "open":
        modelzip.open(url)
    else:
        modelzip.load(url, "t")
except KeyboardInterrupt as e:
    print("KeyboardInterrupt", *getattr(e, "__notes__", []), flush=True)
    print("threads", threading.active_count(), flush=True)
    print("handler restored", sigint_handler() == before, flush=True)
    sys.exit(42)
print("read completed", flush=True)
"""


def ctrl_c_during_read(how, url, slow_down, started, env=None, script=READ_UNTIL_CTRL_C):
    """Runs `script` on `url`, calling slow_down() before its read starts,
    and sends SIGINT once started() says the read is under way; returns
    (exit status, output, seconds from the signal to the exit)."""
    p = subprocess.Popen([sys.executable, "-c", script, how, url],
                         env=env or cli_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n", p.communicate(timeout=60)
        slow_down()
        p.stdin.write(b"go\n")
        p.stdin.flush()
        deadline = time.monotonic() + 60
        while not started():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.01)
        time.sleep(0.3)  # into the transfer
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # still reading: reported below
            p.kill()
            out, err = p.communicate()
        return p.returncode, out.decode() + err.decode(), time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def assert_interrupted_at_once(status, out, seconds):
    assert seconds < 20 and status == 42, (seconds, status, out)
    assert "KeyboardInterrupt modelzip: " in out and "read cancelled (SIGINT)" in out, out
    assert "threads 1" in out and "handler restored True" in out, out


@pytest.fixture(scope="module")
def four_mib(tmp_path_factory):
    """An archive of one 4 MiB tensor "w" in tag "t": two minutes at 32 KiB/s."""
    modelzip = pytest.importorskip("modelzip")
    import numpy as np
    path = tmp_path_factory.mktemp("ctrl-c") / "w.zip"
    rng = np.random.default_rng(3)
    modelzip.save(path, "t", {"w": rng.integers(0, 255, 4 << 20, dtype=np.uint8)})
    return path.read_bytes()


@pytest.mark.parametrize("how", ["load", "tensor", "modelzip.load", "open"])
def test_ctrl_c_stops_a_python_read_from_a_slow_server_at_once(four_mib, how):
    """Ctrl-C during a Python read from a server sending 32 KiB/s (2 KiB/s
    for open, whose reads are small) raises KeyboardInterrupt within a
    second or so, naming the cancelled read (it took effect only once the
    read had ended, a minute or more later), and leaves neither a thread
    nor a signal handler of modelzip behind."""
    server = servers.HostileHttp(four_mib, rate=(2 << 10) if how == "open" else (32 << 10),
                                 max_seconds=120)
    gets = []

    def slow_down():
        gets.append(server.gets)
        server.plan = ["slow"] * 100

    try:
        result = ctrl_c_during_read(how, server.url(), slow_down, lambda: server.gets > gets[0])
    finally:
        server.stop()
    assert_interrupted_at_once(*result)


# READ_UNTIL_CTRL_C's reads on two threads other than the main one, each of
# an archive of its own, while the main thread waits for them: says what
# each read ended with once both ended.
READ_IN_THREADS_UNTIL_CTRL_C = r"""
import ctypes, signal, sys, threading, time, modelzip
libc = ctypes.CDLL(None, use_errno=True)
def sigint_handler():
    action = ctypes.create_string_buffer(256)
    assert libc.sigaction(signal.SIGINT, None, action) == 0
    return action.raw[:8]
url = sys.argv[2]
before = sigint_handler()
archives = [modelzip.open(url) for _ in range(2)]
print("ready", flush=True)
sys.stdin.readline()
outcomes = []
def read(archive, ended):
    try:
        archive.tensor("w")
        outcomes.append("read completed")
    except modelzip.Error as e:
        outcomes.append(f"Error {e.code}: {e}")
    finally:
        ended.set()
ended = [threading.Event() for _ in archives]
workers = [threading.Thread(target=read, args=(a, e)) for a, e in zip(archives, ended)]
for w in workers:
    w.start()
try:
    for w in workers:
        w.join()
    print("no KeyboardInterrupt", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
# What a program's exit does, which join() cannot: CPython 3.11's join takes
# a thread whose join a KeyboardInterrupt interrupted for ended (bpo-45274's
# branch), so the reads say themselves when they end, and the threads' end
# is awaited until no thread but this one is left (both bounded).
for e in ended:
    e.wait(60)
deadline = time.monotonic() + 60
while threading.active_count() > 1 and time.monotonic() < deadline:
    time.sleep(0.01)
print("outcomes", outcomes, flush=True)
print("threads", threading.active_count(), flush=True)
print("handler restored", sigint_handler() == before, flush=True)
sys.exit(42)
"""


def ctrl_c_during_slow_reads(archive, script, reads):
    """ctrl_c_during_read of `script` on `archive` served at 32 KiB/s once
    the script's `reads` reads have started; returns what it returns."""
    server = servers.HostileHttp(archive, rate=32 << 10, max_seconds=120)
    gets = []

    def slow_down():
        gets.append(server.gets)
        server.plan = ["slow"] * 100

    try:
        return ctrl_c_during_read("threads", server.url(), slow_down,
                                  lambda: server.gets >= gets[0] + reads, script=script)
    finally:
        server.stop()


def test_ctrl_c_stops_python_reads_on_other_threads(four_mib):
    """Ctrl-C while two threads other than the main one read from a server
    sending 32 KiB/s (the main thread waiting for them, as a program's exit
    does): the main thread raises KeyboardInterrupt and both reads end
    within a second or so with modelzip.Error (cancelled) "read cancelled
    (SIGINT)", so the program can end; no signal handler of modelzip is left
    behind. Before, only the main thread's reads were watched: these went on
    for two minutes."""
    status, out, seconds = ctrl_c_during_slow_reads(four_mib, READ_IN_THREADS_UNTIL_CTRL_C, 2)
    assert seconds < 20 and status == 42, (seconds, status, out)
    assert "KeyboardInterrupt" in out.splitlines(), out
    assert out.count("Error cancelled: ") == 2 and out.count("read cancelled (SIGINT)") == 2, out
    assert "threads 1" in out and "handler restored True" in out, out


EXIT_DURING_A_READ_OF_A_THREAD = r"""
import atexit, sys, threading, time
outcomes = []
atexit.register(lambda: print("outcomes", outcomes, flush=True))  # runs after modelzip's hook
import modelzip
archive = modelzip.open(sys.argv[2])
class SlowFinalization:  # finalization takes a second: the read ends during it
    def __del__(self, sleep=time.sleep):  # the module's `time` may be gone by then
        sleep(1.0)
slow = SlowFinalization()
print("ready", flush=True)
sys.stdin.readline()
def read():
    try:
        archive.tensor("w")
        outcomes.append("read completed")
    except modelzip.Error as e:
        outcomes.append(f"Error {e.code}")
worker = threading.Thread(target=read)
worker.start()
try:
    worker.join()
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
sys.exit(42)
"""


def test_exit_after_ctrl_c_waits_for_a_read_of_a_thread_it_was_joining(four_mib):
    """Ctrl-C while the main thread joins a thread reading from a slow
    server, then exit: CPython 3.11's join marks the reading thread as ended
    when a KeyboardInterrupt interrupts it, so exit did not wait for it: the
    read never reported its end (3 runs of 3), and when it ended during
    interpreter finalization the process aborted ("terminate called without
    an active exception", status -6: 1 run of those 3; the test of reads on
    other threads above met it 2 runs in 6). Now modelzip's exit hook waits
    for calls of non-daemon threads: the read ends cancelled and the process
    exits with its own status."""
    status, out, seconds = ctrl_c_during_slow_reads(four_mib, EXIT_DURING_A_READ_OF_A_THREAD, 1)
    assert status == 42 and seconds < 20, (seconds, status, out)
    assert "terminate called" not in out, out
    assert "KeyboardInterrupt" in out.splitlines(), out
    assert "outcomes ['Error cancelled']" in out, out


# A daemon thread reads while the main thread exits; the read ends about a
# second later, while the interpreter finalizes (which takes 3 s here).
EXIT_DURING_A_READ_OF_A_DAEMON_THREAD = r"""
import sys, threading, time
import modelzip
archive = modelzip.open(sys.argv[2])
class SlowFinalization:  # finalization takes 3 s: the read ends during it
    def __del__(self, sleep=time.sleep):  # the module's `time` may be gone by then
        print("finalizing", flush=True)
        sleep(3.0)
slow = SlowFinalization()
print("ready", flush=True)
sys.stdin.readline()
# No frame of this module on that thread: it would keep the module's
# globals, and so `slow`, from being cleared during finalization.
threading.Thread(target=archive.tensor, args=("w",), daemon=True).start()
time.sleep(0.2)  # the read is under way
sys.exit(42)
"""


def test_a_daemon_threads_read_that_ends_during_finalization_does_not_abort_exit(four_mib):
    """A daemon thread's read of a remote archive that ends while the
    interpreter finalizes: Python ends such a thread as it takes the GIL
    back (pthread_exit), and the unwinding through the C++ destructor that
    took it back aborted the process ("terminate called without an active
    exception", status -6: 3 runs of 3). Now the thread is parked instead
    (it sleeps until the process ends) and the process exits with its own
    status. Three runs, each of which aborted before."""
    for _ in range(3):
        server = servers.HostileHttp(four_mib, rate=4 << 20, max_seconds=30)
        p = subprocess.Popen([sys.executable, "-c", EXIT_DURING_A_READ_OF_A_DAEMON_THREAD, "daemon",
                              server.url()], env=cli_env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert p.stdout.readline() == b"ready\n", p.communicate(timeout=60)
            gets = server.gets
            server.plan = ["slow"] * 100  # the 4 MiB in about a second
            p.stdin.write(b"go\n")
            p.stdin.flush()
            out = p.communicate(timeout=60)[0].decode()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            server.stop()
        assert server.gets > gets, out  # the read reached the server
        assert "finalizing" in out and "terminate called" not in out, out
        assert p.returncode == 42, (p.returncode, out)


def test_ctrl_c_stops_a_python_read_of_s3_waiting_for_the_server(s3, tmp_path):
    """s3:// reads share the fetch loop: Ctrl-C while the server takes a
    minute to answer a GET raises KeyboardInterrupt at once."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    import numpy as np
    np.save(tmp_path / "w.npy", np.zeros(4 << 20, dtype=np.uint8))
    url = "s3://models/ctrl-c.zip"
    run("import", url, "--tag", "t", tmp_path / "w.npy", env=env_for(proxy))
    proxy.clear()

    def slow_down():
        proxy.inject(lambda m, p: m == "GET", ("delay", 60.0), 100)

    def started():
        return any(r["method"] == "HEAD" for r in proxy.requests())

    try:
        result = ctrl_c_during_read("modelzip.load", url, slow_down, started, env=env_for(proxy))
    finally:
        proxy.clear()
    assert_interrupted_at_once(*result)


def test_a_killed_cached_read_leaves_a_record_of_what_it_fetched(four_mib, tmp_path):
    """kill -9 of a CLI read with a cache folder, during its slow read of the
    tensor: the bytes file has its ranges record, which claims only bytes
    that are the object's (those of the reads that completed), kept for the
    next read. (Before, the record was written only when
    the read ended: a killed read left the bytes file alone, and all it had
    fetched was fetched again.) A record file a killed writer left
    half-renamed is removed by the next read."""
    cache = tmp_path / "cache"
    server = servers.HostileHttp(four_mib, rate=32 << 10, max_seconds=120)
    proc = None
    try:
        server.plan = ["ok"] * 2 + ["slow"] * 100
        proc = subprocess.Popen([CLI, "cat", server.url(), "w", "--tag", "t"], env=cli_env(cache),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        # The tensor's read (slow) starts only once the reads before it ended.
        while server.gets < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.kill()
        proc.wait()
        [record] = [p for p in cache.iterdir() if p.suffix == ".ranges"]
        [cached] = [p for p in cache.iterdir() if p.suffix == ".bytes"]
        assert sorted(p.name for p in cache.iterdir()) == sorted([record.name, cached.name])
        header, *lines = record.read_text().splitlines()
        assert int(header.split()[2]) == cached.stat().st_ino
        ranges = [tuple(map(int, line.split())) for line in lines]
        assert ranges
        data = cached.read_bytes()
        for b, e in ranges:
            assert data[b:e] == four_mib[b:e], (b, e)
        claimed = sum(e - b for b, e in ranges)
        assert claimed < len(four_mib) // 2  # not the tensor, still being read
        # A record being written when its writer was killed: removed.
        stray = cache / f"{record.name}.tmp{proc.pid}"
        stray.write_text(record.read_text())
        server.plan = []
        out = run("cat", server.url(), "w", "--tag", "t", env=cli_env(cache)).stdout
        assert len(out) >= 4 << 20
        assert not stray.exists()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
