"""Collective saves into one S3 object (issue 29, "N ranks, one object"):
modelzip.distributed.save / save_checkpoint on s3://BUCKET/KEY under
mpirun (mpi4py) and torch gloo, against @20minutes/s3rver 4.0.4 through the
recording, fault-injecting proxy (servers.S3Proxy). Each rank runs
s3_collective_worker.py, which also reads its blocks back from the object
resharded (modelzip.distributed.load)."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import servers
from conftest import completions, env_for, is_completion, run
from test_s3_multipart import MIB
from test_s3_writes import check_downloaded, uploaded

WORKER = os.path.join(os.path.dirname(__file__), "s3_collective_worker.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

pytestmark = pytest.mark.skipif(
    subprocess.run([PYTHON, "-c", "import modelzip.distributed, mpi4py, torch"],
                   capture_output=True).returncode != 0 or shutil.which("mpirun") is None,
    reason="needs the Python bindings, mpi4py, torch and mpirun")


def ranks(proxy, engine, world, jobs, mib=24):
    """Runs the worker on `world` ranks, which do the (scenario, url) jobs in
    turn; their output, by rank, and whether all succeeded."""
    pairs = [str(x) for job in jobs for x in job]
    env = dict(env_for(proxy), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    if engine == "mpi":
        r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(world), PYTHON, WORKER, "mpi",
                            str(mib), *pairs], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        return r.stdout, r.returncode == 0 and len(re.findall(r"rank \d+ ok", r.stdout)) == world
    port = servers.free_port()
    procs = [subprocess.Popen([PYTHON, WORKER, "torch", str(rank), str(world), str(port),
                               str(mib), *pairs], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(world)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    return "".join(outs), all(p.returncode == 0 for p in procs)


def saved(proxy, engine, world, jobs, mib=24):
    out, ok = ranks(proxy, engine, world, jobs, mib)
    assert ok, out
    return out


def uploads_by_rank(out, url):
    """Bytes each rank uploaded in its save into `url` (the worker's lines;
    mpirun may join two ranks' lines)."""
    return {int(m[1]): int(m[2]) for m in re.finditer(
        r"rank (\d+) uploaded (\d+) of \d+ into " + re.escape(url), out)}


@pytest.mark.parametrize("world", [2, 4])
def test_mpi_new_archive_then_append(s3, tmp_path, world):
    fork, proxy = s3
    key = f"coll/mpi{world}.zip"
    url = f"s3://models/{key}"
    # The same ranks then save the same tensors into a local file (compared
    # below): one start of the ranks for both saves.
    local = tmp_path / "local.zip"
    out = saved(proxy, "mpi", world, [("save", url), ("save", local)])
    by_rank = uploads_by_rank(out, url)
    # 24 MiB of rows: every rank's block is a run over 5 MiB, uploaded by that rank.
    assert all(by_rank[r] >= 5 * MIB for r in range(1, world)), out
    complete = completions(proxy)
    assert len(complete) == 1 and complete[0]["headers"].get("if-none-match") == "*"
    creates = [r for r in proxy.requests() if r["path"].endswith("?uploads=")]
    assert len(creates) == 1  # one upload for all ranks
    blob = fork.get(key)
    check_downloaded(blob, tmp_path)
    run("verify", url, env=env_for(proxy))
    # Byte for byte the local collective save of the same tensors.
    assert local.read_bytes() == blob

    proxy.clear()
    out = saved(proxy, "mpi", world, [("append", url), ("append", local)])
    new = fork.get(key)
    assert run("tags", url, env=env_for(proxy)).stdout.split() == [b"t1", b"t2"]
    new_bytes = ((24 * 16) // 2 + 1) * (64 << 10)  # the tensor "extra"
    sent = uploaded(proxy)
    assert sent <= 1.1 * new_bytes + (64 << 10), (sent, new_bytes)
    copies = [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert copies, "the old object's prefix is copied server-side"
    complete = completions(proxy)
    assert complete[-1]["headers"].get("if-match"), "completion is conditional on the old ETag"
    if world == 4:  # 3 MiB per rank: every rank's range is under 5 MiB, the root uploads it
        assert not any(uploads_by_rank(out, url).get(r) for r in range(1, world)), out
    check_downloaded(new, tmp_path)
    run("verify", url, env=env_for(proxy))
    assert local.read_bytes() == new


def test_gloo_save_checkpoint_and_background_save(s3, tmp_path):
    fork, proxy = s3
    # One start of the two gloo ranks for the three saves.
    local = tmp_path / "bg.zip"
    saved(proxy, "torch", 2, [("checkpoint", "s3://models/coll/ckpt.zip"),
                              ("background", "s3://models/coll/bg.zip"), ("save", local)])
    run("verify", "s3://models/coll/ckpt.zip", env=env_for(proxy))
    check_downloaded(fork.get("coll/ckpt.zip"), tmp_path)
    check_downloaded(fork.get("coll/bg.zip"), tmp_path)
    assert local.read_bytes() == fork.get("coll/bg.zip")


def put_of_part(number):
    """A proxy.inject matcher: the UploadPart request of part `number`."""
    return lambda method, path: method == "PUT" and re.search(
        rf"[?&]partNumber={number}(&|$)", path) is not None


def failing_part_aborts(fork, proxy, key, part, scenario):
    """Rank 1's part `part` answered 403 during the mpirun -np 2 `scenario`:
    every rank raises, the root aborts the upload (nothing completed), the
    object at `key` is as it was."""
    before = fork.get(key)
    proxy.clear()
    proxy.inject(put_of_part(part), (403, "AccessDenied"), 1)
    out, ok = ranks(proxy, "mpi", 2, [(scenario, f"s3://models/{key}")])
    assert ok, out
    assert out.count("collective commit failed on rank 1") == 2, out
    assert "AccessDenied" in out, out
    assert any(r["method"] == "DELETE" and "uploadId=" in r["path"] for r in proxy.requests()), \
        "the root aborts the upload"
    assert not completions(proxy)
    assert fork.get(key) == before


def test_a_failing_rank_aborts_the_upload_on_every_rank(s3, tmp_path):
    fork, proxy = s3
    key = "coll/fail.zip"
    saved(proxy, "mpi", 2, [("save", f"s3://models/{key}")])
    # The append's parts: 1 to 11 are the root's (copies of the old prefix,
    # then its own rows), rank 1's rows begin at part 12.
    failing_part_aborts(fork, proxy, key, 12, "fail")


def same_as_local(fork, proxy, key, local, tmp_path, tags):
    """The object is the local collective save's archive byte for byte,
    readable by zip tools and modelzip, with `tags`."""
    url = f"s3://models/{key}"
    blob = fork.get(key)
    assert run("tags", url, env=env_for(proxy)).stdout.decode().split() == tags
    check_downloaded(blob, tmp_path)
    run("verify", url, env=env_for(proxy))
    assert local.read_bytes() == blob
    return blob


def both(scenario, url, local):
    return [(scenario, url), (scenario, local)]


def test_mpi_keep_last_and_replace_remove_tags_in_the_one_upload(s3, tmp_path):
    import modelzip  # the module is skipped without the bindings (pytestmark)
    fork, proxy = s3
    key = "coll/rot.zip"
    url = f"s3://models/{key}"
    local = tmp_path / "rot.zip"
    saved(proxy, "mpi", 2, both("rot:s1:2:0:1", url, local) + both("rot:s2:2:0:2", url, local))
    same_as_local(fork, proxy, key, local, tmp_path, ["s1", "s2"])

    # keep_last=2 removes s1 in place: its 24 MiB stay as a free entry (its
    # header uploaded with the 5 MiB a part needs), s2 is copied server-side,
    # "small" and the text "vocab" (stored by s1, referenced by s2 and s3)
    # move to s2.
    proxy.clear()
    out = saved(proxy, "mpi", 2, both("rot:s3:2:0:3", url, local))
    by_rank = uploads_by_rank(out, url)
    assert by_rank[1] >= 5 * MIB, out  # rank 1 still uploads its rows
    sent = uploaded(proxy)
    assert sent <= 24 * MIB + 5 * MIB + 256 * 1024, sent
    copies = [r for r in proxy.requests() if "x-amz-copy-source" in r["headers"]]
    assert copies, "the kept bytes are copied server-side"
    complete = completions(proxy)
    assert len(complete) == 1 and complete[0]["headers"].get("if-match"), complete
    blob = same_as_local(fork, proxy, key, local, tmp_path, ["s2", "s3"])
    assert b".modelzip-free/" in blob
    with modelzip.open(local) as a:  # the object, byte for byte
        assert {p.name: p.owner_tag for p in a.params("s3")} == {"big": "s3", "small": "s2",
                                                                 "vocab": "s2"}

    # keep_last=1 leaves more free bytes than live ones: the commit (in
    # place) is followed by the root's rewrite, server-side copies again.
    proxy.clear()
    before = len(blob)
    saved(proxy, "mpi", 2, both("rot:s4:1:0:4", url, local))
    complete = completions(proxy)
    assert len(complete) == 2 and all(c["headers"].get("if-match") for c in complete), complete
    assert uploaded(proxy) <= 24 * MIB + 2 * 5 * MIB + 512 * 1024, uploaded(proxy)
    blob = same_as_local(fork, proxy, key, local, tmp_path, ["s4"])
    assert b".modelzip-free/" not in blob and len(blob) < before / 2

    # replace: the old "latest" removed and the new one added, one upload.
    proxy.clear()
    saved(proxy, "mpi", 2, both("rot:latest:0:0:5", url, local) +
          both("rot:latest:3:1:6", url, local))
    assert len(completions(proxy)) == 2
    same_as_local(fork, proxy, key, local, tmp_path, ["s4", "latest"])
    with modelzip.open(local) as a:  # the object, byte for byte
        assert a.tensor("big", "latest")[0, 0] == 6.0


def test_mpi_a_blob_moved_by_rotation_is_copied_server_side(s3, tmp_path):
    """m1 and m2 save the same "big" (24 MiB; m2's is a dedup reference to
    m1's blob); m3's keep_last=2 removes m1, so that blob moves to m2. Its
    bytes are in the object: the root copies them server-side (but the
    first ones, which fill the part of the headers before them to S3's
    5 MiB), it does not upload them again (before: 24 MiB more)."""
    import modelzip  # the module is skipped without the bindings (pytestmark)
    fork, proxy = s3
    key = "coll/moved.zip"
    url = f"s3://models/{key}"
    local = tmp_path / "moved.zip"
    saved(proxy, "mpi", 2, both("rot:m1:0:0:1", url, local) + both("rot:m2:0:0:1", url, local))
    with modelzip.open(local) as a:
        assert {p.name: p.owner_tag for p in a.params("m2")}["big"] == "m1"
    old_size = len(fork.get(key))
    proxy.clear()
    # Without dedup (whose comparisons read the old "big" where it is m3's
    # namesake), the bytes of the old object fetched before its tail (the
    # ranks' loads of m3 afterwards read after it): the local headers, the
    # 5 MiB after the free entry's header and the moved blob's first bytes
    # that fill parts, not the moved blob, whose size and CRC the directory
    # gives (before: its 24 MiB too, read by the root while planning).
    saved(proxy, "mpi", 2, both("rot:m3:2:0:3:nodedup", url, local))
    fetched = 0
    for r in proxy.requests():
        if r["method"] == "GET" and r["headers"].get("range", "").startswith("bytes="):
            first, _, last = r["headers"]["range"][len("bytes="):].partition("-")
            if last and int(first) < old_size - 64 * 1024:
                fetched += int(last) - int(first) + 1
    assert fetched <= 10 * MIB + 512 * 1024, fetched
    same_as_local(fork, proxy, key, local, tmp_path, ["m2", "m3"])
    with modelzip.open(local) as a:
        assert {p.name: p.owner_tag for p in a.params("m3")}["big"] == "m3"
        assert {p.name: p.owner_tag for p in a.params("m2")}["big"] == "m2"  # moved
    # The new 24 MiB of m3, the free entry's header with the 5 MiB a part
    # needs, the moved blob's first bytes up to 5 MiB, the tables and tail.
    sent = uploaded(proxy)
    assert sent <= 24 * MIB + 10 * MIB + 512 * 1024, sent
    copied = sum(int(b) - int(a) + 1 for a, b in (
        r["headers"]["x-amz-copy-source-range"][len("bytes="):].split("-")
        for r in proxy.requests() if "x-amz-copy-source" in r["headers"]))
    # Twice m1's blob but the 5 MiB uploaded: in place as the free entry's
    # data, and moved into m2 (before: once).
    assert copied >= 2 * 19 * MIB, copied


def test_gloo_background_save_with_keep_last(s3, tmp_path):
    fork, proxy = s3
    key = "coll/bgrot.zip"
    url = f"s3://models/{key}"
    local = tmp_path / "bgrot.zip"
    saved(proxy, "torch", 2, both("rot:s1:2:0:1:bg", url, local) +
          both("rot:s2:2:0:2:bg", url, local) + both("rot:s3:2:0:3:bg", url, local))
    same_as_local(fork, proxy, key, local, tmp_path, ["s2", "s3"])


def test_a_failing_rank_aborts_a_rotating_upload(s3, tmp_path):
    fork, proxy = s3
    key = "coll/rotfail.zip"
    url = f"s3://models/{key}"
    saved(proxy, "mpi", 2, [("rot:s1:0:0:1", url), ("rot:s2:0:0:2", url)])
    # Rank 1's part (its 12 MiB of rows) fails: every rank raises, the root
    # aborts the upload, s1 is still there. The root's parts before it are
    # numbered up to 23 (the free entry's header adds 12 numbers to the
    # append's), rank 1's is 24; the root's tail comes after the failure.
    failing_part_aborts(fork, proxy, key, 24, "rotfail:s3:2")


def test_a_rank_killed_during_a_rotating_save_leaves_the_object(s3, tmp_path):
    """gloo: rank 1 is killed while its part is held by the proxy; rank 0's
    engine fails at once and rank 0 names rank 1 as lost (gloo's "Connection
    closed by peer" names no rank: the ranks' alive locks on a lock file of
    their host do), the root aborts the upload, the object is unchanged."""
    fork, proxy = s3
    key = "coll/rotkill.zip"
    url = f"s3://models/{key}"
    saved(proxy, "torch", 2, [("rot:s1:0:0:1", url), ("rot:s2:0:0:2", url)])
    before = fork.get(key)
    proxy.clear()
    # Rank 1's part is number 24 (test_a_failing_rank_aborts_a_rotating_upload).
    proxy.inject(put_of_part(24), ("delay", 20.0), 1)
    env = dict(env_for(proxy), PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    port = servers.free_port()
    procs = [subprocess.Popen([PYTHON, WORKER, "torch", str(rank), "2", str(port), "24",
                               "rotfail:s3:2", url], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    try:
        for _ in range(600):  # at most 60 s for rank 1's part to arrive
            if proxy.faults[0][2] == 0 or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.1)
        assert proxy.faults[0][2] == 0, "rank 1's part never arrived"
        procs[1].kill()
        out = procs[0].communicate(timeout=120)[0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[0].returncode == 0 and "rank 0 raised" in out, out
    assert "collective commit failed: rank 1 was lost (the process ended during the commit" \
        in out, out
    assert f"s3://models/{key}" in out, out  # the archive (and tag) named
    log = proxy.requests()
    assert any(r["method"] == "DELETE" and "uploadId=" in r["path"] for r in log), \
        "the root aborts the upload"
    assert not completions(proxy)
    assert fork.get(key) == before


def test_a_collective_save_refused_by_another_writer_is_planned_again(guarded, tmp_path):
    """mpirun -np 2: the collective append's CompleteMultipartUpload is held
    until another writer (modelzip import) committed tag b; the server
    refuses it (If-Match), and every rank plans the commit again against
    the new object and completes it: t1, b and t2 are there, the object
    verifies, and the root said that it planned again (before: every rank
    failed with "archive changed on the server by another writer")."""
    fork, proxy = guarded
    key = "coll/race.zip"
    url = f"s3://models/{key}"
    env = env_for(proxy)
    saved(proxy, "mpi", 2, [("save", url)])
    b = tmp_path / "b.npy"
    np.save(b, np.arange(1000, dtype=np.float32))
    proxy.clear()
    arrived, release = threading.Event(), threading.Event()
    proxy.inject(lambda m, p: is_completion(m, p, key), ("hold", arrived, release, 120.0), 1)
    result = {}
    collective = threading.Thread(
        target=lambda: result.update(zip(("out", "ok"), ranks(proxy, "mpi", 2,
                                                              [("append", url)]))))
    collective.start()
    try:
        assert arrived.wait(240), "the collective save never completed its upload"
        run("import", url, "--tag", "b", b, env=env)
    finally:
        release.set()
        collective.join(timeout=300)
    assert result.get("ok"), result.get("out")
    assert "the commit is planned again against the archive as it is now (new plan 1 of 3)" \
        in result["out"], result["out"]
    assert run("tags", url, env=env).stdout.split() == [b"t1", b"b", b"t2"]
    run("verify", url, env=env)
    check_downloaded(fork.get(key), tmp_path)
    refused = [r for r in proxy.requests() if r.get("refused")]
    assert len(refused) == 1 and "if-match" in refused[0]["headers"], refused
    # b's, the collective's refused one and its new plan's.
    assert len(completions(proxy, key)) == 3


def test_a_collective_save_refused_again_and_again_fails_on_every_rank(guarded):
    """Every completion refused (412): the collective commit is planned
    again 3 times, then every rank fails with the refusal and the object
    is unchanged."""
    fork, proxy = guarded
    key = "coll/always.zip"
    url = f"s3://models/{key}"
    saved(proxy, "mpi", 2, [("save", url)])
    before = fork.get(key)
    proxy.clear()
    proxy.inject(lambda m, p: is_completion(m, p, key), (412, "PreconditionFailed"), 100)
    out, ok = ranks(proxy, "mpi", 2, [("fail", url)])
    assert ok, out
    assert out.count("archive changed on the server by another writer") >= 2, out
    assert len(completions(proxy)) == 4
    assert fork.get(key) == before
