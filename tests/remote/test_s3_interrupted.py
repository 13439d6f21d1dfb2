"""Writers of s3:// archives that stop early (issue 29): an incomplete upload
a killed writer left behind is aborted by the next writer of the key once it
is old enough; SIGINT / SIGTERM during an upload abort it and leave the old
object as it was. Against @20minutes/s3rver 4.0.4 through the recording
proxy (servers.S3Proxy), which here also answers ListMultipartUploads (the
server does not implement it) and slows parts down."""
import datetime
import threading
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import CLI, completions, env_for, is_completion
from test_s3_multipart import MIB
from test_s3_writes import run, tensors  # noqa: F401


def listing(key, uploads):
    """A ListMultipartUploads answer naming (key, upload id, initiated) uploads."""
    items = "".join(f"<Upload><Key>{k}</Key><UploadId>{u}</UploadId>"
                    f"<Initiated>{t}</Initiated></Upload>" for k, u, t in uploads)
    return (f'<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult>'
            f"<Bucket>models</Bucket><Prefix>{key}</Prefix><IsTruncated>false</IsTruncated>"
            f"{items}</ListMultipartUploadsResult>").encode()


def aborted_ids(proxy):
    return [r["path"].split("uploadId=")[1] for r in proxy.requests()
            if r["method"] == "DELETE" and "uploadId=" in r["path"]]


def is_listing(method, path):
    return method == "GET" and "uploads=" in path


def test_the_server_without_listing_lets_the_writer_go_on(s3, tensors):
    fork, proxy = s3
    url = "s3://models/w/nolist.zip"
    run("import", url, "--tag", "t", tensors / "small.npy", env=env_for(proxy))
    listed = [r for r in proxy.requests() if is_listing(r["method"], r["path"])]
    assert listed and listed[0]["status"] == 501  # s3rver: NotImplemented
    assert "prefix=w%2Fnolist.zip" in listed[0]["path"]
    assert run("tags", url, env=env_for(proxy)).stdout.split() == [b"t"]


def test_stale_uploads_of_the_key_are_aborted(s3, tensors):
    fork, proxy = s3
    key = "w/stale.zip"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    uploads = [(key, "stale-1", "2020-01-01T00:00:00.000Z"), (key, "fresh-1", now),
               (key + ".bak", "other-1", "2020-01-01T00:00:00.000Z")]
    proxy.inject(is_listing, ("answer", 200, listing(key, uploads)), 1)
    run("import", f"s3://models/{key}", "--tag", "t", tensors / "small.npy",
        env=env_for(proxy))
    # Only the old upload of this very key; the young one may be a live writer's.
    assert aborted_ids(proxy) == ["stale-1"]
    assert run("tags", f"s3://models/{key}", env=env_for(proxy)).stdout.split() == [b"t"]
    # A bound of 0 seconds takes every incomplete upload of the key.
    proxy.clear()
    proxy.inject(is_listing, ("answer", 200, listing(key, uploads)), 1)
    run("import", f"s3://models/{key}", "--tag", "u", tensors / "small.npy",
        env=env_for(proxy, MODELZIP_S3_STALE_UPLOAD_AGE="0"))
    assert aborted_ids(proxy) == ["stale-1", "fresh-1"]


def test_the_upload_is_created_while_the_old_object_is_read(s3, tensors):
    """CreateMultipartUpload and the stale-upload listing do not wait for the
    commit's reads of the old object (each HEAD is held 1 s here); a commit
    whose reads fail aborts the upload it created."""
    fork, proxy = s3
    url = "s3://models/w/early.zip"
    run("import", url, "--tag", "t", tensors / "small.npy", env=env_for(proxy))
    proxy.clear()
    proxy.inject(lambda m, p: m == "HEAD", ("delay", 1.0), 10)
    run("import", url, "--tag", "u", tensors / "new.npy", env=env_for(proxy))
    log = proxy.requests()
    heads = [r for r in log if r["method"] == "HEAD"]
    create = [r for r in log if r["method"] == "POST" and r["path"].endswith("uploads=")]
    listed = [r for r in log if is_listing(r["method"], r["path"])]
    assert len(create) == 1 and listed and len(heads) >= 2
    # Sent before the commit's HEAD (the last one) was answered.
    assert create[0]["start"] < heads[-1]["end"] and listed[0]["start"] < heads[-1]["end"]
    assert run("tags", url, env=env_for(proxy)).stdout.split() == [b"t", b"u"]

    proxy.clear()
    seen = []

    def commits_head(method, path):  # the writer's own opening HEAD passes
        if method != "HEAD":
            return False
        seen.append(path)
        return len(seen) == 2

    proxy.inject(commits_head, (403, "AccessDenied"), 1)
    before = fork.get("w/early.zip")
    p = run("import", url, "--tag", "v", tensors / "new.npy", env=env_for(proxy), check=False)
    assert p.returncode != 0 and b"403" in p.stderr
    created = [r for r in proxy.requests()
               if r["method"] == "POST" and r["path"].endswith("uploads=")]
    assert len(created) == 1 and len(aborted_ids(proxy)) == 1  # s3rver answers 405
    assert not completions(proxy)
    assert fork.get("w/early.zip") == before


