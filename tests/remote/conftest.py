"""Fixtures for the remote-archive tests: archives written by the CLI and
served by a real nginx on 127.0.0.1, and an S3 server (@20minutes/s3rver)
behind the recording, fault-injecting proxy (tests/remote/servers.py)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import servers  # noqa: E402

CLI = os.environ.get("MODELZIP_CLI", "modelzip")
QUICKSTART = os.environ.get("MODELZIP_QUICKSTART", "quickstart")
SOURCE_DIR = os.environ.get("MODELZIP_SOURCE_DIR", ".")
TESTDATA = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                        "finalfusion")
BIG_TENSOR = 64 << 20  # bytes of each large tensor in big.zip (4 of them: 256 MiB)


def run(*args, check=True, env=None, timeout=120):
    """Runs modelzip with a private cache unless `env` says otherwise."""
    proc = subprocess.run([CLI, *map(str, args)], capture_output=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"modelzip {args} failed ({proc.returncode}): {proc.stderr.decode()}")
    return proc


def cli_env(cache_dir=None, **extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("MODELZIP_") and k not in ("MODELZIP_CLI",) or k.startswith("AWS_"):
            env.pop(k)
    if cache_dir is None:
        env["MODELZIP_NO_CACHE"] = "1"
    else:
        env["MODELZIP_CACHE_DIR"] = str(cache_dir)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The folder nginx serves: qs.zip (quickstart: two tags), emb.zip (an
    embedding tag on top), golden.zip (graph and training) and big.zip
    (4 x 64 MiB tensors and a small one, appended as two tags)."""
    www = tmp_path_factory.mktemp("www")
    subprocess.run([QUICKSTART, str(www / "qs.zip")], check=True, capture_output=True)
    shutil.copyfile(www / "qs.zip", www / "emb.zip")
    run("import", www / "emb.zip", "--tag", "words", os.path.join(TESTDATA, "similarity.fifu"),
        "--name", "words")
    run("import", www / "emb.zip", "--tag", "analogy", os.path.join(TESTDATA, "analogy.bin"),
        "--name", "words")
    shutil.copyfile(os.path.join(SOURCE_DIR, "tests", "golden", "graph", "checkpoint-v1.zip"),
                    www / "golden.zip")
    data = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(7)
    files = []
    for i in range(4):
        np.save(data / f"big{i}.npy", rng.integers(0, 255, BIG_TENSOR, dtype=np.uint8))
        files.append(data / f"big{i}.npy")
    np.save(data / "small.npy", np.arange(1000, dtype=np.float32))
    run("import", www / "big.zip", "--tag", "t1", *files[:2])
    run("import", www / "big.zip", "--tag", "t2", *files[2:], data / "small.npy")
    shutil.rmtree(data)
    return www


@pytest.fixture(scope="session")
def nginx(site, tmp_path_factory):
    server = servers.Nginx(tmp_path_factory.mktemp("nginx"), site)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    """@20minutes/s3rver 4.0.4 on 127.0.0.1 with the bucket "models" (one per
    test module)."""
    prefix = servers.install_s3rver_fork(os.environ["MODELZIP_BUILD_DIR"])
    server = servers.S3rverFork(prefix, tmp_path_factory.mktemp("s3rver-fork"), "models")
    try:
        yield server
    finally:
        server.stop()


def proxy_of(fork, **options):
    """A fixture's (fork, servers.S3Proxy in front of it): requests go through
    the proxy, stopped when the test ends."""
    proxy = servers.S3Proxy(fork.port, **options)
    try:
        yield fork, proxy
    finally:
        proxy.stop()


@pytest.fixture()
def s3(fork):
    """The proxy in front of the fork; requests go through it."""
    yield from proxy_of(fork)


@pytest.fixture()
def guarded(fork):
    """The proxy enforcing the conditions s3rver ignores (as AWS S3 does)."""
    yield from proxy_of(fork, enforce_conditions=True)


def env_for(proxy, **extra):
    """The environment of a modelzip process writing to the S3 server behind `proxy`."""
    return cli_env(**{"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                      "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": proxy.endpoint, **extra})


def is_completion(method, path, key=""):
    """Whether a request is a CompleteMultipartUpload (of a key containing `key`)."""
    return method == "POST" and "uploadId=" in path and key in path


def completions(proxy, key=""):
    """The CompleteMultipartUpload requests the proxy saw (of keys containing `key`)."""
    return [r for r in proxy.requests() if is_completion(r["method"], r["path"], key)]
