"""A second reader of finalfusion files (`.fifu`), written from
schemas/FINALFUSION.md alone (stdlib and numpy only).

    read(data) -> Fifu

`Fifu` gives the words, the storage matrix (quantized storage
reconstructed, §6.2), the norms, the metadata text and the lookup of a word
(§8: known words by row, unknown words through subwords where the
vocabulary has them), similar words and analogies (§8). Every rule the
chapter marks MUST is checked, and a violation raises `SpecError` naming
the absolute offset.
"""
import struct
import tomllib

import numpy as np

from spec_reader import SpecError

SIMPLE, NDARRAY, BUCKET, QUANTIZED, METADATA, NDNORMS, FASTTEXT, EXPLICIT, FLORET = range(1, 10)
VOCABS = (SIMPLE, BUCKET, FASTTEXT, EXPLICIT, FLORET)
STORAGES = (NDARRAY, QUANTIZED)
U8, F32 = 1, 10
M64 = (1 << 64) - 1
M32 = (1 << 32) - 1


class Unsupported(SpecError):
    """§9: a version, chunk identifier or data type this reader does not know
    (modelzip's `unsupported`); every other SpecError is its `corrupt`."""


class _Cursor:
    """Reads the body of one chunk, `data[pos:end]`; positions are absolute."""

    def __init__(self, data, pos, end):
        self.data, self.pos, self.end = data, pos, end

    def fail(self, msg, at=None):
        raise SpecError(f"offset {self.pos if at is None else at}: {msg}")

    def take(self, n):
        if n < 0 or n > self.end - self.pos:
            self.fail(f"{n} bytes needed, {self.end - self.pos} left in the chunk")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        at = self.pos
        raw = self.take(self.u32())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string is not valid UTF-8", at)

    def words(self, n):
        # Each word takes at least its 4-byte length: never trust n.
        if n > (self.end - self.pos) // 4:
            self.fail(f"{n} words cannot fit in {self.end - self.pos} bytes")
        at = self.pos
        words = [self.string() for _ in range(n)]
        if len(set(words)) != len(words):
            self.fail("duplicate word", at)
        return words

    def dtype(self, want):
        at = self.pos
        t = self.u32()
        if t != want:
            raise Unsupported(f"offset {at}: unsupported data type {t} (expected {want})")

    def pad(self):
        """§2: 4 - pos % 4 bytes, 1 to 4, never 0."""
        self.take(4 - self.pos % 4)

    def f32(self, count):
        return np.frombuffer(self.take(4 * count), "<f4").astype(np.float32)

    def done(self):
        if self.pos != self.end:
            self.fail(f"{self.end - self.pos} bytes left over in the chunk")


# --------------------------------------------------------------------------
# §5 N-grams and the three hashes


def bracketed(word, bow="<", eow=">"):
    if isinstance(word, bytes):
        word = word.decode("utf-8", errors="replace")
    return bow + word + eow


def ngrams(word, min_n, max_n, bow="<", eow=">"):
    """Every substring of the bracketed word with min_n..max_n code points,
    by start position, longest first."""
    s = bracketed(word, bow, eow)
    out = []
    for start in range(len(s)):
        for n in range(min(max_n, len(s) - start), min_n - 1, -1):
            out.append(s[start:start + n])
    return out


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def bucket_index(gram, exponent):
    """§4.2: FNV-1a 64 over the code point count (u64) and the code points (u32 each)."""
    data = struct.pack("<Q", len(gram)) + b"".join(struct.pack("<I", ord(c)) for c in gram)
    return fnv1a64(data) & ((1 << exponent) - 1)


def fasttext_index(gram, n_buckets):
    """§4.3: FNV-1a 32 over the UTF-8 bytes, each sign-extended."""
    h = 2166136261
    for b in gram.encode("utf-8"):
        h = ((h ^ (b | 0xFFFFFF00 if b >= 0x80 else b)) * 16777619) & M32
    return h % n_buckets


def _rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _fmix64(k):
    k ^= k >> 33
    k = (k * 0xff51afd7ed558ccd) & M64
    k ^= k >> 33
    k = (k * 0xc4ceb9fe1a85ec53) & M64
    return k ^ (k >> 33)


