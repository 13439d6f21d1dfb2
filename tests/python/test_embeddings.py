"""Embeddings: lookups and queries checked against numpy on the shared real files (parsed here
independently), converters, quantization, and embedding parameters in archives."""
import numpy as np
import pytest

import modelzip
from conftest import save


def read_word2vec(path):
    """An independent word2vec binary reader: words and float32 rows."""
    data = path.read_bytes()
    header, rest = data.split(b"\n", 1)
    rows, dims = map(int, header.split())
    words, vectors, pos = [], [], 0
    for _ in range(rows):
        space = rest.index(b" ", pos)
        words.append(rest[pos:space].decode().strip())
        vectors.append(np.frombuffer(rest, "<f4", dims, space + 1))
        pos = space + 1 + 4 * dims
        if rest[pos:pos + 1] == b"\n":
            pos += 1
    return words, np.array(vectors)


def cosine_top(matrix, words, query, k, skip):
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    q = query / np.linalg.norm(query)
    sims = unit @ q
    order = [i for i in np.argsort(-sims, kind="stable") if words[i] not in skip]
    return [(words[i], float(sims[i])) for i in order[:k]]


def assert_similarities(got, expected):
    assert [w for w, _ in got] == [w for w, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], rtol=1e-5)


def test_word2vec_lookups_and_similarity_match_numpy(finalfusion_dir):
    words, vectors = read_word2vec(finalfusion_dir / "similarity.bin")
    emb = modelzip.Embeddings.load(finalfusion_dir / "similarity.bin", "word2vec")
    assert emb.words == words and len(emb) == len(words) and emb.dims == vectors.shape[1]
    norms = np.linalg.norm(vectors, axis=1)
    np.testing.assert_allclose(emb.norms, norms, rtol=1e-6)
    np.testing.assert_allclose(emb.matrix, vectors / norms[:, None], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(emb["Berlin"], vectors[0] / norms[0], rtol=1e-5, atol=1e-7)
    assert emb.word_index("Hamburg") == words.index("Hamburg")
    assert emb.embedding("NotAWord") is None and "NotAWord" not in emb and "Berlin" in emb
    with pytest.raises(KeyError):
        emb["NotAWord"]
    assert emb.norm("Berlin") == pytest.approx(norms[0], rel=1e-6)
    assert_similarities(emb.similar("Berlin", 10),
                        cosine_top(vectors, words, vectors[0], 10, {"Berlin"}))
    query = vectors[3] + vectors[4]
    assert_similarities(emb.similar_to(query, 5, skip=["Leipzig"]),
                        cosine_top(vectors, words, query, 5, {"Leipzig"}))
    assert emb.similar("NotAWord") is None
    with pytest.raises(ValueError, match="100 floats"):
        emb.similar_to(np.zeros(3))


def test_analogy_matches_numpy(finalfusion_dir):
    words, vectors = read_word2vec(finalfusion_dir / "analogy.bin")
    emb = modelzip.Embeddings.load(finalfusion_dir / "analogy.bin", "word2vec")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    a, b, c = (unit[words.index(w)] for w in ("Paris", "Frankreich", "Berlin"))
    expected = cosine_top(vectors, words, b - a + c, 5, {"Paris", "Frankreich", "Berlin"})
    assert_similarities(emb.analogy("Paris", "Frankreich", "Berlin", 5), expected)
    assert expected[0][0] == "Deutschland"
    assert emb.analogy("Paris", "Frankreich", "NotAWord") is None


def test_finalfusion_files_and_batch_lookup(finalfusion_dir):
    fifu = modelzip.Embeddings.open(finalfusion_dir / "similarity.fifu")
    words, vectors = read_word2vec(finalfusion_dir / "similarity.bin")
    assert fifu.words == words and fifu.vocab_kind == "simple" and not fifu.quantized
    assert not fifu.matrix.flags.writeable
    matrix, found = fifu.embeddings(["Berlin", "NotAWord", "Dresden"])
    assert matrix.shape == (3, 100) and found.tolist() == [True, False, True]
    np.testing.assert_array_equal(matrix[0], fifu["Berlin"])
    assert not matrix[1].any()
    buckets = modelzip.Embeddings.open(finalfusion_dir / "ff_buckets.fifu")
    assert buckets.vocab_kind == "bucket_subwords" and buckets.rows > len(buckets)
    assert buckets.embedding("unseenword") is not None  # from its subwords
    assert "dims = 5" in buckets.metadata
    pq = modelzip.Embeddings.open(finalfusion_dir / "pq.fifu")
    assert pq.quantized and pq.matrix is None
    dense = pq.dequantize()
    assert not dense.quantized and dense.matrix.shape == (41, 100)
    np.testing.assert_allclose(dense.matrix[5], pq.embedding(pq.words[5]), rtol=1e-6)


def test_from_matrix_save_and_convert(tmp_path):
    words = ["cat", "dog", "car", "bus"]
    matrix = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 0, 1], [0, 0.2, 0.9]], np.float32)
    emb = modelzip.Embeddings.from_matrix(words, matrix)
    assert emb.similar("cat", 1)[0][0] == "dog" and emb.similar("car", 1)[0][0] == "bus"
    for fmt in ["finalfusion", "text", "textdims", "word2vec"]:
        path = tmp_path / f"e.{fmt}"
        emb.save(path, fmt)
        back = modelzip.Embeddings.load(path, fmt, normalize=False)
        assert back.words == words
        np.testing.assert_allclose(back.matrix, matrix, rtol=1e-6)
    text = (tmp_path / "e.text").read_text().splitlines()
    assert text[0].split()[0] == "cat" and [float(x) for x in text[0].split()[1:]] == [1, 0, 0]
    assert modelzip.Embeddings.from_bytes(emb.to_bytes()).words == words
    with pytest.raises(ValueError, match="unknown embedding format"):
        emb.save(tmp_path / "x", "glove")
    with pytest.raises(ValueError, match="rows for"):
        modelzip.Embeddings.from_matrix(["a"], matrix)


