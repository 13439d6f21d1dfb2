"""rm-tag in place, rm-tag --keep-last, import --replace / --keep-last, and
the refusal of '/' in tags, through the modelzip command."""
import zipfile

import numpy as np

from conftest import run


def tags_of(path):
    return run("tags", path).stdout.decode().split()


def import_tags(tmp_path, path, names, size=20000):
    for k, tag in enumerate(names):
        f = tmp_path / f"{tag}.npy"
        np.save(f, np.full(size, k, dtype=np.float32))
        run("import", path, "--tag", tag, f)


def test_rm_tag_removes_in_place_and_reports_the_freed_bytes(tmp_path):
    path = tmp_path / "m.zip"
    import_tags(tmp_path, path, ["a", "b", "c"])
    size = path.stat().st_size
    out = run("rm-tag", path, "A").stdout.decode()
    assert "removed tag 'a'" in out and "freed in place" in out, out
    assert tags_of(path) == ["b", "c"]
    assert path.stat().st_size > size - 1000  # the bytes stay until gc
    assert run("verify", path).returncode == 0
    out = run("rm-tag", path, "b", "--rewrite").stdout.decode()
    assert "(rewritten)" in out, out
    assert path.stat().st_size < size / 2


def test_rm_tag_keep_last(tmp_path):
    path = tmp_path / "m.zip"
    import_tags(tmp_path, path, [f"step-{k}" for k in range(6)])
    out = run("rm-tag", path, "--keep-last", "4").stdout.decode()
    assert "removed 2 tag(s): 'step-0', 'step-1'; kept 4" in out, out
    assert tags_of(path) == ["step-2", "step-3", "step-4", "step-5"]
    out = run("rm-tag", path, "--keep-last", "10").stdout.decode()
    assert "removed 0 tag(s)" in out
    bad = run("rm-tag", path, "--keep-last", "0", check=False)
    assert bad.returncode == 2
    bad = run("rm-tag", path, "step-2", "--keep-last", "1", check=False)
    assert bad.returncode == 2  # a tag or --keep-last, not both
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None


def test_import_replace_and_keep_last(tmp_path):
    path = tmp_path / "m.zip"
    import_tags(tmp_path, path, ["latest", "other"])
    f = tmp_path / "new.npy"
    np.save(f, np.arange(20000, dtype=np.float32))
    again = run("import", path, "--tag", "LATEST", f, check=False)
    assert again.returncode != 0 and b"exists already" in again.stderr
    out = run("import", path, "--tag", "latest", f, "--replace")
    assert b"freed in place" in out.stderr, out.stderr
    assert tags_of(path) == ["other", "latest"]  # the replaced tag is the newest
    exported = tmp_path / "out.npz"
    run("export", path, "--tag", "latest", exported)
    with np.load(exported) as z:
        assert np.array_equal(z[z.files[0]], np.arange(20000, dtype=np.float32))
    run("import", path, "--tag", "third", f, "--keep-last", "2")
    assert tags_of(path) == ["latest", "third"]


def test_slash_in_a_tag_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "m.zip"
    f = tmp_path / "x.npy"
    np.save(f, np.zeros(3, dtype=np.float32))
    p = run("import", path, "--tag", "run1/step-5", f, check=False)
    assert p.returncode != 0
    message = p.stderr.decode()
    assert "'/' at position 4 is not allowed in a tag" in message
    assert "separates" in message and "run1.step-5" in message
    assert not path.exists()
