"""The write path leaves nothing behind and keeps what it found: no lock or
temporary file beside the archive after any command (successful or failed),
symbolic links stay links, a rewrite keeps mode, owner and group, an archive
the user may not write is refused by every editing command, and an empty tag
is a usage error."""
import json
import os
import stat
import struct
import subprocess
import tempfile
import time
import zipfile
import zlib

import numpy as np
import pytest

from conftest import CLI, run

NOBODY = 65534


@pytest.fixture
def npy(tmp_path):
    path = tmp_path / "w.npy"
    np.save(path, np.arange(1000, dtype=np.float32))
    return path


@pytest.fixture
def shared_dir():
    """A folder any user may write in (tmp_path's parents are private to root)."""
    path = tempfile.mkdtemp(prefix="modelzip-writepath-")
    os.chmod(path, 0o777)
    yield path
    subprocess.run(["rm", "-rf", path], check=True)


@pytest.fixture
def public_npy(npy):
    """npy where any user may read it."""
    folder = tempfile.mkdtemp(prefix="modelzip-writepath-in-")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "w.npy")
    with open(path, "wb") as f:
        f.write(npy.read_bytes())
    os.chmod(path, 0o644)
    yield path
    subprocess.run(["rm", "-rf", folder], check=True)


def as_nobody(*args):
    """Runs modelzip as user and group "nobody" when we are root (root may write anything)."""
    def drop():
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
    return subprocess.run([CLI, *map(str, args)], capture_output=True, preexec_fn=drop)


def listing(folder):
    return sorted(os.listdir(folder))


def test_the_folder_holds_only_the_archive_after_any_command(tmp_path, npy):
    folder = tmp_path / "f"
    folder.mkdir()
    archive = folder / "m.zip"
    # A failed first save (the input is not a tensor file) creates nothing.
    (tmp_path / "bad.npy").write_bytes(b"not an npy file")
    assert run("import", archive, "--tag", "v1", tmp_path / "bad.npy", check=False).returncode == 1
    assert listing(folder) == []
    run("import", archive, "--tag", "v1", npy)  # first save
    assert listing(folder) == ["m.zip"]
    run("import", archive, "--tag", "v2", npy)  # append
    run("import", archive, "--tag", "v3", npy, "--compress")
    assert listing(folder) == ["m.zip"]
    p = run("import", archive, "--tag", "V2", npy, check=False)  # failed commit
    assert p.returncode == 1 and b"exists already" in p.stderr
    run("rm-tag", archive, "v1")  # rewrite
    run("gc", archive)
    assert run("rm-tag", archive, "nope", check=False).returncode == 1
    assert listing(folder) == ["m.zip"]
    with zipfile.ZipFile(archive) as z:
        assert z.testzip() is None


def test_a_symbolic_link_stays_a_link_and_its_target_is_written(tmp_path, npy):
    data = tmp_path / "data"
    data.mkdir()
    link = tmp_path / "latest.zip"
    os.symlink("data/real.zip", link)  # dangling: the first save creates data/real.zip
    run("import", link, "--tag", "v1", npy)
    run("import", link, "--tag", "v2", npy)  # append through the link
    run("rm-tag", link, "v1")  # rewrite through the link
    run("gc", link)
    assert os.readlink(link) == "data/real.zip"
    assert listing(data) == ["real.zip"] and listing(tmp_path) == ["data", "latest.zip", "w.npy"]
    assert run("tags", data / "real.zip").stdout.split() == [b"v2"]
    # Errors name the path the user gave.
    p = run("rm-tag", link, "v9", check=False)
    assert p.returncode == 1 and str(link).encode() in p.stderr


