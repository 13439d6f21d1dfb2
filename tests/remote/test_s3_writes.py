"""Writers on s3://BUCKET/KEY (issue 29, steps so far): `modelzip import`,
C++ Writer and Python save upload one object by multipart upload; an append
copies the old object's prefix server-side and uploads only the new entries
and the tail. Against @20minutes/s3rver 4.0.4 through the recording proxy
(servers.S3Proxy), which counts the bytes uploaded."""
import io
import os
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import env_for, run
from test_s3_multipart import MIB


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    d = tmp_path_factory.mktemp("tensors")
    rng = np.random.default_rng(29)
    np.save(d / "big.npy", rng.integers(0, 255, 64 * MIB, dtype=np.uint8))
    np.save(d / "new.npy", rng.integers(0, 255, MIB, dtype=np.uint8))
    np.save(d / "small.npy", np.arange(1000, dtype=np.float32))
    return d


def uploaded(proxy):
    """Bytes sent in UploadPart bodies (copies carry none)."""
    return sum(r["body"] for r in proxy.requests()
               if r["method"] == "PUT" and "partNumber=" in r["path"])


def check_downloaded(blob, tmp_path):
    path = tmp_path / "downloaded.zip"
    path.write_bytes(blob)
    subprocess.run(["unzip", "-tq", str(path)], check=True, capture_output=True, timeout=120)
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        assert z.testzip() is None
    run("verify", path)


def test_import_writes_the_same_archive_as_a_local_import(s3, tensors, tmp_path):
    fork, proxy = s3
    url = "s3://models/w/new.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "t1", tensors / "small.npy", tensors / "new.npy", env=env)
    creates = [r for r in proxy.requests() if r["path"].endswith("?uploads=")]
    assert len(creates) == 1
    # A writer's HEAD answered 404 means a new archive: no GET asks S3 why.
    key_requests = [(r["method"], r["status"]) for r in proxy.requests()
                    if r["path"].split("?")[0].endswith("/w/new.zip") and "upload" not in r["path"]]
    assert key_requests and set(key_requests) == {("HEAD", 404)}, key_requests
    complete = proxy.requests()[-1]
    assert complete["headers"].get("if-none-match") == "*"  # a new key
    assert run("tags", url, env=env).stdout.split() == [b"t1"]
    run("verify", url, env=env)
    blob = fork.get("w/new.zip")
    check_downloaded(blob, tmp_path)
    local = tmp_path / "local.zip"
    run("import", local, "--tag", "t1", tensors / "small.npy", tensors / "new.npy")
    assert run("ls", "--json", url, env=env).stdout == run("ls", "--json", local).stdout


