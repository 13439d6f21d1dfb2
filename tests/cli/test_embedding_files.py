"""Embedding files as users meet them: export round trips (norms restored by
default, --normalized, format by extension), what ls and info say about
embedding parameters, queries on standalone word2vec/text files, and the
--utf8 policies on the shared test data."""
import json
import os
import struct

import numpy as np
import pytest

from conftest import run

TESTDATA = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                        "finalfusion")


def data(name):
    path = os.path.join(TESTDATA, name)
    assert os.path.exists(path), f"shared test data missing: {path}"
    return path


def read_text(path, dims_line):
    """word -> vector, read with plain Python (an independent reader)."""
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    if dims_line:
        rows, dims = map(int, lines[0].split())
        lines = lines[1:]
        assert len(lines) == rows
    out = {}
    for line in lines:
        parts = line.split()
        out[parts[0]] = np.array([float(x) for x in parts[1:]], dtype=np.float64)
    return out


def read_word2vec(path):
    raw = open(path, "rb").read()
    header, rest = raw.split(b"\n", 1)
    rows, dims = map(int, header.split())
    out, pos = {}, 0
    for _ in range(rows):
        space = rest.index(b" ", pos)
        word = rest[pos:space].strip()
        vec = np.array(struct.unpack_from("<%df" % dims, rest, space + 1), dtype=np.float64)
        out[word] = vec
        pos = space + 1 + 4 * dims
    return out


def assert_same_vectors(a, b, rtol=1e-6):
    assert list(a) == list(b)
    for w in a:
        # float32 rounding of norm * unit row: a few ulps.
        np.testing.assert_allclose(a[w], b[w], rtol=rtol, atol=1e-6 * np.abs(b[w]).max())


@pytest.mark.parametrize("source,out,dims_line", [
    ("similarity.nodims", "glove.txt", False),  # GloVe: no dims line, .txt
    ("similarity.txt", "vectors.vec", True),    # word2vec text / fastText .vec
])
def test_text_round_trip_restores_the_original_vectors(tmp_path, source, out, dims_line):
    archive = tmp_path / "a.zip"
    args = ["--format", "text"] if source.endswith("nodims") else []
    run("import", archive, "--tag", "v1", data(source), "--name", "w", *args)
    p = run("export", archive, "w", tmp_path / out)
    assert b"original norms restored" in p.stderr
    original = read_text(data(source), dims_line=source.endswith(".txt"))
    exported = read_text(tmp_path / out, dims_line=dims_line)
    assert_same_vectors(exported, original)
    # The norms really differ from 1 (so restoring them is tested).
    assert max(abs(np.linalg.norm(v) - 1) for v in original.values()) > 0.5


def test_word2vec_binary_round_trip_and_normalized(tmp_path):
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", data("similarity.bin"), "--name", "w")
    run("export", archive, "w", tmp_path / "out.bin")
    assert_same_vectors(read_word2vec(tmp_path / "out.bin"), read_word2vec(data("similarity.bin")))
    p = run("export", archive, "w", tmp_path / "unit.txt", "--normalized")
    assert b"unit rows" in p.stderr
    unit = read_text(tmp_path / "unit.txt", dims_line=False)
    original = read_word2vec(data("similarity.bin"))
    for w, v in unit.items():
        assert abs(np.linalg.norm(v) - 1) < 1e-5
        o = original[w]
        np.testing.assert_allclose(v, o / np.linalg.norm(o), atol=1e-6)
    # A .fifu keeps what is stored; --normalized does not apply to it.
    p = run("export", archive, "w", tmp_path / "x.fifu", "--normalized", check=False)
    assert p.returncode == 2 and b"--normalized" in p.stderr


