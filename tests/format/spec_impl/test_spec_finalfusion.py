"""schemas/FINALFUSION.md is exact enough for a second implementation:
spec_finalfusion, written from it alone, reads the real finalfusion files,
the files modelzip writes and `.fifu` parameters inside archives, and gives
the same words, matrix, norms, metadata and lookups as modelzip."""
import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_finalfusion as sf  # noqa: E402
import spec_reader  # noqa: E402

modelzip = pytest.importorskip("modelzip")

FINALFUSION = Path(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata")) / "finalfusion"
REAL = sorted(FINALFUSION.glob("*.fifu"))

# Known words are added per file; these are unknown to every file: ASCII,
# non-ASCII (2- and 3-byte UTF-8, sign extension of §4.3), one and two
# characters (shorter than most n-grams), the empty word.
UNKNOWN = ["Berlinx", "xyzzy", "über", "Straße", "日本語", "a", "zz", "", "<>", "Ber<lin>"]


def test_the_real_files_are_there():
    assert len(REAL) >= 7, f"no finalfusion files in {FINALFUSION} (../shared beside the clone)"


def agree(spec, emb, extra_words=()):
    """spec (a spec_finalfusion.Fifu) and emb (modelzip.Embeddings) agree."""
    assert spec.words == emb.words
    assert spec.vocab.kind == emb.vocab_kind
    assert spec.quantized == emb.quantized
    assert spec.metadata == emb.metadata
    assert spec.matrix.shape == (emb.rows, emb.dims)
    if emb.quantized:
        # Reconstruction (§6.2) is a sum of products: float rounding aside.
        np.testing.assert_allclose(spec.matrix, emb.dequantize().matrix, rtol=1e-5, atol=1e-6)
    else:
        assert spec.matrix.tobytes() == np.asarray(emb.matrix).tobytes()
    if spec.norms is None:
        assert emb.norms is None
    else:
        assert spec.norms.tobytes() == np.asarray(emb.norms, np.float32).tobytes()
    looked_up = 0
    for word in [*spec.words[:20], *extra_words, *UNKNOWN]:
        mine, theirs = spec.embedding(word), emb.embedding(word)
        assert (mine is None) == (theirs is None), word
        if mine is not None:
            looked_up += 1
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6, err_msg=word)
            np.testing.assert_allclose(spec.norm(word), emb.norm(word), rtol=1e-5, atol=1e-6)
        else:
            assert emb.norm(word) is None
    return looked_up


def same_ranking(mine, theirs):
    assert (mine is None) == (theirs is None)
    if mine is not None:
        assert [w for w, _ in mine] == [w for w, _ in theirs]
        np.testing.assert_allclose([s for _, s in mine], [s for _, s in theirs], atol=1e-5)


def test_similar_ties_by_word_and_nan_skipped():
    # §8: equal scores ordered by the words' bytes; a NaN score is skipped.
    words = ["b", "a", "\u00e9", "Z", "n", "q"]
    matrix = np.array([[1, 0], [2, 0], [1, 0], [3, 0], [np.nan, 0], [0, 1]], np.float32)
    vocab = (sf.SIMPLE, struct.pack("<Q", len(words)) + b"".join(map(string, words)))
    data = fifu(vocab, ndarray(matrix))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert [w for w, _ in spec.similar("q", 10)] == ["Z", "a", "b", "\u00e9"]
    for word in words:
        same_ranking(spec.similar(word, 10), emb.similar(word, 10))
    assert [w for w, _ in emb.similar("q", 3)] == ["Z", "a", "b"]
    assert "n" not in [w for w, _ in emb.similar("b", 10)]


def chunk_bodies(data):
    """{chunk id: absolute offset of its body}, from the frames (§2)."""
    (count,) = struct.unpack_from("<I", data, 8)
    pos, bodies = 12 + 4 * count, {}
    while pos < len(data):
        cid, length = struct.unpack_from("<IQ", data, pos)
        bodies[cid] = pos + 12
        pos += 12 + length
    return bodies


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_files(path):
    data = path.read_bytes()
    spec = sf.read(data)
    emb = modelzip.Embeddings.from_bytes(data)
    agree(spec, emb)
    if spec.vocab.kind != "simple":
        # Unknown words reach rows through subwords, as modelzip computes them.
        assert any(spec.embedding(w) is not None for w in UNKNOWN)
    # What modelzip writes back reads the same.
    agree(sf.read(emb.to_bytes()), emb)
    # §8 queries: the same words in the same order, scores to f32 rounding.
    words = spec.words
    for word in [*words[:10], "Berlinx"]:
        same_ranking(spec.similar(word, 8), emb.similar(word, 8))
    for i in range(0, min(len(words), 12) - 2, 3):
        same_ranking(spec.analogy(*words[i:i + 3], 5), emb.analogy(*words[i:i + 3], 5))


def test_fasttext_vocabulary_converted_from_a_real_fasttext_model():
    emb = modelzip.Embeddings.load(FINALFUSION / "fasttext.bin", "fasttext")
    assert emb.vocab_kind == "fasttext_subwords"
    spec = sf.read(emb.to_bytes())
    assert agree(spec, emb) > len(spec.words[:20])