def interrupt_mid_upload(proxy, argv, env, sig, timeout):
    """Starts `argv`, sends `sig` once its multipart upload has been created and
    the proxy holds one of its parts (the last proxy.inject: a delay of every
    UploadPart), and returns (exit status, stderr, seconds from the signal to
    the exit)."""
    held = proxy.faults[-1]  # [match, kind, remaining]: taken once per part held
    remaining = held[2]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while held[2] == remaining or not [r for r in proxy.requests()
                                           if r["path"].endswith("?uploads=")]:
            assert time.monotonic() < deadline and p.poll() is None, "no part in flight"
            time.sleep(0.05)
        assert p.poll() is None
        sent = time.monotonic()
        p.send_signal(sig)
        _, err = p.communicate(timeout=timeout)
        return p.returncode, err, time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def ctrl_c_at_the_hold(p, arrived, release, what, before=lambda: None):
    """Runs `before`, waits (60 s at most) until the proxy holds a request of
    `p` (`arrived` set; else the test fails saying `what`), sends SIGINT to
    `p` and returns its stderr once it ended; the hold is then released (and
    `p` killed if it still runs)."""
    try:
        before()
        assert arrived.wait(60), what
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        return err
    finally:
        release.set()
        if p.poll() is None:
            p.kill()
            p.wait()


def check_not_saved(s3, key, before, returncode, err):
    """The script interrupted exited with 42 (KeyboardInterrupt) noting that
    the save did not happen; no upload completed, the object is unchanged."""
    fork, proxy = s3
    assert returncode == 42, (returncode, err)
    assert b"the save did not happen" in err, err
    assert not completions(proxy)
    assert fork.get(key) == before


def object_with_t1(s3, tensors, key):
    """Imports tag t1 (a small tensor) into s3://models/KEY with 5 MiB parts
    and clears the proxy's record: returns the URL, the environment of the
    writers (through the proxy) and the object's bytes."""
    fork, proxy = s3
    url = f"s3://models/{key}"
    env = env_for(proxy, MODELZIP_S3_PART_SIZE="5M")
    run("import", url, "--tag", "t1", tensors / "small.npy", env=env)
    before = fork.get(key)
    proxy.clear()
    return url, env, before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_upload_is_aborted_and_the_object_kept(s3, tensors, sig):
    fork, proxy = s3
    key = f"w/interrupted-{sig.name}.zip"
    url, env, before = object_with_t1(s3, tensors, key)
    # Every part waits 30 s in the proxy: the 64 MiB upload is mid-way for long,
    # and a writer that waited for its parts in flight would take that long.
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=" in p, ("delay", 30.0), 10_000)
    returncode, err, took = interrupt_mid_upload(
        proxy, [CLI, "import", url, "--tag", "t2", str(tensors / "big.npy")], env, sig, 25)
    assert returncode == 128 + sig, (returncode, err)
    assert took < 15, took  # in-flight parts are stopped, not waited for
    assert b"interrupted" in err, err
    created = [r for r in proxy.requests() if r["path"].endswith("?uploads=")]
    assert len(created) == 1 and aborted_ids(proxy)  # AbortMultipartUpload sent
    assert not completions(proxy)  # never completed
    assert fork.get(key) == before
    assert run("tags", url, env=env).stdout.split() == [b"t1"]


SAVE = """
import sys, numpy as np, modelzip
weights = {f"w{i}": np.full(2 << 20, i, dtype=np.float32) for i in range(8)}  # 64 MiB
try:
    modelzip.save(sys.argv[1], "t2", weights)
except KeyboardInterrupt:
    sys.exit(42)
"""


def test_ctrl_c_in_a_python_save_aborts_the_upload(s3, tensors):
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-python.zip"
    url, env, before = object_with_t1(s3, tensors, key)
    # Parts wait 3 s each. All data is handed to the upload at once, so the
    # save is waiting for parts when Ctrl-C comes: the progress hook, asked
    # again while it waits, notices it; the parts in flight finish, the
    # upload is aborted, nothing completed.
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=" in p, ("delay", 3.0), 10_000)
    returncode, err, _ = interrupt_mid_upload(proxy, [sys.executable, "-c", SAVE, url], env,
                                              signal.SIGINT, 60)
    assert returncode == 42, (returncode, err)  # KeyboardInterrupt raised by save
    assert aborted_ids(proxy), err  # AbortMultipartUpload sent
    assert not completions(proxy)
    assert fork.get(key) == before


