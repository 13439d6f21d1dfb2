"""What users met at the command line (issue 16): hostile names reaching the
terminal, arguments that start with '-', binary data on a terminal, what
rm-tag and diff report, updater state in cat/export/diff, archive metadata,
and the messages for things that are not archives. Expected bytes are written
from the rules in the help texts, not from running modelzip."""
import json
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
