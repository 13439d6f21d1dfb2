"""An archive without tags (what rm-tag of the last tag leaves) is valid
(FORMAT.md section 4.1): every listing command says so clearly, --json
gives JSON, and a new tag can be added again."""
import json

import numpy as np

from conftest import run


def test_rm_tag_of_the_last_tag_leaves_a_valid_empty_archive(tmp_path, quickstart_archive):
    a = quickstart_archive
    run("rm-tag", a, "step-1")
    run("rm-tag", a, "step-2")
    assert run("tags", a).stdout == b""
    assert json.loads(run("tags", a, "--json").stdout) == []
    assert run("ls", a).stdout == b""
    assert json.loads(run("ls", a, "--json").stdout) == []
    text = run("info", a).stdout.decode()
    assert "none (the archive has no tags)" in text
    info = json.loads(run("info", a, "--json").stdout)
    assert info["tags"] == 0 and info["tag"] is None and info["params"] is None
    assert info["metadata"]["format_version"] == 1
    run("verify", a)
    failed = run("cat", a, "fc.weight", check=False)
    assert failed.returncode == 1
    assert b"the archive has no tags" in failed.stderr
    failed = run("ls", a, "--tag", "step-1", check=False)
    assert failed.returncode == 1 and b"tag 'step-1': no such tag" in failed.stderr

    npz = tmp_path / "w.npz"
    np.savez(npz, w=np.ones(3, dtype=np.float32))
    run("import", a, "--tag", "again", npz)
    assert run("tags", a).stdout.decode().split() == ["again"]
