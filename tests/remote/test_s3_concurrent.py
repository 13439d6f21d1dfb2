"""Two writers of one s3:// object at once: the commit that comes second is
refused with "archive changed on the server by another writer", and its
writer plans it again against the object the first one committed (at most
3 times): both tags are there (docs/s3-writes.md, "Concurrent writers"). s3rver
ignores the conditions, so the proxy in front of it enforces them as AWS S3
does (servers.S3Proxy(enforce_conditions=True)); without it the second
completion would win and the first tag be lost. The writers are `modelzip
import` processes; one of them is held by the proxy at the request under
test until the other has committed. benchmarks/concurrent_stress.py --s3
runs many writers and readers at random."""
import os
import subprocess
import threading

import numpy as np
import pytest

import servers
from conftest import CLI, completions, env_for, is_completion, run
from test_s3_multipart import MIB

CHANGED = "archive changed on the server by another writer"


def is_race_completion(method, path):
    """A proxy.inject matcher: the CompleteMultipartUpload of a key under race/."""
    return is_completion(method, path, "race/")


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    d = tmp_path_factory.mktemp("arrays")
    rng = np.random.default_rng(46)
    np.save(d / "big.npy", rng.integers(0, 255, 6 * MIB, dtype=np.uint8))
    for name in ("a", "b"):
        np.save(d / f"{name}.npy", rng.standard_normal(1000).astype(np.float32))
    return d


def tags_of(url, env):
    return run("tags", url, env=env).stdout.decode().split()