def murmur3_x64_128(data, seed):
    """Austin Appleby's MurmurHash3_x64_128: (h1, h2)."""
    c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
    h1 = h2 = seed & M32
    nblocks = len(data) // 16
    for i in range(nblocks):
        k1, k2 = struct.unpack_from("<QQ", data, 16 * i)
        k1 = (_rotl64((k1 * c1) & M64, 31) * c2) & M64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & M64
        h1 = (h1 * 5 + 0x52dce729) & M64
        k2 = (_rotl64((k2 * c2) & M64, 33) * c1) & M64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & M64
        h2 = (h2 * 5 + 0x38495ab5) & M64
    tail = data[16 * nblocks:]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if len(tail) > 8:
        k2 = (_rotl64((k2 * c2) & M64, 33) * c1) & M64
        h2 ^= k2
    if len(tail) > 0:
        k1 = (_rotl64((k1 * c1) & M64, 31) * c2) & M64
        h1 ^= k1
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1, h2 = _fmix64(h1), _fmix64(h2)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    return h1, h2


# --------------------------------------------------------------------------
# §4 Vocabularies


class Vocab:
    """`kind` is the name modelzip's Python API gives the vocabulary type.
    `subword_rows(word)`: the storage rows of an unknown word's subwords
    (each occurrence once), [] when it has none."""
    kind = "simple"

    def __init__(self, words, subword_count=0):
        self.words, self.subword_count = words, subword_count
        self.index = {w: i for i, w in enumerate(words)}

    def rows(self):
        return len(self.words) + self.subword_count

    def subword_rows(self, word):
        return []


class BucketVocab(Vocab):
    kind = "bucket_subwords"

    def __init__(self, words, min_n, max_n, exponent):
        super().__init__(words, 1 << exponent)
        self.min_n, self.max_n, self.exponent = min_n, max_n, exponent

    def subword_rows(self, word):
        return [len(self.words) + bucket_index(g, self.exponent)
                for g in ngrams(word, self.min_n, self.max_n)]


class FastTextVocab(Vocab):
    kind = "fasttext_subwords"

    def __init__(self, words, min_n, max_n, n_buckets):
        super().__init__(words, n_buckets)
        self.min_n, self.max_n, self.n_buckets = min_n, max_n, n_buckets

    def subword_rows(self, word):
        # §4.3: the 1-grams of the opening and the closing bracket are not used.
        s = bracketed(word)
        grams = [s[start:start + n] for start in range(len(s))
                 for n in range(min(self.max_n, len(s) - start), self.min_n - 1, -1)
                 if not (n == 1 and start in (0, len(s) - 1))]
        return [len(self.words) + fasttext_index(g, self.n_buckets) for g in grams]


class ExplicitVocab(Vocab):
    kind = "explicit_ngrams"

    def __init__(self, words, min_n, max_n, table):
        renumbered, ngram_row = {}, {}
        for gram, stored in table:
            ngram_row[gram] = renumbered.setdefault(stored, len(renumbered))
        super().__init__(words, len(renumbered))
        self.min_n, self.max_n, self.ngram_row = min_n, max_n, ngram_row

    def subword_rows(self, word):
        return [len(self.words) + self.ngram_row[g]
                for g in ngrams(word, self.min_n, self.max_n) if g in self.ngram_row]


class FloretVocab(Vocab):
    kind = "floret"

    def __init__(self, min_n, max_n, n_buckets, n_hashes, seed, bow, eow):
        super().__init__([], n_buckets)
        self.min_n, self.max_n, self.n_buckets = min_n, max_n, n_buckets
        self.n_hashes, self.seed, self.bow, self.eow = n_hashes, seed, bow, eow

    def subword_rows(self, word):
        units = [bracketed(word, self.bow, self.eow)]
        units += ngrams(word, self.min_n, self.max_n, self.bow, self.eow)
        rows = []
        for u in units:
            h1, h2 = murmur3_x64_128(u.encode("utf-8"), self.seed)
            parts = (h1 & M32, h1 >> 32, h2 & M32, h2 >> 32)
            rows += [p % self.n_buckets for p in parts[:self.n_hashes]]
        return rows


def _min_max(c):
    at = c.pos
    min_n, max_n = c.u32(), c.u32()
    if not 1 <= min_n <= max_n:
        c.fail(f"min_n {min_n}, max_n {max_n}: not 1 <= min_n <= max_n", at)
    return min_n, max_n


