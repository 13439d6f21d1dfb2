"""The format specification (schemas/) is exact enough for a second
implementation: spec_reader and spec_writer, written from it alone, read
what modelzip writes and write what modelzip reads, and reject what the
specification says a reader must reject, as modelzip does."""
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import spec_reader  # noqa: E402
import spec_writer  # noqa: E402
from spec_writer import Shared, Typed  # noqa: E402

modelzip = pytest.importorskip("modelzip")
CLI = os.environ.get("MODELZIP_CLI", "modelzip")

rng = np.random.default_rng(41)


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def same(a, b):
    """Exactly equal: dtype, shape and every byte (NaN payloads aside: the
    decoded 8-bit float NaNs are NaN, whatever their bits)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    elif a.dtype.kind == "f":
        assert np.array_equal(np.isnan(a), np.isnan(b))
        assert a[~np.isnan(a)].tobytes() == b[~np.isnan(b)].tobytes()
    else:
        assert a.tobytes() == b.tobytes()


# Values of every dtype, as modelzip is given them; the keys of EXPECT say
# what spec_reader must give back (its documented decoding).
E4M3_BITS = np.array([0x38, 0x40, 0xC4, 0x7E, 0x01, 0x08, 0x80, 0x7F, 0xFE], np.uint8)
E4M3_VALUES = np.array([1, 2, -3, 448, 2.0**-9, 2.0**-6, -0.0, np.nan, -448], np.float32)
E5M2_BITS = np.array([0x3C, 0x7B, 0x7C, 0xFC, 0x01, 0x7D, 0x40], np.uint8)
E5M2_VALUES = np.array([1, 57344, np.inf, -np.inf, 2.0**-16, np.nan, 2], np.float32)
# §6's MX types, worked by hand. E8M0: 2^(e-127), 0xFF NaN. FP4: two values
# a byte, low nibble first; nibbles 0x1-0x7 are 0.5, 1, 1.5, 2, 3, 4, 6, and
# 0x8-0xF their negations. A [2, 2] tensor holds [2, 4] values.
E8M0_BITS = np.array([0x00, 0x7F, 0x80, 0xFE, 0xFF, 0x7E], np.uint8)
E8M0_VALUES = np.array([2.0**-127, 1, 2, 2.0**127, np.nan, 0.5], np.float32)
FP4_BITS = np.array([[0x21, 0x73], [0x8F, 0xD4]], np.uint8)
FP4_VALUES = np.array([[0.5, 1, 1.5, 6], [-6, -0.0, 2, -3]], np.float32)
FP4_SCALAR_BITS = np.array(0xE9, np.uint8)
FP4_SCALAR_VALUES = np.array([-0.5, -4], np.float32)


def every_dtype():
    arrays = {
        "bool": np.array([[True, False, True]]),
        "int8": np.array([-128, 0, 127], np.int8),
        "int16": rng.integers(-2**15, 2**15, (2, 3), dtype=np.int16),
        "int32": rng.integers(-2**31, 2**31, (4,), dtype=np.int32),
        "int64": np.array([-2**63, 2**63 - 1], np.int64),
        "uint8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "uint16": np.array([0, 65535], np.uint16),
        "uint32": np.array([2**32 - 1], np.uint32),
        "uint64": np.array([2**64 - 1, 1], np.uint64),
        "float16": rng.standard_normal((3, 5)).astype(np.float16),
        "float32": rng.standard_normal((7, 2, 3)).astype(np.float32),
        "float64": np.array([np.pi, -0.0, np.inf], np.float64),
        "float32 big-endian": np.arange(5, dtype=">f4"),
        "complex64": (np.arange(4) + 1j * np.arange(4)[::-1]).astype(np.complex64),
        "complex128": np.array([[1 - 2j, np.inf + 0.5j]], np.complex128),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((3, 0, 2), np.int32),
        "bf16": np.array([0x3F80, 0xC000, 0x7F80, 0x0001], np.uint16),
        "e4m3": E4M3_BITS,
        "e5m2": E5M2_BITS,
        "e8m0": E8M0_BITS,
        "fp4": FP4_BITS,
        "fp4 scalar": FP4_SCALAR_BITS,
        # §4.2 escaping: space, '#', '%', LF, a leading U+FEFF, non-ASCII.
        "encoder/layer 1#w%": np.ones(2, np.float32),
        "a\nb": np.zeros(1, np.int8),
        "\ufeffbom": np.ones(1, np.uint8),
        "größe": np.full(3, 7, np.int64),
    }
    dtypes = {"bf16": "bfloat16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
              "e8m0": "float8_e8m0fnu", "fp4": "float4_e2m1fn_x2",
              "fp4 scalar": "float4_e2m1fn_x2"}
    return arrays, dtypes


def expected(name, value):
    """What spec_reader gives for `value` saved by modelzip under `name`."""
    if name == "bf16":
        return (value.astype(np.uint32) << 16).view(np.float32)
    if name == "e4m3":
        return E4M3_VALUES
    if name == "e5m2":
        return E5M2_VALUES
    if name == "e8m0":
        return E8M0_VALUES
    if name == "fp4":
        return FP4_VALUES
    if name == "fp4 scalar":
        return FP4_SCALAR_VALUES
    v = np.asarray(value)
    return v.astype(v.dtype.newbyteorder("="))


def check_tag(got, arrays):
    assert list(got) == list(arrays)
    for name, value in arrays.items():
        same(got[name], expected(name, value))


# --------------------------------------------------------------------------
# (a) modelzip writes, spec_reader reads


def test_modelzip_archive_read_by_spec_reader(tmp_path):
    path = tmp_path / "m.zip"
    arrays, dtypes = every_dtype()
    modelzip.save(path, "step-1", arrays, dtypes=dtypes, compress=["int16", "größe"],
                  updater={("float32", "m"): np.full((7, 2, 3), 0.25, np.float32)})
    # Tag 2: one parameter changed, one unchanged (deduplicated), one shared explicitly.
    tag2 = {"float32": arrays["float32"], "float64": arrays["float64"] * 2,
            "strings": np.array([["a", ""], ["é", "x y"]], object)}
    with modelzip.Writer(path) as w:
        w.add_tag("step-2", tag2, share={"int8": ("step-1", "int8")})
    big = rng.standard_normal(3_000_000).astype(np.float32)
    modelzip.save(path, "step-3", {"big": big, "float32": arrays["float32"]})

    spec = spec_reader.SpecArchive(path)
    assert spec.tags == ["step-1", "step-2", "step-3"]
    check_tag(spec.tensors("step-1"), arrays)
    got = spec.updater_tensors("step-1")
    same(got[("float32", "m")], np.full((7, 2, 3), 0.25, np.float32))
    got2 = spec.tensors("step-2")
    assert list(got2) == ["float32", "float64", "strings", "int8"]
    same(got2["float32"], arrays["float32"])
    same(got2["float64"], arrays["float64"] * 2)
    same(got2["strings"], tag2["strings"])
    same(got2["int8"], arrays["int8"])
    rows = dict(spec.params["step-2"])
    assert rows["int8"] == rows_of(spec, "step-1")["int8"]          # shared by reference
    assert rows["float32"] == rows_of(spec, "step-1")["float32"]    # deduplicated
    same(spec.tensors("step-3")["big"], big)
    spec.verify()
    data = open(path, "rb").read()
    assert spec_reader.writer_layout_problems(data) == []
    assert spec_reader.walk_local_headers(data)[-1][1] == "tags.txt"

    # Removing a tag in place leaves free entries (§8.5); its shared blobs
    # move to the oldest tag that uses them; a tag appended after it.
    assert cli("rm-tag", path, "step-1").returncode == 0
    modelzip.save(path, "step-4", {"float32": arrays["float32"], "new": np.arange(3)})
    spec = spec_reader.SpecArchive(path)
    assert spec.tags == ["step-2", "step-3", "step-4"]
    got2 = spec.tensors("step-2")
    same(got2["int8"], arrays["int8"])
    same(got2["float32"], arrays["float32"])
    same(spec.tensors("step-4")["new"], np.arange(3))
    assert not any(e.startswith("step-1/") for e in spec.entries)
    spec.verify()
    data = open(path, "rb").read()
    assert spec_reader.writer_layout_problems(data) == []
    walked = spec_reader.walk_local_headers(data)
    free = [(at, n) for at, n in walked if n.startswith(".modelzip-free/")]
    assert free, walked
    for at, n in free:  # §8.5: named by its offset, cut to fit its range
        assert n == f".modelzip-free/{at}"[:len(n)]
        assert n not in spec.entries
    assert walked[-1][1] == "tags.txt"


def rows_of(spec, tag):
    return dict(spec.params[tag])


def test_collective_rotation_read_by_spec_reader(tmp_path):
    """A collective commit with keep_last (one rank here): the blob every tag
    references moves out of each removed tag, removed entries become free
    entries (§8.5), and the root's rewrite of a mostly free archive."""
    import modelzip.distributed as mzd
    from one_rank import OneRank

    path = tmp_path / "roll.zip"
    big = rng.standard_normal(300_000).astype(np.float32)  # unchanged: dedup references it
    frees = 0
    for step in range(1, 7):
        small = np.full(1000, step, np.float32)
        w = mzd.CollectiveWriter(path, OneRank(), durable=False)
        w.add("big", big)
        w.add("small", small)
        w.add_updater_state("small", "m", small * 2)
        w.commit(f"step-{step}", keep_last=2)
        spec = spec_reader.SpecArchive(path)
        kept = [f"step-{s}" for s in range(max(1, step - 1), step + 1)]
        assert spec.tags == kept
        for s in range(max(1, step - 1), step + 1):
            got = spec.tensors(f"step-{s}")
            same(got["big"], big)
            same(got["small"], np.full(1000, s, np.float32))
            same(spec.updater_tensors(f"step-{s}")[("small", "m")], np.full(1000, 2 * s, np.float32))
        spec.verify()
        data = open(path, "rb").read()
        assert spec_reader.writer_layout_problems(data) == []
        walked = spec_reader.walk_local_headers(data)
        assert walked[-1][1] == "tags.txt"
        frees += any(n.startswith(".modelzip-free/") for _, n in walked)
        assert cli("verify", path).returncode == 0
    assert frees > 0  # in place at least once