def test_broken_files_raise_error_with_offset(finalfusion_dir, tmp_path):
    data = (finalfusion_dir / "similarity.fifu").read_bytes()
    for cut in (3, 20, len(data) // 2, len(data) - 1):
        with pytest.raises(modelzip.Error) as e:
            modelzip.Embeddings.from_bytes(data[:cut])
        assert e.value.code == "corrupt"
    with pytest.raises(modelzip.Error) as e:
        modelzip.Embeddings.load(finalfusion_dir / "utf8-incomplete.txt", "text")
    assert e.value.code == "corrupt" and e.value.line is not None
    lossy = modelzip.Embeddings.load(finalfusion_dir / "utf8-incomplete.txt", "text", lossy=True)
    assert any("\ufffd" in w for w in lossy.words)


def test_quantize(finalfusion_dir):
    emb = modelzip.Embeddings.open(finalfusion_dir / "similarity.fifu")
    pq, mse = emb.quantize(n_subquantizers=10, n_centroids=16, n_iterations=5)
    pq2, mse2 = emb.quantize(n_subquantizers=10, n_centroids=16, n_iterations=5)
    assert pq.quantized and 0 < mse < 1 and mse == mse2  # deterministic for a seed
    recon = pq.dequantize().matrix
    # The reported error is the mean squared difference of the storage rows.
    assert np.mean((recon - emb.matrix) ** 2) == pytest.approx(mse, rel=1e-3)


def test_embedding_parameters_in_an_archive(archive_path, finalfusion_dir):
    emb = modelzip.Embeddings.open(finalfusion_dir / "similarity.fifu")
    save(archive_path, "t", {"words": emb, "w": np.ones(2)})
    with modelzip.open(archive_path) as ar:
        info = ar.param("words")
        assert info.kind == "embedding" and info.dtype == "float32"
        assert info.shape == (emb.rows, emb.dims) and emb.rows == len(emb)  # as modelzip ls shows it
        assert list(ar.load()) == ["w"]  # embedding parameters are not tensors
        a, b = ar.embeddings("words"), ar.embeddings("words")
        with pytest.raises(modelzip.Error, match="embedding"):
            ar.tensor("words")
    assert np.shares_memory(a.matrix, b.matrix)  # zero-copy views of the mapped archive
    np.testing.assert_array_equal(a.matrix, emb.matrix)
    assert a.similar("Berlin", 3) == emb.similar("Berlin", 3)
    # Deduplicated like any blob.
    stats = save(archive_path, "t2", {"words": emb})
    assert stats.blobs_deduplicated == 1


# embeddings.fifu and ff_buckets.fifu (subwords, metadata) have norms their header does not list,
# which an encoding would list: their bytes show whether a save re-encoded them.
UNCHANGED_FILES = ["embeddings.fifu", "ff_buckets.fifu", "pq.fifu", "similarity-normalized.fifu"]


@pytest.mark.parametrize("name", UNCHANGED_FILES)
def test_embeddings_read_from_a_file_or_an_archive_are_saved_as_their_bytes(
        archive_path, finalfusion_dir, tmp_path, name):
    import zipfile
    original = (finalfusion_dir / name).read_bytes()
    emb = modelzip.Embeddings.open(finalfusion_dir / name)
    assert emb.to_bytes() == original
    for normalize in (False, True):  # a finalfusion file keeps rows as stored either way
        emb.save(tmp_path / "again.fifu", normalize=normalize)
        assert (tmp_path / "again.fifu").read_bytes() == original
    save(archive_path, "t", {"emb": emb})
    with modelzip.open(archive_path) as ar:
        stored = ar.embeddings("emb")
        blob = ar.param("emb").blob
    with zipfile.ZipFile(archive_path) as z:
        assert z.read(blob) == original
    # Read back from the archive and saved again (no dedup: an entry of its own).
    save(archive_path, "t2", {"emb": stored}, dedup=False)
    stored.save(tmp_path / "stored.fifu")
    assert (tmp_path / "stored.fifu").read_bytes() == original
    with modelzip.open(archive_path) as ar:
        again = ar.param("emb", "t2")
        assert not again.shared
    with zipfile.ZipFile(archive_path) as z:
        assert z.read(again.blob) == original


def test_embeddings_changed_or_made_are_encoded(archive_path, finalfusion_dir, tmp_path):
    import zipfile
    pq_file = finalfusion_dir / "pq.fifu"
    dense = modelzip.Embeddings.open(pq_file).dequantize()
    dense.save(tmp_path / "dense.fifu")
    again = modelzip.Embeddings.open(tmp_path / "dense.fifu")
    assert not again.quantized and dense.to_bytes() == (tmp_path / "dense.fifu").read_bytes()
    np.testing.assert_array_equal(again.matrix, dense.matrix)
    buckets = modelzip.Embeddings.open(finalfusion_dir / "ff_buckets.fifu")
    pq, _ = buckets.quantize(n_subquantizers=5, n_centroids=4, n_iterations=2)
    save(archive_path, "t", {"pq": pq})
    with modelzip.open(archive_path) as ar:
        blob = ar.param("pq").blob
    with zipfile.ZipFile(archive_path) as z:
        data = z.read(blob)
    assert data == pq.to_bytes() and data != (finalfusion_dir / "ff_buckets.fifu").read_bytes()
    read = modelzip.Embeddings.from_bytes(data)
    assert read.quantized and read.words == buckets.words


def test_a_deflated_embedding_parameter_has_its_shape(archive_path, finalfusion_dir, tmp_path):
    import zipfile
    emb = modelzip.Embeddings.open(finalfusion_dir / "ff_buckets.fifu")
    save(archive_path, "t", {"words": emb})
    deflated = tmp_path / "deflated.zip"  # every entry rewritten deflated by another tool
    with zipfile.ZipFile(archive_path) as src, zipfile.ZipFile(deflated, "w") as dst:
        for item in src.infolist():
            dst.writestr(item.filename, src.read(item), zipfile.ZIP_DEFLATED)
    with modelzip.open(deflated) as ar:
        info = ar.param("words")
        assert info.compressed and info.shape == (emb.rows, emb.dims)
        assert [p.shape for p in ar.params()] == [(emb.rows, emb.dims)]


def test_matrix_view_keeps_the_archive_mapping_alive(archive_path, finalfusion_dir):
    import gc
    emb = modelzip.Embeddings.open(finalfusion_dir / "similarity.fifu")
    expected = np.array(emb.matrix)
    save(archive_path, "t", {"words": emb})
    ar = modelzip.open(archive_path)
    matrix = ar.embeddings("words").matrix
    ar.close()
    del ar
    gc.collect()
    assert not matrix.flags.writeable
    np.testing.assert_array_equal(matrix, expected)


def test_utf8_policies(finalfusion_dir, tmp_path):
    path = finalfusion_dir / "utf8-incomplete.txt"
    with pytest.raises(modelzip.Error, match="not valid UTF-8"):
        modelzip.Embeddings.load(path, "text")
    with pytest.warns(UnicodeWarning, match="1 word"):
        lossy = modelzip.Embeddings.load(path, "text", utf8="lossy")
    assert sum("\ufffd" in w for w in lossy.words) == 1
    escaped = modelzip.Embeddings.load(path, "text", utf8="escape")
    # The invalid byte 0xC3 (a lead byte followed by "n") as \xc3.
    assert "zee\\xc3n" in escaped.words
    assert escaped.embedding("zee\\xc3n") is not None
    escaped.save(tmp_path / "back.txt", "text", normalize=False)
    original = open(path, "rb").read().split(b"\n")
    back = (tmp_path / "back.txt").read_bytes().split(b"\n")
    assert [l.split(b" ")[0] for l in back] == [l.split(b" ")[0] for l in original]
    with pytest.raises(ValueError, match="strict, lossy, escape"):
        modelzip.Embeddings.load(path, "text", utf8="latin1")
    with pytest.raises(ValueError, match="contradicts"):
        modelzip.Embeddings.load(path, "text", lossy=True, utf8="escape")


def test_fasttext_quantized_and_supervised_models():
    # Seeds of the fastText fuzz corpus, trained by the real fasttext tool
    # (supervised, -dim 4, quantized with -qnorm; and -minn 2 -maxn 3).
    from conftest import SOURCE_DIR
    corpus = SOURCE_DIR / "tests" / "fuzz" / "corpus" / "fasttext"
    ftz = modelzip.Embeddings.load(corpus / "supervised-qnorm.ftz", "fasttext")
    assert ftz.quantized and ftz.vocab_kind == "simple" and ftz.matrix is None
    assert not any(w.startswith("__label__") for w in ftz.words)
    assert abs(np.linalg.norm(ftz.embedding("cat")) - 1) < 1e-5
    dense = modelzip.Embeddings.load(corpus / "supervised.bin", "fasttext")
    assert dense.words == ftz.words and not dense.quantized
    ngrams = modelzip.Embeddings.load(corpus / "supervised-ngrams.ftz", "fasttext")
    assert ngrams.vocab_kind == "fasttext_subwords" and not ngrams.quantized
    assert ngrams.embedding("catdogx") is not None  # unknown: through its n-grams


def test_reading_an_embedding_as_a_tensor_names_the_python_call(archive_path, finalfusion_dir):
    save(archive_path, "t", {"words": modelzip.Embeddings.open(finalfusion_dir / "similarity.fifu")})
    with modelzip.open(archive_path) as ar:
        for read in (lambda: ar.tensor("words"), lambda: ar.tensor("words", "t"),
                     lambda: ar.load(names=["words"])):
            with pytest.raises(modelzip.InvalidArgumentError) as e:
                read()
            assert "parameter 'words' is an embedding, not a tensor" in str(e.value)
            assert "Archive.embeddings('words')" in str(e.value)
            assert "embedding_file()" not in str(e.value)  # the C++ call


def test_a_model_of_another_format_raises_error_with_escaped_bytes(finalfusion_dir):
    # The fastText magic number read as a word2vec header: bytes that are not
    # UTF-8 (and a NUL) are quoted as escapes, control characters too (as the
    # CLI shows them), and the error is modelzip's.
    with pytest.raises(modelzip.Error) as e:
        modelzip.Embeddings.load(finalfusion_dir / "fasttext.bin", "word2vec")
    assert e.value.code == "corrupt" and e.value.offset == 0
    assert "word2vec header: rows: '\\xba\\x16O/\\x0c' is not a number" in str(e.value)


def test_save_refuses_words_word2vec_and_text_cannot_hold(tmp_path):
    emb = modelzip.Embeddings.from_matrix(["Berlin", "New York"], np.ones((2, 3), np.float32))
    for name, fmt in (("a.txt", "text"), ("a.vec", "textdims"), ("a.bin", "word2vec")):
        with pytest.raises(modelzip.InvalidArgumentError) as e:
            emb.save(tmp_path / name, fmt)
        assert str(e.value).startswith(f"{tmp_path / name}: word 1 'New York' cannot be written")
        assert not (tmp_path / name).exists()
    emb.save(tmp_path / "a.fifu")
    assert modelzip.Embeddings.open(tmp_path / "a.fifu").words == ["Berlin", "New York"]


def test_save_refuses_values_that_are_not_finite(tmp_path):
    # save() wrote "NaN" / "inf", which fastText's .vec reader does not parse (it silently read
    # that vector and every later one wrong) and which load() refuses unless normalize=False.
    matrix = np.array([[1, 2], [3, np.nan]], np.float32)
    emb = modelzip.Embeddings.from_matrix(["ok", "bad"], matrix)
    for name, fmt in (("a.txt", "text"), ("a.vec", "textdims"), ("a.bin", "word2vec")):
        with pytest.raises(modelzip.InvalidArgumentError) as e:
            emb.save(tmp_path / name, fmt)
        assert str(e.value).startswith(
            f"{tmp_path / name}: row 1 ('bad'): component 2 is NaN, which word2vec and text "
            "files do not hold"), str(e.value)
        assert not (tmp_path / name).exists()
    emb.save(tmp_path / "a.fifu")
    again = modelzip.Embeddings.open(tmp_path / "a.fifu")
    assert again["ok"].tolist() == [1, 2] and np.isnan(again["bad"][1])


@pytest.mark.parametrize("fmt,name", [("text", "e.txt"), ("textdims", "e.vec"),
                                      ("word2vec", "e.bin")])
def test_save_writes_the_vectors_export_writes(finalfusion_dir, tmp_path, fmt, name):
    # save() wrote the stored unit rows while `modelzip export` of the same embeddings wrote
    # the original vectors (rows times norms): one file, two different sets of vectors.
    import os
    import subprocess
    emb = modelzip.Embeddings.load(finalfusion_dir / "similarity.bin", "word2vec")
    assert emb.norms is not None
    emb.save(tmp_path / ("py-" + name), fmt)
    modelzip.save(tmp_path / "a.zip", "v1", {"words": emb})
    subprocess.run([os.environ["MODELZIP_CLI"], "export", str(tmp_path / "a.zip"), "words",
                    str(tmp_path / ("cli-" + name))], check=True, capture_output=True)
    assert (tmp_path / ("py-" + name)).read_bytes() == (tmp_path / ("cli-" + name)).read_bytes()
    back = modelzip.Embeddings.load(tmp_path / ("py-" + name), fmt, normalize=False)
    np.testing.assert_allclose(back.matrix, emb.matrix * emb.norms[:, None], rtol=1e-6)
    assert abs(np.linalg.norm(back.matrix[0]) - emb.norms[0]) < 1e-4 * emb.norms[0]
    # normalize=True: the stored unit rows, as export --normalized writes them.
    emb.save(tmp_path / ("unit-" + name), fmt, normalize=True)
    subprocess.run([os.environ["MODELZIP_CLI"], "export", str(tmp_path / "a.zip"), "words",
                    str(tmp_path / ("cli-unit-" + name)), "--normalized"], check=True,
                   capture_output=True)
    assert (tmp_path / ("unit-" + name)).read_bytes() == \
        (tmp_path / ("cli-unit-" + name)).read_bytes()


def test_save_takes_normalize_as_the_rest_of_the_api_and_unnormalize_with_a_warning(
        finalfusion_dir, tmp_path):
    # Embeddings.save took unnormalize= (True: original vectors), the opposite of load()'s
    # normalize= and C++ WriteOptions{.normalize}; normalize= raised TypeError.
    emb = modelzip.Embeddings.load(finalfusion_dir / "similarity.bin", "word2vec")
    unit = emb.matrix[0] / np.linalg.norm(emb.matrix[0])
    emb.save(tmp_path / "unit.txt", "text", normalize=True)
    emb.save(tmp_path / "vectors.txt", "text", normalize=False)
    emb.save(tmp_path / "default.txt", "text")
    first = [np.array(line.split()[1:], dtype=np.float32) for line in (
        (tmp_path / n).read_text().splitlines()[0] for n in ("unit.txt", "vectors.txt"))]
    np.testing.assert_allclose(first[0], unit, rtol=1e-5)
    np.testing.assert_allclose(first[1], unit * emb.norms[0], rtol=1e-5)
    assert (tmp_path / "default.txt").read_bytes() == (tmp_path / "vectors.txt").read_bytes()
    # The old keyword, with the old meaning and a DeprecationWarning naming the new one.
    for unnormalize, same_as in ((False, "unit.txt"), (True, "vectors.txt")):
        with pytest.warns(DeprecationWarning, match=r"unnormalize= is deprecated.*normalize="):
            emb.save(tmp_path / "old.txt", "text", unnormalize=unnormalize)
        assert (tmp_path / "old.txt").read_bytes() == (tmp_path / same_as).read_bytes()
    with pytest.raises(TypeError, match="normalize= or .*unnormalize=, not both"):
        emb.save(tmp_path / "both.txt", "text", normalize=True, unnormalize=False)
    assert not (tmp_path / "both.txt").exists()
    with pytest.raises(TypeError, match="'unnormalize' must be bool, not str"):
        emb.save(tmp_path / "bad.txt", "text", unnormalize="no")


def test_queries_agree_whether_rows_are_stored_normalized_or_as_read(finalfusion_dir):
    # analogy combined raw vectors when the rows were kept as read (normalize=False) and unit
    # vectors otherwise, and ranked differently; similar differed in the last bits.
    path = finalfusion_dir / "analogy.bin"
    unit = modelzip.Embeddings.load(path, "word2vec")
    raw = modelzip.Embeddings.load(path, "word2vec", normalize=False)
    assert unit.norms is not None and raw.norms is None
    assert raw.analogy("Berlin", "Deutschland", "Paris", 5) == \
        unit.analogy("Berlin", "Deutschland", "Paris", 5)
    assert raw.similar("Berlin", 20) == unit.similar("Berlin", 20)
    assert raw.unit_embedding("Berlin").tobytes() == unit.unit_embedding("Berlin").tobytes()
    np.testing.assert_array_equal(unit.unit_embedding("Berlin"), unit["Berlin"])
    assert abs(np.linalg.norm(raw.unit_embedding("Paris")) - 1) < 1e-6
    assert raw.unit_embedding("no-such-word") is None
