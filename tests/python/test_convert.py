"""Tensor file converters, checked against numpy's own .npy/.npz reader and writer and a
hand-parsed safetensors header."""
import json
import struct
import zipfile

import numpy as np
import pytest

import modelzip
from conftest import save


def test_reads_what_numpy_writes(tmp_path):
    arrays = {"f": np.arange(12, dtype=np.float32).reshape(3, 4),
              "fortran": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
              "big": np.arange(5, dtype=">f8"), "flags": np.array([True, False]),
              "scalar": np.array(7, dtype=np.uint64), "words": np.array(["ab", "cde", ""])}
    np.save(tmp_path / "single.npy", arrays["f"])
    np.savez(tmp_path / "plain.npz", **arrays)
    np.savez_compressed(tmp_path / "deflated.npz", **arrays)
    tensors, meta = modelzip.read_tensor_file(tmp_path / "single.npy")
    assert list(tensors) == ["single"] and meta == {}
    np.testing.assert_array_equal(tensors["single"], arrays["f"])
    for name in ["plain.npz", "deflated.npz"]:
        tensors, _ = modelzip.read_tensor_file(tmp_path / name)
        assert list(tensors) == list(arrays)
        for key, expected in arrays.items():
            assert tensors[key].shape == expected.shape
            assert tensors[key].tolist() == expected.tolist(), (name, key)
        assert tensors["big"].dtype == np.dtype("<f8")
        assert not tensors["f"].flags.writeable


def test_numpy_reads_what_we_write(tmp_path):
    arrays = {"a": np.linspace(0, 1, 10, dtype=np.float64), "b": np.arange(6).reshape(2, 3),
              "c": np.array(["x", "yz"])}
    modelzip.write_tensor_file(tmp_path / "out.npz", arrays)
    with np.load(tmp_path / "out.npz") as z:
        assert sorted(z.files) == ["a", "b", "c"]
        for key, expected in arrays.items():
            np.testing.assert_array_equal(z[key], expected)
    modelzip.write_tensor_file(tmp_path / "one.npy", {"a": arrays["b"]})
    np.testing.assert_array_equal(np.load(tmp_path / "one.npy"), arrays["b"])
    with pytest.raises(modelzip.Error) as e:
        modelzip.write_tensor_file(tmp_path / "two.npy", arrays)
    assert e.value.code == "invalid_argument"


def test_safetensors_header_by_hand(tmp_path):
    bits = np.array([0x3F80, 0xC020], np.uint16)  # bfloat16 1.0 and -2.5
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = tmp_path / "m.safetensors"
    modelzip.write_tensor_file(path, {"w": w, "h": bits}, metadata={"source": "test"},
                               bfloat16=["h"])
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    assert header["__metadata__"] == {"source": "test"}
    assert header["w"]["dtype"] == "F32" and header["w"]["shape"] == [2, 3]
    assert header["h"]["dtype"] == "BF16" and header["h"]["shape"] == [2]
    body = data[8 + n:]
    start, end = header["w"]["data_offsets"]
    assert body[start:end] == w.tobytes()
    start, end = header["h"]["data_offsets"]
    assert body[start:end] == bits.tobytes()
    tensors, meta = modelzip.read_tensor_file(path)
    assert meta == {"source": "test"} and tensors["h"].tolist() == bits.tolist()
    with pytest.raises(modelzip.Error) as e:
        modelzip.write_tensor_file(tmp_path / "s.safetensors", {"names": ["a"]})
    assert e.value.code == "unsupported" and "names" in str(e.value)


