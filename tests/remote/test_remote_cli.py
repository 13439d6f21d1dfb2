"""Every read-only command on an archive served by nginx gives the same
answer as on the local file, fetching only what it needs (nginx's access log
is the witness)."""
import filecmp
import os
import shutil
import time

import pytest

from conftest import BIG_TENSOR, TESTDATA, cli_env, run

COMMANDS = [  # (archive, args after it)
    ("qs.zip", ["tags"]),
    ("qs.zip", ["tags", "--json"]),
    ("qs.zip", ["ls"]),
    ("qs.zip", ["ls", "--tag", "step-1", "--json"]),
    ("qs.zip", ["info"]),
    ("qs.zip", ["info", "--json"]),
    ("qs.zip", ["meta", "--json"]),
    ("qs.zip", ["cat", "fc.bias"]),
    ("qs.zip", ["cat", "fc.weight", "--tag", "step-1"]),
    ("qs.zip", ["diff", "step-1", "step-2"]),
    ("qs.zip", ["diff", "step-1", "step-2", "--json"]),
    ("qs.zip", ["verify"]),
    ("golden.zip", ["graph", "--json"]),
    ("golden.zip", ["graph", "--dot"]),
    ("golden.zip", ["info", "--tag", "step-2", "--json"]),
    ("emb.zip", ["embed", "words", "Berlin", "no-such-word", "--tag", "words", "--json"]),
    ("emb.zip", ["similar", "words", "Berlin", "-k", "5", "--tag", "words", "--json"]),
    ("emb.zip", ["analogy", "words", "Berlin", "Deutschland", "Paris", "--json"]),
    ("emb.zip", ["ls", "--tag", "words"]),
    ("big.zip", ["ls", "--json"]),
]


def swap(text, url, path):
    return text.replace(url.encode(), path.encode())


@pytest.mark.parametrize("name,args", COMMANDS, ids=[" ".join([a, *b]) for a, b in COMMANDS])
def test_same_answer_as_local(nginx, site, name, args):
    local = str(site / name)
    url = nginx.url(name)
    a = run(args[0], local, *args[1:], check=False)
    b = run(args[0], url, *args[1:], check=False, env=cli_env())
    # The local run answered (diff exits 1 when the tags differ).
    assert a.returncode in (0, 1) and (a.stdout or a.returncode == 0), a.stderr
    assert (b.returncode, swap(b.stdout, url, local), swap(b.stderr, url, local)) == \
        (a.returncode, a.stdout, a.stderr)


EMBEDDING_URL = ("a URL: embedding files are read from local paths (download it first; modelzip "
                 "archives are read over http, https and s3, docs/remote.md)")


@pytest.mark.parametrize("command", [["similar", "Berlin"], ["embed", "Berlin"],
                                     ["analogy", "Berlin", "Deutschland", "Paris"]])
def test_embedding_file_url_is_refused_before_fetching(nginx, site, command):
    """A URL naming an embedding file (by extension, whatever its case, or
    --format) is not fetched as an archive: the error says why it is not read."""
    for name in ("similarity.fifu", "similarity.txt", "analogy.bin"):
        shutil.copyfile(os.path.join(TESTDATA, name), site / name)
    shutil.copyfile(os.path.join(TESTDATA, "similarity.fifu"), site / "vectors")
    for name, extra in (("similarity.fifu", []), ("similarity.txt?x=1", []),
                        ("analogy.BIN", []), ("vectors", ["--format", "fifu"])):
        url = nginx.url(name)
        start = len(nginx.log_lines())
        out = run(command[0], url, *command[1:], *extra, check=False, env=cli_env())
        assert (out.returncode, out.stdout, out.stderr.decode()) == \
            (1, b"", f"modelzip: {url}: {EMBEDDING_URL}\n")
        assert fetched(nginx, start) == []


def test_url_that_is_no_zip_says_embedding_files_are_local(nginx, site):
    shutil.copyfile(os.path.join(TESTDATA, "similarity.fifu"), site / "vectors")
    url = nginx.url("vectors")
    out = run("similar", url, "Berlin", check=False, env=cli_env())
    assert (out.returncode, out.stdout, out.stderr.decode()) == \
        (1, b"", f"modelzip: {url}: {EMBEDDING_URL}\n")
    # Other commands still say what the bytes are not.
    out = run("ls", url, check=False, env=cli_env())
    assert out.returncode == 1 and b"not a zip archive" in out.stderr


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_export_same_bytes(nginx, site, tmp_path, fmt):
    run("export", site / "qs.zip", tmp_path / f"local.{fmt}")
    run("export", nginx.url("qs.zip"), tmp_path / f"remote.{fmt}", env=cli_env())
    assert filecmp.cmp(tmp_path / f"local.{fmt}", tmp_path / f"remote.{fmt}", shallow=False)


def test_extract_same_files(nginx, site, tmp_path):
    run("extract", site / "emb.zip", tmp_path / "local")
    run("extract", nginx.url("emb.zip"), tmp_path / "remote", env=cli_env())
    cmp = filecmp.dircmp(tmp_path / "local", tmp_path / "remote")
    names = []
    for root, _, files in os.walk(tmp_path / "local"):
        names += [os.path.relpath(os.path.join(root, f), tmp_path / "local") for f in files]
    assert names
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "local", tmp_path / "remote", names,
                                               shallow=False)
    assert (mismatch, errors) == ([], []) and not cmp.left_only and not cmp.right_only