def test_append_uploads_only_the_new_bytes_and_the_tail(s3, tensors, tmp_path):
    fork, proxy = s3
    url = "s3://models/w/big.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "t1", tensors / "big.npy", env=env, timeout=300)
    old = fork.get("w/big.zip")
    assert len(old) > 64 * MIB
    proxy.clear()
    run("import", url, "--tag", "t2", tensors / "new.npy", env=env, timeout=300)
    new_bytes = os.path.getsize(tensors / "new.npy")
    sent = uploaded(proxy)
    blob = fork.get("w/big.zip")
    tail = len(blob) - len(old)  # what the object grew by
    assert sent <= 1.1 * new_bytes + (64 << 10), (sent, new_bytes, tail)
    copies = [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert copies and all(r["headers"]["x-amz-copy-source"] == "/models/w/big.zip"
                          for r in copies)
    complete = proxy.requests()[-1]
    assert complete["headers"]["if-match"].strip('"') and "if-none-match" not in complete["headers"]
    assert blob[:64 * MIB] == old[:64 * MIB]  # the prefix, copied
    assert run("tags", url, env=env).stdout.split() == [b"t1", b"t2"]
    run("verify", url, env=env)
    check_downloaded(blob, tmp_path)


def copied(proxy):
    """Bytes copied server-side (UploadPartCopy ranges)."""
    total = 0
    for r in proxy.requests():
        if "x-amz-copy-source-range" in r["headers"]:
            first, last = r["headers"]["x-amz-copy-source-range"][6:].split("-")
            total += int(last) - int(first) + 1
    return total


@pytest.fixture()
def three_tags(s3, tensors, request):
    """An archive of tags a (1 MiB), b (64 MiB), c (small) at s3://models/w/<test>.zip."""
    fork, proxy = s3
    url = f"s3://models/w/{request.node.name}.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "a", tensors / "new.npy", env=env, timeout=300)
    run("import", url, "--tag", "b", tensors / "big.npy", env=env, timeout=300)
    run("import", url, "--tag", "c", tensors / "small.npy", env=env, timeout=300)
    return url, env


def test_rm_tag_copies_the_surviving_ranges(s3, three_tags, tensors, tmp_path):
    fork, proxy = s3
    url, env = three_tags
    old = fork.get(url[len("s3://models/"):])
    proxy.clear()
    p = run("rm-tag", url, "a", env=env, timeout=300)
    assert b"freed in place" in p.stdout, p.stdout
    blob = fork.get(url[len("s3://models/"):])
    # In place: the removed tag's bytes stay as a free entry, everything
    # else before the old tail is copied; only the free entry's header
    # (with the 5 MiB a part needs at least) and the new tail are uploaded.
    assert copied(proxy) >= 60 * MIB and uploaded(proxy) <= 5 * MIB + (256 << 10), (
        copied(proxy), uploaded(proxy))
    assert len(blob) >= 64 * MIB and blob[MIB:60 * MIB] == old[MIB:60 * MIB]
    assert run("tags", url, env=env).stdout.split() == [b"b", b"c"]
    run("verify", url, env=env)
    check_downloaded(blob, tmp_path)
    # The result is still appendable: the next tag copies the prefix.
    proxy.clear()
    run("import", url, "--tag", "d", tensors / "small.npy", env=env, timeout=300)
    assert uploaded(proxy) <= 5 * MIB + (256 << 10) and copied(proxy) >= 60 * MIB
    assert run("tags", url, env=env).stdout.split() == [b"b", b"c", b"d"]
    check_downloaded(fork.get(url[len("s3://models/"):]), tmp_path)
    # gc rewrites without the free bytes; the entries moved, their data is
    # copied (at most a part's minimum of each fetched and uploaded again).
    proxy.clear()
    p = run("gc", url, env=env, timeout=300)
    assert b"archive" in p.stdout
    gc_blob = fork.get(url[len("s3://models/"):])
    assert len(gc_blob) < len(blob)
    assert copied(proxy) >= 55 * MIB and uploaded(proxy) <= 6 * MIB, (
        copied(proxy), uploaded(proxy))
    assert run("tags", url, env=env).stdout.split() == [b"b", b"c", b"d"]
    run("verify", url, env=env)
    check_downloaded(gc_blob, tmp_path)
    local = tmp_path / "big.zip"
    run("import", local, "--tag", "b", tensors / "big.npy")
    assert (run("cat", url, "--tag", "b", "big", env=env).stdout
            == run("cat", local, "--tag", "b", "big").stdout)


def test_rm_tag_copies_a_moved_blob_server_side(s3, tensors, tmp_path):
    """Tags x (the 64 MiB tensor, a small one) and y (the same 64 MiB, a
    dedup reference to x's blob, and 1 MiB): removing x moves the blob into
    y. It is copied server-side (its new local header uploaded with the
    bytes that fill that part to 5 MiB), not uploaded again; the removed
    tag's range becomes a free entry (5 MiB more uploaded)."""
    fork, proxy = s3
    url = "s3://models/w/moved.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "x", tensors / "big.npy", tensors / "small.npy", env=env,
        timeout=300)
    run("import", url, "--tag", "y", tensors / "big.npy", tensors / "new.npy", env=env,
        timeout=300)
    assert b"\tx/params/" in run("ls", url, "--tag", "y", env=env).stdout
    proxy.clear()
    run("rm-tag", url, "x", env=env, timeout=300)
    assert uploaded(proxy) <= 10 * MIB + (256 << 10), uploaded(proxy)
    assert copied(proxy) >= 2 * 59 * MIB, copied(proxy)  # in place as free, and moved
    assert b"\ty/params/" in run("ls", url, "--tag", "y", env=env).stdout
    run("verify", url, env=env)
    local = tmp_path / "m.zip"
    run("import", local, "--tag", "y", tensors / "big.npy")
    assert (run("cat", url, "--tag", "y", "big", env=env).stdout
            == run("cat", local, "--tag", "y", "big").stdout)


def test_rm_tag_keep_last_and_rewrite(s3, three_tags, tmp_path):
    fork, proxy = s3
    url, env = three_tags
    proxy.clear()
    run("rm-tag", url, "--keep-last", "2", "--rewrite", env=env, timeout=300)
    assert copied(proxy) >= 55 * MIB and uploaded(proxy) <= 6 * MIB
    assert run("tags", url, env=env).stdout.split() == [b"b", b"c"]
    run("verify", url, env=env)
    check_downloaded(fork.get(url[len("s3://models/"):]), tmp_path)