def test_import_keeps_bfloat16_and_export_round_trips(tmp_path, archive_path):
    bits = np.array([0x3F80, 0x4000, 0x4040], np.uint16)
    modelzip.write_tensor_file(tmp_path / "m.safetensors", {"h": bits, "f": np.ones(2)},
                               bfloat16=["h"])
    np.savez(tmp_path / "extra.npz", e=np.arange(3, dtype=np.int8))
    stats = modelzip.import_tensor_files(archive_path, "imported",
                                         [tmp_path / "m.safetensors", tmp_path / "extra.npz"],
                                         durable=False)
    assert stats.blobs_written == 3
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {"h": "bfloat16", "f": "float64",
                                                          "e": "int8"}
        assert ar.tensor("h").tolist() == bits.tolist()
    modelzip.export_tensor_file(archive_path, tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as z:
        assert z["h"].tolist() == bits.tolist() and z["e"].tolist() == [0, 1, 2]
    with pytest.raises(modelzip.Error) as e:  # BTF has no bfloat16
        modelzip.export_tensor_file(archive_path, tmp_path / "bad.btf")
    assert e.value.code == "unsupported" and "'h'" in str(e.value)
    save(archive_path, "plain", {"f": np.ones(2), "e": np.arange(3, dtype=np.int8)})
    modelzip.export_tensor_file(archive_path, tmp_path / "out.btf", "PLAIN")
    tensors, _ = modelzip.read_tensor_file(tmp_path / "out.btf")
    assert [t.tolist() for t in tensors.values()] == [[1.0, 1.0], [0, 1, 2]]  # names dropped


def test_import_keeps_safetensors_metadata_for_export(tmp_path, archive_path):
    """A safetensors file's __metadata__ survives import_tensor_files -> export_tensor_file;
    the metadata argument updates it; files that disagree are refused."""
    modelzip.write_tensor_file(tmp_path / "a.safetensors", {"w": np.ones(2, np.float32)},
                               metadata={"format": "pt"})
    modelzip.write_tensor_file(tmp_path / "b.safetensors", {"b": np.zeros(1, np.float32)},
                               metadata={"format": "pt", "source": "b"})
    modelzip.import_tensor_files(archive_path, "t", [tmp_path / "a.safetensors",
                                                     tmp_path / "b.safetensors"], durable=False)
    with zipfile.ZipFile(archive_path) as z:
        assert z.read("t/metadata.toml") == b'[safetensors]\nformat = "pt"\nsource = "b"\n'
    modelzip.export_tensor_file(archive_path, tmp_path / "out.safetensors")
    tensors, meta = modelzip.read_tensor_file(tmp_path / "out.safetensors")
    assert meta == {"format": "pt", "source": "b"} and list(tensors) == ["b", "w"]
    # Readable without an export (modelzip info shows it too); {} for a tag that keeps none.
    assert modelzip.imported_metadata(archive_path) == {"format": "pt", "source": "b"}
    assert modelzip.imported_metadata(archive_path, "t") == {"format": "pt", "source": "b"}
    modelzip.export_tensor_file(archive_path, tmp_path / "out2.safetensors",
                                metadata={"source": "mine", "extra": "1"})
    _, meta = modelzip.read_tensor_file(tmp_path / "out2.safetensors")
    assert meta == {"format": "pt", "source": "mine", "extra": "1"}
    modelzip.write_tensor_file(tmp_path / "c.safetensors", {"c": np.zeros(1, np.float32)},
                               metadata={"format": "tf"})
    with pytest.raises(modelzip.InvalidArgumentError, match="'format' differs"):
        modelzip.import_tensor_files(archive_path, "u", [tmp_path / "a.safetensors",
                                                         tmp_path / "c.safetensors"])
    assert modelzip.open(archive_path).tags == ["t"]
    modelzip.save(archive_path, "plain", {"x": np.ones(1)})
    assert modelzip.imported_metadata(archive_path) == {}
    with pytest.raises(modelzip.NotFoundError):
        modelzip.imported_metadata(archive_path, "nope")


def test_sparse_and_btf(tmp_path):
    s = modelzip.SparseCOO(np.array([[0, 1], [1, 0]]), np.array([2.0, 3.0], np.float32), (2, 2))
    modelzip.write_tensor_file(tmp_path / "s.btf", {"s": s, "d": np.arange(4, dtype=np.int32)})
    tensors, _ = modelzip.read_tensor_file(tmp_path / "s.btf")
    assert list(tensors) == ["0", "1"]
    assert isinstance(tensors["0"], modelzip.SparseCOO)
    np.testing.assert_array_equal(tensors["0"].to_dense(), [[0, 2], [3, 0]])
    assert tensors["1"].tolist() == [0, 1, 2, 3]


def test_broken_files_raise_error_with_offset(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.float32))
    data = (tmp_path / "a.npy").read_bytes()
    for cut in (5, 40, len(data) - 3):
        (tmp_path / "cut.npy").write_bytes(data[:cut])
        with pytest.raises(modelzip.Error) as e:
            modelzip.read_tensor_file(tmp_path / "cut.npy")
        assert e.value.code == "corrupt" and e.value.archive == str(tmp_path / "cut.npy")
    with pytest.raises(modelzip.Error) as e:
        modelzip.read_tensor_file(tmp_path / "x.unknown")
    assert e.value.code == "unsupported"


def test_tensor_file_views_outlive_nothing_but_themselves(tmp_path, archive_path):
    """Arrays read from a tensor file can be saved into an archive as they are (zero-copy in)."""
    np.savez(tmp_path / "w.npz", w=np.arange(50, dtype=np.float32))
    tensors, _ = modelzip.read_tensor_file(tmp_path / "w.npz")
    (tmp_path / "w.npz").unlink()
    save(archive_path, "t", tensors)
    assert modelzip.load(archive_path)["w"].tolist() == list(range(50))


