"""The S3 multipart-upload client (src/remote/s3_multipart.*) against a real
@20minutes/s3rver 4.0.4 on 127.0.0.1, through a recording and fault-injecting
proxy (servers.S3Proxy), driven by tests/remote/s3_multipart_probe.cpp.

What the server lacks (servers.install_s3rver_fork): AbortMultipartUpload and
ListMultipartUploads are answered 405 / 501, and conditional completion is not
enforced; for those the tests check the requests sent and that the server's
answer is reported with its S3 error code."""
import os
import subprocess
import time

import pytest

from conftest import env_for

PROBE = os.environ.get("MODELZIP_S3_PROBE", "s3_multipart_probe")
MIB = 1 << 20


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("parts") / "data.bin"
    path.write_bytes(os.urandom(12 * MIB + 12345))
    return path


def probe(proxy, *args, env_extra=None, check=True):
    env = env_for(proxy, **(env_extra or {}))
    p = subprocess.run([PROBE, *map(str, args)], capture_output=True, env=env, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"probe {args} failed ({p.returncode}): {p.stderr.decode()}")
    return p


def upload_parts(proxy):
    """The UploadPart requests seen (not UploadPartCopy)."""
    return [r for r in proxy.requests() if r["method"] == "PUT" and "partNumber=" in r["path"]
            and "x-amz-copy-source" not in r["headers"]]


