"""Embedding parameters: import (finalfusion, word2vec, text), queries
checked against numpy, export."""
import json
import struct
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


def float32_text(value):
    """Rust's f32 Display, as finalfusion-utils prints a similarity: the shortest decimal that
    reads back as the same float32, without exponent (numpy's Dragon4 gives it)."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


@pytest.mark.parametrize("query", [
    ["similar", data("similarity.fifu"), "Berlin", "-k", "20"],
    ["analogy", data("analogy.bin"), "Berlin", "Deutschland", "Paris", "-k", "20"],
    ["embed", data("similarity.fifu"), "Berlin", "Bonn"]])
def test_text_output_prints_float32_as_finalfusion_utils_does(query):
    # The float32 scores and components printed as the shortest text of their double
    # ("0.8848506212234497", 17 digits of float32 rounding noise); finalfusion-utils prints
    # "0.8848506". --json keeps the exact value.
    text = run(*query).stdout.decode().splitlines()
    exact = json.loads(run(*query, "--json").stdout)
    if query[0] == "embed":
        for line, (word, vector) in zip(text, exact.items()):
            assert line.split(" ") == [word] + [float32_text(x) for x in vector]
        return
    assert len(text) == len(exact) == 20
    for line, r in zip(text, exact):
        assert line == f"{r['word']}\t{float32_text(r['similarity'])}"
        assert np.float32(float(line.split("\t")[1])) == np.float32(r["similarity"])


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


# ---------------------------------------------------------------------------
# An independent reader of finalfusion files, written from
# schemas/FINALFUSION.md (not from modelzip's code), for the checks below.

def parse_fifu(raw):
    """Returns {"ids": header ids, "chunks": [(id, body_offset, body)]}."""
    assert raw[:4] == b"FiFu"
    version, count = struct.unpack_from("<II", raw, 4)
    assert version == 0
    ids = list(struct.unpack_from("<%dI" % count, raw, 12))
    pos, chunks = 12 + 4 * count, []
    while pos < len(raw):
        cid, length = struct.unpack_from("<IQ", raw, pos)
        chunks.append((cid, pos + 12, raw[pos + 12:pos + 12 + length]))
        pos += 12 + length
    assert pos == len(raw)
    return {"ids": ids, "chunks": chunks}


def read_words(body, at, n):
    words = []
    for _ in range(n):
        (length,) = struct.unpack_from("<I", body, at)
        words.append(body[at + 4:at + 4 + length].decode("utf-8"))
        at += 4 + length
    return words, at


def ndarray(body_offset, body):
    rows, cols, dtype = struct.unpack_from("<QII", body, 0)
    assert dtype == 10
    pad = 4 - (body_offset + 16) % 4  # 1..4, never 0
    data = np.frombuffer(body, dtype="<f4", count=rows * cols, offset=16 + pad)
    assert len(body) == 16 + pad + 4 * rows * cols
    return data.reshape(rows, cols).astype(np.float64)


def bracketed_ngrams(word, min_n, max_n):
    chars = "<" + word + ">"
    out = []
    for i in range(len(chars)):
        for n in range(min(max_n, len(chars) - i), min_n - 1, -1):
            out.append(chars[i:i + n])
    return out


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def finalfusion_index(ngram, exponent):
    data = struct.pack("<Q", len(ngram)) + b"".join(struct.pack("<I", ord(c)) for c in ngram)
    return fnv1a64(data) & ((1 << exponent) - 1)


def fasttext_index(ngram, buckets):
    h = 2166136261
    for byte in ngram.encode("utf-8"):
        signed = byte - 256 if byte > 127 else byte
        h = ((h ^ (signed & 0xFFFFFFFF)) * 16777619) & 0xFFFFFFFF
    return h % buckets


def subword_embedding(matrix, words_len, rows):
    v = sum(matrix[words_len + r] for r in rows)
    return v / np.linalg.norm(v)


def embed_json(*args):
    return json.loads(run("embed", *args, "--json").stdout)


def test_bucket_vocab_unknown_words_match_the_spec():
    # ff_buckets.fifu: Metadata, BucketSubwordVocab (min_n 3, max_n 6, 2^10
    # buckets), NdArray; an unlisted NdNorms at the end.
    raw = open(data("ff_buckets.fifu"), "rb").read()
    f = parse_fifu(raw)
    assert f["ids"] == [5, 3, 2] and [c[0] for c in f["chunks"]] == [5, 3, 2, 6]
    _, _, vocab = f["chunks"][1]
    words_len, min_n, max_n, exponent = struct.unpack_from("<QIII", vocab, 0)
    words, _ = read_words(vocab, 20, words_len)
    assert (words, min_n, max_n, exponent) == (["one", "</s>"], 3, 6, 10)
    matrix = ndarray(f["chunks"][2][1], f["chunks"][2][2])
    assert matrix.shape == (2 + 1024, 5)
    for word in ["two", "Bärchen", "日本語テキスト"]:
        rows = [finalfusion_index(g, exponent) for g in bracketed_ngrams(word, min_n, max_n)]
        want = subword_embedding(matrix, words_len, rows)
        got = embed_json(data("ff_buckets.fifu"), word)[word]
        assert np.allclose(got, want, atol=1e-6), word
    # Known word: its row as stored.
    assert np.allclose(embed_json(data("ff_buckets.fifu"), "one")["one"], matrix[0], atol=0)


def test_fasttext_import_and_unknown_words_match_the_spec(tmp_path):
    archive = tmp_path / "ft.zip"
    run("import", archive, "--tag", "v1", data("fasttext.bin"), "--name", "ft")
    run("export", archive, "ft", tmp_path / "ft.fifu")
    f = parse_fifu((tmp_path / "ft.fifu").read_bytes())
    assert [c[0] for c in f["chunks"]] == f["ids"]
    vocab_chunk = [c for c in f["chunks"] if c[0] == 7]
    assert len(vocab_chunk) == 1
    vocab = vocab_chunk[0][2]
    words_len, min_n, max_n, buckets = struct.unpack_from("<QIII", vocab, 0)
    words, end = read_words(vocab, 20, words_len)
    assert end == len(vocab)
    (dense,) = [c for c in f["chunks"] if c[0] == 2]
    matrix = ndarray(dense[1], dense[2])
    assert matrix.shape == (words_len + buckets, 50)
    for word in ["zzqx", "Übermaß", words[0] + "x"]:
        assert word not in words
        rows = [fasttext_index(g, buckets) for g in bracketed_ngrams(word, min_n, max_n)]
        want = subword_embedding(matrix, words_len, rows)
        got = embed_json(archive, "ft", word)[word]
        assert np.allclose(got, want, atol=1e-6), word
    # The standalone export answers like the archive.
    assert embed_json(tmp_path / "ft.fifu", words[1]) == embed_json(archive, "ft", words[1])


def test_quantized_rows_reconstruct_as_the_spec_says():
    # pq.fifu: SimpleVocab, QuantizedArray with norms and without projection.
    raw = open(data("pq.fifu"), "rb").read()
    f = parse_fifu(raw)
    assert f["ids"] == [1, 4]
    (words_len,) = struct.unpack_from("<Q", f["chunks"][0][2], 0)
    words, _ = read_words(f["chunks"][0][2], 8, words_len)
    at, body = f["chunks"][1][1], f["chunks"][1][2]
    proj, has_norms, m, d, k, rows, qt, rt = struct.unpack_from("<IIIIIQII", body, 0)
    assert (proj, has_norms, qt, rt, rows) == (0, 1, 1, 10, words_len)
    pos = 36 + (4 - (at + 36) % 4)
    centroids = np.frombuffer(body, "<f4", m * k * (d // m), pos).reshape(m, k, d // m)
    pos += 4 * m * k * (d // m)
    norms = np.frombuffer(body, "<f4", rows, pos)
    pos += 4 * rows
    codes = np.frombuffer(body, np.uint8, rows * m, pos).reshape(rows, m)
    assert pos + rows * m == len(body)
    for r in (0, 7, rows - 1):
        want = np.concatenate([centroids[j, codes[r, j]] for j in range(m)]) * norms[r]
        got = embed_json(data("pq.fifu"), words[r])[words[r]]
        # embed prints unit vectors; the file has no NdNorms, so it normalizes the row.
        assert np.allclose(got, want / np.linalg.norm(want), rtol=1e-6, atol=1e-7), words[r]


FIFU_FILES = ["embeddings.fifu", "ff_buckets.fifu", "pq.fifu", "quantized.fifu",
              "similarity.fifu", "similarity-normalized.fifu", "simple_vocab.fifu"]


@pytest.mark.parametrize("name", FIFU_FILES)
def test_every_real_fifu_imports_and_exports(tmp_path, name):
    archive = tmp_path / "f.zip"
    run("import", archive, "--tag", "v1", data(name), "--name", "emb")
    rows = json.loads(run("ls", archive, "--json").stdout)
    assert [(r["name"], r["kind"]) for r in rows] == [("emb", "embedding")]
    run("export", archive, "emb", tmp_path / "out.fifu")
    # .fifu files are stored as they are: the export is the original file.
    assert (tmp_path / "out.fifu").read_bytes() == open(data(name), "rb").read()
    # And what is stored answers queries from the archive as the file does.
    word = "Berlin" if name not in ("embeddings.fifu", "ff_buckets.fifu") else "one"
    assert embed_json(archive, "emb", word) == embed_json(data(name), word)
    assert run("verify", archive).returncode == 0


def similarity_list(out):
    got = json.loads(out)
    assert isinstance(got, list)
    for item in got:
        assert set(item) == {"word", "similarity"}
        assert isinstance(item["word"], str) and isinstance(item["similarity"], float)
    sims = [g["similarity"] for g in got]
    assert sims == sorted(sims, reverse=True)
    return got


def test_similar_and_analogy_json_shapes_in_archive_and_standalone(archive):
    fifu = data("similarity.fifu")
    a = similarity_list(run("similar", archive, "words", "Berlin", "-k", "4", "--json").stdout)
    b = similarity_list(run("similar", fifu, "Berlin", "-k", "4", "--json").stdout)
    assert a == b and len(a) == 4 and "Berlin" not in [x["word"] for x in a]
    query = ("Berlin", "Potsdam", "Hamburg")
    c = similarity_list(run("analogy", archive, "words", *query, "-k", "5", "--json").stdout)
    d = similarity_list(run("analogy", fifu, *query, "-k", "5", "--json").stdout)
    assert c == d and len(c) == 5 and not set(query) & {x["word"] for x in c}
    e = embed_json(archive, "words", "Berlin", "Potsdam")
    assert e == embed_json(fifu, "Berlin", "Potsdam")
    assert list(e) == ["Berlin", "Potsdam"] and all(len(v) == 100 for v in e.values())


def test_unknown_query_words_fail(archive):
    p = run("similar", archive, "words", "no-such-word-xyz", "--json", check=False)
    assert p.returncode != 0 and b"no-such-word-xyz" in p.stderr
    p = run("analogy", data("similarity.fifu"), "Berlin", "no-such-word-xyz", "Paris",
            check=False)
    assert p.returncode != 0
    # The message names the source and, of three words, the missing ones
    # (this vocabulary has no Paris).
    assert p.stderr.decode() == (f"modelzip: {data('similarity.fifu')}: no embedding for "
                                 "'no-such-word-xyz', 'Paris'\n")
    p = run("similar", archive, "words", "zzz", "--tag", "v1", check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {archive}: tag 'v1': no embedding for 'zzz' in parameter 'words'\n")
    p = run("embed", archive, "words", "Berlin", "qqq", check=False)
    assert p.returncode == 1 and p.stdout.startswith(b"Berlin ") and p.stderr.decode() == (
        f"modelzip: {archive}: no embedding for 'qqq' in parameter 'words'\n")
    # A typo or another letter case (no suggestion was made, and vocabularies are
    # case-sensitive): the words the vocabulary has.
    p = run("analogy", data("similarity.fifu"), "berlin", "Potsdm", "Hamburg", check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {data('similarity.fifu')}: no embedding for 'berlin' (did you mean "
        "'Berlin'?), 'Potsdm' (did you mean 'Potsdam'?)\n")


def test_export_of_a_whole_tag_says_which_embeddings_it_leaves_out(archive, tmp_path):
    out = tmp_path / "all.npz"
    p = run("export", archive, out, check=False)  # the tag holds only an embedding
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {archive}: tag 'v1': has 1 embedding(s) and no tensors to write to {out}: "
        f"export each by name (modelzip export ARCHIVE words OUT.fifu, or .vec, .txt, .bin)\n")
    assert not out.exists()
    np.save(tmp_path / "bias.npy", np.ones(3, np.float32))
    run("import", archive, "--tag", "v2", tmp_path / "bias.npy", data("similarity.fifu"),
        "--name", "words")
    p = run("export", archive, out)
    assert p.stderr.decode().startswith(f"modelzip: 1 embedding(s) not written to {out}: ")
    assert list(np.load(out).keys()) == ["bias"]


@pytest.mark.parametrize("command", [["similar"], ["embed"], ["analogy", "Berlin", "Potsdam"]])
def test_options_that_do_not_apply_to_the_source_are_usage_errors(archive, command):
    name, *words = command
    for source, option, message in [
            ([data("similarity.fifu")], ["--tag", "v1"], "--tag selects a tag of an ARCHIVE"),
            ([archive, "words"], ["--format", "text"], "--format and --utf8 apply to a"),
            ([archive, "words"], ["--utf8", "lossy"], "--format and --utf8 apply to a"),
            ([data("similarity.fifu")], ["--utf8", "bogus"], "unknown --utf8 policy 'bogus'")]:
        p = run(name, *source, *words, "Hamburg", *option, check=False)
        assert p.returncode == 2 and message in p.stderr.decode() and p.stdout == b"", option


def test_vec_extension_imports_as_text(tmp_path):
    vec = tmp_path / "vectors.vec"
    vec.write_bytes(open(data("similarity.txt"), "rb").read())
    path = tmp_path / "v.zip"
    run("import", path, "--tag", "vec", vec, "--name", "words")
    run("import", path, "--tag", "txt", data("similarity.txt"), "--name", "words")
    a = run("similar", path, "words", "Berlin", "--tag", "vec", "--json").stdout
    b = run("similar", path, "words", "Berlin", "--tag", "txt", "--json").stdout
    assert a == b


def test_export_refuses_words_the_text_formats_cannot_hold(tmp_path):
    # A finalfusion vocabulary may hold phrases; word2vec and text files end a word at
    # whitespace, so writing one would give a file that reads back wrong or not at all.
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("Berlin 1 2\nPotsdam 3 4\n")
    path = tmp_path / "p.zip"
    run("import", path, "--tag", "v1", phrases, "--name", "words")
    fifu = tmp_path / "words.fifu"
    run("export", path, "words", fifu)
    data_ = bytearray(fifu.read_bytes())
    at = data_.index(b"Potsdam")
    data_[at:at + 7] = b"New Yrk"  # same length: a phrase in the vocabulary
    fifu.write_bytes(bytes(data_))
    run("import", path, "--tag", "v2", fifu, "--name", "words")
    for out in ("o.txt", "o.vec", "o.bin"):
        p = run("export", path, "words", tmp_path / out, check=False)
        assert p.returncode == 1 and not (tmp_path / out).exists()
        assert p.stderr.decode().startswith(
            f"modelzip: {tmp_path / out}: embedding 'words' of {path}, tag 'v2': word 1 "
            "'New Yrk' cannot be written to "), p.stderr
    run("export", path, "words", tmp_path / "o.fifu")


def test_embedding_queries_print_the_same_from_every_source(tmp_path):
    # similarity.fifu (rows as trained, no norms), similarity.bin and .txt hold the same
    # vectors: embed printed the raw rows for the .fifu and an import with --no-normalize,
    # unit rows for the word2vec and text files and a normalized import; similar differed
    # in the last digits and analogy in its ranking between the two kinds.
    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "raw", data("similarity.bin"), "--name", "w",
        "--no-normalize")
    run("import", archive, "--tag", "norm", data("similarity.txt"), "--name", "w")
    run("import", archive, "--tag", "fifu", data("similarity.fifu"), "--name", "w")
    words = read_words_of(data("similarity.bin"))
    sources = [[data("similarity.fifu")], [data("similarity.bin")], [data("similarity.txt")],
               [archive, "w", "--tag", "raw"], [archive, "w", "--tag", "norm"],
               [archive, "w", "--tag", "fifu"]]
    for query in (["embed", *words], ["similar", "Berlin", "-k", "40"],
                  ["similar", "Bonn", "-k", "40", "--json"],
                  ["analogy", "Berlin", "Potsdam", "Hamburg", "-k", "40"]):
        outputs = [run(query[0], *s, *query[1:]).stdout for s in sources]
        assert all(o == outputs[0] for o in outputs), query
    got = json.loads(run("embed", data("similarity.fifu"), *words, "--json").stdout)
    assert len(got) == len(words) == 41
    for word in words:
        assert abs(np.linalg.norm(got[word]) - 1) < 1e-6, word


def read_words_of(word2vec_path):
    """The words of a word2vec binary file, read with plain Python."""
    raw = open(word2vec_path, "rb").read()
    header, rest = raw.split(b"\n", 1)
    rows, dims = map(int, header.split())
    words, pos = [], 0
    for _ in range(rows):
        space = rest.index(b" ", pos)
        words.append(rest[pos:space].strip().decode())
        pos = space + 1 + 4 * dims
    return words
