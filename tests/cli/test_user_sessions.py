"""What users met at the command line (issue 16): hostile names reaching the
terminal, arguments that start with '-', binary data on a terminal, what
rm-tag and diff report, updater state in cat/export/diff, archive metadata,
and the messages for things that are not archives. Expected bytes are written
from the rules in the help texts, not from running modelzip."""
import json
import re
import os
import shutil
import struct
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import CLI, SOURCE_DIR, run
from test_terminal_and_help import commands, run_on_terminal

GOLDEN = os.path.join(SOURCE_DIR, "tests", "golden", "graph", "checkpoint-v1.zip")

# Clears the screen, sets the window title (OSC ... BEL), a C1 control (NEL,
# U+0085), a newline, a tab and DEL: each must reach the terminal escaped.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07a\u0085b\nc\td\x7f"
HOSTILE_SHOWN = b"\\x1b[2J\\x1b]0;pwned\\x07a\\u0085b\\nc\\td\\x7f"


def no_control_bytes(data, allowed=b"\n"):
    """True when `data` has no C0 control byte (but those allowed), no DEL
    and no C1 control (U+0080..U+009F encoded as C2 80..C2 9F)."""
    text = data.decode("utf-8")  # also: valid UTF-8
    return not any((ord(ch) < 0x20 and ch.encode() not in allowed) or 0x7F <= ord(ch) < 0xA0
                   for ch in text)


def write_safetensors(path, tensors):
    """A .safetensors file (float32 arrays) written by hand from the format:
    u64 header length, JSON header, data."""
    header, data = {}, b""
    for name, array in tensors.items():
        raw = np.asarray(array, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.fixture
def hostile(tmp_path):
    """An archive whose tag v1 has a parameter named HOSTILE and one named '-Mozilla'."""
    src = tmp_path / "in.safetensors"
    write_safetensors(src, {HOSTILE: [0, 1, 2], "-Mozilla": [1, 1]})
    path = tmp_path / "hostile.zip"
    run("import", path, "--tag", "v1", src)
    return path


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "golden.zip"
    shutil.copyfile(GOLDEN, path)
    return path


def test_ls_escapes_control_characters_and_json_keeps_them(hostile):
    out = run("ls", hostile).stdout
    assert no_control_bytes(out, allowed=b"\n\t")
    lines = out.split(b"\n")[:-1]
    assert len(lines) == 2  # the newline in the name does not start a line
    assert any(line.startswith(HOSTILE_SHOWN + b"\t") for line in lines)
    names = [r["name"] for r in json.loads(run("ls", hostile, "--json").stdout)]
    assert HOSTILE in names  # exact in JSON


def test_errors_escape_names_and_stay_one_line(hostile, tmp_path):
    p = run("cat", hostile, HOSTILE + "x", check=False)
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1
    assert HOSTILE_SHOWN + b"x" in p.stderr and no_control_bytes(p.stderr)
    # An import error names the file and the entry; both escaped.
    bad = tmp_path / ("bad\x1b]0;t\x07.safetensors")
    text = json.dumps({HOSTILE: {"dtype": "F32", "shape": [9], "data_offsets": [0, 36]}}).encode()
    bad.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 4)  # 36 bytes promised
    p = run("import", tmp_path / "x.zip", "--tag", "t", bad, check=False)
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1
    assert no_control_bytes(p.stderr) and b"bad\\x1b]0;t\\x07.safetensors" in p.stderr
    # Invalid UTF-8 in an argument is shown as \xNN.
    p = run("ls", "ar\xe9".encode("latin-1").decode("utf-8", "surrogateescape"), check=False)
    assert p.returncode == 1 and b"ar\\xe9" in p.stderr and no_control_bytes(p.stderr)