def test_meta_and_quantize_on_s3(s3, tensors, tmp_path):
    fork, proxy = s3
    url = "s3://models/w/meta.zip"
    env = env_for(proxy)
    mat = tmp_path / "mat.npy"
    np.save(mat, np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32))
    run("import", url, "--tag", "t", mat, tensors / "big.npy", env=env, timeout=300)
    proxy.clear()
    p = run("meta", url, "--name", "resnet", "--description", "on s3", "--json", env=env,
            timeout=300)
    assert b'"name": "resnet"' in p.stdout, p.stdout
    assert copied(proxy) >= 55 * MIB and uploaded(proxy) <= 6 * MIB
    assert b'"description": "on s3"' in run("meta", url, "--json", env=env).stdout
    check_downloaded(fork.get("w/meta.zip"), tmp_path)
    proxy.clear()
    run("quantize", url, "--from", "t", "--tag", "q", "--scheme", "int8-per-tensor", env=env,
        timeout=300)
    assert copied(proxy) >= 60 * MIB  # an append: the old object copied
    assert run("tags", url, env=env).stdout.split() == [b"t", b"q"]
    run("verify", url, env=env)
    check_downloaded(fork.get("w/meta.zip"), tmp_path)
    p = run("rm-tag", url, "nosuch", env=env, check=False)
    assert p.returncode != 0 and b"nosuch" in p.stderr
    p = run("gc", "s3://models/w/absent.zip", env=env, check=False)
    assert p.returncode != 0 and b"s3://models/w/absent.zip" in p.stderr