def test_sparse_tensors_read_by_spec_reader(tmp_path):
    """§6 SPARSE_COO: coordinates as stored, unsorted and repeated ones
    included; the dense tensor sums repeated coordinates."""
    path = tmp_path / "sparse.zip"
    indices = np.array([[2, 1], [0, 3], [2, 1], [1, 0]], np.int64)
    sparse = {"f": modelzip.SparseCOO(indices, np.array([1.5, -2, 0.25, 4], np.float32), (3, 4)),
              "b": modelzip.SparseCOO(indices[:3], np.array([True, False, True]), (3, 4)),
              "none": modelzip.SparseCOO(np.zeros((0, 1), np.int64), np.zeros(0, np.int16), (5,))}
    modelzip.save(path, "t", sparse)
    assert spec_reader.writer_layout_problems(path.read_bytes()) == []
    got = spec_reader.SpecArchive(path).tensors("t")
    with modelzip.open(path) as archive:
        for name, value in sparse.items():
            assert got[name].shape == value.shape
            same(got[name].indices, value.indices)
            same(got[name].values, value.values)
            same(got[name].dense(), archive.tensor(name, "t").to_dense())
    assert got["f"].dense()[2, 1] == 1.75


def test_quantized_tensors_read_by_spec_reader(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "q.zip"
    floats = {"w": rng.standard_normal((8, 40)).astype(np.float32),
              "h": rng.standard_normal((3, 33)).astype(np.float16),
              "d": rng.standard_normal((70,)).astype(np.float64)}
    modelzip.save(path, "float", floats)
    schemes = ["int8-per-tensor", "int8-per-channel", "int8-block32", "int4-block32"]
    for scheme in schemes:
        modelzip.quantize(path, "float", scheme, scheme=scheme, min_elements=1)
    spec = spec_reader.SpecArchive(path)
    with modelzip.open(path) as archive:
        for scheme in schemes:
            got = spec.tensors(scheme)
            quantized = [n for n in floats
                         if isinstance(archive.tensor(n, scheme), modelzip.QuantizedTensor)]
            assert {"w", "h"} <= set(quantized), (scheme, quantized)
            for name, x in floats.items():
                assert got[name].dtype == x.dtype
                # §6.1: every element within half a step of the original
                # (a step is at most max|x| / 7 or / 127), before the
                # rounding to the output type.
                ax = np.abs(x.astype(np.float64))
                step = np.max(ax) / (7 if "int4" in scheme else 127)
                tol = step / 2 * 1.001 + (ax + step) * np.finfo(x.dtype).eps
                assert np.all(np.abs(got[name].astype(np.float64) - x) <= tol), (scheme, name)
                same(got[name], archive.tensor(name, scheme, dequantize=True))

    # torch's quantized tensors: the integers, scale and zero point stored exactly.
    x = torch.randn(4, 6)
    per_tensor = torch.quantize_per_tensor(x, 0.05, 3, torch.qint8)
    per_channel = torch.quantize_per_channel(x, torch.rand(6).double() + 0.01,
                                             torch.arange(6) * 10, 1, torch.quint8)
    modelzip.save(path, "torch", {"t": per_tensor, "c": per_channel})
    assert spec_reader.writer_layout_problems(path.read_bytes()) == []
    got = spec_reader.SpecArchive(path).tensors("torch")
    ints = per_tensor.int_repr().numpy().astype(np.float64)
    same(got["t"], ((ints - 3) * 0.05).astype(np.float32))
    ints = per_channel.int_repr().numpy().astype(np.float64)
    scales = per_channel.q_per_channel_scales().numpy()
    zps = per_channel.q_per_channel_zero_points().numpy()
    same(got["c"], ((ints - zps) * scales).astype(np.float32))


# --------------------------------------------------------------------------
# (b) spec_writer writes, modelzip reads


def spec_tags():
    t1 = {"w": rng.standard_normal((5, 3)).astype(np.float32),
          "big-endian i64": np.arange(-3, 3, dtype=">i8"),
          "scalar": np.array(1.5, np.float64),
          "empty": np.zeros((0,), np.float16),
          "flags": np.array([True, False]),
          "u32": np.array([1, 2**32 - 1], np.uint32),
          "c128": np.array([1 + 2j], np.complex128),
          "c64": np.array([[3 - 1j, 0j]], np.complex64),
          "bf16": Typed("bfloat16", np.array([0x3F80, 0x4000], np.uint16)),
          "e4m3": Typed("float8_e4m3fn", E4M3_BITS),
          "e5m2": Typed("float8_e5m2", E5M2_BITS),
          "e8m0": Typed("float8_e8m0fnu", E8M0_BITS),
          "fp4": Typed("float4_e2m1fn_x2", FP4_BITS),
          "text": np.array(["héllo", "", "a b"], object),
          "layer 1#w%\n": np.arange(4, dtype=np.int16)}
    t2 = {"w": rng.standard_normal((5, 3)).astype(np.float32),
          "u32": Shared("step-1", "u32"), "layer 1#w%\n": Shared("step-1", "layer 1#w%\n")}
    u1 = {("w", "M"): np.full((5, 3), 0.5, np.float32), ("w", "V"): np.zeros((5, 3), np.float32),
          ("layer 1#w%\n", "step count"): np.array(7, np.int64)}
    u2 = {("w", "M"): np.ones((5, 3), np.float32), ("w", "V"): Shared("step-1", ("w", "V"))}
    return [("step-1", t1, u1), ("step-2", t2, u2)]


def as_modelzip_loads(value):
    if isinstance(value, Typed):
        return value.bits
    v = np.asarray(value)
    return v if v.dtype == object else v.astype(v.dtype.newbyteorder("="))


def check_spec_archive_with_modelzip(path, tags):
    r = cli("verify", path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["unzip", "-t", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    originals = {t: params for t, params, *_ in tags}
    updaters = {t: rest[0] for t, _, *rest in tags if rest}
    with modelzip.open(path) as archive:
        assert archive.tags == [t for t, *_ in tags]
        for tag, updater in updaters.items():
            states = archive.updater_states(tag)
            assert [(p.name, p.state) for p in states] == list(updater)
            for (variable, state), value in updater.items():
                if isinstance(value, Shared):
                    value = updaters[value.tag][value.name]
                same(archive.updater_state(variable, state, tag, copy=True),
                     as_modelzip_loads(value))
        assert {(p.name, p.state): p.shared for p in archive.updater_states("step-2")} == \
            {("w", "M"): False, ("w", "V"): True}
        for tag, params, *_ in tags:
            loaded = archive.load(tag, copy=True)
            assert list(loaded) == list(params)
            for name, value in params.items():
                if isinstance(value, Shared):
                    value = originals[value.tag][value.name]
                same(loaded[name], as_modelzip_loads(value))
        info = {p.name: p for p in archive.params("step-2")}
        assert info["u32"].shared and info["layer 1#w%\n"].shared and not info["w"].shared
        assert archive.param("bf16", "step-1").dtype == "bfloat16"
        assert archive.param("e5m2", "step-1").dtype == "float8_e5m2"
        assert archive.param("e8m0", "step-1").dtype == "float8_e8m0fnu"
        fp4 = archive.param("fp4", "step-1")
        assert fp4.dtype == "float4_e2m1fn_x2" and list(fp4.shape) == [2, 2]
        assert archive.verify() == []


def test_spec_writer_archive_read_by_modelzip(tmp_path):
    path = tmp_path / "s.zip"
    tags = spec_tags()
    spec_writer.write(path, tags, model={"name": "spec"})
    assert spec_reader.writer_layout_problems(path.read_bytes()) == []
    check_spec_archive_with_modelzip(path, tags)
    # spec_writer's archive is in the append layout: modelzip appends a tag in
    # place, and both readers read all three.
    modelzip.save(path, "step-3", {"w": tags[0][1]["w"]})
    with modelzip.open(path) as archive:
        assert archive.tags == ["step-1", "step-2", "step-3"]
    spec = spec_reader.SpecArchive(path)
    same(spec.tensors("step-3")["w"], tags[0][1]["w"])
    same(spec.tensors("step-2")["u32"], tags[0][1]["u32"])
    same(spec.updater_tensors("step-2")[("w", "V")], tags[0][2][("w", "V")])
    same(spec.updater_tensors("step-1")[("layer 1#w%\n", "step count")], np.array(7, np.int64))
    # (Not deduplicated with step-1's blob: §5, dedup compares whole blob
    # entries, and spec_writer's header differs from modelzip's.)


@pytest.mark.parametrize("options", [dict(big=True), dict(alignment=8), dict(alignment=4096),
                                     dict(deflate=True), dict(align=False)],
                         ids=["byte order BIG", "alignment 8", "alignment 4096", "deflated",
                              "unaligned entries"])
def test_what_readers_accept_beyond_writers_rules(tmp_path, options):
    """§1, §6: readers convert BIG data (each complex part on its own), take
    any segment alignment from 8 to 4096, read deflated blobs, and do not
    rely on the alignment of stored data."""
    path = tmp_path / "s.zip"
    tags = spec_tags()
    spec_writer.write(path, tags, **options)
    check_spec_archive_with_modelzip(path, tags)
    spec = spec_reader.SpecArchive(path)
    for name, value in tags[0][1].items():
        if not isinstance(value, Typed):
            same(spec.tensors("step-1")[name], as_modelzip_loads(value))


def test_an_archive_without_tags(tmp_path):
    """§4.1: an empty tags.txt is valid (no tags)."""
    path = tmp_path / "empty.zip"
    z = spec_writer.ZipWriter()
    z.add("modelzip.toml", b"format_version = 1\n")
    z.add("tags.txt", b"")
    path.write_bytes(z.finish())
    assert spec_reader.read(path) == {}
    assert cli("verify", path).returncode == 0
    with modelzip.open(path) as archive:
        assert archive.tags == []


def test_comment_trailing_bytes_and_folder_entries_are_accepted(tmp_path):
    """§1: an archive comment, trailing bytes after it, folder entries."""
    path = tmp_path / "c.zip"
    z = spec_writer.ZipWriter()
    z.add("modelzip.toml", b"format_version = 1\n")
    z.add("t/", b"")
    z.add("other/", b"")
    # A comment line; a raw U+FEFF starting a name (not the table: §4.2).
    z.add("t/params.txt", b"# a comment line\nx 0\n\xef\xbb\xbfy 0\n")
    z.add("t/params/0.fb", good_blob())
    z.add("tags.txt", b"t")  # the last line may omit its LF
    path.write_bytes(z.finish(comment=b"a comment PK") + b"\n")
    spec = spec_reader.SpecArchive(path)
    assert list(spec.tensors("t")) == ["x", "\ufeffy"]
    same(spec.tensors("t")["x"], np.arange(4, dtype=np.float32))
    assert cli("verify", path).returncode == 0
    loaded = modelzip.open(path).load("t")
    assert list(loaded) == ["x", "\ufeffy"]
    same(loaded["x"], np.arange(4, dtype=np.float32))
    # A writer keeps the comment and writes no trailing bytes (§1); the
    # folder entries are not kept.
    modelzip.save(path, "u", {"y": np.ones(2)})
    data = path.read_bytes()
    assert data.endswith(b"a comment PK")
    spec = spec_reader.SpecArchive(path)
    assert spec.tags == ["t", "u"] and "t/" not in spec.entries
    assert not any(e.name.endswith("/") for e in spec_reader.parse_zip(data)[0])
    same(spec.tensors("u")["y"], np.ones(2))


def test_unreferenced_blob_must_be_valid(tmp_path):
    """§2: a blob file no table references is allowed but must be a valid
    blob: verify rejects it in both, loading the tag does not read it."""
    path = tmp_path / "u.zip"
    blob_archive(path, good_blob(), extra=[("t/params/7.fb", b"\0" * 40),
                                           ("t/params/07.fb", b"not a blob")])
    with pytest.raises(spec_reader.SpecError, match="params/7.fb"):
        spec_reader.SpecArchive(path).verify()
    same(spec_reader.SpecArchive(path).tensors("t")["x"], np.arange(4, dtype=np.float32))
    assert cli("verify", path).returncode != 0
    same(modelzip.open(path).load("t")["x"], np.arange(4, dtype=np.float32))


def test_quantized_blobs_of_spec_writer_read_by_modelzip(tmp_path):
    """§6.1 from the writer's side: modelzip gives the stored integers and
    the same dequantized values as spec_reader."""
    path = tmp_path / "q.zip"
    q = {"per-tensor": spec_writer.Quantized("float32", rng.integers(-128, 128, (3, 5)),
                                             "affine-per-tensor", "int8", scale=0.125,
                                             zero_point=-3),
         "per-axis": spec_writer.Quantized("float64", rng.integers(0, 256, (2, 4, 3)),
                                           "affine-per-axis", "uint8", axis=1,
                                           scales=np.array([0.5, 0.25, 2.0, 1e-3]),
                                           zero_points=np.array([0, 128, 255, 7])),
         "int4 odd": spec_writer.Quantized("float16", rng.integers(-8, 8, (3, 7)),
                                           "block-symmetric", "int4", axis=1, block_size=4,
                                           scales=np.array([[0.5, 0.25], [1, 2], [3, 0.125]],
                                                           np.float16)),
         "int8 blocks": spec_writer.Quantized("bfloat16", rng.integers(-128, 128, (2, 3, 5)),
                                              "block-symmetric", "int8", axis=1, block_size=32,
                                              scales=np.array([[0.01], [0.3]], np.float32))}
    spec_writer.write(path, [("t", q)])
    assert spec_reader.writer_layout_problems(path.read_bytes()) == []
    assert cli("verify", path).returncode == 0
    got = spec_reader.SpecArchive(path).tensors("t")
    with modelzip.open(path) as archive:
        for name, value in q.items():
            t = archive.tensor(name, "t")
            same(np.asarray(t.int_values()).astype(np.int64), value.ints.astype(np.int64))
            deq = archive.tensor(name, "t", dequantize=True)
            if value.dtype == "bfloat16":  # numpy has none: modelzip gives the bits
                deq = (np.asarray(deq).astype(np.uint32) << 16).view(np.float32)
            same(got[name], deq)
    # The per-axis values, computed here from the definition.
    v = q["per-axis"]
    c = np.arange(4).reshape(1, 4, 1)
    same(got["per-axis"], (v.ints - v.zero_points[c]) * v.scales[c])


def test_a_wrong_writer_is_caught(tmp_path, monkeypatch):
    """The comparison above can fail: a writer that numbers float32 as the
    DataType of int32 (same size) writes an archive modelzip reads as int32."""
    path = tmp_path / "wrong.zip"
    monkeypatch.setitem(spec_writer.DTYPE_NUMBERS, "float32", 9)
    tags = spec_tags()
    spec_writer.write(path, tags)
    with pytest.raises(AssertionError):
        check_spec_archive_with_modelzip(path, tags)


# --------------------------------------------------------------------------
# (c) what a reader must reject, both readers reject


def blob_archive(path, blob, params_txt=b"x 0\n", tags_txt=b"t\n", extra=(),
                 toml=b"format_version = 1\n"):
    z = spec_writer.ZipWriter()
    z.add("modelzip.toml", toml)
    z.add("t/params.txt", params_txt)
    z.add("t/params/0.fb", blob)
    for name, data in extra:
        z.add(name, data)
    z.add("tags.txt", tags_txt)
    path.write_bytes(z.finish())


def good_blob():
    return spec_writer.encode_blob(np.arange(4, dtype=np.float32))


def patch_header(blob, field_index, fmt, value):
    """A copy of `blob` with one present scalar field of its TensorHeader changed."""
    data = bytearray(blob)
    (S,) = struct.unpack_from("<I", data)
    t = spec_reader.flatbuf.root(data, 4, S, b"MZTB")
    struct.pack_into("<" + fmt, data, t.field_pos(field_index, struct.calcsize(fmt)), value)
    return bytes(data)


def patch_values_length(blob, length):
    data = bytearray(blob)
    (S,) = struct.unpack_from("<I", data)
    t = spec_reader.flatbuf.root(data, 4, S, b"MZTB")
    struct.pack_into("<Q", data, t.field_pos(4, 16) + 8, length)
    return bytes(data)


def corruptions():
    blob = good_blob()
    blob8 = spec_writer.encode_blob(np.arange(4, dtype=np.float32), alignment=8)
    return {
        "unsupported dtype FLOAT8": dict(blob=patch_header(blob, 0, "b", 2)),
        "unknown dtype 99": dict(blob=patch_header(blob, 0, "b", 99)),
        "values shorter than numel x size": dict(blob=patch_values_length(blob, 12)),
        "segment past the entry": dict(blob=blob[:-1]),
        "wrong file identifier": dict(blob=blob[:8] + b"XXXX" + blob[12:]),
        "reference to a missing blob": dict(blob=blob, params_txt=b"x 1\n"),
        "reference to an unknown tag": dict(blob=blob, params_txt=b"x u/0\n"),
        "unescaped #": dict(blob=blob, params_txt=b"x#y 0\n"),
        "bad escape": dict(blob=blob, params_txt=b"x%4 0\n"),
        "leading zero in a reference": dict(blob=blob, params_txt=b"x 00\n"),
        "three fields": dict(blob=blob, params_txt=b"x 0 0\n"),
        "byte-order mark in tags.txt": dict(blob=blob, tags_txt=b"\xef\xbb\xbft\n"),
        "CR in tags.txt": dict(blob=blob, tags_txt=b"t\r\n"),
        "entry outside a tag folder": dict(blob=blob, extra=[("other/x", b"1")]),
        "tags equal but for case": dict(blob=blob, tags_txt=b"t\nT\n",
                                        extra=[("T/params.txt", b"")]),
        "tag folder spelled in another case": dict(blob=blob, tags_txt=b"t\nu\n",
                                                   extra=[("U/params.txt", b"")]),
        "reference spelled in another case": dict(blob=blob, params_txt=b"x T/0\n"),
        "format_version 2": dict(blob=blob, toml=b"format_version = 2\n"),
        "format_version a float": dict(blob=blob, toml=b"format_version = 1.0\n"),
        "alignment 4": dict(blob=patch_header(blob8, 8, "I", 4)),
        "alignment 24": dict(blob=patch_header(blob8, 8, "I", 24)),
        "empty line in tags.txt": dict(blob=blob, tags_txt=b"t\n\n"),
        "a name twice after unescaping": dict(blob=blob, params_txt=b"x 0\n%78 0\n"),
        "a name not UTF-8 after unescaping": dict(blob=blob, params_txt=b"%FF 0\n"),
        ".fifu in updater.txt": dict(blob=blob, extra=[("t/updater.txt", b"v s 0.fifu\n")]),
        "a tag of 101 characters": dict(blob=blob, tags_txt=b"t\n" + b"a" * 101 + b"\n",
                                        extra=[("a" * 101 + "/params.txt", b"")]),
        "tag is a device name": dict(blob=blob, tags_txt=b"t\ncom1.x\n",
                                     extra=[("com1.x/params.txt", b"")]),
    }


@pytest.mark.parametrize("case", list(corruptions()))
def test_both_readers_reject(tmp_path, case):
    path = tmp_path / "bad.zip"
    blob_archive(path, **corruptions()[case])
    with pytest.raises(spec_reader.SpecError):
        spec_reader.SpecArchive(path).verify()
    r = cli("verify", path)
    assert r.returncode != 0, (case, r.stdout)
    with pytest.raises(modelzip.Error):
        with modelzip.open(path) as archive:
            archive.load("t", copy=True)
            assert archive.verify() == []


def test_the_valid_base_of_the_corruptions_is_accepted(tmp_path):
    """Each corruption above breaks one rule of an archive both accept."""
    path = tmp_path / "good.zip"
    blob_archive(path, good_blob())
    spec_reader.SpecArchive(path).verify()
    assert cli("verify", path).returncode == 0
    same(modelzip.open(path).load("t")["x"], np.arange(4, dtype=np.float32))


def test_crc_mismatch_rejected_by_both(tmp_path):
    path = tmp_path / "crc.zip"
    blob_archive(path, good_blob())
    data = bytearray(path.read_bytes())
    pos = data.rfind(np.arange(4, dtype=np.float32).tobytes())
    data[pos + 5] ^= 0x40  # a byte of the tensor data; the CRC-32 no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(spec_reader.SpecError, match="CRC"):
        spec_reader.SpecArchive(path).tensors("t")
    assert cli("verify", path).returncode != 0
    with pytest.raises(modelzip.Error):
        modelzip.open(path).tensor("x", "t", copy=True)


def test_valid_journal_gives_the_previous_archive(tmp_path):
    """§8.3: while a valid journal exists, the archive is the file's first T
    bytes plus the journal's tail; both readers read the previous archive."""
    path = tmp_path / "j.zip"
    spec_writer.write(path, [("a", {"x": np.arange(3)})])
    old = path.read_bytes()
    modelzip.save(path, "b", {"y": np.ones(2)})
    new = path.read_bytes()
    T = {e.name: e.offset for e in spec_reader.parse_zip(old)[0]}["tags.txt"]  # the tail's start
    assert new[:T] == old[:T]
    tags = b"b\n"
    head = (b"modelzip-append v3\n" + struct.pack("<QQQQ", 7, T, len(old), len(tags)) + tags
            + old[T:])
    journal = tmp_path / ".j.zip.modelzip-append"
    journal.write_bytes(head + struct.pack("<I", spec_reader.zlib.crc32(head)))
    assert spec_reader.SpecArchive(path).tags == ["a"]
    with modelzip.open(path) as archive:
        assert archive.tags == ["a"]
    # Version 2 (no tag list) and version 1 (appends began at the old end).
    head2 = b"modelzip-append v2\n" + struct.pack("<QQQ", 7, T, len(old)) + old[T:]
    for content in (head2 + struct.pack("<I", spec_reader.zlib.crc32(head2)),
                    b"modelzip-append v1 %d\n" % len(new)):
        journal.write_bytes(content)
        expect = ["a"] if content.startswith(b"modelzip-append v2") else ["a", "b"]
        assert spec_reader.SpecArchive(path).tags == expect
        with modelzip.open(path) as archive:
            assert archive.tags == expect
    journal.write_bytes(head + struct.pack("<I", spec_reader.zlib.crc32(head) ^ 1))  # torn
    assert spec_reader.SpecArchive(path).tags == ["a", "b"]
    with modelzip.open(path) as archive:
        assert archive.tags == ["a", "b"]