@pytest.mark.parametrize("rotation", [False, True])
def test_quantized_storage_with_projection_and_norms(rotation):
    dense = modelzip.Embeddings.open(FINALFUSION / "similarity.fifu")
    emb, _ = dense.quantize(n_subquantizers=5, n_centroids=16, n_iterations=3,
                            normalize=True, random_rotation=rotation)
    data = emb.to_bytes()
    flags = struct.unpack_from("<II", data, chunk_bodies(data)[sf.QUANTIZED])
    assert flags[0] == int(rotation) and flags[1] == 1
    agree(sf.read(data), emb)


# Files written here by the chapter's layout (§1 - §7), for the vocabularies
# no real file has: modelzip must read them as spec_finalfusion does.


def string(s):
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def fifu(*chunks, listed=None):
    ids = [cid for cid, _ in chunks] if listed is None else listed
    out = bytearray(b"FiFu" + struct.pack("<II", 0, len(ids)) + struct.pack(f"<{len(ids)}I", *ids))
    for cid, body in chunks:
        # The body's padding depends on its absolute position (§2).
        body = body(len(out) + 12) if callable(body) else body
        out += struct.pack("<IQ", cid, len(body)) + body
    return bytes(out)


def ndarray(matrix):
    def body(pos):
        head = struct.pack("<QII", *matrix.shape, sf.F32)
        pad = 4 - (pos + len(head)) % 4
        return head + bytes(pad) + matrix.astype("<f4").tobytes()
    return sf.NDARRAY, body


def ndnorms(norms):
    def body(pos):
        head = struct.pack("<QI", len(norms), sf.F32)
        return head + bytes(4 - (pos + len(head)) % 4) + norms.astype("<f4").tobytes()
    return sf.NDNORMS, body


rng = np.random.default_rng(4141)
WORDS = ["Berlin", "Paris", "über", "日本"]


def test_explicit_ngram_table_with_shared_and_sparse_indices():
    # Stored indices 7, 3, 7, 100: renumbered 0, 1, 0, 2 (§4.4): 3 rows.
    table = [("<Be", 7), ("rli", 3), ("ber", 7), ("Str", 100)]
    vocab = (struct.pack("<QQII", len(WORDS), len(table), 3, 3) + b"".join(map(string, WORDS))
             + b"".join(string(g) + struct.pack("<Q", i) for g, i in table))
    matrix = rng.standard_normal((len(WORDS) + 3, 6)).astype(np.float32)
    data = fifu((sf.METADATA, b"[common_config]\ndims = 6\n"), (sf.EXPLICIT, vocab),
                ndarray(matrix), ndnorms(rng.random(len(WORDS)).astype(np.float32)))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert spec.vocab.rows() == len(WORDS) + 3
    # "<Berxrli>": "<Be" and "rli" (rows 0 and 1); "Straber": "Str" and "ber".
    assert agree(spec, emb, ["Berxrli", "Straber", "<Be"]) >= len(WORDS) + 2
    assert spec.embedding("qqq") is None


@pytest.mark.parametrize("n_hashes", [1, 2, 3, 4])
def test_floret_vocabulary(n_hashes):
    n_buckets = 13
    vocab = struct.pack("<IIQII", 2, 4, n_buckets, n_hashes, 2166136261) + string("<") + string(">")
    matrix = rng.standard_normal((n_buckets, 5)).astype(np.float32)
    data = fifu((sf.FLORET, vocab), ndarray(matrix))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    # MurmurHash3 on more than one 16-byte block, with every tail length.
    long = ["abcdefghijklmnopqrstuvwxyz"[:n] for n in range(1, 27)]
    assert agree(spec, emb, long) >= len(UNKNOWN) + len(long) - 1


def test_bucket_vocabulary_with_unlisted_norms_and_four_byte_padding():
    words = ["one", "two", "three"]
    vocab = struct.pack("<QIII", len(words), 1, 4, 3) + b"".join(map(string, words))
    matrix = rng.standard_normal((len(words) + 8, 4)).astype(np.float32)
    chunks = [(sf.BUCKET, vocab), ndarray(matrix), ndnorms(np.arange(1, 4, dtype=np.float32))]
    data = fifu(*chunks, listed=[sf.BUCKET, sf.NDARRAY])
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert agree(spec, emb) > len(words)


def test_fasttext_vocabulary_with_one_grams():
    # min_n = 1: the 1-grams "<" and ">" of the brackets are left out (§4.3),
    # a "<" or ">" inside the word is not.
    words = ["one", "two"]
    vocab = struct.pack("<QIII", len(words), 1, 2, 17) + b"".join(map(string, words))
    matrix = rng.standard_normal((len(words) + 17, 3)).astype(np.float32)
    data = fifu((sf.FASTTEXT, vocab), ndarray(matrix))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert agree(spec, emb, ["x", "<", ">", "a>b"]) == len(words) + len(UNKNOWN) + 4


