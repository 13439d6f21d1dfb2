"""Round trips of every numpy dtype, ranks 0 to 5, empty arrays, strings, sparse tensors and odd
names. Expected values are the numpy arrays given to save (compared bit for bit); the layout on
disk is cross-checked with the modelzip CLI when it is available."""
import subprocess

import numpy as np
import pytest

import modelzip
from conftest import CLI, save

NUMERIC = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
           np.uint64, np.float16, np.float32, np.float64]
SHAPES = [(), (5,), (2, 3), (2, 1, 3), (1, 2, 3, 2), (2, 1, 2, 1, 3)]  # ranks 0..5
EMPTY_SHAPES = [(0,), (0, 3), (2, 0, 4), (3, 2, 0)]


def sample(dtype, shape, seed=0):
    """Values that use the whole range of `dtype` (floats: also nan, inf, -0.0)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        flat[:2] = [info.min, info.max][:n]
    else:
        flat = (rng.standard_normal(n) * 1000).astype(dtype)
        flat[:4] = [np.nan, np.inf, -np.inf, -0.0][:n]
    return flat.reshape(shape)


def assert_same(loaded, expected):
    assert isinstance(loaded, np.ndarray)
    assert loaded.dtype == np.dtype(expected.dtype).newbyteorder("<")
    assert loaded.shape == expected.shape
    assert loaded.tobytes() == np.ascontiguousarray(expected).astype(loaded.dtype).tobytes()


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_every_dtype_at_ranks_0_to_5_and_empty(archive_path, dtype):
    arrays = {f"rank{len(s)}": sample(dtype, s, seed=i) for i, s in enumerate(SHAPES)}
    arrays.update({f"empty{i}": np.zeros(s, dtype) for i, s in enumerate(EMPTY_SHAPES)})
    save(archive_path, "t", arrays)
    with modelzip.open(archive_path) as ar:
        infos = {p.name: p for p in ar.params()}
        assert list(infos) == list(arrays)  # stored order is insertion order
        for name, expected in arrays.items():
            assert infos[name].dtype == np.dtype(dtype).name
            assert infos[name].shape == expected.shape
            assert infos[name].nbytes == expected.nbytes
            assert infos[name].layout == "dense" and infos[name].kind == "tensor"
        loaded = ar.load()
        copies = ar.load(copy=True)
    assert list(loaded) == list(arrays)
    for name, expected in arrays.items():
        assert_same(loaded[name], expected)
        assert_same(copies[name], expected)


def test_non_contiguous_and_big_endian_inputs(archive_path):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    arrays = {
        "transposed": base.T,
        "strided": base[::2, 1::2],
        "fortran": np.asfortranarray(base),
        "big_endian": base.astype(">i4"),
        "negative_strides": base[::-1],
    }
    save(archive_path, "t", arrays)
    loaded = modelzip.load(archive_path)
    for name, expected in arrays.items():
        assert loaded[name].dtype.byteorder in "<=|"
        np.testing.assert_array_equal(loaded[name], expected)
    assert loaded["big_endian"].dtype == np.dtype("<i4")


def test_python_scalars_lists_and_array_likes(archive_path):
    class ArrayLike:
        def __array__(self, dtype=None):
            return np.array([[1, 2], [3, 4]], dtype=np.int16)

    class HasNumpy:
        def numpy(self):
            return np.array([0.5, 1.5], dtype=np.float32)

    save(archive_path, "t", {"int": 7, "float": 2.5, "bool": True, "numbers": [1, 2, 3],
                             "array_like": ArrayLike(), "has_numpy": HasNumpy()})
    loaded = modelzip.load(archive_path)
    assert loaded["int"].shape == () and loaded["int"].dtype == np.int64 and loaded["int"] == 7
    assert loaded["float"].dtype == np.float64 and loaded["float"] == 2.5
    assert loaded["bool"].dtype == np.bool_ and loaded["bool"]
    assert loaded["numbers"].tolist() == [1, 2, 3]
    assert loaded["array_like"].dtype == np.int16
    assert loaded["array_like"].tolist() == [[1, 2], [3, 4]]
    assert loaded["has_numpy"].tolist() == [0.5, 1.5]


def test_strings_load_as_object_arrays_of_str(archive_path):
    words = ["", "a", "Grüße", "日本語", "emoji 🙂", "tab\there", "nul\0inside", "trailing\0"]
    grid = np.array([["x", "yy"], ["zzz", "é"]])
    save(archive_path, "t", {"list": words, "scalar": "only one", "grid": grid,
                             "nested": [["a", "b", "c"], ["d", "e", "f"]]})
    with modelzip.open(archive_path) as ar:
        assert ar.param("list").dtype == "string"
        loaded = ar.load()
    assert loaded["list"].dtype == object and loaded["list"].shape == (len(words),)
    assert loaded["list"].tolist() == words  # NULs survive (unlike numpy 'U' arrays)
    assert all(type(s) is str for s in loaded["list"])
    assert loaded["scalar"].shape == () and loaded["scalar"][()] == "only one"
    assert loaded["grid"].shape == (2, 2) and loaded["grid"].tolist() == grid.tolist()
    assert loaded["nested"].shape == (2, 3) and loaded["nested"][1, 2] == "f"
    assert not loaded["list"].flags.writeable


def test_bfloat16_loads_as_uint16_bits(archive_path):
    values = np.array([1.0, -2.5, 3.140625, 0.0], dtype=np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact: these floats fit bfloat16
    save(archive_path, "t", {"w": bits, "plain": bits}, bfloat16=["w"])
    with modelzip.open(archive_path) as ar:
        assert ar.param("w").dtype == "bfloat16"
        assert ar.param("plain").dtype == "uint16"
        w = ar.tensor("w")
    assert w.dtype == np.uint16
    np.testing.assert_array_equal((w.astype(np.uint32) << 16).view(np.float32), values)


def test_bfloat16_option_is_checked(archive_path):
    with pytest.raises(TypeError, match="'w'.*bfloat16"):
        save(archive_path, "t", {"w": np.zeros(3, np.float32)}, bfloat16=["w"])
    with pytest.raises(ValueError, match="not among the arrays"):
        save(archive_path, "t", {"w": np.zeros(3, np.uint16)}, bfloat16=["typo"])
    with pytest.raises(TypeError, match="collection of names"):
        save(archive_path, "t", {"w": np.zeros(3, np.uint16)}, bfloat16="w")


def test_sparse_coo_round_trip(archive_path):
    indices = np.array([[0, 1], [2, 3], [2, 0]], dtype=np.int32)  # converted to int64
    values = np.array([1.5, -2.0, 4.0], dtype=np.float32)
    save(archive_path, "t", {"s": modelzip.SparseCOO(indices, values, (3, 4))})
    with modelzip.open(archive_path) as ar:
        info = ar.param("s")
        s = ar.tensor("s")
    assert info.layout == "sparse_coo" and info.shape == (3, 4) and info.dtype == "float32"
    assert isinstance(s, modelzip.SparseCOO) and isinstance(s, tuple)
    idx, vals, shape = s  # also a plain tuple
    assert idx.dtype == np.int64 and idx.tolist() == indices.tolist()
    assert vals.tolist() == values.tolist() and shape == (3, 4) and s.nnz == 3
    assert not idx.flags.writeable and not vals.flags.writeable
    expected = np.zeros((3, 4), np.float32)
    expected[0, 1], expected[2, 3], expected[2, 0] = 1.5, -2.0, 4.0
    np.testing.assert_array_equal(s.to_dense(), expected)


def test_sparse_coo_errors(archive_path):
    with pytest.raises(ValueError, match=r"\(nnz, rank\).*\.T"):
        save(archive_path, "t", {"s": modelzip.SparseCOO(np.zeros((2, 3), np.int64),
                                                         np.zeros(3, np.float32), (4, 4))})
    with pytest.raises(modelzip.Error) as e:  # coordinate outside the shape: checked by the core
        save(archive_path, "t", {"s": modelzip.SparseCOO(np.array([[5, 0]]), np.ones(1), (4, 4))})
    assert e.value.code == "invalid_argument"
    assert not archive_path.exists()


ODD_NAMES = ["with space", "slash/in/name", "percent%20literal", "#hash", "new\nline", "tab\t",
             "ünïcödé", "日本", "=equals=", "../escape", "back\\slash", "nul\0byte", "x" * 1000,
             "layer.0.weight", " ", "%", "\x7f"]


def test_odd_parameter_names(archive_path):
    arrays = {name: np.full(2, i, np.int32) for i, name in enumerate(ODD_NAMES)}
    save(archive_path, "t", arrays)
    with modelzip.open(archive_path) as ar:
        assert [p.name for p in ar.params()] == ODD_NAMES
        assert ar.verify() == []
        for i, name in enumerate(ODD_NAMES):
            assert ar.tensor(name).tolist() == [i, i]


def test_unsupported_values_name_the_parameter(archive_path):
    for value, pattern in [(np.zeros(2, "V2"), "V2"),
                           (np.array(["a", 1], dtype=object), "every element is a str"),
                           (np.ma.masked_array([1.0, 2.0], mask=[0, 1]), "mask would be lost"),
                           (np.zeros(2, "datetime64[s]"), "datetime64")]:
        with pytest.raises(TypeError, match="parameter 'bad': .*" + pattern):
            save(archive_path, "t", {"ok": np.zeros(1), "bad": value})
    with pytest.raises(TypeError, match="parameter names must be str"):
        save(archive_path, "t", {1: np.zeros(1)})
    # A lone surrogate has no UTF-8 (it raised "Unable to cast Python instance of type str").
    with pytest.raises(ValueError, match="parameter 'bad': string 1 is no UTF-8 text: .*"
                                         "surrogates not allowed"):
        save(archive_path, "t", {"ok": np.zeros(1), "bad": ["a", "b\ud800"]})
    assert not archive_path.exists()


def test_python_scalars_are_0d_arrays_with_their_types_recorded(archive_path):
    # modelzip.save is modelzip.torch.save: an int, float, bool or None is stored as a 0-d array
    # (None as the text "None") with its Python type in the _python_types record, which the
    # torch loads use; numpy loads give the arrays. An int beyond 64 bits was refused as an
    # "object array" of an element that is not a str.
    save(archive_path, "t", {"epoch": 5, "lr": 0.5, "flag": True, "best": None, "x": np.ones(2)})
    arrays = modelzip.load(archive_path)
    assert [(k, a.dtype.name, a.shape, a[()]) for k, a in arrays.items() if k != "x"] == [
        ("epoch", "int64", (), 5), ("lr", "float64", (), 0.5), ("flag", "bool", (), True),
        ("best", "object", (), "None"),
        ("_python_types", "object", (),
         'torch.python_types:{"epoch": "int", "lr": "float", "flag": "bool", "best": "None"}')]
    with pytest.raises(ValueError, match="parameter 'big': the int -9223372036854775809 does not "
                                         "fit in 64 bits"):
        save(archive_path, "u", {"big": -2**63 - 1})


def test_cli_reads_what_python_wrote(archive_path):
    """The C++ CLI prints the raw little-endian bytes numpy gave."""
    assert CLI, "MODELZIP_CLI must name the built CLI (set by meson)"
    arrays = {"f": sample(np.float32, (3, 5)), "i": sample(np.int64, (2, 2)),
              "h": sample(np.float16, (7,))}
    save(archive_path, "t", arrays)
    for name, expected in arrays.items():
        raw = subprocess.run([CLI, "cat", str(archive_path), name], check=True,
                             capture_output=True).stdout
        assert raw == expected.astype(expected.dtype.newbyteorder("<")).tobytes()
    subprocess.run([CLI, "verify", str(archive_path)], check=True, capture_output=True)