SAVE_TELLING = """
import sys, numpy as np, modelzip
weights = {f"w{i}": np.full(2 << 20, i, dtype=np.float32) for i in range(8)}  # 64 MiB
try:
    modelzip.save(sys.argv[1], "t2", weights)
except KeyboardInterrupt as e:
    print(*getattr(e, "__notes__", []), file=sys.stderr)
    sys.exit(42)
"""


def test_ctrl_c_during_complete_multipart_upload_completes_the_save_and_raises(s3, tensors):
    """CompleteMultipartUpload is the commit point: Ctrl-C while it is under
    way cannot stop the save, which completes; save() then raises the
    KeyboardInterrupt, saying so."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-at-complete.zip"
    url, env, before = object_with_t1(s3, tensors, key)
    proxy.inject(lambda m, p: is_completion(m, p, key), ("delay", 3.0), 1)
    returncode, err, _ = interrupt_mid_upload(proxy, [sys.executable, "-c", SAVE_TELLING, url],
                                              env, signal.SIGINT, 60)
    assert returncode == 42, (returncode, err)
    assert b"the save completed before the interrupt could stop it" in err, err
    assert not aborted_ids(proxy)
    assert fork.get(key) != before
    assert run("tags", url, env=env).stdout.split() == [b"t1", b"t2"]



SAVE_SMALL = """
import sys, numpy as np, modelzip
calls = []
def ctrl_c_at_once(done, total):  # stands for Ctrl-C before the first copy
    calls.append((done, total))
    raise KeyboardInterrupt
try:
    modelzip.save(sys.argv[1], "t2", {"w": np.arange(16, dtype=np.float32)},
                  dedup=False, progress=ctrl_c_at_once)
except KeyboardInterrupt as e:
    print(calls, *getattr(e, "__notes__", []), file=sys.stderr)
    sys.exit(42)
