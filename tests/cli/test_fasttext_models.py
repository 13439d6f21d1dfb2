"""Real fastText models, trained here by Debian's `fasttext` tool on a small
generated corpus, read by modelzip (import, and embed/similar on the files
themselves) and compared with the tool's own answers: `print-word-vectors`
for vectors, `nn` for neighbours. Covers skipgram with and without character
n-grams (-maxn 0), supervised models, quantized .ftz files (with and without
-qnorm, -cutoff pruning, odd -dsub layouts) and a model trained on Latin-1
text (the --utf8 policies)."""
import json
import os
import random
import shutil
import subprocess
import threading

import numpy as np
import pytest

from conftest import run

FASTTEXT = shutil.which("fasttext")

TOPICS = {
    "animal": "cat dog horse cow sheep goat mouse bird fish wolf".split(),
    "city": "paris berlin london rome madrid vienna prague oslo dublin lisbon".split(),
    "food": "bread cheese apple pear soup rice bean cake milk honey".split(),
}
GLUE = "the a and of in on with near big small".split()
# Latin-1 words: "café" and "cafè" differ only in their non-UTF-8 byte.
LATIN1 = ["caf\xe9", "caf\xe8", "na\xefve", "\xfcber", "gar\xe7on", "se\xf1or"]


def sentences(seed, count, extra=()):
    r = random.Random(seed)
    for _ in range(count):
        topic = r.choice(sorted(TOPICS))
        pool = TOPICS[topic] + list(extra)
        words = [r.choice(pool) if r.random() < 0.6 else r.choice(GLUE) for _ in range(12)]
        yield topic, words


