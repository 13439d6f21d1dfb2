"""Opening a remote archive reads the tail, the central directory and the
tables, nothing else: a local header is fetched (and checked against the
central directory, as for a local file) only when its entry is read, in the
same request as the entry's data. nginx's access log is the witness; the
entry layout comes from Python's zipfile, not from modelzip."""
import os
import shutil
import struct
import time
import zipfile

import pytest

from conftest import cli_env, run


def fetched(nginx, start):
    time.sleep(0.2)  # nginx logs a request when it has ended
    return nginx.log_lines()[start:]


def get_ranges(log):
    out = []
    for r in log:
        if not r["request"].startswith("GET"):
            continue
        assert r["status"] == 206 and r["range"].startswith("bytes="), r
        first, last = r["range"][6:].split("-")
        out.append((int(first), int(last) + 1))
    return out


def layout(path):
    """Entries in file order: (name, local header offset, compressed size)."""
    with zipfile.ZipFile(path) as z:
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
    return [(i.filename, i.header_offset, i.compress_size) for i in infos]


def tail_start(path):
    size = os.path.getsize(path)
    return size - min(size, 22 + 0xFFFF)


def test_open_fetches_no_local_header(nginx, site):
    """`tags` on big.zip (two tags of 2 x 64 MiB and 3 tensors): the tail and
    the tables; not one blob's local header."""
    path = site / "big.zip"
    start = len(nginx.log_lines())
    assert run("tags", nginx.url("big.zip"), env=cli_env()).stdout == \
        run("tags", path).stdout
    log = fetched(nginx, start)
    assert [r["request"].split()[0] for r in log].count("HEAD") == 1
    ranges = get_ranges(log)
    entries = layout(path)
    tail = tail_start(path)
    blobs = [(n, off) for n, off, _ in entries if "/params/" in n and off < tail]
    assert len(blobs) == 4  # the big ones (the small tensor lies in the tail)
    for name, off in blobs:
        assert not any(b <= off < e for b, e in ranges), (name, off, ranges)
    # The tail, then the tables outside it (modelzip.toml and t1/params.txt
    # at the start, t2/params.txt in the middle): 3 requests.
    assert len(ranges) <= 3, ranges
    assert sum(r["body_bytes_sent"] for r in log) <= (22 + 0xFFFF) + 4096


def test_list_newest_tag_fetches_its_blob_headers_only(nginx, site):
    """`ls` reads each listed blob's header (dtype, shape): one request per
    blob outside the tail, holding the local header and the blob header;
    nothing of the older tag's blobs."""
    path = site / "big.zip"
    start = len(nginx.log_lines())
    assert run("ls", nginx.url("big.zip"), env=cli_env()).stdout == run("ls", path).stdout
    log = fetched(nginx, start)
    ranges = get_ranges(log)
    entries = layout(path)
    tail = tail_start(path)
    old = [(n, off) for n, off, _ in entries if n.startswith("t1/params/")]
    new = [(n, off) for n, off, _ in entries if n.startswith("t2/params/") and off < tail]
    assert len(old) == 2 and len(new) == 2
    for name, off in old:
        assert not any(b <= off < e for b, e in ranges), (name, off, ranges)
    for name, off in new:  # the local header and the blob header in one request
        assert any(b == off and e - b <= 4096 for b, e in ranges), (name, off, ranges)
    assert len(ranges) <= 3 + len(new), ranges
    assert sum(r["body_bytes_sent"] for r in log) <= (22 + 0xFFFF) + 4096 + 4096 * len(new)


def damaged_copy(site, name, edit):
    """A copy of qs.zip with `edit(data, local_header_offset)` applied to the
    local header of blob t1... chosen below; returns (url path, entry name)."""
    with zipfile.ZipFile(site / "qs.zip") as z:
        info = next(i for i in z.infolist() if i.filename.startswith("step-1/params/")
                    and i.compress_size > 64)
    data = bytearray((site / "qs.zip").read_bytes())
    edit(data, info.header_offset)
    (site / name).write_bytes(bytes(data))
    return info.filename


def param_of(site, entry):
    """The parameter of step-1 stored in `entry` (params.txt: 'name index')."""
    with zipfile.ZipFile(site / "qs.zip") as z:
        table = z.read("step-1/params.txt").decode()
    index = entry.rsplit("/", 1)[1].split(".")[0]
    for line in table.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == index:
            return parts[0]
    raise AssertionError(f"{entry} not in {table!r}")


@pytest.mark.parametrize("damage,message", [
    ("name", "local header name differs from the central directory"),
    ("extra", "extends past the entry area"),
    ("signature", "bad local header signature"),
])
def test_local_header_checked_before_data_is_used(nginx, site, damage, message):
    def edit(data, lh):
        if damage == "name":
            data[lh + 30] ^= 0x01  # first byte of the name
        elif damage == "extra":
            struct.pack_into("<H", data, lh + 28, 0xFFF0)  # extra length past the next entry
        else:
            data[lh] ^= 0xFF
    name = f"lazy-{damage}.zip"
    entry = damaged_copy(site, name, edit)
    param = param_of(site, entry)
    # The local file: the open checks every local header.
    local = run("cat", site / name, param, "--tag", "step-1", check=False)
    assert local.returncode == 1 and message in local.stderr.decode(), local.stderr
    # Remote: the open does not read it; reading the entry checks it first.
    remote = run("cat", nginx.url(name), param, "--tag", "step-1", check=False, env=cli_env())
    err = remote.stderr.decode()
    assert remote.returncode == 1 and message in err and entry in err, err
    assert remote.stdout == b""
    # Other entries of the remote archive stay readable; verify names it.
    assert run("tags", nginx.url(name), env=cli_env()).stdout == b"step-1\nstep-2\n"
    v = run("verify", nginx.url(name), check=False, env=cli_env())
    assert v.returncode == 1 and message in v.stderr.decode() + v.stdout.decode()
    os.remove(site / name)


def test_read_only_commands_on_url(nginx, site, tmp_path):
    """Commands that change an archive refuse a URL with one clear sentence,
    before they fetch anything."""
    npy = tmp_path / "x.npy"
    import numpy as np
    np.save(npy, np.arange(4, dtype=np.float32))
    url = nginx.url("qs.zip")
    start = len(nginx.log_lines())
    for args in (["import", url, "--tag", "t9", npy], ["rm-tag", url, "step-1"], ["gc", url],
                 ["meta", url, "--name", "x"],
                 ["quantize", url, "--from", "step-1", "--tag", "q", "--scheme",
                  "int8-per-tensor"]):
        p = run(*args, check=False, env=cli_env())
        assert (p.returncode, p.stderr.decode()) == \
            (1, f"modelzip: remote archives are read-only: {url}\n"), args
    assert fetched(nginx, start) == []
    assert not os.path.exists("http:")