def race(proxy, env, url, held_request, arrays, b_tag="b"):
    """Writer A (tag a) is held at its first request for which
    held_request(method, path) is true until writer B (tag `b_tag`)
    committed; returns A's finished process."""
    arrived, release = threading.Event(), threading.Event()
    proxy.inject(held_request, ("hold", arrived, release, 60.0), 1)
    a = subprocess.Popen([CLI, "import", url, "--tag", "a", str(arrays / "a.npy")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert arrived.wait(60), "writer A never reached the held request"
        run("import", url, "--tag", b_tag, arrays / "b.npy", env=env)
    finally:
        release.set()
        a.wait(timeout=120)
    a.stderr_text = a.stderr.read().decode()
    return a


@pytest.mark.parametrize("held", ["completion", "copy"])
def test_the_second_of_two_concurrent_commits_is_planned_again(guarded, arrays, held):
    """held=completion: A's CompleteMultipartUpload (If-Match: the ETag it
    read) arrives after B's; held=copy: A's UploadPartCopy of the old
    prefix (x-amz-copy-source-if-match) after B's commit changed the
    object. The server refuses it; A plans its commit again against B's
    object and completes it: B's tag, A's and the old one are there, the
    object verifies (before: A failed with the refusal)."""
    fork, proxy = guarded
    env = env_for(proxy)
    url = f"s3://models/race/{held}.zip"
    run("import", url, "--tag", "base", arrays / "big.npy", env=env)
    if held == "completion":
        match = is_race_completion
    else:  # the 6 MiB prefix is copied: an UploadPartCopy is part 1
        def match(m, p):
            return m == "PUT" and "partNumber=1&" in p and "race/" in p
    proxy.clear()
    a = race(proxy, env, url, match, arrays)
    assert a.returncode == 0, a.stderr_text
    # Its progress starts again: the writer says why (on stderr, a notice).
    assert a.stderr_text.count("the commit is planned again against the archive as it is now "
                               "(new plan 1 of 3)") == 1, a.stderr_text
    assert tags_of(url, env) == ["base", "b", "a"]
    run("verify", url, env=env)
    refused = [r for r in proxy.requests() if r.get("refused")]
    assert len(refused) == 1 and refused[0]["path"].split("?")[0].endswith(f"race/{held}.zip")
    if held == "copy":  # the refused copy was asked for the version A read
        assert "x-amz-copy-source-if-match" in refused[0]["headers"]
    else:
        assert "if-match" in refused[0]["headers"]
    # B's, and A's after its new plan (and A's refused one).
    assert len(completions(proxy, f"race/{held}.zip")) == (3 if held == "completion" else 2)


def test_a_new_key_created_twice_at_once_keeps_both(guarded, arrays):
    """Both writers find no object: A's completion (If-None-Match: *) after
    B created the key is refused, and A appends its tag to B's object."""
    fork, proxy = guarded
    env = env_for(proxy)
    url = "s3://models/race/new.zip"
    a = race(proxy, env, url, is_race_completion, arrays)
    assert a.returncode == 0, a.stderr_text
    assert tags_of(url, env) == ["b", "a"]
    refused = [r for r in proxy.requests() if r.get("refused")]
    assert len(refused) == 1 and refused[0]["headers"].get("if-none-match") == "*"


def test_a_conflict_the_new_plan_cannot_resolve_is_reported(guarded, arrays):
    """B adds the tag A adds: A's new plan finds it there and A fails
    saying so; B's tag stays."""
    fork, proxy = guarded
    env = env_for(proxy)
    url = "s3://models/race/same-tag.zip"
    run("import", url, "--tag", "base", arrays / "big.npy", env=env)
    a = race(proxy, env, url, is_race_completion, arrays, b_tag="a")
    assert a.returncode == 1, a.stderr_text
    assert "'a'" in a.stderr_text and "exists" in a.stderr_text, a.stderr_text
    assert tags_of(url, env) == ["base", "a"]
    run("verify", url, env=env)


def test_a_commit_refused_again_and_again_fails_after_3_new_plans(guarded, arrays):
    """Every completion refused (as if another writer always came first):
    the commit is planned again 3 times, then fails with the refusal."""
    fork, proxy = guarded
    env = env_for(proxy)
    url = "s3://models/race/always.zip"
    run("import", url, "--tag", "base", arrays / "a.npy", env=env)
    before = fork.get("race/always.zip")
    proxy.clear()
    proxy.inject(is_race_completion, (412, "PreconditionFailed"), 100)
    p = subprocess.run([CLI, "import", url, "--tag", "a", str(arrays / "a.npy")], env=env,
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and CHANGED in p.stderr.decode(), p.stderr
    assert len(completions(proxy, "race/always.zip")) == 4
    assert fork.get("race/always.zip") == before


def test_s3rver_alone_lets_the_last_completion_win(fork, arrays):
    """Why the proxy enforces: the same race against s3rver's own
    conditions loses tag b (so the tests above can fail)."""
    proxy = servers.S3Proxy(fork.port)
    try:
        env = env_for(proxy)
        url = "s3://models/race/unguarded.zip"
        run("import", url, "--tag", "base", arrays / "big.npy", env=env)
        a = race(proxy, env, url, is_race_completion, arrays)
        assert a.returncode == 0, a.stderr_text
        assert sorted(tags_of(url, env)) == ["a", "base"]  # b is lost
    finally:
        proxy.stop()


def test_a_read_of_old_bytes_refused_before_the_commit_is_planned_again(guarded, arrays):
    """A removal in place fetches the 5 MiB after the removed tag's free
    entry (a part's minimum) from the version it read; held until another
    writer committed, that read is refused ("changed while reading"):
    nothing was written yet, so the removal is planned again against the
    new object and completes: t1 gone, b there (the only request refused
    is that read)."""
    fork, proxy = guarded
    env = env_for(proxy, MODELZIP_S3_PART_SIZE="5M")
    url = "s3://models/race/fetch.zip"
    run("import", url, "--tag", "t1", arrays / "a.npy", env=env)
    run("import", url, "--tag", "t2", arrays / "big.npy", env=env)
    proxy.clear()

    def large_get(method, path, headers):  # the fetch of bytes for a part
        first, _, last = headers.get("range", "bytes=0-0")[6:].partition("-")
        return method == "GET" and last.isdigit() and int(last) - int(first) >= MIB

    arrived, release = threading.Event(), threading.Event()
    proxy.inject(large_get, ("hold", arrived, release, 60.0), 1)
    a = subprocess.Popen([CLI, "rm-tag", url, "t1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    try:
        assert arrived.wait(60), "writer A never fetched old bytes"
        run("import", url, "--tag", "b", arrays / "b.npy", env=env)
    finally:
        release.set()
        a.wait(timeout=120)
    err = a.stderr.read().decode()
    assert a.returncode == 0, err
    assert tags_of(url, env) == ["t2", "b"]
    run("verify", url, env=env)
    refused = [r for r in proxy.requests() if r.get("refused")]
    assert len(refused) == 1 and refused[0]["method"] == "GET", refused
    assert "changed on the server while reading" in err and "(new plan 1 of 3)" in err, err