def test_ls_and_info_describe_embeddings(tmp_path):
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", data("similarity.fifu"), data("pq.fifu"),
        data("fasttext.bin"))
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--json").stdout)}
    sim, pq, ft = rows["similarity"], rows["pq"], rows["fasttext"]
    # Facts read independently: similarity.fifu has 41 words x 100 dims
    # (its text twin's dims line), an array and no norms chunk (its header
    # lists chunks 1 and 2 only); a converted fastText model has norms.
    assert sim["shape"] == [41, 100]
    assert sim["embedding"]["vocab"] == "simple" and sim["embedding"]["words"] == 41
    assert sim["embedding"]["storage"] == "array" and sim["embedding"]["norms"] is False
    assert ft["embedding"]["norms"] is True
    assert pq["embedding"]["storage"] == "quantized"
    assert pq["embedding"]["quantizer"]["centroids"] <= 256
    assert ft["embedding"]["vocab"] == "fasttext_subwords"
    assert ft["embedding"]["subword_rows"] == ft["embedding"]["rows"] - ft["embedding"]["words"]
    assert ft["embedding"]["subword_rows"] > 0
    text = run("ls", archive).stdout.decode()
    line = next(l for l in text.splitlines() if l.startswith("similarity\t"))
    assert "[41, 100]" in line and "simple 41 words" in line and "array, no norms" in line
    assert "quantized" in next(l for l in text.splitlines() if l.startswith("pq\t"))
    info = json.loads(run("info", archive, "--json").stdout)
    assert info["embeddings"]["similarity"] == sim["embedding"]
    assert info["embeddings"]["pq"]["storage"] == "quantized"
    info_text = run("info", archive).stdout.decode()
    assert "similarity: simple 41 words; 100 dims, array, no norms" in info_text


def test_queries_on_standalone_files_of_every_format(tmp_path):
    # The same 41 words in four formats give the same neighbours.
    expected = json.loads(run("similar", data("similarity.fifu"), "Berlin", "-k", "5",
                              "--json").stdout)
    for name, extra in (("similarity.bin", []), ("similarity.txt", []),
                        ("similarity.nodims", ["--format", "text"])):
        got = json.loads(run("similar", data(name), "Berlin", "-k", "5", "--json",
                             *extra).stdout)
        assert [g["word"] for g in got] == [e["word"] for e in expected], name
    vec = tmp_path / "sim.vec"
    vec.write_bytes(open(data("similarity.txt"), "rb").read())
    got = json.loads(run("analogy", vec, "Berlin", "Potsdam", "Hamburg", "--json").stdout)
    want = json.loads(run("analogy", data("similarity.fifu"), "Berlin", "Potsdam", "Hamburg",
                          "--json").stdout)
    assert [g["word"] for g in got] == [w["word"] for w in want] and len(got) == 10
    got = json.loads(run("embed", data("similarity.bin"), "Berlin", "--json").stdout)
    assert len(got["Berlin"]) == 100


def test_unknown_format_is_said_plainly(tmp_path):
    odd = tmp_path / "notes.dat"
    odd.write_bytes(b"hello\n")
    p = run("similar", odd, "Berlin", check=False)
    assert p.returncode != 0
    assert b"unknown format" in p.stderr and b"end-of-central-directory" not in p.stderr


def test_utf8_policies_on_text_files(tmp_path):
    archive = tmp_path / "u.zip"
    p = run("import", archive, "--tag", "s", data("utf8-incomplete.txt"), "--format", "text",
            check=False)
    # Said "line 2: line is not valid UTF-8": which byte, in what?
    assert p.returncode == 1 and p.stderr.decode().startswith(
        f"modelzip: {data('utf8-incomplete.txt')}: line 2: column 4: word 'zee\\xc3n' is not "
        "valid UTF-8"), p.stderr
    bad = tmp_path / "n.txt"
    bad.write_bytes(b"a 1 2\nb 1 2\xff\n")
    p = run("import", archive, "--tag", "s", bad, check=False)
    assert p.returncode == 1 and b"line 2: column 6: the line is not valid UTF-8" in p.stderr
    p = run("import", archive, "--tag", "l", data("utf8-incomplete.txt"), "--format", "text",
            "--utf8", "lossy", "--name", "w")
    assert b"1 word(s) had invalid UTF-8 replaced by U+FFFD" in p.stderr
    p = run("import", archive, "--tag", "e", data("utf8-incomplete.txt"), "--format", "text",
            "--utf8", "escape", "--name", "w")
    assert b"1 word(s) stored in the escaped form" in p.stderr
    got = json.loads(run("embed", archive, "w", "--tag", "e", "zee\\xc3n", "--json").stdout)
    assert got["zee\\xc3n"] is not None
    run("export", archive, "w", "--tag", "e", tmp_path / "back.txt")
    assert read_text(tmp_path / "back.txt", False).keys() == \
        read_text(data("utf8-incomplete.txt"), False).keys()
    p = run("import", archive, "--tag", "x", data("utf8-incomplete.txt"), "--utf8", "latin1",
            check=False)
    assert p.returncode == 2 and b"strict, lossy, escape" in p.stderr