def fetched(nginx, start):
    """Records logged since `start` (nginx logs a request when it ends)."""
    time.sleep(0.2)
    return nginx.log_lines()[start:]


def test_one_small_tensor_of_a_large_archive(nginx, site, tmp_path):
    size = os.path.getsize(site / "big.zip")
    assert size >= 256 << 20
    start = len(nginx.log_lines())
    out = run("cat", nginx.url("big.zip"), "small", "--npy", env=cli_env()).stdout
    local = run("cat", site / "big.zip", "small", "--npy").stdout
    assert out == local
    log = fetched(nginx, start)
    # The tensor and the central directory, from the local file's own listing.
    import zipfile
    with zipfile.ZipFile(site / "big.zip") as z:
        infos = z.infolist()
        blob = [i for i in infos if i.filename.startswith("t2/params/")]
        small = min(blob, key=lambda i: i.compress_size)
        cd_offset = max(i.header_offset for i in infos)  # past the last local header
    with open(site / "big.zip", "rb") as f:
        f.seek(-22, os.SEEK_END)
        eocd = f.read(22)
    cd_size = int.from_bytes(eocd[12:16], "little")
    sent = sum(r["bytes_sent"] for r in log)
    assert all(r["range"].startswith("bytes=") and "-" in r["range"][6:] and
               not r["range"].startswith("bytes=-") for r in log if r["request"].startswith("GET"))
    assert all(r["status"] == 206 for r in log if r["request"].startswith("GET"))
    budget = small.compress_size + cd_size + (128 << 10)
    assert sent <= budget, (sent, budget, log)
    assert cd_offset < size


def test_second_read_fetches_nothing(nginx, site, tmp_path):
    cache = tmp_path / "cache"
    env = cli_env(cache)
    first = run("cat", nginx.url("qs.zip"), "fc.weight", "--tag", "step-1", env=env).stdout
    start = len(nginx.log_lines())
    second = run("cat", nginx.url("qs.zip"), "fc.weight", "--tag", "step-1", env=env).stdout
    assert first == second
    log = fetched(nginx, start)
    assert [r["request"].split()[0] for r in log] == ["HEAD"], log  # only the version check
    assert any(p.suffix == ".bytes" for p in cache.iterdir())


def test_verify_reads_everything_once(nginx, site):
    start = len(nginx.log_lines())
    run("verify", nginx.url("big.zip"), env=cli_env())
    log = fetched(nginx, start)
    body = sum(r["body_bytes_sent"] for r in log)
    size = os.path.getsize(site / "big.zip")
    assert size <= body <= size + (64 << 10), (body, size)


def test_cache_limit_evicts(nginx, site, tmp_path):
    cache = tmp_path / "cache"
    qs, emb = os.path.getsize(site / "qs.zip"), os.path.getsize(site / "emb.zip")
    limit = max(qs, emb) + (64 << 10)  # room for either, not both
    assert qs + emb > limit
    env = cli_env(cache, MODELZIP_CACHE_LIMIT=limit)
    run("verify", nginx.url("qs.zip"), env=env)
    assert len([p for p in cache.iterdir() if p.suffix == ".bytes"]) == 1
    run("verify", nginx.url("emb.zip"), env=env)
    kept = [p for p in cache.iterdir() if p.suffix == ".bytes"]
    assert len(kept) == 1  # qs.zip's bytes made room for emb.zip's
    start = len(nginx.log_lines())
    run("verify", nginx.url("emb.zip"), env=env)  # still cached
    assert [r["request"].split()[0] for r in fetched(nginx, start)] == ["HEAD"]
    run("verify", nginx.url("big.zip"), env=env)
    # big.zip alone exceeds the limit: not kept; emb.zip made room first.
    assert sum(p.stat().st_blocks * 512 for p in cache.iterdir()) <= limit


def test_cache_record_of_another_boot_is_not_trusted(nginx, site, tmp_path):
    """Cached bytes are not synced: their record names the kernel's boot id,
    and a record of another boot (bytes that may never have reached the
    disk) is ignored; one marked 'synced' is trusted."""
    cache = tmp_path / "cache"
    env = cli_env(cache)
    url = nginx.url("qs.zip")
    first = run("cat", url, "fc.weight", "--tag", "step-1", env=env).stdout
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    [record] = [p for p in cache.iterdir() if p.suffix == ".ranges"]
    header, *ranges = record.read_text().splitlines()
    magic, size, inode, word = header.split()
    assert (magic, int(size), word) == ("modelzip-cache-2", os.path.getsize(site / "qs.zip"), boot)
    assert ranges

    def methods():
        start = len(nginx.log_lines())
        assert run("cat", url, "fc.weight", "--tag", "step-1", env=env).stdout == first
        return [r["request"].split()[0] for r in fetched(nginx, start)]

    assert methods() == ["HEAD"]
    other = "00000000-0000-4000-8000-000000000000"
    record.write_text("\n".join([f"{magic} {size} {inode} {other}", *ranges]) + "\n")
    assert "GET" in methods()  # fetched again, and recorded for this boot
    assert record.read_text().split()[3] == boot
    record.write_text("\n".join([f"{magic} {size} {inode} synced", *ranges]) + "\n")
    assert methods() == ["HEAD"]