def test_write_and_import_errors_name_the_file(tmp_path, archive_path):
    for name, arrays in (("o.npz", {"../x": np.ones(2)}),
                         ("o.safetensors", {"z": np.ones(2, np.complex128)}),
                         ("o.btf", {"s": np.array(["a"])})):
        with pytest.raises(modelzip.Error) as e:
            modelzip.write_tensor_file(tmp_path / name, arrays)
        assert e.value.archive == str(tmp_path / name), e.value
        assert str(e.value).startswith(f"{tmp_path / name}: ")
        assert not (tmp_path / name).exists()
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "x.npy", np.ones(2))
    np.save(tmp_path / "sub" / "x.npy", np.zeros(2))
    with pytest.raises(modelzip.InvalidArgumentError) as e:
        modelzip.import_tensor_files(archive_path, "t", [tmp_path / "x.npy", tmp_path / "sub" / "x.npy"])
    assert str(e.value) == (f"parameter 'x' is in both {tmp_path / 'x.npy'} and "
                            f"{tmp_path / 'sub' / 'x.npy'}")  # as modelzip import says
    assert not archive_path.exists()


def test_hdf5_files_are_named_with_the_way_to_convert_them(tmp_path, archive_path):
    # read_tensor_file("model.h5") said "unknown tensor file extension '.h5' (known: ...)".
    for name in ("model.h5", "model.HDF5"):
        for call in (lambda: modelzip.read_tensor_file(tmp_path / name),
                     lambda: modelzip.import_tensor_files(archive_path, "t", [tmp_path / name]),
                     lambda: modelzip.write_tensor_file(tmp_path / name, {"w": np.ones(2)})):
            with pytest.raises(modelzip.Error) as e:
                call()
            assert e.value.code == "unsupported" and str(e.value) == (
                f"{tmp_path / name}: HDF5 is not a format modelzip reads or writes: in Python, "
                "h5py reads the datasets and modelzip.save stores them (docs/python.md, "
                "\"HDF5 files\")")
    assert not archive_path.exists()


def test_urls_are_said_to_be_urls(archive_path):
    # read_tensor_file("https://...") said "cannot open: No such file or directory", as if
    # the server had no such file; so did Embeddings.load and open. Nothing is fetched.
    url = "http://127.0.0.1:9/w.safetensors"
    for call, kind in ((lambda: modelzip.read_tensor_file(url), "tensor"),
                       (lambda: modelzip.import_tensor_files(archive_path, "t", [url]), "tensor"),
                       (lambda: modelzip.Embeddings.load(url, "textdims"), "embedding"),
                       (lambda: modelzip.Embeddings.load(url), "embedding"),
                       (lambda: modelzip.Embeddings.open(url), "embedding")):
        with pytest.raises(modelzip.Error) as e:
            call()
        assert e.value.code == "unsupported" and e.value.archive == url
        assert str(e.value) == (
            f"{url}: a URL: {kind} files are read from local paths (download it first; modelzip "
            "archives are read over http, https and s3, docs/remote.md)")
    assert not archive_path.exists()


def test_h5py_recipe_keeps_and_drops_what_python_md_says(tmp_path):
    """docs/python.md, "HDF5 files": what the recipe keeps, drops and refuses."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = "2.13"
        w = f.create_dataset("g/w", data=np.ones((2, 2), np.float32), chunks=(1, 2),
                             compression="gzip")
        w.attrs["units"] = 2
        f.create_group("empty")
        f["g/soft"] = h5py.SoftLink("/g/w")
        f["g/x_hard"] = w
        f.create_dataset("enum", data=np.array([0, 1], np.int8),
                         dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"))
        f.create_dataset("comp", data=np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]))
        f.create_dataset("vlen", (2,), dtype=h5py.vlen_dtype(np.float32))
        f.create_dataset("nothing", data=h5py.Empty("f4"))
    arrays, refused = {}, {}
    with h5py.File(path, "r") as f:
        def keep(name, item):
            if isinstance(item, h5py.Dataset):
                text = h5py.check_string_dtype(item.dtype)
                arrays[name] = item.asstr()[()] if text else item[()]
        f.visititems(keep)
    for name in ["comp", "vlen", "nothing"]:
        with pytest.raises(TypeError, match=f"parameter '{name}'"):
            modelzip.save(tmp_path / "r.zip", "t", {name: arrays.pop(name)})
    modelzip.save(tmp_path / "m.zip", "t", arrays)
    with modelzip.open(tmp_path / "m.zip") as archive:
        # One path per hard-linked dataset, no soft link, no empty group, no attribute.
        assert sorted(p.name for p in archive.params()) == ["enum", "g/w"]
        assert archive.param("enum").dtype == "int8"
        np.testing.assert_array_equal(archive.tensor("g/w"), np.ones((2, 2)))
        assert not any("keras_version" in e or "units" in e for e in archive.entry_names())
