"""diff, extract and gc."""
import json
import os
import zipfile

from conftest import run


def test_diff_reports_shared_and_changed(quickstart_archive):
    p = run("diff", quickstart_archive, "step-1", "step-2", "--json", check=False)
    assert p.returncode == 1  # the tags differ (like diff and git diff --exit-code)
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["embedding"]["change"] == "shared"
    assert rows["fc.weight"]["change"] == "shared"
    assert rows["fc.bias"]["change"] == "changed"
    assert rows["fc.bias"]["max_abs_diff"] == 0.5  # bias went from 0 to 0.5
    text = run("diff", quickstart_archive, "step-2", "step-1", check=False)
    assert text.returncode == 1
    assert b"changed\tfc.bias" in text.stdout
    assert b"0 added, 0 removed, 1 changed, 2 shared" in text.stderr


def test_extract_writes_every_entry_and_never_overwrites(quickstart_archive, tmp_path):
    out = tmp_path / "out"
    run("extract", quickstart_archive, out)
    with zipfile.ZipFile(quickstart_archive) as z:
        for name in z.namelist():
            assert (out / name).read_bytes() == z.read(name)
    again = run("extract", quickstart_archive, out, check=False)
    assert again.returncode == 1 and b"exists" in again.stderr
    run("extract", quickstart_archive, out, "--force")


def test_extract_refuses_symlinks_leading_outside(quickstart_archive, tmp_path):
    out = tmp_path / "out"
    outside = tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    os.symlink(outside, out / "step-1")
    p = run("extract", quickstart_archive, out, check=False)
    assert p.returncode == 1 and b"symbolic link" in p.stderr
    assert list(outside.iterdir()) == []


def test_gc_drops_unreferenced_blobs(quickstart_archive):
    with zipfile.ZipFile(quickstart_archive, "a") as z:
        blob = z.read("step-1/params/2.fb")
        z.writestr("step-1/params/7.fb", blob)  # nothing references it
    size_before = os.path.getsize(quickstart_archive)
    out = run("gc", quickstart_archive).stdout.decode()
    assert out.startswith("removed 1 unreferenced blob(s), 168 B")
    assert os.path.getsize(quickstart_archive) < size_before
    with zipfile.ZipFile(quickstart_archive) as z:
        assert "step-1/params/7.fb" not in z.namelist()
    assert run("verify", quickstart_archive).returncode == 0
