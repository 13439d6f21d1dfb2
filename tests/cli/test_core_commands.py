"""The core CLI commands on archives written by the library, checked against
independent readers (zipfile, numpy, unzip, flatc)."""
import json
import os
import shutil
import struct
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import CLI, SOURCE_DIR, run


def test_tags_oldest_first(quickstart_archive):
    assert run("tags", quickstart_archive).stdout.decode() == "step-1\nstep-2\n"
    assert json.loads(run("tags", quickstart_archive, "--json").stdout) == ["step-1", "step-2"]


def test_ls_json_describes_parameters(quickstart_archive):
    rows = json.loads(run("ls", quickstart_archive, "--json").stdout)
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == {"embedding", "fc.weight", "fc.bias"}
    assert by_name["embedding"]["dtype"] == "float32"
    assert by_name["embedding"]["shape"] == [1000, 64]
    assert by_name["embedding"]["nbytes"] == 1000 * 64 * 4
    assert by_name["embedding"]["shared"] is True
    assert by_name["embedding"]["blob"] == "step-1/params/0.fb"
    assert by_name["fc.bias"]["shared"] is False
    assert by_name["fc.bias"]["blob"] == "step-2/params/0.fb"
    old = json.loads(run("ls", quickstart_archive, "--tag", "STEP-1", "--json").stdout)
    assert all(not r["shared"] for r in old)


def test_cat_raw_matches_the_values_written(quickstart_archive):
    raw = run("cat", quickstart_archive, "fc.bias").stdout
    assert np.frombuffer(raw, dtype="<f4").tolist() == [0.5] * 10
    raw = run("cat", quickstart_archive, "fc.bias", "--tag", "step-1").stdout
    assert np.frombuffer(raw, dtype="<f4").tolist() == [0.0] * 10
    emb = np.frombuffer(run("cat", quickstart_archive, "embedding").stdout, dtype="<f4")
    expected = np.array([(i % 97) / 97 for i in range(64000)], dtype=np.float32)
    assert np.array_equal(emb, expected)


def test_errors_exit_nonzero_with_one_line(quickstart_archive, tmp_path):
    p = run("cat", quickstart_archive, "nope", check=False)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "no parameter 'nope'" in err and "step-2" in err
    p = run("ls", tmp_path / "missing.zip", check=False)
    assert p.returncode == 1 and "missing.zip" in p.stderr.decode()
    p = run("ls", check=False)
    assert p.returncode == 2 and "Usage" in p.stderr.decode()
    p = run("frobnicate", check=False)
    assert p.returncode == 2


def test_rm_tag_keeps_shared_blobs(quickstart_archive):
    run("rm-tag", quickstart_archive, "step-1")
    assert run("tags", quickstart_archive).stdout.decode() == "step-2\n"
    rows = {r["name"]: r for r in json.loads(run("ls", quickstart_archive, "--json").stdout)}
    assert rows["embedding"]["blob"].startswith("step-2/params/")
    assert not rows["embedding"]["shared"]
    emb = np.frombuffer(run("cat", quickstart_archive, "embedding").stdout, dtype="<f4")
    assert emb[96] == np.float32(96 / 97)
    assert run("verify", quickstart_archive).returncode == 0
    with zipfile.ZipFile(quickstart_archive) as z:
        assert not [n for n in z.namelist() if n.startswith("step-1/")]


def test_verify_reports_a_damaged_entry(quickstart_archive):
    data = bytearray(quickstart_archive.read_bytes())
    with zipfile.ZipFile(quickstart_archive) as z:
        info = z.getinfo("step-1/params/0.fb")
    # Flip a byte inside the tensor data (past the local header and blob header).
    data[info.header_offset + 30 + len(info.filename) + 64 * 40] ^= 0xFF
    quickstart_archive.write_bytes(bytes(data))
    p = run("verify", quickstart_archive, check=False)
    assert p.returncode == 1
    assert "step-1/params/0.fb" in p.stdout.decode()
    assert "CRC" in p.stdout.decode()


def test_verify_writes_its_result_on_stdout(quickstart_archive, tmp_path):
    """`verify > report` keeps the verdict: results on stdout, diagnostics on stderr."""
    p = run("verify", quickstart_archive)
    assert (p.stdout, p.stderr) == (f"{quickstart_archive}: OK\n".encode(), b"")
    assert run("verify", quickstart_archive, "--quiet").stdout == b""
    data = bytearray(quickstart_archive.read_bytes())
    with zipfile.ZipFile(quickstart_archive) as z:
        info = z.getinfo("step-1/params/0.fb")
    data[info.header_offset + 30 + len(info.filename) + 64 * 40] ^= 0xFF
    broken = tmp_path / "broken.zip"
    broken.write_bytes(bytes(data))
    p = run("verify", broken, check=False)
    lines = p.stdout.decode().splitlines()
    assert p.returncode == 1 and p.stderr == b""
    assert "step-1/params/0.fb" in lines[0] and lines[-1] == f"{broken}: 1 problem(s)"
    p = run("verify", tmp_path / "missing.zip", check=False)
    assert p.returncode == 1 and p.stdout == b"" and b"missing.zip" in p.stderr