def test_diff_and_info_and_tags_escape(hostile, tmp_path):
    src = tmp_path / "v2.safetensors"
    write_safetensors(src, {HOSTILE: [1, 2, 3]})
    run("import", hostile, "--tag", "v2", src)
    p = run("diff", hostile, "v1", "v2", check=False)
    assert p.returncode == 1
    assert no_control_bytes(p.stdout, allowed=b"\n\t")
    assert b"changed\t" + HOSTILE_SHOWN + b"\tmax |a - b| = 1\n" in p.stdout
    rows = json.loads(run("diff", hostile, "v1", "v2", "--json", check=False).stdout)
    assert {r["name"] for r in rows} == {HOSTILE, "-Mozilla"}
    assert no_control_bytes(run("info", hostile).stdout, allowed=b"\n")
    p = run("meta", hostile, "--description", "line 1\nline 2\x1b[31m")
    assert b"line 1\\nline 2\\x1b[31m" in p.stdout and no_control_bytes(p.stdout)
    assert json.loads(run("meta", hostile, "--json").stdout)["description"] == \
        "line 1\nline 2\x1b[31m"


def test_a_backslash_and_n_and_a_newline_print_apart(tmp_path):
    """Outside --json, the name a\\nb (a, backslash, n, b) and the name a\nb
    (a, newline, b) both printed as the four bytes a \\ n b. A backslash is
    now shown doubled (docs/cli.md), in ls, diff, meta and info alike."""
    backslash_n, newline = "a\\nb", "a\nb"
    shown_backslash_n, shown_newline = b"a\\\\nb", b"a\\nb"  # a \ \ n b; a \ n b
    assert len(backslash_n) == 4 and len(shown_backslash_n) == 5 and len(shown_newline) == 4
    src = tmp_path / "v1.safetensors"
    header = {"__metadata__": {"k1": backslash_n, "k2": newline}}
    data = b""
    for name in (backslash_n, newline):
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        data += struct.pack("<f", 0)
    text = json.dumps(header).encode()
    src.write_bytes(struct.pack("<Q", len(text)) + text + data)
    path = tmp_path / "m.zip"
    run("import", path, "--tag", "v1", src)
    names = [line.split(b"\t")[0] for line in run("ls", path).stdout.splitlines()]
    assert sorted(names) == [shown_backslash_n, shown_newline]
    write_safetensors(tmp_path / "v2.safetensors", {backslash_n: [1], newline: [2]})
    run("import", path, "--tag", "v2", tmp_path / "v2.safetensors")
    out = run("diff", path, "v1", "v2", check=False).stdout
    assert b"changed\t" + shown_backslash_n + b"\tmax |a - b| = 1\n" in out
    assert b"changed\t" + shown_newline + b"\tmax |a - b| = 2\n" in out
    out = run("meta", path, "--description", backslash_n).stdout
    assert b"description   " + shown_backslash_n + b"\n" in out
    info = run("info", path, "--tag", "v1").stdout
    assert b"about     " + shown_backslash_n + b"\n" in info
    assert b"  k1 = " + shown_backslash_n + b"\n" in info
    assert b"  k2 = " + shown_newline + b"\n" in info


def test_on_a_terminal_nothing_raw_arrives(hostile):
    for args in (["ls", hostile], ["cat", hostile, HOSTILE + "x"], ["tags", hostile]):
        _, shown = run_on_terminal(*args, env={**os.environ, "NO_COLOR": "1"})
        assert b"\x1b" not in shown and b"\x07" not in shown, args


def test_words_that_start_with_a_dash(hostile):
    p = run("cat", hostile, "-Mozilla", check=False)
    assert p.returncode == 2
    first = p.stderr.split(b"\n")[0]
    assert first.endswith(b"unknown option -Mozilla (put -- before words that start with -)")
    assert np.frombuffer(run("cat", hostile, "--", "-Mozilla").stdout, "<f4").tolist() == [1, 1]
    # Every command's help (and usage error) says how.
    for command in commands():
        assert "put -- before" in run(command, "--help").stdout.decode(), command
    assert b"put -- before" in run("ls", check=False).stderr
    man = subprocess.run([CLI, "--man"], capture_output=True, check=True).stdout
    assert b"put \\-\\- before" in man


def test_unicode_tag_names_name_the_character(tmp_path):
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(2, np.float32))
    p = run("import", tmp_path / "t.zip", "--tag", "caf\u00e9", npy, check=False)
    assert p.returncode == 1
    assert "'\u00e9' (U+00E9) at position 3 is not allowed in a tag" in p.stderr.decode()
    p = run("import", tmp_path / "t.zip", "--tag", "a\x1bb", npy, check=False)
    assert b"U+001B at position 1 is not allowed" in p.stderr and b"\x1b" not in p.stderr


