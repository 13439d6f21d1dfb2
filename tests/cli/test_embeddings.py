"""Embedding parameters: import (finalfusion, word2vec, text), queries
checked against numpy, export."""
import json
import os

import numpy as np
import pytest

from conftest import run

TESTDATA = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"), "finalfusion")


def data(name):
    path = os.path.join(TESTDATA, name)
    assert os.path.exists(path), f"shared test data missing: {path}"
    return path


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "e.zip"
    run("import", path, "--tag", "v1", data("similarity.fifu"), "--name", "words")
    return path


def text_matrix(path):
    """Reads a word2vec text file (dims line) with plain Python/numpy."""
    with open(path, encoding="utf-8") as f:
        rows, dims = map(int, f.readline().split())
        words, vecs = [], []
        for line in f:
            parts = line.rstrip("\n").split(" ")
            words.append(parts[0])
            vecs.append([float(x) for x in parts[1:]])
    m = np.array(vecs, dtype=np.float64)
    assert m.shape == (rows, dims)
    return words, m


def test_similar_matches_numpy_cosine(archive, tmp_path):
    run("export", archive, "words", tmp_path / "w.txt", "--format", "textdims")
    words, m = text_matrix(tmp_path / "w.txt")
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    q = unit[words.index("Berlin")]
    sims = unit @ q
    order = [i for i in np.argsort(-sims, kind="stable") if words[i] != "Berlin"][:5]
    got = json.loads(run("similar", archive, "words", "Berlin", "-k", "5", "--json").stdout)
    assert [g["word"] for g in got] == [words[i] for i in order]
    for g, i in zip(got, order):
        assert abs(g["similarity"] - sims[i]) < 1e-5


def test_analogy_matches_numpy(tmp_path):
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", data("analogy.bin"), "--name", "words")
    run("export", archive, "words", tmp_path / "w.txt", "--format", "textdims")
    words, m = text_matrix(tmp_path / "w.txt")
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    a, b, c = (unit[words.index(w)] for w in ("Berlin", "Deutschland", "Paris"))
    target = b - a + c
    target /= np.linalg.norm(target)
    sims = unit @ target
    order = [i for i in np.argsort(-sims, kind="stable")
             if words[i] not in ("Berlin", "Deutschland", "Paris")][:3]
    got = json.loads(run("analogy", archive, "words", "Berlin", "Deutschland", "Paris",
                         "-k", "3", "--json").stdout)
    assert [g["word"] for g in got] == [words[i] for i in order]


def test_standalone_file_and_archive_agree(archive):
    a = run("similar", archive, "words", "Berlin", "--json").stdout
    b = run("similar", data("similarity.fifu"), "Berlin", "--json").stdout
    assert a == b


def test_embed_json_shape(archive):
    out = json.loads(run("embed", archive, "words", "Berlin", "no-such-word-xyz", "--json",
                         check=False).stdout)
    assert set(out) == {"Berlin", "no-such-word-xyz"}
    assert isinstance(out["Berlin"], list) and all(isinstance(x, float) for x in out["Berlin"])
    assert out["no-such-word-xyz"] is None
    p = run("embed", archive, "words", "no-such-word-xyz", check=False)
    assert p.returncode == 1


def test_import_converts_word2vec_and_text(tmp_path):
    path = tmp_path / "c.zip"
    run("import", path, "--tag", "bin", data("similarity.bin"), "--name", "words")
    run("import", path, "--tag", "txt", data("similarity.txt"), "--name", "words")
    run("import", path, "--tag", "nodims", data("similarity.nodims"), "--format", "text",
        "--name", "words")
    a = json.loads(run("similar", path, "words", "Berlin", "--tag", "bin", "--json").stdout)
    b = json.loads(run("similar", path, "words", "Berlin", "--tag", "txt", "--json").stdout)
    c = json.loads(run("similar", path, "words", "Berlin", "--tag", "nodims", "--json").stdout)
    assert [x["word"] for x in a] == [x["word"] for x in b] == [x["word"] for x in c]
    rows = json.loads(run("ls", path, "--tag", "txt", "--json").stdout)
    assert rows[0]["kind"] == "embedding"
    assert run("verify", path).returncode == 0


def test_export_fifu_is_byte_identical(archive, tmp_path):
    run("export", archive, "words", tmp_path / "out.fifu")
    with open(data("similarity.fifu"), "rb") as f:
        assert (tmp_path / "out.fifu").read_bytes() == f.read()