def test_verify_prints_every_bad_table_line_and_counts_those_it_does_not_print(
        quickstart_archive, tmp_path):
    """A params.txt with 25 bad lines: 20 printed, then how many more; the result counts all 25
    (it counted the 21 lines printed, and verify stopped at the first bad line before that)."""
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(quickstart_archive) as zin, \
            zipfile.ZipFile(damaged, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "step-1/params.txt":
                data = b"".join(b"bad line %d\n" % i for i in range(25))
            zout.writestr(info.filename, data)
    p = run("verify", damaged, check=False)
    assert p.returncode == 1 and p.stderr == b""
    lines = p.stdout.decode().splitlines()
    prefix = f"{damaged}: entry 'step-1/params.txt': "
    assert lines[:20] == [prefix + f"line {n}: expected 2 fields separated by single spaces, "
                          "found 3" for n in range(1, 21)]
    assert lines[20:] == [prefix + "... and 5 more problems in this entry",
                          f"{damaged}: 25 problem(s)"]


def test_typos_get_a_did_you_mean(quickstart_archive):
    """Misspelt commands, options, tags and parameter names: the close names, as git does."""
    cases = [
        (["lss", quickstart_archive], 2, "modelzip: unknown command 'lss' (did you mean 'ls'?)"),
        (["ls", quickstart_archive, "--tga", "step-1"], 2,
         "modelzip ls: unknown option --tga (did you mean '--tag'?)"),
        (["ls", quickstart_archive, "--tag", "step-99"], 1,
         f"modelzip: {quickstart_archive}: tag 'step-99': no such tag "
         "(did you mean 'step-1' or 'step-2'?)"),
        (["cat", quickstart_archive, "fc.wieght"], 1,
         f"modelzip: {quickstart_archive}: tag 'step-2': no parameter 'fc.wieght' "
         "(did you mean 'fc.weight'?)"),
        (["rm-tag", quickstart_archive, "step2"], 1,
         f"modelzip: {quickstart_archive}: tag 'step2': no such tag to remove "
         "(did you mean 'step-2'?)"),
        (["quantize", quickstart_archive, "--from", "STEP-3", "--tag", "q", "--scheme",
          "int8-per-tensor"], 1,
         f"modelzip: {quickstart_archive}: no tag 'STEP-3' (did you mean 'step-1' or 'step-2'?)"),
    ]
    for args, status, first_line in cases:
        p = run(*args, check=False)
        assert (p.returncode, p.stderr.decode().splitlines()[0]) == (status, first_line), args
    # Nothing close: no guess, the usual hint.
    p = run("frobnicate", check=False)
    assert p.stderr == b"modelzip: unknown command 'frobnicate' (see modelzip --help)\n"
    p = run("ls", quickstart_archive, "--tag", "nightly", check=False)
    assert p.stderr.decode().endswith("tag 'nightly': no such tag\n"), p.stderr


def test_zip_tools_accept_our_archives(quickstart_archive):
    with zipfile.ZipFile(quickstart_archive) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert names[0] == "modelzip.toml" and "tags.txt" in names
        assert z.read("tags.txt") == b"step-1\nstep-2\n"
        # Stored tensor data starts on a 64-byte boundary in the file.
        for info in z.infolist():
            if info.filename.endswith(".fb") and info.compress_type == zipfile.ZIP_STORED:
                with open(quickstart_archive, "rb") as f:
                    f.seek(info.header_offset + 26)
                    n, m = struct.unpack("<HH", f.read(4))
                assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
    # unzip and zipinfo are installed by .ci/install-deps: a missing one fails.
    assert shutil.which("unzip") and shutil.which("zipinfo"), "install the unzip package"
    assert subprocess.run(["unzip", "-tq", str(quickstart_archive)], capture_output=True).returncode == 0
    out = subprocess.run(["zipinfo", str(quickstart_archive)], capture_output=True, text=True)
    assert out.returncode == 0 and "step-2/params.txt" in out.stdout


def test_blob_layout_decoded_independently(quickstart_archive):
    """Decodes a tensor blob by hand (size prefix, identifier, segment) and
    with flatc, against the schema, without using modelzip."""
    with zipfile.ZipFile(quickstart_archive) as z:
        blob = z.read("step-1/params/1.fb")  # fc.weight, 64 x 10 float32
    size = struct.unpack_from("<I", blob, 0)[0]
    assert blob[8:12] == b"MZTB"
    assert len(blob) == ((4 + size + 63) // 64) * 64 + 64 * 10 * 4
    data = np.frombuffer(blob[len(blob) - 2560:], dtype="<f4")
    assert data.tolist() == [float(i % 13 - 6) for i in range(640)]
    flatc = shutil.which("flatc")
    if flatc is None:
        pytest.fail("flatc is a build dependency and must be installed")
    tmp = quickstart_archive.parent
    (tmp / "w.fb").write_bytes(blob)
    subprocess.run([flatc, "--json", "--strict-json", "--defaults-json", "--raw-binary",
                    "--size-prefixed", "-o", str(tmp),
                    os.path.join(SOURCE_DIR, "schemas", "tensor.fbs"), "--", str(tmp / "w.fb")],
                   check=True)
    header = json.loads((tmp / "w.json").read_text())
    assert header["dtype"] == "FLOAT"
    assert header["shape"] == [64, 10]
    assert header["layout"] == "DENSE"
    assert header["values"]["length"] == 2560
    assert header["values"]["offset"] % 64 == 0
    assert header["values"]["offset"] + 2560 == len(blob)


def test_help_lists_every_command():
    out = run("--help").stdout.decode()
    for cmd in ["tags", "ls", "cat", "rm-tag", "verify"]:
        assert f"  {cmd}" in out
    assert "Example" in run("ls", "--help").stdout.decode()