def test_cat_refuses_binary_on_a_terminal(tmp_path):
    archive = tmp_path / "q.zip"
    subprocess.run([os.environ.get("MODELZIP_QUICKSTART", "quickstart"), str(archive)],
                   check=True, capture_output=True)
    status, shown = run_on_terminal("cat", archive, "fc.bias")
    assert status == 1 and b"to a terminal" in shown and b"--force" in shown
    assert b"\x00\x00\x00?" not in shown  # 0.5 as float32 never arrived
    status, shown = run_on_terminal("cat", archive, "fc.bias", "--npy")
    assert status == 1 and b"NUMPY" not in shown
    status, shown = run_on_terminal("cat", archive, "fc.bias", "-f")
    assert status == 0 and shown.count(b"\x00\x00\x00?") == 10
    # Pipes and files are not terminals: raw bytes as before.
    assert len(run("cat", archive, "fc.bias").stdout) == 40


def test_rm_tag_says_what_it_did(tmp_path):
    archive = tmp_path / "q.zip"
    subprocess.run([os.environ.get("MODELZIP_QUICKSTART", "quickstart"), str(archive)],
                   check=True, capture_output=True)
    # step-1 owns embedding, fc.weight, fc.bias; step-2 shares the first two.
    out = run("rm-tag", archive, "STEP-1").stdout.decode()
    assert out.startswith("removed tag 'step-1' (3 parameter(s), 0 updater state(s)); "
                          "1 blob(s) deleted, 2 moved to a tag that shares them; archive ")
    assert out.count("\n") == 1


def test_diff_exit_status_and_updater_state(golden):
    # Equal tags: exit 0.
    p = run("diff", golden, "step-2", "step-2")
    assert p.returncode == 0 and b"0 added, 0 removed, 0 changed" in p.stderr
    # step-1 -> step-2 of the golden checkpoint: updater state is compared too.
    p = run("diff", golden, "step-1", "step-2", "--json", check=False)
    assert p.returncode == 1
    states = {(r["name"], r["state"]): r for r in json.loads(p.stdout) if "state" in r}
    assert {s for (_, s) in states} == {"M", "V"}
    assert {v for (v, _) in states} == {"w1", "b1", "w2"}
    text = run("diff", golden, "step-1", "step-2", check=False).stdout.decode()
    assert any(line.split("\t")[1] == "w1 [M]" for line in text.splitlines())
    # A missing tag is trouble: 2, not "differ".
    assert run("diff", golden, "step-1", "nope", check=False).returncode == 2


def test_cat_and_export_updater_state(golden, tmp_path):
    rows = json.loads(run("ls", golden, "--tag", "step-2", "--updater", "--json").stdout)
    m = next(r for r in rows if r["name"] == "w1" and r["state"] == "M")
    raw = run("cat", golden, "--updater", "w1", "M", "--tag", "step-2").stdout
    assert len(raw) == m["nbytes"]
    npy = tmp_path / "m.npy"
    npy.write_bytes(run("cat", golden, "--tag", "step-2", "--updater", "w1", "M", "--npy").stdout)
    assert np.load(npy).tobytes() == raw and list(np.load(npy).shape) == m["shape"]
    out = tmp_path / "adam.npz"
    run("export", golden, "--tag", "step-2", "--updater", "w1", "M", "--updater", "w1", "V", out)
    with np.load(out) as z:
        assert sorted(z.files) == ["w1/M", "w1/V"]
        assert z["w1/M"].tobytes() == raw
    p = run("cat", golden, "--updater", "w1", "Q", "--tag", "step-2", check=False)
    assert p.returncode == 1 and b"w1" in p.stderr


def test_info_json_without_tags(tmp_path):
    path = tmp_path / "empty.zip"
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(1, np.float32))
    run("import", path, "--tag", "t", npy)
    run("rm-tag", path, "t")
    info = json.loads(run("info", path, "--json").stdout)
    assert info["tag"] is None and info["tags"] == 0 and info["params"] is None
    assert info["metadata"]["format_version"] == 1
    assert b"no tags" in run("info", path).stdout


