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

from conftest import cli_env, run
from test_s3_multipart import MIB, fork, s3  # noqa: F401


def env_for(proxy, **extra):
    return cli_env(**{"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                      "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": proxy.endpoint, **extra})


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


def test_other_commands_refuse_s3_archives_clearly(s3, tensors):
    fork, proxy = s3
    url = "s3://models/w/rm.zip"
    env = env_for(proxy)
    run("import", url, "--tag", "a", tensors / "small.npy", env=env)
    for args in (["rm-tag", url, "a"], ["gc", url]):
        p = run(*args, env=env, check=False)
        assert p.returncode != 0 and b"only import writes s3:// archives so far" in p.stderr


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