def _read_vocab(cid, c):
    if cid == SIMPLE:
        return Vocab(c.words(c.u64()))
    if cid in (BUCKET, FASTTEXT):
        words_len = c.u64()
        min_n, max_n = _min_max(c)
        at = c.pos
        buckets = c.u32()
        if cid == BUCKET:
            if buckets > 63:
                c.fail(f"bucket_exponent {buckets} > 63", at)
            return BucketVocab(c.words(words_len), min_n, max_n, buckets)
        if buckets < 1:
            c.fail("n_buckets is 0", at)
        return FastTextVocab(c.words(words_len), min_n, max_n, buckets)
    if cid == EXPLICIT:
        words_len, ngrams_len = c.u64(), c.u64()
        min_n, max_n = _min_max(c)
        words = c.words(words_len)
        if ngrams_len > (c.end - c.pos) // 12:
            c.fail(f"{ngrams_len} n-grams cannot fit in {c.end - c.pos} bytes")
        at = c.pos
        table = [(c.string(), c.u64()) for _ in range(ngrams_len)]
        if len({g for g, _ in table}) != len(table):
            c.fail("duplicate n-gram", at)
        return ExplicitVocab(words, min_n, max_n, table)
    min_n, max_n = _min_max(c)
    at = c.pos
    n_buckets, n_hashes, seed = c.u64(), c.u32(), c.u32()
    if n_buckets < 1 or not 1 <= n_hashes <= 4:
        c.fail(f"n_buckets {n_buckets}, n_hashes {n_hashes} out of range", at)
    return FloretVocab(min_n, max_n, n_buckets, n_hashes, seed, c.string(), c.string())


# --------------------------------------------------------------------------
# §6 Storage


def _read_ndarray(c):
    rows, cols = c.u64(), c.u32()
    c.dtype(F32)
    c.pad()
    if rows * cols > (c.end - c.pos) // 4:
        c.fail(f"{rows} x {cols} f32 do not fit in {c.end - c.pos} bytes")
    return c.f32(rows * cols).reshape(rows, cols)