def test_meta_sets_only_the_given_fields(tmp_path):
    path = tmp_path / "m.zip"
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(1, np.float32))
    run("import", path, "--tag", "t", npy)
    shown = json.loads(run("meta", path, "--json").stdout)
    assert shown["name"] is None and shown["description"] is None
    run("meta", path, "--name", "resnet", "--version", "2")
    run("meta", path, "--description", "ImageNet", "--quantization", "none")
    run("meta", path, "--version", "3", "--clear", "quantization")
    with zipfile.ZipFile(path) as z:  # an independent reader: the TOML as stored
        import tomllib
        toml = tomllib.loads(z.read("modelzip.toml").decode())
    assert toml["model"] == {"name": "resnet", "version": "3", "description": "ImageNet"}
    assert run("tags", path).stdout == b"t\n"  # tags untouched
    text = run("meta", path).stdout.decode()
    assert "name          resnet\n" in text and "quantization  (not set)\n" in text
    assert run("meta", path, "--clear", "colour", check=False).returncode == 2
    assert run("meta", tmp_path / "none.zip", "--name", "x", check=False).returncode == 1
    assert not (tmp_path / "none.zip").exists()
    assert run("verify", path).returncode == 0


@pytest.fixture
def damaged(tmp_path):
    """quickstart's archive (step-1 owns embedding, fc.weight, fc.bias; step-2
    shares the first two) with one byte of step-1/params.txt flipped in place:
    its CRC no longer matches, as after bit rot."""
    path = tmp_path / "q.zip"
    subprocess.run([os.environ.get("MODELZIP_QUICKSTART", "quickstart"), str(path)],
                   check=True, capture_output=True)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("step-1/params.txt")
        assert info.compress_type == zipfile.ZIP_STORED
        original = {n: z.read(n) for n in z.namelist()}
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    data[info.header_offset + 30 + name_len + extra_len] ^= 0x20  # first letter's case
    path.write_bytes(bytes(data))
    return path, original


def test_a_damaged_tag_leaves_the_others_usable(damaged, tmp_path):
    path, original = damaged
    p = run("tags", path)
    assert p.stdout == b"step-1\nstep-2\n"
    assert b"tag 'step-1' is damaged" in p.stderr and b"step-1/params.txt" in p.stderr
    assert b"CRC" in p.stderr and p.stderr.count(b"\n") == 1
    rows = {r["name"] for r in json.loads(run("ls", path, "--tag", "step-2", "--json").stdout)}
    assert rows == {"embedding", "fc.weight", "fc.bias"}
    assert run("cat", path, "embedding").stdout == \
        np.array([(i % 97) / 97 for i in range(64000)], "<f4").tobytes()
    p = run("ls", path, "--tag", "step-1", check=False)
    assert p.returncode == 1 and b"step-1/params.txt" in p.stderr and b"CRC" in p.stderr
    # verify names the damaged table, once.
    p = run("verify", path, check=False)
    assert p.returncode == 1 and p.stdout.count(b"step-1/params.txt") == 1
    assert b"1 problem" in p.stdout
    # extract --tag step-2: its folder, the root files and the step-1 blobs it shares.
    out = tmp_path / "out"
    run("extract", path, out, "--tag", "step-2")
    got = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    step2 = [n for n in original if n.startswith("step-2/")]
    assert got == sorted(["modelzip.toml", "tags.txt", "step-1/params/0.fb", "step-1/params/1.fb",
                          *step2])
    for name in got:
        assert (out / name).read_bytes() == original[name]
    assert run("extract", path, tmp_path / "o2", "--tag", "step-1", check=False).returncode == 1


def test_a_damaged_tag_blocks_changes_until_removed(damaged, tmp_path):
    path, _ = damaged
    before = path.read_bytes()
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(2, np.float32))
    p = run("import", path, "--tag", "step-3", npy, check=False)
    assert p.returncode == 1 and b"damaged" in p.stderr and b"rm-tag" in p.stderr
    assert path.read_bytes() == before  # nothing changed
    p = run("rm-tag", path, "step-1")
    assert p.stdout.startswith(b"removed tag 'step-1' (damaged tables)")
    assert run("tags", path).stdout == b"step-2\n"
    assert run("verify", path).returncode == 0
    # The blobs step-2 shared with the damaged tag moved into step-2.
    assert run("cat", path, "embedding").stdout == \
        np.array([(i % 97) / 97 for i in range(64000)], "<f4").tobytes()
    run("import", path, "--tag", "step-3", npy)