def test_parts_uploaded_in_parallel_complete_to_the_bytes(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    p = probe(proxy, "upload", "s3://models/new.bin", f"file:{data}:0:{5 * MIB}",
              f"file:{data}:{5 * MIB}:{5 * MIB}", f"file:{data}:{10 * MIB}:{len(blob) - 10 * MIB}")
    upload_id, etag = p.stdout.decode().split()
    assert fork.get("new.bin") == blob
    assert etag.startswith('"') and etag.endswith('"')
    log = proxy.requests()
    assert [r["method"] for r in log] == ["POST", "PUT", "PUT", "PUT", "POST"]
    assert log[0]["path"] == "/models/new.bin?uploads="
    assert log[0]["headers"]["x-amz-checksum-algorithm"] == "CRC32"
    parts = upload_parts(proxy)
    assert sorted(r["body"] for r in parts) == sorted([5 * MIB, 5 * MIB, len(blob) - 10 * MIB])
    for r in parts:  # each part's CRC-32 sent, base64 of 4 bytes
        assert len(r["headers"]["x-amz-checksum-crc32"]) == 8
        assert f"uploadId={upload_id}" in r["path"]
        assert r["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert log[-1]["path"] == f"/models/new.bin?uploadId={upload_id}"
    assert "if-match" not in log[-1]["headers"] and "if-none-match" not in log[-1]["headers"]


def test_part_checksum_is_the_crc32_of_its_bytes(s3, data):
    import base64
    import zlib
    fork, proxy = s3
    probe(proxy, "upload", "s3://models/crc.bin", f"file:{data}:0:1000")
    (part,) = upload_parts(proxy)
    crc = zlib.crc32(data.read_bytes()[:1000]).to_bytes(4, "big")
    assert part["headers"]["x-amz-checksum-crc32"] == base64.b64encode(crc).decode()


def test_copied_ranges_and_uploaded_parts_make_one_object(s3, data):
    fork, proxy = s3
    blob = data.read_bytes()
    probe(proxy, "upload", "s3://models/src.bin", f"file:{data}:0:{len(blob)}")
    proxy.clear()
    # New object: bytes [1 MiB, 6 MiB) and [6 MiB, 12 MiB) copied, 100 new bytes.
    probe(proxy, "upload", "s3://models/dst.bin", f"copy:src.bin:{MIB}:{5 * MIB}",
          f"copy:src.bin:{6 * MIB}:{6 * MIB}", f"file:{data}:7:100")
    assert fork.get("dst.bin") == blob[MIB:12 * MIB] + blob[7:107]
    copies = [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert len(copies) == 2 and all(r["body"] == 0 for r in copies)
    assert {r["headers"]["x-amz-copy-source-range"] for r in copies} == {
        f"bytes={MIB}-{6 * MIB - 1}", f"bytes={6 * MIB}-{12 * MIB - 1}"}
    assert all(r["headers"]["x-amz-copy-source"] == "/models/src.bin" for r in copies)
    # Only the new bytes travelled.
    assert sum(r["body"] for r in proxy.requests() if r["method"] == "PUT") == 100


def test_copy_from_a_version_sends_copy_source_if_match(s3, data):
    fork, proxy = s3
    p = probe(proxy, "upload", "s3://models/v.bin", f"file:{data}:0:{6 * MIB}")
    etag = p.stdout.decode().split()[1]
    proxy.clear()
    probe(proxy, "upload", "s3://models/v2.bin", f"copy:v.bin:0:{5 * MIB}:{etag}",
          f"file:{data}:0:10")
    (copy,) = [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert copy["headers"]["x-amz-copy-source-if-match"] == etag
    assert fork.get("v2.bin") == data.read_bytes()[:5 * MIB] + data.read_bytes()[:10]


@pytest.mark.parametrize("kind", [(503, "SlowDown"), (500, "InternalError"), "reset"])
def test_transient_failures_are_retried(s3, data, kind):
    fork, proxy = s3
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=1" in p, kind, 2)
    proxy.inject(lambda m, p: m == "POST" and "uploads=" in p, kind, 1)
    probe(proxy, "upload", "s3://models/retried.bin", f"file:{data}:0:{5 * MIB}",
          f"file:{data}:0:99")
    assert fork.get("retried.bin") == data.read_bytes()[:5 * MIB] + data.read_bytes()[:99]
    part1 = [r for r in upload_parts(proxy) if "partNumber=1&" in r["path"]]
    assert len(part1) == 3  # two failures, then the part


def test_retries_are_bounded_and_the_error_names_url_and_code(s3, data):
    fork, proxy = s3
    proxy.inject(lambda m, p: m == "PUT", (503, "SlowDown"), 100)
    p = probe(proxy, "upload", "s3://models/never.bin", f"file:{data}:0:10", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1
    assert "s3://models/never.bin" in err and "S3 UploadPart failed: HTTP 503 SlowDown" in err
    assert "after 5 attempts" in err and f"{proxy.endpoint}/models/never.bin?partNumber=1" in err
    assert len(upload_parts(proxy)) == 5
    # The failed upload was aborted (a DELETE of its id; this server answers 405).
    assert [r["method"] for r in proxy.requests()][-1] == "DELETE"


def test_a_request_past_its_deadline_fails_at_once_naming_it(s3):
    """CreateMultipartUpload answered after 3 s, the deadline 1 s: it fails
    after about 1 s, once (a time-out is not retried)."""
    fork, proxy = s3
    proxy.inject(lambda m, p: m == "POST" and p.endswith("?uploads="), ("delay", 3.0), 10)
    start = time.monotonic()
    p = probe(proxy, "create", "s3://models/late.bin",
              env_extra={"MODELZIP_REQUEST_TIMEOUT": "1"}, check=False)
    took = time.monotonic() - start
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/late.bin" in err, err
    assert ("S3 CreateMultipartUpload failed: timed out: the request not done within 1 s: "
            "no answer (MODELZIP_REQUEST_TIMEOUT") in err, err
    assert f"(POST {proxy.endpoint}/models/late.bin?uploads=)" in err, err
    assert took < 2.5, took
    assert proxy.faults[0][2] == 9  # one attempt


def test_a_completion_from_a_stalled_server_fails_after_the_low_speed_time(s3, data):
    """CompleteMultipartUpload of a 100-byte object answered after 30 s, the
    low-speed time 2 s: the server may assemble the object silently, but
    not for longer than the low-speed time per 8 MiB of it (at least once),
    as a copy; it fails after 2 s naming the stall and the setting, not
    after its deadline (600 s), and says the completion may have taken
    effect."""
    fork, proxy = s3
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, ("delay", 30.0), 1)
    start = time.monotonic()
    p = probe(proxy, "upload", "s3://models/stalled-complete.bin", f"file:{data}:0:100",
              env_extra={"MODELZIP_LOW_SPEED_TIME": "2"}, check=False)
    took = time.monotonic() - start
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert ("S3 CompleteMultipartUpload failed: timed out: the server sent nothing for 2 s "
            "while completing the upload of an object of 100 bytes (MODELZIP_LOW_SPEED_TIME"
            ) in err, err
    assert "it may have taken effect" in err, err
    assert took < 15, took
    assert proxy.faults[0][2] == 0  # one attempt


def test_a_completion_of_a_large_object_may_be_silent_longer(s3, data, tmp_path):
    """The completion's stall limit grows with the object, as its deadline
    does: a 24 MiB object (3 x 8 MiB, 8 s with a low-speed time of 2 s)
    answered after 3 s completes; the server assembles the object before
    it answers (AWS sends a space now and then, others nothing)."""
    fork, proxy = s3
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(24 * MIB))
    fork.put("slow-complete-src.bin", src)
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, ("delay", 3.0), 1)
    probe(proxy, "upload", "s3://models/slow-complete.bin",
          f"copy:slow-complete-src.bin:0:{24 * MIB}", f"file:{data}:0:100",
          env_extra={"MODELZIP_LOW_SPEED_TIME": "2"})
    assert fork.get("slow-complete.bin") == src.read_bytes() + data.read_bytes()[:100]
    assert proxy.faults[0][2] == 0


def test_a_copy_from_a_stalled_server_fails_after_the_low_speed_time(s3, data, tmp_path):
    """UploadPartCopy answered after 30 s, the low-speed time 2 s: the copy of
    6 MiB (under 8 MiB: one low-speed time) fails once nothing arrived for
    2 s, naming the stall and the setting, not after its deadline (600 s per
    8 MiB)."""
    fork, proxy = s3
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(6 * MIB))
    fork.put("stall-src.bin", src)
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=1&" in p, ("delay", 30.0), 1)
    start = time.monotonic()
    p = probe(proxy, "upload", "s3://models/stall.bin", f"copy:stall-src.bin:0:{6 * MIB}",
              f"file:{data}:0:100", env_extra={"MODELZIP_LOW_SPEED_TIME": "2"}, check=False)
    took = time.monotonic() - start
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert (f"S3 UploadPartCopy failed: timed out: the server sent nothing for 2 s during a "
            f"server-side copy of {6 * MIB} bytes (MODELZIP_LOW_SPEED_TIME") in err, err
    assert took < 15, took
    assert proxy.faults[0][2] == 0  # one attempt


def test_a_large_copy_may_be_silent_longer(s3, data, tmp_path):
    """The stall limit grows with the bytes copied, as the deadline does: a
    copy of 24 MiB (3 x 8 MiB) answered after 2 s passes a low-speed time of
    2 s (6 s for it)."""
    fork, proxy = s3
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(24 * MIB))
    fork.put("slow-src.bin", src)
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=1&" in p, ("delay", 2.0), 1)
    probe(proxy, "upload", "s3://models/slow-copy.bin", f"copy:slow-src.bin:0:{24 * MIB}",
          f"file:{data}:0:100", env_extra={"MODELZIP_LOW_SPEED_TIME": "2"})
    assert fork.get("slow-copy.bin") == src.read_bytes() + data.read_bytes()[:100]