def test_a_rewrite_through_the_writer_replaces_the_object(s3, tensors, tmp_path):
    """--replace of the only tag: not an append, the whole archive uploaded."""
    fork, proxy = s3
    url = "s3://models/w/replace.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "a", tensors / "small.npy", env=env)
    proxy.clear()
    run("import", url, "--tag", "a", "--replace", tensors / "new.npy", env=env)
    assert not [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert run("tags", url, env=env).stdout.split() == [b"a"]
    run("verify", url, env=env)
    check_downloaded(fork.get("w/replace.zip"), tmp_path)


def test_missing_bucket_and_wrong_credentials_are_named(s3, tensors):
    fork, proxy = s3
    p = run("import", "s3://nosuch/x.zip", "--tag", "t", tensors / "small.npy",
            env=env_for(proxy), check=False)
    assert p.returncode != 0 and b"s3://nosuch/x.zip" in p.stderr and b"NoSuchBucket" in p.stderr
    p = run("import", "s3://models/w/x.zip", "--tag", "t", tensors / "small.npy",
            env=env_for(proxy, AWS_ACCESS_KEY_ID="NOBODY"), check=False)
    assert p.returncode != 0 and b"403" in p.stderr, p.stderr


def test_a_failed_upload_leaves_the_old_object(s3, tensors):
    fork, proxy = s3
    url = "s3://models/w/kept.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "t1", tensors / "small.npy", env=env)
    before = fork.get("w/kept.zip")
    proxy.inject(lambda m, p: m == "PUT" and "partNumber=" in p, (503, "SlowDown"), 1000)
    p = run("import", url, "--tag", "t2", tensors / "new.npy", env=env, check=False)
    assert p.returncode != 0 and b"SlowDown" in p.stderr
    assert fork.get("w/kept.zip") == before
    assert proxy.requests()[-1]["method"] == "DELETE"  # the upload aborted


def test_a_lost_completion_answer_is_not_reported_as_a_plain_failure(s3, tensors):
    """The server completes the upload but its answer is lost: the retry
    finds no such upload. The error must not read as if the old object were
    kept: it says the upload may have completed."""
    fork, proxy = s3
    url = "s3://models/w/lost-answer.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "t1", tensors / "small.npy", env=env)
    proxy.inject(lambda m, p: m == "POST" and "uploadId=" in p, "lose", 1)
    p = run("import", url, "--tag", "t2", tensors / "small.npy", env=env, check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and url in err and "CompleteMultipartUpload" in err, err
    assert "may have taken effect" in err, err
    assert run("tags", url, env=env).stdout.split() == [b"t1", b"t2"]  # it did


def test_parts_in_flight_and_part_size_are_configurable(s3, tensors):
    fork, proxy = s3
    url = "s3://models/w/serial.zip"
    run("import", url, "--tag", "t", tensors / "big.npy",
        env=env_for(proxy, MODELZIP_S3_PART_SIZE="5M", MODELZIP_S3_PARTS_IN_FLIGHT="1"))
    parts = sorted((r for r in proxy.requests()
                    if r["method"] == "PUT" and "partNumber=" in r["path"]),
                   key=lambda r: r["start"])
    assert len(parts) >= 12 and max(r["body"] for r in parts) == 5 * MIB
    # One at a time: each part sent only after the one before was answered.
    assert all(b["start"] >= a["end"] for a, b in zip(parts, parts[1:]))
    p = run("import", url, "--tag", "u", tensors / "small.npy",
            env=env_for(proxy, MODELZIP_S3_PARTS_IN_FLIGHT="0"), check=False)
    assert p.returncode != 0 and b"parts in flight 1 to 64" in p.stderr, p.stderr
    p = run("import", url, "--tag", "u", tensors / "small.npy",
            env=env_for(proxy, MODELZIP_S3_PART_SIZE="8X"), check=False)
    assert p.returncode != 0 and b"MODELZIP_S3_PART_SIZE='8X' is not a size" in p.stderr, p.stderr
    before = fork.get("w/serial.zip")
    proxy.clear()
    for age in ("1h", "-1", "3.5"):
        p = run("import", url, "--tag", "u", tensors / "small.npy",
                env=env_for(proxy, MODELZIP_S3_STALE_UPLOAD_AGE=age), check=False)
        assert p.returncode != 0 and url.encode() in p.stderr, p.stderr
        assert f"MODELZIP_S3_STALE_UPLOAD_AGE='{age}'".encode() in p.stderr, p.stderr
    assert fork.get("w/serial.zip") == before
    assert not [r for r in proxy.requests() if r["method"] in ("POST", "PUT")]  # nothing started


def test_python_save_to_s3(s3, tensors, monkeypatch):
    modelzip = pytest.importorskip("modelzip")
    fork, proxy = s3
    for k, v in env_for(proxy).items():
        if k.startswith("AWS_") or k.startswith("MODELZIP_"):
            monkeypatch.setenv(k, v)
    url = "s3://models/w/py.zip"
    weights = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    modelzip.save(url, "s1", weights)
    modelzip.save(url, "s2", {"w": weights["w"] * 2})
    assert modelzip.open(url).tags == ["s1", "s2"]
    np.testing.assert_array_equal(modelzip.load(url, "s2")["w"], weights["w"] * 2)
    # A removal rewrites the object from the old one's bytes (fetched).
    modelzip.remove_tag(url, "s1")
    assert modelzip.open(url).tags == ["s2"]
    np.testing.assert_array_equal(modelzip.load(url, "s2")["w"], weights["w"] * 2)
    assert not modelzip.open(url).verify()
    m = modelzip.update_metadata(url, model_name="py-model")
    assert m.model_name == "py-model" and modelzip.open(url).metadata.model_name == "py-model"
    assert modelzip.open(url).tags == ["s2"]
    blob = fork.get("w/py.zip")
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        assert z.testzip() is None


def test_an_s3_archive_tells_whether_another_writer_committed(s3, tensors, monkeypatch):
    """changed_since_open() of an s3:// archive asks with one HEAD whether
    the object's ETag and size are still those pinned at open (before:
    always False): True after another writer's commit; reopen() reads it."""
    modelzip = pytest.importorskip("modelzip")
    fork, proxy = s3
    for k, v in env_for(proxy).items():
        if k.startswith("AWS_") or k.startswith("MODELZIP_"):
            monkeypatch.setenv(k, v)
    url = "s3://models/w/asked.zip"
    w = np.arange(12, dtype=np.float32)
    modelzip.save(url, "s1", {"w": w})
    with modelzip.open(url) as archive:
        proxy.clear()
        assert not archive.changed_since_open()
        assert [r["method"] for r in proxy.requests()] == ["HEAD"]
        modelzip.save(url, "s2", {"w": w * 2})  # another writer
        assert archive.changed_since_open()
        assert archive.tags == ["s1"]
        with archive.reopen() as now:
            assert now.tags == ["s1", "s2"] and not now.changed_since_open()
            np.testing.assert_array_equal(now.load("s2")["w"], w * 2)


def test_python_save_of_large_tensors_is_the_local_archive(s3, tmp_path, monkeypatch):
    """Each large tensor's part is uploaded once its CRC is known (not at the
    commit's end); the object is byte for byte what a local save writes."""
    modelzip = pytest.importorskip("modelzip")
    fork, proxy = s3
    for k, v in env_for(proxy, MODELZIP_S3_PART_SIZE="5M").items():
        if k.startswith("AWS_") or k.startswith("MODELZIP_"):
            monkeypatch.setenv(k, v)
    rng = np.random.default_rng(37)
    weights = {f"w{i}": rng.standard_normal(3 * MIB // 2, dtype=np.float32) for i in range(6)}
    weights["bias"] = np.arange(7, dtype=np.float32)
    modelzip.save("s3://models/w/large.zip", "t", weights)
    modelzip.save(tmp_path / "large.zip", "t", weights)
    assert fork.get("w/large.zip") == (tmp_path / "large.zip").read_bytes()