@pytest.mark.parametrize("out", ["w.npz", "w.npy", "w.safetensors", "w.btf"])
def test_export_writes_through_a_link_and_never_replaces_a_pipe(tmp_path, npy, out):
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", npy)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / out).write_bytes(b"old")
    link = tmp_path / ("latest" + os.path.splitext(out)[1])
    os.symlink("data/" + out, link)
    run("export", archive, "w", link)
    assert os.readlink(link) == "data/" + out  # the link stays, its file is replaced
    assert (tmp_path / "data" / out).read_bytes()[:3] != b"old"
    assert listing(tmp_path / "data") == [out]
    # A pipe (or a device: /dev/stdout, /dev/null) is refused, never renamed over.
    fifo = tmp_path / ("fifo" + os.path.splitext(out)[1])
    os.mkfifo(fifo)
    p = run("export", archive, "w", fifo, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {fifo}: is not a regular file (a device, pipe or socket)\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not [n for n in listing(tmp_path) if ".mztmp" in n]


@pytest.mark.parametrize("command", [["rm-tag", "{a}", "v1"], ["gc", "{a}"],
                                     ["meta", "{a}", "--name", "x"], ["import", "{a}", "--tag", "v2", "{npy}"],
                                     ["quantize", "{a}", "--from", "v1", "--tag", "q",
                                      "--scheme", "int8-per-tensor"]])
def test_commands_that_change_an_archive_refuse_a_folder_with_a_sentence(tmp_path, npy, command):
    folder = tmp_path / "folder.zip"
    folder.mkdir()
    p = run(*[c.format(a=folder, npy=npy) for c in command], check=False)
    assert p.returncode == 1
    assert p.stderr.decode() == f"modelzip: {folder}: is a folder, not a file\n"
    assert listing(folder) == []


def test_a_rewrite_keeps_mode_owner_and_group(tmp_path, npy):
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", npy)
    run("import", archive, "--tag", "v2", npy)
    run("import", archive, "--tag", "v3", npy)
    modes = [0o600, 0o640, 0o604]
    if os.geteuid() == 0:
        os.chown(archive, 4321, 8765)  # root may give files away, so modelzip keeps them
    for mode, command in zip(modes, [("rm-tag", "v1"), ("gc",), ("rm-tag", "v2")]):
        os.chmod(archive, mode)
        before = os.stat(archive)
        run(command[0], archive, *command[1:])
        after = os.stat(archive)
        assert after.st_ino != before.st_ino  # it was rewritten
        assert stat.S_IMODE(after.st_mode) == mode
        assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


def test_an_archive_the_user_may_not_write_is_refused_by_every_command(shared_dir, public_npy):
    npy = public_npy
    archive = os.path.join(shared_dir, "m.zip")
    run("import", archive, "--tag", "v1", npy)
    run("import", archive, "--tag", "v2", npy)
    os.chmod(archive, 0o444)
    with open(archive, "rb") as f:
        before = f.read()
    for command in [("rm-tag", archive, "v1"), ("gc", archive),
                    ("import", archive, "--tag", "v3", npy)]:
        p = as_nobody(*command)
        assert p.returncode == 1, (command, p.stderr)
        message = p.stderr.decode()
        assert archive in message and "may not write" in message, message
        assert ".mztmp" not in message
        with open(archive, "rb") as f:
            assert f.read() == before
        assert listing(shared_dir) == ["m.zip"]
    # The rule is the kernel's (open for writing): root may modify a 0444
    # archive, and the rewrite keeps it 0444.
    if os.geteuid() == 0:
        run("rm-tag", archive, "v1")
        assert stat.S_IMODE(os.stat(archive).st_mode) == 0o444


def test_extract_into_a_folder_it_may_not_create_says_so(shared_dir, public_npy):
    archive = os.path.join(shared_dir, "m.zip")
    run("import", archive, "--tag", "v1", public_npy)
    os.chmod(archive, 0o644)
    locked = os.path.join(shared_dir, "locked")
    os.mkdir(locked, 0o555)
    out = os.path.join(locked, "out")
    p = as_nobody("extract", archive, out)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: cannot create folder '{out}': Permission denied\n")  # not "No such file"
    assert listing(locked) == []


def test_a_rewrite_refuses_to_change_the_owner(shared_dir, public_npy):
    npy = public_npy
    # The suite runs as root (README, CI): only root can make an archive that
    # another user may write but does not own. Elsewhere this fails, not skips.
    assert os.geteuid() == 0, "this check needs root (to run a command as another user)"
    archive = os.path.join(shared_dir, "m.zip")
    run("import", archive, "--tag", "v1", npy)
    run("import", archive, "--tag", "v2", npy)
    os.chmod(archive, 0o666)  # nobody may write it, but not give it to root
    with open(archive, "rb") as f:
        before = f.read()
    p = as_nobody("rm-tag", archive, "v1")
    assert p.returncode == 1 and b"owner" in p.stderr and archive.encode() in p.stderr
    with open(archive, "rb") as f:
        assert f.read() == before
    assert listing(shared_dir) == ["m.zip"]
    # Appending does not change the owner: allowed.
    assert as_nobody("import", archive, "--tag", "v3", npy).returncode == 0
    assert os.stat(archive).st_uid == 0


@pytest.mark.parametrize("command", [
    ["cat", "{a}", "w", "--tag", ""],
    ["cat", "{a}", "w", "--tag="],
    ["export", "{a}", "{d}/out.npz", "--tag", ""],
    ["info", "{a}", "--tag", ""],
    ["ls", "{a}", "--tag", ""],
    ["graph", "{a}", "--tag", ""],
    ["import", "{a}", "--tag", "", "{d}/w.npy"],
    ["diff", "{a}", "", "v1"],
    ["diff", "{a}", "v1", ""],
    ["rm-tag", "{a}", ""],
])
def test_an_empty_tag_is_a_usage_error(tmp_path, npy, command):
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", npy)
    before = archive.read_bytes()
    p = run(*[c.format(a=archive, d=tmp_path) for c in command], check=False)
    assert p.returncode == 2, p.stderr
    assert b"empty" in p.stderr and b"tag" in p.stderr.lower()
    assert archive.read_bytes() == before


# ---- cat / export of a tensor larger than the memory they may use ---------

BIG = 2**28  # float32 elements: 1 GiB
CHUNK = 2**26  # bytes


def peak_anon_kib(args, stdout):
    """Runs `args`; returns (exit status, stderr, peak RssAnon in KiB).

    RssAnon (/proc/<pid>/status) counts the process's anonymous memory only:
    the pages of the archive it maps are file pages (page cache), which the
    kernel can drop, so they are not what limits the tensor size. Sampled
    every millisecond: holding a 1 GiB tensor takes far longer than that to
    fill, so a whole-tensor buffer cannot slip between two samples.
    """
    proc = subprocess.Popen([CLI, *map(str, args)], stdout=stdout, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.001)
    return proc.returncode, proc.stderr.read(), peak


def streaming_limit_kib():
    """The peak anonymous memory allowed to stream a 1 GiB tensor (BIG float32).

    64 MiB in the normal build: a few MiB of buffers, far from the tensor.
    Under AddressSanitizer (meson's b_sanitize, MODELZIP_SANITIZE) the process
    also holds the sanitizer's own memory, which grows with what the program
    allocates and frees rather than with what it keeps: the quarantine of
    freed chunks (up to 256 MiB by default) and the shadow of the heap; about
    170 MiB were seen for these commands. There the bound is half the tensor,
    which a whole-tensor buffer still exceeds.
    """
    if os.environ.get("MODELZIP_SANITIZE", "none") not in ("", "none"):
        return BIG * 4 // 2 // 1024
    return 64 * 1024


def big_archive(folder, deflated, updater=False):
    """A modelzip archive whose tag "t" holds parameter "big": BIG float32
    zeros except 1.5 at element 0 and 2.5 at the last one, written directly
    (modelzip would take tens of seconds to write and fsync 1 GiB).

    A small archive from `modelzip import` gives every entry; its blob's
    header is patched for the big shape (the FlatBuffer's shape element and
    values length are fixed-size fields). Stored: the zeros are a hole in a
    sparse file. Deflated: zlib with a full flush after the first chunk, so
    that each further chunk of zeros compresses to the same bytes, which are
    repeated (checked on two chunks).

    With `updater`, the tag also holds updater state ("big", "M") in
    t/updater/0.fb: a second copy of the same blob, listed in t/updater.txt
    (FORMAT.md 4.2: VARIABLE SP STATE SP BLOB).
    """
    small_n = 1000
    np.save(folder / "big.npy", np.zeros(small_n, np.float32))
    small = folder / "small.zip"
    if small.exists():
        small.unlink()
    run("import", small, "--tag", "t", folder / "big.npy")
    with zipfile.ZipFile(small) as z:
        entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    blob_name = "t/params/0.fb"
    blob = dict(entries)[blob_name]
    big_names = {blob_name}
    if updater:
        assert entries[-1][0] == "tags.txt"  # stays the last entry
        entries[-1:-1] = [("t/updater/0.fb", blob), ("t/updater.txt", b"big M 0\n")]
        big_names.add("t/updater/0.fb")
    assert blob.endswith(bytes(small_n * 4))
    header = bytearray(blob[:len(blob) - small_n * 4])
    for old, new in [(small_n, BIG), (small_n * 4, BIG * 4)]:
        assert bytes(header).count(struct.pack("<Q", old)) == 1
        at = bytes(header).index(struct.pack("<Q", old))
        header[at:at + 8] = struct.pack("<Q", new)
    header = bytes(header)
    first = bytearray(CHUNK)
    first[:4] = struct.pack("<f", 1.5)
    last = bytearray(CHUNK)
    last[-4:] = struct.pack("<f", 2.5)
    zeros = bytes(CHUNK)
    middle = BIG * 4 // CHUNK - 2
    crc = zlib.crc32(header + first)
    for _ in range(middle):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(last, crc)
    size = len(header) + BIG * 4
    path = folder / (("big-deflated" if deflated else "big-stored")
                     + ("-updater" if updater else "") + ".zip")
    central = b""
    with open(path, "wb") as f:
        for name, data in entries:
            offset = f.tell()
            method = 8 if deflated and name in big_names else 0
            if name in big_names:
                entry_crc, usize = crc, size
            else:
                entry_crc, usize = zlib.crc32(data), len(data)
            unpadded = offset + 30 + len(name)
            pad = (64 - unpadded % 64) % 64
            if pad and pad < 4:
                pad += 64
            extra = struct.pack("<HH", 0xA220, pad - 4) + bytes(pad - 4) if pad else b""
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, entry_crc,
                                0, usize, len(name), len(extra)) + name.encode() + extra
            f.write(local)
            start = f.tell()
            if name not in big_names:
                f.write(data)
            elif not deflated:
                f.write(header + first)
                f.seek(middle * CHUNK, os.SEEK_CUR)  # a hole: zeros
                f.write(last)
            else:
                c = zlib.compressobj(1, zlib.DEFLATED, -15)
                f.write(c.compress(header + bytes(first)) + c.flush(zlib.Z_FULL_FLUSH))
                piece = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
                assert c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) == piece
                for _ in range(middle):
                    f.write(piece)
                f.write(c.compress(bytes(last)) + c.flush())
            csize = f.tell() - start
            f.seek(offset + 18)
            f.write(struct.pack("<I", csize))
            f.seek(0, os.SEEK_END)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21,
                                   entry_crc, csize, usize, len(name), 0, 0, 0, 0, 0,
                                   offset) + name.encode()
        cd_offset = f.tell()
        f.write(central)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                            len(central), cd_offset, 0))
    os.remove(small)
    return path


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def out_folder():
    """Where 1 GiB outputs go: memory-backed if possible (no disk writes to
    wait for; fsync is free), never counted as the process's memory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def check_big_npy(path):
    a = np.load(path, mmap_mode="r")
    assert a.dtype == np.float32 and a.shape == (BIG,)
    assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any() and not a[-4097:-1].any()


def check_big_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert header == {"big": {"dtype": "F32", "shape": [BIG], "data_offsets": [0, BIG * 4]}}
    assert os.path.getsize(path) == 8 + n + BIG * 4
    a = np.memmap(path, np.float32, "r", offset=8 + n)
    assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any() and not a[-4097:-1].any()


def check_big_npz(path):
    """One stored member big.npy (Python's zipfile checks its CRC), its data
    64-byte aligned; the array read in place through numpy's .npy header
    parser and a memory map."""
    with zipfile.ZipFile(path) as z:
        (info,) = z.infolist()
        assert info.filename == "big.npy" and info.compress_type == zipfile.ZIP_STORED
        assert z.testzip() is None
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        name_len, extra_len = struct.unpack_from("<HH", local, 26)
        start = info.header_offset + 30 + name_len + extra_len
        assert start % 64 == 0
        f.seek(start)
        assert np.lib.format.read_magic(f) == (1, 0)
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        data = f.tell()
    assert (shape, fortran, dtype) == ((BIG,), False, np.float32)
    assert info.file_size == data - start + BIG * 4
    a = np.memmap(path, np.float32, "r", offset=data, shape=(BIG,))
    assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any() and not a[-4097:-1].any()


def check_big_btf(path):
    """TFRT binary tensor format: record count and offsets, then a record of
    rank, dtype, layout (0: dense), 6 reserved bytes, dims, values."""
    with open(path, "rb") as f:
        head = f.read(40)
    count, offset, rank = struct.unpack_from("<QQQ", head)
    layout = head[25]
    (dim,) = struct.unpack_from("<Q", head, 32)
    assert (count, offset, rank, layout, dim) == (1, 16, 1, 0, BIG)
    assert os.path.getsize(path) == 40 + BIG * 4
    a = np.memmap(path, np.float32, "r", offset=40)
    assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any() and not a[-4097:-1].any()


@pytest.mark.parametrize("deflated", [False, True], ids=["stored", "deflated"])
def test_cat_and_export_stream_a_1_gib_tensor_in_bounded_memory(big_folder, deflated):
    archive = big_archive(big_folder, deflated)
    info = [r for r in json.loads(run("ls", archive, "--json").stdout)
            if r["name"] == "big"][0]
    assert info["compressed"] == deflated and info["shape"] == [BIG]
    limit_kib = streaming_limit_kib()
    out = tempfile.mkdtemp(dir=out_folder(), prefix="modelzip-big-")
    try:
        # Stored: raw cat; deflated: cat --npy; both: export to .npy.
        cat_out = os.path.join(out, "cat.npy" if deflated else "raw")
        with open(cat_out, "wb") as f:
            rc, err, peak_cat = peak_anon_kib(
                ["cat", archive, "big", *(["--npy"] if deflated else [])], f)
        assert rc == 0, err
        if deflated:
            check_big_npy(cat_out)
        else:
            assert os.path.getsize(cat_out) == BIG * 4
            a = np.memmap(cat_out, np.float32, "r")
            assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any()
            del a
        os.remove(cat_out)
        assert peak_cat < limit_kib, f"cat: {peak_cat} KiB anonymous"
        # Each streamed export format once (the stored and deflated paths
        # differ only below them).
        peaks = {}
        for suffix in [".safetensors", ".btf", ".npz"] if deflated else [".npy"]:
            exported = os.path.join(out, "big" + suffix)
            rc, err, peaks[suffix] = peak_anon_kib(["export", archive, "big", exported],
                                                   subprocess.DEVNULL)
            assert rc == 0, err
            {".npy": check_big_npy, ".safetensors": check_big_safetensors,
             ".btf": check_big_btf, ".npz": check_big_npz}[suffix](exported)
            os.remove(exported)
            assert peaks[suffix] < limit_kib, f"export {suffix}: {peaks[suffix]} KiB anonymous"
        print(f"\n{'deflated' if deflated else 'stored'} 1 GiB tensor, peak anonymous memory: "
              f"cat{' --npy' if deflated else ''} {peak_cat} KiB, "
              + ", ".join(f"export {k} {v} KiB" for k, v in peaks.items()))
    finally:
        subprocess.run(["rm", "-rf", out], check=True)
        os.remove(archive)


@pytest.mark.parametrize("deflated", [False, True], ids=["stored", "deflated"])
def test_extract_writes_a_1_gib_entry_in_bounded_memory(big_folder, deflated):
    """extract read each entry whole into memory (a 1 GiB blob: 1 GiB of
    anonymous memory); every entry, stored or deflated (a few MiB of zlib
    data here), is now streamed in pieces."""
    archive = big_archive(big_folder, deflated)
    out = tempfile.mkdtemp(dir=out_folder(), prefix="modelzip-big-")
    try:
        target = os.path.join(out, "x")
        rc, err, peak = peak_anon_kib(["extract", archive, target], subprocess.DEVNULL)
        assert rc == 0, err
        blob = os.path.join(target, "t", "params", "0.fb")
        with zipfile.ZipFile(archive) as z:
            info = z.getinfo("t/params/0.fb")
            assert os.path.getsize(blob) == info.file_size
            with z.open(info) as member, open(blob, "rb") as f:
                # The FlatBuffer header and first values (1.5), the last ones (2.5).
                for at in [0, info.file_size - (1 << 20)]:
                    f.seek(at)
                    member.seek(at)
                    assert f.read(1 << 20) == member.read(1 << 20)
        assert peak < streaming_limit_kib(), f"extract: {peak} KiB anonymous"
        print(f"\nextract of a {'deflated' if deflated else 'stored'} 1 GiB blob, "
              f"peak anonymous memory: {peak} KiB")
    finally:
        subprocess.run(["rm", "-rf", out], check=True)
        os.remove(archive)


def test_cat_and_export_stream_a_1_gib_updater_state_in_bounded_memory(big_folder):
    """Optimizer state (Adam's M, V) is as big as the parameters: cat
    --updater and export --updater stream it like a parameter."""
    archive = big_archive(big_folder, False, updater=True)
    rows = json.loads(run("ls", archive, "--updater", "--json").stdout)
    assert [(r["name"], r["state"], r["shape"]) for r in rows] == [("big", "M", [BIG])]
    limit_kib = streaming_limit_kib()
    out = tempfile.mkdtemp(dir=out_folder(), prefix="modelzip-big-")
    try:
        raw = os.path.join(out, "raw")
        with open(raw, "wb") as f:
            rc, err, peak_cat = peak_anon_kib(["cat", archive, "--updater", "big", "M"], f)
        assert rc == 0, err
        assert os.path.getsize(raw) == BIG * 4
        a = np.memmap(raw, np.float32, "r")
        assert a[0] == 1.5 and a[-1] == 2.5 and not a[1:4096].any()
        del a
        os.remove(raw)
        assert peak_cat < limit_kib, f"cat --updater: {peak_cat} KiB anonymous"
        # One state alone: .npy; named "VAR/STATE" beside a parameter: safetensors.
        npy = os.path.join(out, "m.npy")
        rc, err, peak_npy = peak_anon_kib(["export", archive, "--updater", "big", "M", npy],
                                          subprocess.DEVNULL)
        assert rc == 0, err
        check_big_npy(npy)
        os.remove(npy)
        assert peak_npy < limit_kib, f"export --updater .npy: {peak_npy} KiB anonymous"
        st = os.path.join(out, "both.safetensors")
        rc, err, peak_st = peak_anon_kib(
            ["export", archive, "big", "--updater", "big", "M", st], subprocess.DEVNULL)
        assert rc == 0, err
        with open(st, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        assert header == {
            "big": {"dtype": "F32", "shape": [BIG], "data_offsets": [0, BIG * 4]},
            "big/M": {"dtype": "F32", "shape": [BIG], "data_offsets": [BIG * 4, BIG * 8]}}
        b = np.memmap(st, np.float32, "r", offset=8 + n)
        assert b[0] == 1.5 and b[BIG - 1] == 2.5 and b[BIG] == 1.5 and b[-1] == 2.5
        del b
        os.remove(st)
        assert peak_st < limit_kib, f"export --updater .safetensors: {peak_st} KiB anonymous"
    finally:
        subprocess.run(["rm", "-rf", out], check=True)
        os.remove(archive)


def test_cat_and_export_refuse_a_damaged_blob_and_leave_no_file(tmp_path):
    """The CRC check of a streamed tensor: cat fails after the data went
    out (exit 1); export leaves no output file."""
    a = np.arange(300000, dtype=np.float32)
    np.save(tmp_path / "w.npy", a)
    for compress in [[], ["--compress"]]:
        archive = tmp_path / "m.zip"
        if archive.exists():
            archive.unlink()
        run("import", archive, "--tag", "t", tmp_path / "w.npy", *compress)
        data = bytearray(archive.read_bytes())
        with zipfile.ZipFile(archive) as z:
            info = z.getinfo("t/params/0.fb")
        # The data starts after the local header; damage a byte in its middle.
        name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
        start = info.header_offset + 30 + name_len + extra_len
        data[start + info.compress_size // 2] ^= 0x55
        archive.write_bytes(bytes(data))
        p = run("cat", archive, "w", check=False)
        assert p.returncode == 1 and b"t/params/0.fb" in p.stderr, p.stderr
        # Stored: the CRC; deflated: the CRC or the damaged deflate stream.
        assert any(w in p.stderr for w in [b"CRC-32 mismatch", b"deflate data", b"data than"])
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        for name in ["w.npy", "w.safetensors"]:
            p = run("export", archive, "w", out / name, check=False)
            assert p.returncode == 1 and b"t/params/0.fb" in p.stderr, p.stderr
        assert listing(out) == []


# A second process that holds a lock until its stdin closes: a POSIX record
# lock of the whole archive (lockf; the kernel makes it conflict with the
# open-file-description lock modelzip's writers take), or a flock of the
# folder (what a first save waits for).
LOCK_HOLDER = r"""
import fcntl, os, sys
path, kind = sys.argv[1], sys.argv[2]
if kind == "archive":
    fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
else:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def wait_for_writer_message(archive, lock_path, kind, command):
    """Runs `command` while another process holds the lock; returns its
    stderr. Checks that it waited (still running after the message) and
    finished once the lock was released."""
    holder = subprocess.Popen(["/usr/bin/python3", "-c", LOCK_HOLDER, str(lock_path), kind],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        with tempfile.TemporaryFile() as err:
            writer = subprocess.Popen([CLI, *map(str, command)], stdout=subprocess.DEVNULL,
                                      stderr=err)
            expected = f"modelzip: waiting for the writer of {archive}...\n".encode()
            deadline = time.monotonic() + 120  # generous: CI machines are loaded
            while True:
                err.seek(0)
                if expected in err.read():
                    break
                assert writer.poll() is None, "finished without waiting"
                if time.monotonic() > deadline:
                    where = ""
                    for f in ["wchan", "stat"]:
                        try:
                            with open(f"/proc/{writer.pid}/{f}") as proc:
                                where += f"{f}: {proc.read()} "
                        except OSError:
                            pass
                    writer.kill()
                    raise AssertionError(f"no waiting message from {command}: {where}")
                time.sleep(0.02)
            time.sleep(0.3)
            assert writer.poll() is None  # still waiting: the lock is held
            holder.stdin.close()  # release
            assert writer.wait(timeout=60) == 0
            err.seek(0)
            return err.read().decode()
    finally:
        holder.kill()
        holder.wait()


def test_a_writer_that_waits_for_another_says_so_once(tmp_path, npy):
    archive = tmp_path / "m.zip"
    # First save: waits for whoever holds the folder's lock.
    message = wait_for_writer_message(archive, tmp_path, "folder",
                                      ["import", archive, "--tag", "v1", npy])
    assert message.count("waiting for the writer of") == 1, message
    # Existing archive: append, rewrite, gc and meta all wait for its lock.
    for command in [["import", archive, "--tag", "v2", npy], ["rm-tag", archive, "v1"],
                    ["gc", archive], ["meta", archive, "--name", "x"]]:
        message = wait_for_writer_message(archive, archive, "archive", command)
        assert message.count("waiting for the writer of") == 1, (command, message)
    assert run("tags", archive).stdout.split() == [b"v2"]
    # Nobody holds the lock: no message.
    p = run("import", archive, "--tag", "v3", npy)
    assert b"waiting" not in p.stderr


def test_a_folder_the_user_may_not_write_is_named_not_the_temporary_file(
        shared_dir, public_npy):
    npy = public_npy
    folder = os.path.join(shared_dir, "ro")
    os.mkdir(folder)
    os.chmod(folder, 0o555)  # nobody may not create files in it (root may: run as nobody)
    archive = os.path.join(folder, "model.zip")
    p = as_nobody("import", archive, "--tag", "v1", npy)
    assert p.returncode == 1
    message = p.stderr.decode()
    assert message == (f"modelzip: {archive}: cannot create model.zip in {folder}/: "
                       "permission denied\n"), message
    # A relative path names the folder as given: "./" for the current one.
    p = subprocess.run([CLI, "import", "model.zip", "--tag", "v1", npy], capture_output=True,
                       cwd=folder, preexec_fn=lambda: (os.setgroups([]), os.setgid(NOBODY),
                                                       os.setuid(NOBODY))
                       if os.geteuid() == 0 else None)
    assert p.stderr.decode() == ("modelzip: model.zip: cannot create model.zip in ./: "
                                 "permission denied\n")
    # Exports too (their temporary file is as internal).
    run("import", os.path.join(shared_dir, "m.zip"), "--tag", "v1", npy)
    for out in ["w.npy", "w.npz", "w.safetensors"]:
        p = as_nobody("export", os.path.join(shared_dir, "m.zip"), os.path.join(folder, out))
        assert p.returncode == 1
        assert p.stderr.decode().endswith(
            f"cannot create {out} in {folder}/: permission denied\n"), p.stderr
    assert listing(folder) == []


@pytest.mark.parametrize("command", [["rm-tag", "{a}", "v1"], ["gc", "{a}"],
                                     ["meta", "{a}", "--name", "x"]])
def test_commands_that_never_create_an_archive_say_it_is_missing(tmp_path, command):
    archive = tmp_path / "missing.zip"
    p = run(*[c.format(a=archive) for c in command], check=False)
    assert p.returncode == 1
    assert p.stderr.decode() == (f"modelzip: {archive}: no such archive (create it with "
                                 "modelzip import)\n")
    assert listing(tmp_path) == []