def test_lossy_collisions_are_explained_and_escape_keeps_backslashes(tmp_path):
    src = tmp_path / "two.txt"
    # Two words that differ only in an invalid byte, and one with a backslash.
    src.write_bytes(b"caf\xe9 1 0\ncaf\xe8 0 1\na\\b 0 2\n")
    archive = tmp_path / "t.zip"
    p = run("import", archive, "--tag", "l", src, "--utf8", "lossy", check=False)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert "words 0 and 1" in err and "lossy UTF-8 decoding" in err and "escape" in err
    run("import", archive, "--tag", "e", src, "--utf8", "escape", "--name", "w")
    got = json.loads(run("embed", archive, "w", "caf\\xe9", "caf\\xe8", "a\\\\b",
                         "--json").stdout)
    assert all(v is not None for v in got.values())
    run("export", archive, "w", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_bytes().splitlines() == [
        b"caf\xe9 1 0", b"caf\xe8 0 1", b"a\\b 0 2"]


def test_escape_round_trip_of_a_word2vec_file_is_byte_identical(tmp_path):
    # utf8-incomplete.bin holds a word with a truncated UTF-8 sequence; its
    # vectors are unit rows times exact norms, so the export is bit-exact.
    archive = tmp_path / "w.zip"
    run("import", archive, "--tag", "v1", data("utf8-incomplete.bin"), "--utf8", "escape",
        "--name", "w")
    run("export", archive, "w", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == open(data("utf8-incomplete.bin"), "rb").read()


@pytest.mark.parametrize("source,out", [("similarity.bin", "back.bin"),
                                        ("similarity.txt", "back.vec")])
def test_no_normalize_import_exports_the_file_bit_for_bit(tmp_path, source, out):
    # Python had Embeddings.load(..., normalize=False); the CLI stored unit rows and norms only,
    # and export's norm * row differed from the file in the last bit for 7% of the components.
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", data(source), "--name", "w", "--no-normalize")
    rows = json.loads(run("ls", archive, "--json").stdout)
    assert "no norms" in run("ls", archive).stdout.decode() and rows[0]["kind"] == "embedding"
    run("export", archive, "w", tmp_path / out)
    assert (tmp_path / out).read_bytes() == open(data(source), "rb").read()
    # Queries see the same neighbours as with the normalized default.
    run("import", archive, "--tag", "v2", data(source), "--name", "w")
    best = [json.loads(run("similar", archive, "w", "Berlin", "-k", "3", "--tag", t,
                           "--json").stdout) for t in ("v1", "v2")]
    assert [r["word"] for r in best[0]] == [r["word"] for r in best[1]]
    p = run("import", archive, "--tag", "v3", data("similarity.fifu"), tmp_path / out,
            "--no-normalize", check=False)
    assert p.returncode == 0
    np.save(tmp_path / "t.npy", np.ones(2))
    p = run("import", archive, "--tag", "v4", tmp_path / "t.npy", "--no-normalize", check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        "modelzip import: --no-normalize applies to embedding files that are converted\n")


@pytest.mark.parametrize("value", ["inf", "-Infinity", "nan", "1e39"])
def test_a_row_that_cannot_be_normalized_is_refused_by_line_and_column(tmp_path, value):
    # Imported as "a" with a NaN unit row (inf / inf), silently; export then wrote NaN.
    text = tmp_path / "v.txt"
    text.write_text(f"b 1 2 3\na 1 {value} 2\n")
    archive = tmp_path / "a.zip"
    p = run("import", archive, "--tag", "v1", text, "--name", "w", check=False)
    assert p.returncode == 1 and not archive.exists()
    assert p.stderr.decode().startswith(
        f"modelzip: {text}: line 2: column 5: component 2 of word 'a' is '{value}', not a "
        "finite float32")
    assert "--no-normalize" in p.stderr.decode()
    # Queried directly: the same error.
    p = run("similar", text, "b", check=False)
    assert p.returncode == 1 and "line 2: column 5" in p.stderr.decode()
    # --no-normalize keeps the row exactly, and a .fifu export with it. word2vec and text
    # exports wrote "NaN" or "inf", which fastText's .vec reader does not parse (it silently
    # read that vector and all later ones wrong): they refuse it, naming it.
    run("import", archive, "--tag", "v1", text, "--name", "w", "--no-normalize")
    shown = {"inf": "inf", "-Infinity": "-inf", "nan": "NaN", "1e39": "inf"}[value]
    for out in ("back.txt", "back.vec", "back.bin"):
        p = run("export", archive, "w", tmp_path / out, check=False)
        assert p.returncode == 1 and not (tmp_path / out).exists()
        assert p.stderr.decode().startswith(
            f"modelzip: {tmp_path / out}: embedding 'w' of {archive}, tag 'v1': row 1 ('a'): "
            f"component 2 is {shown}, which word2vec and text files do not hold"), p.stderr
    run("export", archive, "w", tmp_path / "back.fifu")


def test_export_of_subword_embeddings_says_the_subword_rows_are_left_out(tmp_path):
    # word2vec and text files hold word rows only: an export of a fastText model's embeddings
    # dropped its 100 n-gram bucket rows without a word, and the re-imported file had no
    # embedding for the unknown words the archive answered.
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", data("fasttext.bin"), "--name", "w")
    p = run("export", archive, "w", tmp_path / "w.vec")
    assert p.stderr.decode() == (
        f"wrote embedding 'w' to {tmp_path / 'w.vec'} (textdims, original norms restored); its "
        "100 subword row(s) are not in that format, so unknown words get no embedding from it "
        "(a .fifu keeps them)\n")
    assert run("embed", archive, "w", "Sprachmodell").returncode == 0
    assert run("embed", tmp_path / "w.vec", "Sprachmodell", check=False).returncode == 1
    p = run("export", archive, "w", tmp_path / "w.fifu")
    assert b"subword row" not in p.stderr
    assert run("embed", tmp_path / "w.fifu", "Sprachmodell").returncode == 0
    run("import", archive, "--tag", "v2", data("similarity.bin"), "--name", "s")
    p = run("export", archive, "s", tmp_path / "s.txt")
    assert b"subword row" not in p.stderr


def fasttext_input_matrix(raw):
    """(offset of the dense input matrix's first float, its columns, the words) of a fastText
    .bin, read with plain Python from fastText's save() layout."""
    pos = 8 + 12 * 4 + 8                       # magic, version, 12 int32 args, double t
    size, _, _ = struct.unpack_from("<3i", raw, pos)
    _, prune = struct.unpack_from("<2q", raw, pos + 12)
    pos += 28
    words = []
    for _ in range(size):                      # word NUL, int64 count, int8 type
        end = raw.index(b"\0", pos)
        words.append(raw[pos:end].decode())
        pos = end + 10
    pos += 8 * max(prune, 0)
    assert raw[pos] == 0, "a dense input matrix"
    _, columns = struct.unpack_from("<2q", raw, pos + 1)
    return pos + 17, columns, words


def test_a_fasttext_row_that_cannot_be_normalized_is_refused_at_its_byte_offset(tmp_path):
    # Refused as "row 3: component 5 is inf", without the file's offset (and a NaN in an
    # n-gram's row was blamed on the word's row number).
    raw = bytearray(open(data("fasttext.bin"), "rb").read())
    at, columns, words = fasttext_input_matrix(raw)
    offset = at + (3 * columns + 4) * 4        # word 3's own row, component 5
    struct.pack_into("<f", raw, offset, float("inf"))
    model = tmp_path / "m.bin"
    model.write_bytes(raw)
    archive = tmp_path / "a.zip"
    p = run("import", archive, "--tag", "v1", model, "--name", "w", check=False)
    assert p.returncode == 1 and not archive.exists()
    assert p.stderr.decode().startswith(
        f"modelzip: {model}: offset {offset}: fastText word 3 ('{words[3]}'): component 5 of "
        "input row 3 is inf (the word's own row), and its vector has no norm to normalize by"), \
        p.stderr
    p = run("similar", model, words[3], check=False)
    assert p.returncode == 1 and f"offset {offset}: fastText word 3" in p.stderr.decode()
    run("import", archive, "--tag", "v1", model, "--name", "w", "--no-normalize")


def test_huge_and_tiny_rows_are_normalized_and_exported_exactly(tmp_path):
    # Their squares overflow or underflow float32: "big" became a zero row with an infinite
    # norm, "tiny" a row with norm 0, and export wrote NaN or zeros.
    text = tmp_path / "v.txt"
    text.write_text("big 3e30 4e30\ntiny 3e-30 4e-30\n")
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "v1", text, "--name", "w")
    run("export", archive, "w", tmp_path / "back.txt")
    got = read_text(tmp_path / "back.txt", False)
    np.testing.assert_allclose(got[b"big"], [3e30, 4e30], rtol=1e-6)
    np.testing.assert_allclose(got[b"tiny"], [3e-30, 4e-30], rtol=1e-6)