def _read_quantized(c):
    at = c.pos
    projection, norms, M, D, K = (c.u32() for _ in range(5))
    rows = c.u64()
    c.dtype(U8)
    c.dtype(F32)
    if M < 1 or D % M or not 1 <= K <= 256:
        c.fail(f"M {M}, D {D}, K {K} break the rules of §6.2", at)
    c.pad()
    left = c.end - c.pos
    floats = (D * D if projection else 0) + M * K * (D // M) + (rows if norms else 0)
    if 4 * floats + rows * M != left:
        c.fail(f"quantized data needs {4 * floats + rows * M} bytes, {left} left")
    P = c.f32(D * D).reshape(D, D) if projection else None
    centroids = c.f32(M * K * (D // M)).reshape(M, K, D // M)
    row_norms = c.f32(rows) if norms else None
    at = c.pos
    codes = np.frombuffer(c.take(rows * M), np.uint8).reshape(rows, M)
    if codes.size and int(codes.max()) >= K:
        c.fail(f"a code >= K = {K}", at)
    x = centroids[np.arange(M), codes].reshape(rows, D) if rows else np.zeros((0, D), np.float32)
    y = x @ P.T if P is not None else x
    if row_norms is not None:
        y = row_norms[:, None] * y
    return y.astype(np.float32)


def _read_norms(c):
    n = c.u64()
    c.dtype(F32)
    c.pad()
    if n > (c.end - c.pos) // 4:
        c.fail(f"{n} norms do not fit in {c.end - c.pos} bytes")
    return c.f32(n)


# --------------------------------------------------------------------------
# §1 - §3 The file


def _norm(v):
    """§8: the L2 norm in f32 arithmetic (squares and their sum overflow as f32 do)."""
    with np.errstate(over="ignore"):
        return np.sqrt(np.dot(v, v))


class Fifu:
    def __init__(self, vocab, matrix, norms, metadata, quantized):
        self.vocab, self.matrix, self.norms = vocab, matrix, norms
        self.metadata, self.quantized = metadata, quantized

    @property
    def words(self):
        return self.vocab.words

    def _sum(self, rows):
        """§8: the rows added in f32, in the order of §5."""
        s = np.zeros(self.matrix.shape[1], np.float32)
        for r in rows:
            s += self.matrix[r]
        return s

    def embedding(self, word):
        """§8: the word's vector, or None when it has none."""
        v = self.vocab
        if isinstance(v, FloretVocab):
            rows = v.subword_rows(word)
            return self._sum(rows) / np.float32(len(rows))
        if word in v.index:
            return self.matrix[v.index[word]].copy()
        rows = v.subword_rows(word)
        if not rows:
            return None
        s = self._sum(rows)
        n = _norm(s)
        return s / n if n else s

    def norm(self, word):
        v = self.vocab
        if self.norms is not None and word in v.index:
            return float(self.norms[v.index[word]])
        if isinstance(v, FloretVocab):
            e = self.embedding(word)
        elif word in v.index:
            e = self.matrix[v.index[word]]
        else:
            rows = v.subword_rows(word)
            if not rows:
                return None
            e = self._sum(rows)
        return float(_norm(e))

    def similar_to(self, query, k, skip=()):
        """§8: the k vocabulary words nearest to `query` by cosine similarity,
        best first, equal scores by word (byte order), NaN skipped."""
        q = np.asarray(query, np.float64)
        q = q / np.linalg.norm(q)
        rows = self.matrix[:len(self.words)].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = rows @ q / np.linalg.norm(rows, axis=1)
        ranked = sorted(((float(sc), w) for w, sc in zip(self.words, scores)
                         if w not in skip and not np.isnan(sc)),
                        key=lambda p: (-p[0], p[1].encode("utf-8")))
        return [(w, sc) for sc, w in ranked[:k]]

    def unit(self, word):
        """§8: u(w), the unit vector of a word (in f64: the f32 rounding of the
        normalization is below the tolerance of the comparisons)."""
        e = self.embedding(word)
        if e is None:
            return None
        floret = isinstance(self.vocab, FloretVocab)
        known = not floret and word in self.vocab.index
        if floret or (known and self.norms is None):
            e = e.astype(np.float64)
            n = np.linalg.norm(e)
            return e / n if n else e
        return e

    def similar(self, word, k):
        e = self.unit(word)
        return None if e is None else self.similar_to(e, k, {word})

    def analogy(self, a, b, c, k):
        """§8: a : b :: c : ?, the query normalize(u(b) - u(a) + u(c))."""
        es = [self.unit(w) for w in (a, b, c)]
        if any(e is None for e in es):
            return None
        ea, eb, ec = (e.astype(np.float64) for e in es)
        return self.similar_to(eb - ea + ec, k, {a, b, c})


def read(data):
    data = bytes(data)
    c = _Cursor(data, 0, len(data))
    if c.take(4) != b"FiFu":
        c.fail("magic is not FiFu", 0)
    version = c.u32()
    if version != 0:
        raise Unsupported(f"offset 4: unsupported version {version}")
    count = c.u32()
    if count > (len(data) - 12) // 4:
        c.fail(f"{count} chunk identifiers do not fit", 8)
    listed = [c.u32() for _ in range(count)]
    for i, cid in enumerate(listed):
        if not 1 <= cid <= 9:
            raise Unsupported(f"offset {12 + 4 * i}: unsupported chunk identifier {cid}")
    chunks = []
    while c.pos < len(data):
        at = c.pos
        cid, length = struct.unpack("<IQ", c.take(12))
        if not 1 <= cid <= 9:
            raise Unsupported(f"offset {at}: unsupported chunk identifier {cid}")
        if length > len(data) - c.pos:
            c.fail(f"chunk of {length} bytes extends past the end of the file", at)
        chunks.append((cid, at, _Cursor(data, c.pos, c.pos + length)))
        c.pos += length
    ids = [cid for cid, _, _ in chunks]
    # §3: [Metadata] Vocab Storage [NdNorms]; the list equals the chunks,
    # except that a final NdNorms may be unlisted.
    if listed != ids and not (ids and ids[-1] == NDNORMS and listed == ids[:-1]):
        c.fail(f"header lists chunks {listed}, the file has {ids}", 12)
    order = ids[1:] if ids[:1] == [METADATA] else ids
    if not (len(order) in (2, 3) and order[0] in VOCABS and order[1] in STORAGES
            and (len(order) == 2 or order[2] == NDNORMS)):
        c.fail(f"chunk sequence {ids} is not [Metadata] Vocab Storage [NdNorms]", 12)
    metadata = vocab = matrix = norms = None
    quantized = False
    for cid, at, body in chunks:
        if cid == METADATA:
            try:
                metadata = body.take(body.end - body.pos).decode("utf-8")
                tomllib.loads(metadata.removeprefix("\ufeff"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
                body.fail(f"metadata: {err}", at)
        elif cid in VOCABS:
            vocab = _read_vocab(cid, body)
        elif cid == NDARRAY:
            matrix = _read_ndarray(body)
        elif cid == QUANTIZED:
            matrix, quantized = _read_quantized(body), True
        else:
            norms = _read_norms(body)
        body.done()
    if matrix.shape[0] != vocab.rows():
        c.fail(f"storage has {matrix.shape[0]} rows, the vocabulary needs {vocab.rows()}", 12)
    if norms is not None and len(norms) != len(vocab.words):
        c.fail(f"{len(norms)} norms for {len(vocab.words)} words", 12)
    return Fifu(vocab, matrix, norms, metadata, quantized)