def test_things_that_are_not_archives_get_a_plain_sentence(tmp_path):
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as z:  # as zip(1) makes them: no modelzip.toml
        z.writestr("notes.txt", "hello")
    p = run("ls", plain, check=False)
    assert p.returncode == 1
    assert p.stderr.decode() == f"modelzip: {plain}: not a modelzip archive (no modelzip.toml): " \
                                "a zip file of 1 entry\n"
    # A torch.save file and an .npz are zips too: the sentence says what they are and what
    # reads them (it said only "a zip file of 3 entries").
    torch_file = tmp_path / "model.pt"
    with zipfile.ZipFile(torch_file, "w") as z:  # torch.save's layout (torch >= 1.6)
        for name in ("model/data.pkl", "model/data/0", "model/version"):
            z.writestr(name, b"")
    p = run("ls", torch_file, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {torch_file}: not a modelzip archive (no modelzip.toml): a zip file of 3 "
        "entries written by torch.save (read it with torch.load(..., weights_only=True); "
        "modelzip.torch.save converts it)\n")
    npz = tmp_path / "arrays.npz"
    np.savez(npz, w=np.ones(2), b=np.zeros(1))
    p = run("tags", npz, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {npz}: not a modelzip archive (no modelzip.toml): a zip file of 2 entries, "
        "an .npz of numpy arrays (modelzip import reads it)\n")
    empty = tmp_path / "empty.zip"
    empty.write_bytes(b"")
    p = run("tags", empty, check=False)
    assert p.stderr.decode() == f"modelzip: {empty}: the file is empty (0 bytes), not a " \
                                "modelzip archive\n"
    p = run("verify", tmp_path, check=False)
    assert p.returncode == 1 and f"{tmp_path}: is a folder, not a file".encode() in p.stderr
    assert b"Invalid argument" not in p.stdout + p.stderr


def test_extract_over_existing_files_names_the_output_path_once(tmp_path):
    archive = tmp_path / "q.zip"
    subprocess.run([os.environ.get("MODELZIP_QUICKSTART", "quickstart"), str(archive)],
                   check=True, capture_output=True)
    out = tmp_path / "out"
    run("extract", archive, out)
    before = {f: f.stat().st_mtime_ns for f in out.rglob("*")}
    p = run("extract", archive, out, check=False)
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1
    first = str(out / "modelzip.toml").encode()
    assert p.stderr.count(str(out).encode()) == 1 and first in p.stderr
    assert b"nothing was extracted (use --force to overwrite)" in p.stderr
    assert {f: f.stat().st_mtime_ns for f in out.rglob("*")} == before


def test_a_full_disk_names_the_archive_not_the_temporary_file(tmp_path):
    """RLIMIT_FSIZE makes write() fail with EFBIG as a full disk fails with ENOSPC."""
    import resource
    import signal
    npy = tmp_path / "big.npy"
    np.save(npy, np.zeros(1 << 20, np.float32))  # 4 MiB
    archive = tmp_path / "model.zip"

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    p = subprocess.run([CLI, "import", str(archive), "--tag", "t", str(npy)],
                       capture_output=True, preexec_fn=limit)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith(f"modelzip: {archive}: ") and "modelzip-tmp" not in err, err
    # Nothing half-written is left (a lock file is not data).
    assert not archive.exists()
    assert [n for n in os.listdir(tmp_path) if not n.endswith(".modelzip-lock")] == ["big.npy"]