def test_lookups_compute_in_f32():
    # §8: the norm of a sum of rows of 1e20 overflows in f32 (squares of
    # 1e40), so the normalized vector is zero; in f64 it would be unit length.
    words = ["one"]
    vocab = struct.pack("<QIII", len(words), 3, 3, 2) + b"".join(map(string, words))
    matrix = np.full((len(words) + 4, 3), 1e20, np.float32)
    data = fifu((sf.BUCKET, vocab), ndarray(matrix))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert not np.any(emb.embedding("two")) and emb.norm("two") == np.inf
    agree(spec, emb, ["two"])
    # floret's mean: the f32 sum in the order of §4.5 divided by the count,
    # the same bits.
    vocab = struct.pack("<IIQII", 2, 4, 7, 3, 5) + string("<") + string(">")
    data = fifu((sf.FLORET, vocab), ndarray(rng.standard_normal((7, 4)).astype(np.float32)))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    for word in ["Kopenhagen", "über", "x"]:
        assert spec.embedding(word).tobytes() == emb.embedding(word).tobytes()


def test_metadata_with_a_byte_order_mark_is_kept():
    # §7: the TOML is parsed after a leading U+FEFF, the text kept as written.
    vocab = (sf.SIMPLE, struct.pack("<Q", 1) + string("a"))
    text = "\ufeff[common_config]\ndims = 2\n"
    data = fifu((sf.METADATA, text.encode()), vocab, ndarray(np.ones((1, 2), np.float32)))
    spec, emb = sf.read(data), modelzip.Embeddings.from_bytes(data)
    assert spec.metadata == emb.metadata == text
    agree(spec, emb)
    assert sf.read(emb.to_bytes()).metadata == text


@pytest.mark.parametrize("case", ["header list", "padding 0", "duplicate word", "code >= K",
                                  "rows", "version", "chunk id"])
def test_both_reject(case):
    words = ["a", "b"]
    vocab = (sf.SIMPLE, struct.pack("<Q", 2) + b"".join(map(string, words)))
    matrix = np.ones((2, 3), np.float32)
    data = {
        "header list": lambda: fifu(vocab, ndarray(matrix), listed=[sf.NDARRAY, sf.SIMPLE]),
        "padding 0": lambda: fifu(vocab, (sf.NDARRAY, struct.pack("<QII", 2, 3, sf.F32)
                                          + matrix.tobytes())),
        "duplicate word": lambda: fifu((sf.SIMPLE, struct.pack("<Q", 2) + string("a") * 2),
                                       ndarray(matrix)),
        "code >= K": lambda: fifu(vocab, (sf.QUANTIZED, lambda pos: (
            struct.pack("<IIIIIQII", 0, 0, 1, 3, 2, 2, sf.U8, sf.F32)
            + bytes(4 - (pos + 40) % 4) + np.ones(6, "<f4").tobytes() + bytes([0, 2])))),
        "rows": lambda: fifu(vocab, ndarray(np.ones((3, 3), np.float32))),
        "version": lambda: fifu(vocab, ndarray(matrix)).replace(b"FiFu\0", b"FiFu\1", 1),
        "chunk id": lambda: fifu(vocab, ndarray(matrix), listed=[sf.SIMPLE, 11]),
    }[case]()
    with pytest.raises(sf.SpecError) as mine:
        sf.read(data)
    with pytest.raises(modelzip.Error) as theirs:
        modelzip.Embeddings.from_bytes(data)
    # §9: which failures are `unsupported`, every other one is `corrupt`.
    assert theirs.value.code == ("unsupported" if mine.type is sf.Unsupported else "corrupt")
    assert theirs.value.code == ("unsupported" if case in ("version", "chunk id") else "corrupt")


def test_embedding_parameter_read_in_place_from_the_archive(tmp_path):
    path = tmp_path / "emb.zip"
    words = modelzip.Embeddings.open(FINALFUSION / "ff_buckets.fifu")
    dense = modelzip.Embeddings.open(FINALFUSION / "similarity.fifu")
    modelzip.save(path, "t", {"words": words, "w": np.arange(3, dtype=np.float32)})
    with modelzip.Writer(path) as w:
        w.add_tag("u", {"similar": dense}, share={"words": ("t", "words")})
    archive = spec_reader.SpecArchive(path)
    archive.verify()
    assert [entry for name, entry in archive.params["u"] if name == "words"] == ["t/params/0.fifu"]
    read = spec_reader.read(path)
    with modelzip.open(path) as mz:
        for tag, name in [("t", "words"), ("u", "words"), ("u", "similar")]:
            assert isinstance(read[tag][name], sf.Fifu)
            agree(read[tag][name], mz.embeddings(name, tag))
    # In place: the entry is the file modelzip writes, stored, its data at a
    # multiple of 64 (FORMAT.md §1, §7), so the f32 data is aligned in a mapping.
    entry = dict(archive.params["t"])["words"]
    assert archive.read_entry(entry) == words.to_bytes()
    e = archive.entries[entry]
    assert e.method == 0 and e.data_start % 64 == 0