"""


def test_an_in_place_save_asks_its_progress_hook_before_the_copies(s3, tensors):
    """An in-place save (a small tag added to a 64 MiB object) asks its
    progress hook before it starts the server-side copies of what it keeps
    (which may take long): an interrupt there cancels the save before any
    UploadPartCopy."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-before-copies.zip"
    url = f"s3://models/{key}"
    env = env_for(proxy, MODELZIP_S3_PART_SIZE="5M")
    run("import", url, "--tag", "t1", tensors / "big.npy", env=env, timeout=300)
    before = fork.get(key)
    proxy.clear()
    p = subprocess.run([sys.executable, "-c", SAVE_SMALL, url], env=env, capture_output=True,
                       timeout=120)
    assert p.returncode == 42, (p.returncode, p.stderr)
    assert p.stderr.startswith(b"[(0, 0)]") and b"the save did not happen" in p.stderr, p.stderr
    assert not [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert aborted_ids(proxy)
    assert fork.get(key) == before


REMOVE_T1 = """
import sys, modelzip
try:
    modelzip.remove_tag(sys.argv[1], "t1")
except KeyboardInterrupt as e:
    print("KeyboardInterrupt:", *getattr(e, "__notes__", []), file=sys.stderr)
    sys.exit(42)
"""


def test_ctrl_c_while_a_save_fetches_bytes_to_copy_says_the_save_did_not_happen(s3, tensors):
    """Ctrl-C while an in-place save fetches old bytes for its parts (the
    5 MiB after the free entry of a removed tag, which a part needs at
    least): the fetch stops, the upload is aborted, the object is unchanged,
    and the save raises KeyboardInterrupt noting that it did not happen
    (before: noting only "read cancelled (SIGINT): 0 of 5238094 bytes
    fetched", which did not say whether the save happened)."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-fetch.zip"
    url = f"s3://models/{key}"
    env = env_for(proxy, MODELZIP_S3_PART_SIZE="5M", MODELZIP_NO_CACHE="1")
    run("import", url, "--tag", "t1", tensors / "small.npy", env=env)
    run("import", url, "--tag", "t2", tensors / "big.npy", env=env, timeout=300)
    before = fork.get(key)
    proxy.clear()

    def large_get(method, path, headers):  # the fetch of bytes for a part
        first, _, last = headers.get("range", "bytes=0-0")[6:].partition("-")
        return method == "GET" and last.isdigit() and int(last) - int(first) >= MIB

    arrived, release = threading.Event(), threading.Event()
    proxy.inject(large_get, ("hold", arrived, release, 30.0), 1)
    p = subprocess.Popen([sys.executable, "-c", REMOVE_T1, url], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = ctrl_c_at_the_hold(p, arrived, release, "no fetch of old bytes")
    check_not_saved(s3, key, before, p.returncode, err)
    assert aborted_ids(proxy), err
    assert run("tags", url, env=env).stdout.split() == [b"t1", b"t2"]


# Stages tag t2 holding parameter NAME = the .npy file ARRAY in the archive
# URL (argv: URL NAME ARRAY), says "staged", and commits once told (a line on
# stdin).
COMMIT_WHEN_TOLD = """
import sys, numpy as np, modelzip
w = modelzip.Writer(sys.argv[1])
w.add_tag("t2", {sys.argv[2]: np.load(sys.argv[3])})
print("staged", flush=True)
sys.stdin.readline()
try:
    w.commit()
except KeyboardInterrupt as e:
    print("KeyboardInterrupt:", *getattr(e, "__notes__", []), file=sys.stderr)
    sys.exit(42)
"""


def test_ctrl_c_while_a_save_reads_the_old_object_says_the_save_did_not_happen(s3, tensors,
                                                                              tmp_path):
    """Ctrl-C while the commit reads the object it commits over (its tail,
    before any part): the read stops, and the commit raises
    KeyboardInterrupt noting that the save did not happen (before: its note
    said only "read cancelled (SIGINT): 0 of 4868 bytes fetched"); the
    object is unchanged."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-first-read.zip"
    url, env, before = object_with_t1(s3, tensors, key)
    env["MODELZIP_NO_CACHE"] = "1"  # the commit reads the tail again, not from a cache
    np.save(tmp_path / "w.npy", np.arange(16, dtype=np.float32))
    p = subprocess.Popen([sys.executable, "-c", COMMIT_WHEN_TOLD, url, "w",
                          str(tmp_path / "w.npy")], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    arrived, release = threading.Event(), threading.Event()

    def commit_with_its_first_get_held():
        assert p.stdout.readline() == b"staged\n", p.stderr.read()
        proxy.clear()
        proxy.inject(lambda m, path: m == "GET" and "uploads" not in path,
                     ("hold", arrived, release, 30.0), 1)
        p.stdin.write(b"go\n")
        p.stdin.flush()

    err = ctrl_c_at_the_hold(p, arrived, release, "the commit never read the object",
                             commit_with_its_first_get_held)
    check_not_saved(s3, key, before, p.returncode, err)
    assert b"save cancelled while reading the archive's current version" in err, err


def test_ctrl_c_while_dedup_reads_old_blobs_says_the_save_did_not_happen(s3, tensors):
    """Ctrl-C while dedup compares a new tensor with its namesake in the
    object (a 1 MiB blob fetched from the server): the read stops, and the
    commit raises KeyboardInterrupt noting that the save was cancelled while
    comparing and did not happen (before: its note said "read cancelled
    (SIGINT): 0 of ... bytes fetched", which did not say what became of the
    save); the upload is aborted, the object unchanged."""
    pytest.importorskip("modelzip")
    fork, proxy = s3
    key = "w/interrupted-dedup.zip"
    url = f"s3://models/{key}"
    env = env_for(proxy, MODELZIP_NO_CACHE="1")
    run("import", url, "--tag", "t1", tensors / "new.npy", env=env)
    before = fork.get(key)
    p = subprocess.Popen([sys.executable, "-c", COMMIT_WHEN_TOLD, url, "new",
                          str(tensors / "new.npy")], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    arrived, release = threading.Event(), threading.Event()

    def blob_read(method, path, headers):  # dedup's read of the 1 MiB blob
        first, _, last = headers.get("range", "bytes=0-0")[6:].partition("-")
        return method == "GET" and last.isdigit() and int(last) - int(first) >= MIB // 2

    def commit_with_its_blob_read_held():
        assert p.stdout.readline() == b"staged\n", p.stderr.read()
        proxy.clear()
        proxy.inject(blob_read, ("hold", arrived, release, 30.0), 1)
        p.stdin.write(b"go\n")
        p.stdin.flush()

    err = ctrl_c_at_the_hold(p, arrived, release, "dedup never read the old blob",
                             commit_with_its_blob_read_held)
    check_not_saved(s3, key, before, p.returncode, err)
    assert b"save cancelled while comparing the new tensors with the archive's blobs" in err, err
    assert b"the save did not happen (its upload is aborted, the archive unchanged)" in err, err
    assert not [r for r in proxy.requests() if r["method"] == "POST" and "uploadId=" in r["path"]]