def run_on_narrow_terminal(*args, columns=40):
    """Runs modelzip with stderr on a pseudo-terminal `columns` wide (stdout
    to a pipe); returns (status, bytes the terminal got)."""
    import errno
    import fcntl
    import pty
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen([CLI, *map(str, args)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.wait(), shown


def test_progress_bars_fit_a_narrow_terminal_and_leave_no_trail(tmp_path):
    npy = tmp_path / "big.npy"
    np.save(npy, np.arange(48 << 20 >> 2, dtype=np.float32))  # 48 MiB
    archive = tmp_path / "m.zip"
    for args, label in [(["import", archive, "--tag", "t", "--compress", npy], b"saving"),
                        # The same tensor again: dedup compares it first.
                        (["import", archive, "--tag", "t2", "--compress", npy], b"comparing"),
                        (["verify", archive], b"verifying"),
                        (["export", archive, tmp_path / "out.npz"], b"exporting"),
                        (["cat", archive, "big"], b"reading")]:
        status, shown = run_on_narrow_terminal(*args)
        assert status == 0, shown
        assert label in shown, (label, shown)  # a bar was drawn
        # Every bar (the text between carriage returns) fits in 39 columns:
        # a 40th character would make the terminal wrap.
        for piece in shown.replace(b"\x1b[K", b"").replace(b"\n", b"\r").split(b"\r"):
            if piece.startswith(label):
                assert len(piece.decode()) <= 39, piece
        # No trail: the last bar is erased before anything else is written.
        last = shown.rindex(label)
        assert b"\r\x1b[K" in shown[last:], shown[last:]
        bars = [p for p in shown.replace(b"\x1b[K", b"").split(b"\r") if p.startswith(label)]
        assert all(re.match(rb"^" + label + rb"( \[[#.]+\])? \d+%", b) for b in bars), bars


def test_progress_bars_show_rate_and_eta(tmp_path):
    npy = tmp_path / "big.npy"
    np.save(npy, np.random.default_rng(1).random(12 << 20, dtype=np.float32))  # 48 MiB
    status, shown = run_on_narrow_terminal("import", tmp_path / "m.zip", "--tag", "t",
                                           "--compress", npy, columns=100)
    assert status == 0
    bars = [p for p in shown.replace(b"\x1b[K", b"").split(b"\r") if p.startswith(b"saving")]
    assert bars
    # Bars are redrawn at most every 100 ms and the rate needs 0.2 s of
    # history: from the fourth bar on, each shows the rate and the ETA.
    for bar in bars[3:]:
        assert re.search(rb" \d+% ETA \d+:\d\d [\d.]+ [KMG]?i?B/s \d", bar), bar


def test_tensor_commands_on_an_embedding_say_which_command_to_use(tmp_path):
    vec = tmp_path / "v.vec"
    vec.write_text("2 3\nberlin 1 0 0\nparis 0 1 0\n")
    archive = tmp_path / "e.zip"
    run("import", archive, "--tag", "v1", vec, "--name", "words")
    for args in (["cat", archive, "words"], ["export", archive, "words", tmp_path / "w.npz"]):
        p = run(*args, check=False)
        assert p.returncode == 1 and p.stderr.count(b"\n") == 1
        err = p.stderr.decode()
        assert "'words' is an embedding" in err and "modelzip export" in err
        assert "modelzip embed" in err and "embedding_file()" not in err


def test_names_in_errors_and_verify_lines_read_back_one_way(tmp_path):
    """Error messages and verify's lines showed a backslash single, so the
    parameter a\\nb (a, backslash, n, b) and the parameter a\nb (a, newline,
    b) both read 'a\\nb' there, while ls showed them apart. They are now
    quoted as every listing shows names (docs/cli.md): backslash doubled."""
    shown_backslash_n, shown_newline = "'a\\\\nb'", "'a\\nb'"  # 'a \ \ n b'; 'a \ n b'
    golden = tmp_path / "golden.zip"
    shutil.copyfile(GOLDEN, golden)
    # params.txt escapes a newline as %0A (FORMAT.md 4.2); a backslash stays.
    bad = tmp_path / "names.zip"
    with zipfile.ZipFile(golden) as zin, zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "step-1/params.txt":
                data += b"a\\nb 0\na%0Ab 0\n"
            zout.writestr(info.filename, data)
    p = run("verify", bad, check=False)
    assert p.returncode == 1
    lines = p.stdout.decode().splitlines()
    prefix = f"{bad}: entry 'step-1/params.txt': parameter "
    for shown in (shown_backslash_n, shown_newline):
        assert prefix + shown + " is not a variable of the graph" in lines, lines
    # A misspelt name: the error and its suggestion quote names the same way
    # (a\nb is one edit away, the name with a newline two).
    p = run("cat", bad, "a\\nbc", "--tag", "step-1", check=False)
    assert p.returncode == 1
    assert p.stderr.decode().splitlines()[0] == (
        f"modelzip: {bad}: tag 'step-1': no parameter 'a\\\\nbc' (did you mean "
        f"{shown_backslash_n}?)"), p.stderr