def test_wrong_access_key_is_named(s3, data):
    fork, proxy = s3
    p = probe(proxy, "upload", "s3://models/x.bin", f"file:{data}:0:10",
              env_extra={"AWS_ACCESS_KEY_ID": "NOBODY"}, check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://models/x.bin" in err
    assert "S3 CreateMultipartUpload failed: HTTP 403 InvalidAccessKeyId" in err, err
    assert len(proxy.requests()) == 1  # not retried


def test_wrong_secret_is_named(s3, data):
    fork, proxy = s3
    p = probe(proxy, "upload", "s3://models/x.bin", f"file:{data}:0:10",
              env_extra={"AWS_SECRET_ACCESS_KEY": "wrong"}, check=False)
    assert p.returncode == 1
    assert "HTTP 403 SignatureDoesNotMatch" in p.stderr.decode()


def test_missing_bucket_is_named(s3, data):
    fork, proxy = s3
    p = probe(proxy, "upload", "s3://nosuch/x.bin", f"file:{data}:0:10", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and "s3://nosuch/x.bin" in err
    assert "HTTP 404 NoSuchBucket" in err, err


def test_not_an_s3_url(s3):
    fork, proxy = s3
    p = probe(proxy, "create", "http://127.0.0.1:1/x", check=False)
    assert p.returncode == 1 and b"s3://BUCKET/KEY" in p.stderr


@pytest.mark.parametrize("args,header,value", [
    (["--if-none-match"], "if-none-match", "*"),
    (["--if-match", '"0123abcd"'], "if-match", '"0123abcd"'),
])
def test_conditional_completion_sends_the_condition(s3, data, args, header, value):
    """The fork ignores the condition (the object is written); the header is
    what an enforcing server (AWS, MinIO, R2) judges."""
    fork, proxy = s3
    probe(proxy, "upload", "s3://models/cond.bin", *args, f"file:{data}:0:10")
    complete = proxy.requests()[-1]
    assert complete["method"] == "POST" and "uploadId=" in complete["path"]
    assert complete["headers"][header] == value


@pytest.mark.parametrize("status,code", [(412, "PreconditionFailed"),
                                         (409, "ConditionalRequestConflict")])
def test_failed_condition_says_archive_changed(s3, data, status, code):
    fork, proxy = s3
    before = None
    probe(proxy, "upload", "s3://models/kept.bin", f"file:{data}:0:10")
    before = fork.get("kept.bin")
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, (status, code), 1)
    p = probe(proxy, "upload", "s3://models/kept.bin", "--if-match", '"stale"',
              f"file:{data}:100:10", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1
    assert "archive changed on the server by another writer" in err and code in err, err
    assert fork.get("kept.bin") == before


def test_abort_and_list_requests(s3):
    """AbortMultipartUpload and ListMultipartUploads as sent; this server
    implements neither, and its answer is reported with its code."""
    fork, proxy = s3
    upload_id = probe(proxy, "create", "s3://models/dir/a b.bin").stdout.decode().strip()
    p = probe(proxy, "abort", "s3://models/dir/a b.bin", upload_id, check=False)
    assert b"S3 AbortMultipartUpload failed: HTTP 405 MethodNotAllowed" in p.stderr
    p = probe(proxy, "list", "s3://models/dir/a b.bin", check=False)
    assert b"S3 ListMultipartUploads failed: HTTP 501 NotImplemented" in p.stderr
    create, abort, listing = proxy.requests()
    assert create["path"] == "/models/dir/a%20b.bin?uploads="
    assert abort["method"] == "DELETE" and abort["path"] == f"/models/dir/a%20b.bin?uploadId={upload_id}"
    assert listing["method"] == "GET" and listing["path"] == "/models?prefix=dir%2Fa%20b.bin&uploads="