def fasttext(*args, stdin=None):
    assert FASTTEXT, "Debian's fasttext tool is required (.ci/install-deps installs it)"
    p = subprocess.run([FASTTEXT, *map(str, args)], input=stdin, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


COMMON = ["-thread", "1", "-seed", "1", "-minCount", "1", "-verbose", "0", "-epoch", "3"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("fasttext")
    with open(d / "corpus.txt", "w") as f, open(d / "labelled.txt", "w") as g:
        for topic, words in sentences(7, 2000):
            f.write(" ".join(words) + "\n")
            g.write(f"__label__{topic} " + " ".join(words) + "\n")
    with open(d / "latin1.txt", "wb") as f:
        for _, words in sentences(8, 1500, LATIN1):
            f.write(" ".join(words).encode("latin-1") + b"\n")
    m = {}
    fasttext("skipgram", "-input", d / "corpus.txt", "-output", d / "sg", "-dim", "16",
             "-minn", "3", "-maxn", "5", "-bucket", "2000", *COMMON)
    m["sg"] = d / "sg.bin"
    fasttext("cbow", "-input", d / "corpus.txt", "-output", d / "sg0", "-dim", "12",
             "-maxn", "0", *COMMON)
    m["sg0"] = d / "sg0.bin"
    # Supervised: word bigrams in 1000 buckets, no character n-grams (the
    # default); quantized with -qnorm.
    fasttext("supervised", "-input", d / "labelled.txt", "-output", d / "sup", "-dim", "16",
             "-wordNgrams", "2", "-bucket", "1000", *COMMON)
    fasttext("quantize", "-input", d / "labelled.txt", "-output", d / "sup", "-qnorm",
             "-thread", "1", "-verbose", "0")
    m["sup"], m["sup.ftz"] = d / "sup.bin", d / "sup.ftz"
    # Supervised with character n-grams, dim 15: quantized with -dsub 2 (the
    # last sub-quantizer has 1 component), and a copy pruned with -cutoff.
    fasttext("supervised", "-input", d / "labelled.txt", "-output", d / "ng", "-dim", "15",
             "-minn", "2", "-maxn", "4", "-bucket", "1000", *COMMON)
    shutil.copy(d / "ng.bin", d / "ngcut.bin")
    fasttext("quantize", "-input", d / "labelled.txt", "-output", d / "ng", "-thread", "1",
             "-verbose", "0")
    fasttext("quantize", "-input", d / "labelled.txt", "-output", d / "ngcut", "-thread", "1",
             "-verbose", "0", "-cutoff", "500", "-dsub", "4", "-qnorm")
    m["ng"], m["ng.ftz"], m["ngcut.ftz"] = d / "ng.bin", d / "ng.ftz", d / "ngcut.ftz"
    fasttext("skipgram", "-input", d / "latin1.txt", "-output", d / "latin1", "-dim", "10",
             "-minn", "2", "-maxn", "4", "-bucket", "500", *COMMON)
    m["latin1"] = d / "latin1.bin"
    m["dir"] = d
    return m


def tool_vectors(model, words):
    """fastText's print-word-vectors: {word bytes: vector}."""
    out = fasttext("print-word-vectors", model, stdin=b"\n".join(words) + b"\n")
    vectors = {}
    for line in out.splitlines():
        parts = line.rstrip().split(b" ")
        vectors[parts[0]] = np.array([float(x) for x in parts[1:]])
    return vectors


def tool_neighbours(model, word, k):
    """fastText's nn: [(word, score)] (its query prompt is on stdout too)."""
    out = fasttext("nn", model, k, stdin=word + b"\n")
    pairs = []
    for line in out.splitlines():
        line = line.replace(b"Query word? ", b"").strip()
        if line:
            w, score = line.rsplit(b" ", 1)
            pairs.append((w, float(score)))
    return pairs


def escaped_form(raw):
    """The --utf8 escape form of raw bytes, by Python's own decoder (an
    independent reference): backslashes doubled, then every byte the UTF-8
    decoder rejects written as \\xNN."""
    return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def exported_vectors(path):
    """A text export (no dims line) read as bytes: {word bytes: vector}."""
    vectors = {}
    for line in path.read_bytes().splitlines():
        parts = line.split(b" ")
        vectors[parts[0]] = np.array([float(x) for x in parts[1:]])
    return vectors


def close(a, b):
    # print-word-vectors prints 5 significant digits.
    return np.allclose(a, b, rtol=2e-4, atol=2e-5 * max(1.0, float(np.abs(b).max())))


QUERIES = [b"cat", b"paris", b"bread", b"the", b"wolf"]


@pytest.mark.parametrize("name,kind,storage", [
    ("sg", "fasttext_subwords", "array"),
    ("sg0", "simple", "array"),
    ("sup", "simple", "array"),
    ("sup.ftz", "simple", "quantized"),
    ("ng", "fasttext_subwords", "array"),
    ("ng.ftz", "fasttext_subwords", "array"),
    ("ngcut.ftz", "fasttext_subwords", "array"),
])
def test_vectors_and_neighbours_match_fasttext(models, tmp_path, name, kind, storage):
    model = models[name]
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", model, "--name", "words")
    row = json.loads(run("ls", archive, "--json").stdout)[0]
    assert row["embedding"]["vocab"] == kind
    assert row["embedding"]["storage"] == storage
    # Vectors: the export restores fastText's (unnormalized) word vectors.
    run("export", archive, "words", tmp_path / "w.txt")
    ours = exported_vectors(tmp_path / "w.txt")
    theirs = tool_vectors(model, QUERIES)
    for w in QUERIES:
        assert close(ours[w], theirs[w]), (w, ours[w], theirs[w])
    # The stored rows are the same directions, unit length.
    got = json.loads(run("embed", model, *[w.decode() for w in QUERIES], "--json").stdout)
    for w in QUERIES:
        v = np.array(got[w.decode()])
        t = theirs[w] / np.linalg.norm(theirs[w])
        assert abs(np.linalg.norm(v) - 1) < 1e-5
        assert close(v, t)
    # Neighbours, from the archive and from the model file itself.
    for source in ([archive, "words"], [model]):
        for w in (b"cat", b"berlin"):
            expected = tool_neighbours(model, w, 5)
            ours = json.loads(run("similar", *source, w.decode(), "-k", "5", "--json").stdout)
            assert [o["word"].encode() for o in ours] == [e[0] for e in expected]
            for o, e in zip(ours, expected):
                assert abs(o["similarity"] - e[1]) < 1e-4


def test_unknown_words_through_subwords_match_fasttext(models):
    # An unknown word's vector is the mean of its n-gram rows in fastText;
    # modelzip returns the normalized sum: the same direction.
    for name in ("sg", "ng.ftz", "ngcut.ftz"):
        theirs = tool_vectors(models[name], [b"catdog", b"berlinx"])
        got = json.loads(run("embed", models[name], "catdog", "berlinx", "--json").stdout)
        for w in ("catdog", "berlinx"):
            t = theirs[w.encode()]
            assert close(np.array(got[w]), t / np.linalg.norm(t)), name


def test_supervised_labels_are_not_words(models):
    words = json.loads(run("similar", models["sup"], "cat", "-k", "100", "--json").stdout)
    assert words and not any(w["word"].startswith("__label__") for w in words)
    p = run("embed", models["sup"], "__label__city", check=False)
    assert p.returncode == 1


def test_import_help_lists_what_is_supported():
    text = run("import", "--help").stdout.decode()
    for needle in (".ftz", "supervised", "-maxn 0", "--utf8", "escape", "lossy"):
        assert needle in text, needle


def test_latin1_model_strict_refuses_lossy_explains_escape_keeps(models, tmp_path):
    model = models["latin1"]
    archive = tmp_path / "l.zip"
    p = run("import", archive, "--tag", "strict", model, check=False)
    assert p.returncode != 0
    assert b"not valid UTF-8" in p.stderr and b"escape" in p.stderr
    p = run("import", archive, "--tag", "lossy", model, "--utf8", "lossy", check=False)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert "lossy UTF-8 decoding" in err and "caf\ufffd" in err and "escape" in err
    p = run("import", archive, "--tag", "escape", model, "--utf8", "escape", "--name", "w")
    assert b"6 word(s) stored in the escaped form" in p.stderr
    # Both words survive, under their escaped names, with fastText's vectors.
    theirs = tool_vectors(model, [w.encode("latin-1") for w in LATIN1] + [b"cat"])
    got = json.loads(run("embed", archive, "w", "caf\\xe9", "caf\\xe8", "--json").stdout)
    for escaped, raw in (("caf\\xe9", b"caf\xe9"), ("caf\\xe8", b"caf\xe8")):
        t = theirs[raw]
        assert close(np.array(got[escaped]), t / np.linalg.norm(t))
    nn = json.loads(run("similar", archive, "w", "caf\\xe9", "-k", "5", "--json").stdout)
    expected = [w for w, _ in tool_neighbours(model, b"caf\xe9", 5)]
    assert [n["word"] for n in nn] == [escaped_form(e) for e in expected]
    # The raw Latin-1 bytes as a query (a Latin-1 terminal) find the same.
    raw_query = os.fsdecode(b"caf\xe9")
    nn_raw = json.loads(run("similar", archive, "w", raw_query, "-k", "5", "--json").stdout)
    assert nn_raw == nn
    got = json.loads(run("embed", archive, "w", raw_query, "--json").stdout)
    assert got == {"caf\\xe9": json.loads(run("embed", archive, "w", "caf\\xe9",
                                                "--json").stdout)["caf\\xe9"]}
    # Export writes the original Latin-1 bytes back.
    run("export", archive, "w", tmp_path / "w.txt")
    ours = exported_vectors(tmp_path / "w.txt")
    for w in LATIN1:
        raw = w.encode("latin-1")
        assert raw in ours, raw
        assert close(ours[raw], theirs[raw])


def test_hostile_ftz_is_refused_with_the_reason(models, tmp_path):
    # Cut in the arguments, the dictionary and the quantized codes (the
    # output matrix at the end is not read: cutting it changes nothing).
    data = models["sup.ftz"].read_bytes()
    bad = tmp_path / "bad.ftz"
    for cut in (30, 200, len(data) // 2):
        bad.write_bytes(bytes(data[:cut]))
        p = run("embed", bad, "cat", check=False)
        assert p.returncode != 0 and p.stderr.startswith(b"modelzip: "), p.stderr
        assert b"Traceback" not in p.stderr


def test_vec_written_by_fasttext_round_trips(models, tmp_path):
    # fastText's own .vec output (dims line, 5 significant digits): import,
    # export by extension, same words and values within float rounding.
    vec = models["dir"] / "sg.vec"
    archive = tmp_path / "v.zip"
    run("import", archive, "--tag", "v1", vec, "--name", "w")
    run("export", archive, "w", tmp_path / "out.vec")
    src = vec.read_bytes().splitlines()
    out = (tmp_path / "out.vec").read_bytes().splitlines()
    assert src[0].split() == out[0].split()
    assert len(src) == len(out)
    for a, b in zip(src[1:], out[1:]):
        a, b = a.split(), b.split()
        assert a[0] == b[0]
        np.testing.assert_allclose([float(x) for x in b[1:]], [float(x) for x in a[1:]],
                                   rtol=1e-6, atol=1e-7)


def tool_analogies(model, a, b, c, k):
    """fastText's analogies: [(word, score)] for its query A - B + C. At the end of its input
    it answers the last query again and again: read the first k answers, then stop it."""
    assert FASTTEXT, "Debian's fasttext tool is required (.ci/install-deps installs it)"
    p = subprocess.Popen([FASTTEXT, "analogies", str(model), str(k)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    stop = threading.Timer(120, p.kill)
    stop.start()
    try:
        p.stdin.write(b" ".join([a, b, c]) + b"\n")
        p.stdin.close()
        pairs = []
        while len(pairs) < k:
            line = p.stdout.readline()
            assert line, "fastText analogies ended or timed out"
            line = line.replace(b"Query triplet (A - B + C)? ", b"").strip()
            if line and not line.startswith(b"Loading model"):
                w, score = line.rsplit(b" ", 1)
                pairs.append((w, float(score)))
        return pairs
    finally:
        stop.cancel()
        p.kill()
        p.wait()


def check_queries_against_fasttext(model, queries):
    # analogy A B C ranks by B - A + C, fastText's analogies by its A - B + C: the same
    # query with A and B swapped. fastText prints 6 significant digits; the text output (the
    # shortest float32 text) rounds to them.
    for a, b, c in queries:
        theirs = tool_analogies(model, b, a, c, 5)
        lines = run("analogy", model, a.decode(), b.decode(), c.decode(), "-k", "5").stdout
        ours = [line.split(b"\t") for line in lines.splitlines()]
        assert [w for w, _ in ours] == [w for w, _ in theirs], (a, b, c)
        for (_, score), (_, tool) in zip(ours, theirs):
            assert float(f"{float(score):.6g}") == pytest.approx(tool, abs=2e-6)
    word = queries[0][0]
    theirs = tool_neighbours(model, word, 5)
    ours = [line.split(b"\t") for line in run("similar", model, word.decode(), "-k", "5")
            .stdout.splitlines()]
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    for (_, score), (_, tool) in zip(ours, theirs):
        assert float(f"{float(score):.6g}") == pytest.approx(tool, abs=2e-6)


@pytest.mark.parametrize("name", ["sg", "ng.ftz"])
def test_analogy_and_similar_text_match_fasttext(models, name):
    check_queries_against_fasttext(models[name], ([b"cat", b"dog", b"paris"],
                                                  [b"bread", b"cheese", b"rome"]))


def test_analogy_and_similar_on_the_shared_model_match_fasttext():
    model = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                         "finalfusion", "fasttext.bin")
    check_queries_against_fasttext(model, ([b"und", b"die", b"der"],
                                           [b"sowie", b"dies", b"nachdem"]))
