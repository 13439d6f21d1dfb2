"""import / export / cat --npy against numpy and the safetensors rules."""
import ast
import json
import pickle
import struct
import zipfile

import numpy as np
import pytest

from conftest import run, safetensors_file


@pytest.fixture
def tensor_files(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "bias.npy", np.array([0.5, -1.5], dtype=np.float64))
    np.savez(tmp_path / "layers.npz", w1=a, w2=np.arange(6, dtype=np.int16).reshape(3, 2))
    return tmp_path


def test_import_names_tensors_by_stem_and_key(tensor_files):
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "bias.npy", tensor_files / "layers.npz")
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--json").stdout)}
    assert set(rows) == {"bias", "w1", "w2"}
    assert rows["w1"]["dtype"] == "float32" and rows["w1"]["shape"] == [3, 4]
    assert rows["w2"]["dtype"] == "int16" and rows["bias"]["dtype"] == "float64"
    raw = run("cat", archive, "w1").stdout
    assert np.array_equal(np.frombuffer(raw, "<f4").reshape(3, 4), np.arange(12).reshape(3, 4))


def test_import_names_the_files_of_a_clash_or_a_bad_name(tensor_files):
    archive = tensor_files / "m.zip"
    np.savez(tensor_files / "more.npz", w2=np.zeros(2), bias=np.ones(2))
    p = run("import", archive, "--tag", "v1", tensor_files / "layers.npz",
            tensor_files / "more.npz", check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: parameter 'w2' is in both {tensor_files / 'layers.npz'} and "
        f"{tensor_files / 'more.npz'}\n")
    unnamed = tensor_files / "unnamed.safetensors"
    unnamed.write_bytes(safetensors_file({"": ("F32", [1], b"\0" * 4)}))
    p = run("import", archive, "--tag", "v1", unnamed, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {unnamed}: a parameter name must not be empty\n")
    assert not archive.exists()


def test_import_dedups_and_refuses_existing_tags(tensor_files):
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    run("import", archive, "--tag", "v2", tensor_files / "layers.npz")
    rows = json.loads(run("ls", archive, "--tag", "v2", "--json").stdout)
    assert all(r["shared"] for r in rows)
    # Equal bytes stored uncompressed are not shared by a deflated import
    # (dedup never changes a parameter's storage), but deflated ones are.
    run("import", archive, "--tag", "v2c", tensor_files / "layers.npz", "--compress")
    run("import", archive, "--tag", "v2d", tensor_files / "layers.npz", "--compress")
    rows = json.loads(run("ls", archive, "--tag", "v2c", "--json").stdout)
    assert not any(r["shared"] for r in rows) and all(r["compressed"] for r in rows)
    rows = json.loads(run("ls", archive, "--tag", "v2d", "--json").stdout)
    assert all(r["shared"] and r["compressed"] for r in rows)
    before = archive.read_bytes()
    p = run("import", archive, "--tag", "V1", tensor_files / "bias.npy", check=False)
    assert p.returncode == 1 and b"exists already (tags ignore case); --replace replaces it" \
        in p.stderr
    assert archive.read_bytes() == before
    run("import", archive, "--tag", "v3", tensor_files / "layers.npz", "--no-dedup", "--compress")
    rows = json.loads(run("ls", archive, "--tag", "v3", "--json").stdout)
    assert not any(r["shared"] for r in rows) and all(r["compressed"] for r in rows)
    assert run("verify", archive).returncode == 0


def test_cat_npy_loads_in_numpy(tensor_files, tmp_path):
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    (tmp_path / "w2.npy").write_bytes(run("cat", archive, "w2", "--npy").stdout)
    assert np.array_equal(np.load(tmp_path / "w2.npy"), np.arange(6, dtype=np.int16).reshape(3, 2))


def test_export_safetensors_follows_the_rules(tensor_files, tmp_path):
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz", tensor_files / "bias.npy")
    out = tmp_path / "out.safetensors"
    run("export", archive, out)
    data = out.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    assert n % 8 == 0
    header = json.loads(data[8:8 + n])
    names = [k for k in header if k != "__metadata__"]
    assert names == sorted(names) == ["bias", "w1", "w2"]
    offsets = [header[k]["data_offsets"] for k in names]
    # Sorted by name, contiguous from 0 with no gaps, to the end of the file.
    assert offsets[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))
    assert 8 + n + offsets[-1][1] == len(data)
    w1 = np.frombuffer(data[8 + n + offsets[1][0]:8 + n + offsets[1][1]], "<f4")
    assert header["w1"]["dtype"] == "F32" and header["w1"]["shape"] == [3, 4]
    assert np.array_equal(w1, np.arange(12, dtype=np.float32))


def test_export_npz_and_selected_params(tensor_files, tmp_path):
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz", tensor_files / "bias.npy")
    run("export", archive, "w2", "bias", tmp_path / "sel.npz")
    with np.load(tmp_path / "sel.npz") as z:
        assert sorted(z.files) == ["bias", "w2"]
        assert np.array_equal(z["bias"], [0.5, -1.5])
    run("export", archive, "bias", tmp_path / "b.npy")
    assert np.array_equal(np.load(tmp_path / "b.npy"), [0.5, -1.5])
    p = run("export", archive, "w2", "bias", tmp_path / "two.npy", check=False)
    assert p.returncode == 2


def safetensors_bytes(tensors, metadata):
    """A safetensors file written by hand: {name: float32 array}, "__metadata__" first."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        a = np.asarray(a, "<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + n])


def test_safetensors_metadata_is_kept_per_tag_and_exported_again(tmp_path):
    import zipfile
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "pt.safetensors").write_bytes(safetensors_bytes({"w": w}, {"format": "pt"}))
    (tmp_path / "more.safetensors").write_bytes(
        safetensors_bytes({"b": np.ones(2)}, {"format": "pt", "note": "two\nlines \u00e9"}))
    (tmp_path / "plain.safetensors").write_bytes(safetensors_bytes({"v": np.zeros(1)}, None))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", tmp_path / "pt.safetensors",
        tmp_path / "more.safetensors")
    run("import", archive, "--tag", "v2", tmp_path / "plain.safetensors")
    with zipfile.ZipFile(archive) as z:  # FORMAT.md 3.1: <tag>/metadata.toml
        assert z.read("v1/metadata.toml").decode() == \
            '[safetensors]\nformat = "pt"\nnote = "two\\nlines \u00e9"\n'
        assert "v2/metadata.toml" not in z.namelist()
    run("export", archive, "--tag", "v1", tmp_path / "out.safetensors")
    header = safetensors_header(tmp_path / "out.safetensors")
    assert header["__metadata__"] == {"format": "pt", "note": "two\nlines \u00e9"}
    assert set(header) == {"__metadata__", "w", "b"}
    # Selected parameters and a re-import keep it too; tags without any have none.
    run("export", archive, "w", "--tag", "v1", tmp_path / "w.safetensors")
    assert safetensors_header(tmp_path / "w.safetensors")["__metadata__"]["format"] == "pt"
    run("import", archive, "--tag", "v3", tmp_path / "w.safetensors")
    run("export", archive, tmp_path / "again.safetensors")  # the newest tag, v3
    assert safetensors_header(tmp_path / "again.safetensors")["__metadata__"] == \
        header["__metadata__"]
    run("export", archive, "--tag", "v2", tmp_path / "plain-out.safetensors")
    assert "__metadata__" not in safetensors_header(tmp_path / "plain-out.safetensors")
    run("export", archive, "--tag", "v1", tmp_path / "out.npz")  # other formats: no metadata
    assert run("verify", archive).returncode == 0


def test_conflicting_safetensors_metadata_is_refused(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(
        safetensors_bytes({"w": np.ones(2)}, {"format": "pt"}))
    (tmp_path / "b.safetensors").write_bytes(
        safetensors_bytes({"b": np.ones(2)}, {"format": "tf"}))
    archive = tmp_path / "m.zip"
    p = run("import", archive, "--tag", "v1", tmp_path / "a.safetensors",
            tmp_path / "b.safetensors", check=False)
    assert p.returncode == 1 and not archive.exists()
    assert p.stderr.decode() == (f"modelzip: {tmp_path / 'b.safetensors'}: safetensors metadata "
                                 "'format' differs from an earlier file's ('pt' there, 'tf' "
                                 "here)\n")


def test_damaged_tag_metadata_is_named_by_export_and_verify(tmp_path):
    import zipfile
    (tmp_path / "a.safetensors").write_bytes(
        safetensors_bytes({"w": np.ones(2)}, {"format": "pt"}))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", tmp_path / "a.safetensors")
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(damaged, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "v1/metadata.toml":
                data = b"[safetensors]\nformat = 3\n"
            dst.writestr(info, data)
    p = run("export", damaged, tmp_path / "x.safetensors", check=False)
    assert p.returncode == 1
    assert "entry 'v1/metadata.toml': line 2: safetensors.format must be a string" in \
        p.stderr.decode(), p.stderr
    p = run("verify", damaged, check=False)
    assert p.returncode == 1 and b"v1/metadata.toml" in p.stdout


def test_export_errors_name_the_file(tensor_files):
    archive = tensor_files / "m.zip"
    np.save(tensor_files / "z.npy", np.ones(2, np.complex128))
    np.save(tensor_files / "s.npy", np.array(["a", "b"]))
    run("import", archive, "--tag", "v1", tensor_files / "z.npy", tensor_files / "s.npy")
    # complex128 streams to safetensors, which has no such type; strings are read whole.
    for name, out in (("z", "out.safetensors"), ("s", "out.btf"), ("s", "out.safetensors")):
        p = run("export", archive, name, tensor_files / out, check=False)
        assert p.returncode == 1
        assert p.stderr.decode().startswith(f"modelzip: {tensor_files / out}: "), p.stderr
        assert f"'{name}'" in p.stderr.decode()
        assert not (tensor_files / out).exists()


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.pth"])
@pytest.mark.parametrize("kind", ["zip", "legacy"])
def test_import_names_torch_save_files(tmp_path, name, kind):
    # torch.save writes a zip of <stem>/data.pkl, <stem>/data/0... (torch >= 1.6) or a pickle
    # starting with torch's magic number (older torch, _use_new_zipfile_serialization=False).
    # Such a file named pytorch_model.bin (Hugging Face's name) was read as word2vec ("word2vec
    # header: rows: 'PK\x03\x04' is not a number"), a .pt one got "cannot tell the format".
    path = tmp_path / name
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("archive/data.pkl", pickle.dumps({"w": 1}, protocol=2))
            z.writestr("archive/data/0", b"\0" * 16)
            z.writestr("archive/version", b"3\n")
    else:
        path.write_bytes(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) +
                         pickle.dumps(1001, protocol=2))
    archive = tmp_path / "m.zip"
    p = run("import", archive, "--tag", "v1", path, check=False)
    assert p.returncode == 1
    assert p.stderr.decode() == (
        f"modelzip: {path}: a torch.save file (a Python pickle), which modelzip does not read "
        "(unpickling can run code): convert it in Python with modelzip.torch.save(torch.load("
        f"'{path}', weights_only=True), '{archive}', 'v1')\n")
    assert not archive.exists()


def test_import_names_other_pickles(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=4))
    p = run("import", tmp_path / "m.zip", "--tag", "v1", path, check=False)
    assert p.returncode == 1 and p.stderr.decode().startswith(
        f"modelzip: {path}: a Python pickle, which modelzip does not read (unpickling can run "
        "code): ")


def test_import_of_a_real_torch_save_file_says_how_to_convert_it(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "pytorch_model.bin"
    torch.save(torch.nn.Linear(3, 2).state_dict(), path)
    p = run("import", tmp_path / "m.zip", "--tag", "v1", path, check=False)
    assert p.returncode == 1 and b"a torch.save file (a Python pickle)" in p.stderr


def test_export_to_numpy_formats_says_which_tensors_become_bit_patterns(tmp_path):
    # numpy has no bfloat16 or float8: .npz/.npy hold their bit patterns (uint16/uint8), which
    # import reads back as uint16/uint8. The export said only "wrote 3 tensor(s) to w.npz (npz)",
    # so the types were lost without a word.
    source = tmp_path / "w.safetensors"
    source.write_bytes(safetensors_file({
        "a": ("BF16", [2], b"\x80\x3f\x00\x40"), "b": ("F8_E4M3", [2], b"\x38\x40"),
        "c": ("F32", [1], b"\0\0\x80\x3f")}))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", source)
    p = run("export", archive, tmp_path / "w.npz")
    assert p.stderr.decode() == (
        f"wrote 3 tensor(s) to {tmp_path / 'w.npz'} (npz; 2 as their bit patterns, bfloat16 as "
        "uint16, float8 and float4_e2m1fn_x2 as uint8: numpy has no such types, .safetensors keeps "
        "them)\n")
    p = run("export", archive, "a", tmp_path / "a.npy")
    assert p.stderr.decode() == (
        f"wrote 1 tensor(s) to {tmp_path / 'a.npy'} (npy; 1 as their bit patterns, bfloat16 as "
        "uint16, float8 and float4_e2m1fn_x2 as uint8: numpy has no such types, .safetensors keeps "
        "them)\n")
    assert np.load(tmp_path / "a.npy").dtype == np.uint16
    p = run("export", archive, tmp_path / "again.safetensors")
    assert p.stderr.decode() == \
        f"wrote 3 tensor(s) to {tmp_path / 'again.safetensors'} (safetensors)\n"
    p = run("export", archive, "c", tmp_path / "c.npz")
    assert p.stderr.decode() == f"wrote 1 tensor(s) to {tmp_path / 'c.npz'} (npz)\n"


def test_import_of_an_archive_as_a_file_says_the_archive_comes_first(tensor_files):
    # `modelzip import new.safetensors --tag t model.zip` (ARCHIVE and FILE swapped) said
    # "cannot tell the format of 'model.zip' (tensors: .npy ...)".
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    swapped = tensor_files / "new.safetensors"
    p = run("import", swapped, "--tag", "t", archive, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {archive}: a modelzip archive, not a tensor or embedding file: the archive "
        "to add to comes first (modelzip import ARCHIVE --tag T FILE...; export writes tensor "
        "files)\n")
    assert not swapped.exists()


@pytest.mark.parametrize("fmt", ["npz", "safetensors", "btf", "npy"])
def test_import_format_reads_what_export_format_wrote(tensor_files, tmp_path, fmt):
    # `export ... OUT --format npz` writes a tensor file under any name; `import --format npz`
    # refused it ("unknown --format 'npz'"), so the CLI could not read back its own output.
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    params = ["w1"] if fmt == "npy" else ["w1", "w2"]
    out = tmp_path / "weights-file"
    run("export", archive, *params, out, "--format", fmt)
    run("import", archive, "--tag", "v2", out, "--format", fmt)
    rows = json.loads(run("ls", archive, "--tag", "v2", "--json").stdout)
    names = {"npy": ["weights-file"], "btf": ["0", "1"]}.get(fmt, params)
    assert [r["name"] for r in rows] == names and all(r["shared"] for r in rows)
    p = run("import", archive, "--tag", "v3", out, "--format", "pickle", check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        "modelzip import: unknown --format 'pickle' (tensors: npy npz safetensors btf; "
        "embeddings: finalfusion word2vec text textdims fasttext floret)\n")


@pytest.mark.parametrize("name, userblock", [("model.h5", 0), ("weights.bin", 0),
                                             ("model.hdf5", 1024)])
def test_import_names_hdf5_files_and_the_way_to_convert_them(tmp_path, name, userblock):
    # An h5py/Keras file got "cannot tell the format of 'model.h5' (tensors: ...)" or, named
    # .bin, "word2vec header: rows: '\x89HDF\r\n\x1a\n' is not a number".
    h5py = pytest.importorskip("h5py")
    path = tmp_path / name
    with h5py.File(path, "w", userblock_size=userblock or None) as f:
        f.create_dataset("layer1/kernel", data=np.ones((2, 3), np.float32))
    archive = tmp_path / "m.zip"
    p = run("import", archive, "--tag", "v1", path, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {path}: an HDF5 file, which modelzip does not read: read its datasets with "
        "h5py and save them with modelzip.save (docs/python.md, \"HDF5 files\")\n")
    assert not archive.exists()


def test_export_of_tensors_to_an_embedding_extension_says_which_formats_take_tensors(
        tensor_files, tmp_path):
    # `export m.zip model.bin` said "an embedding export names exactly one PARAM" and
    # `export m.zip w1 w1.txt` "entry 'v1/params/0.fb': parameter 'w1' is a tensor, not an
    # embedding": neither said that .bin and .txt are embedding formats here.
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    p = run("export", archive, tmp_path / "model.bin", check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        f"modelzip export: OUT '{tmp_path / 'model.bin'}' is an embedding file (word2vec); "
        "tensors go to .safetensors, .npz, .npy or .btf: an embedding export names exactly one "
        "PARAM\n")
    p = run("export", archive, "w1", tmp_path / "w1.txt", check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {archive}: parameter 'w1' is a tensor: OUT '{tmp_path / 'w1.txt'}' is an "
        "embedding file (text); tensors go to .safetensors, .npz, .npy or .btf\n")
    assert not (tmp_path / "model.bin").exists() and not (tmp_path / "w1.txt").exists()


@pytest.mark.parametrize("url, kind", [("http://127.0.0.1:9/w.safetensors", "tensor"),
                                       ("https://example.invalid/v.vec", "embedding"),
                                       ("s3://bucket/w.fifu", "embedding")])
def test_import_of_a_url_says_files_are_read_from_local_paths(tmp_path, url, kind):
    # Archives are read over http/https/s3, FILEs are not: import said "cannot open: No such
    # file or directory" for a URL, as if the server had no such file. Nothing is fetched.
    archive = tmp_path / "m.zip"
    p = run("import", archive, "--tag", "v1", url, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {url}: a URL: {kind} files are read from local paths (download it first; "
        "modelzip archives are read over http, https and s3, docs/remote.md)\n")
    assert not archive.exists()


def test_import_says_that_dash_is_not_standard_input(tensor_files, monkeypatch):
    # `cat w.npz | modelzip import m.zip --tag t -` said "-: cannot open: No such file or
    # directory"; `modelzip import - --tag t w.npz` created an archive named "-".
    p = run("import", tensor_files / "m.zip", "--tag", "v1", "-",
            input=(tensor_files / "layers.npz").read_bytes(), check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        "modelzip import: FILE '-': import reads files, not standard input (save it to a file "
        "first)\n")
    monkeypatch.chdir(tensor_files)
    p = run("import", "-", "--tag", "v1", tensor_files / "layers.npz", check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        "modelzip import: ARCHIVE '-': import writes an archive file, not standard output\n")
    assert not (tensor_files / "m.zip").exists() and not (tensor_files / "-").exists()


def test_the_torch_save_hint_is_python_for_any_file_name(tmp_path):
    # The hint quoted paths as '{path}': a name with a quote or a backslash gave a line that
    # Python does not parse (or reads as another name).
    path = tmp_path / "it's a\\b.pt"
    path.write_bytes(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2))
    archive = tmp_path / "run 'x'.zip"
    p = run("import", archive, "--tag", "v1", path, check=False)
    assert p.returncode == 1
    line = p.stderr.decode().split("convert it in Python with ", 1)[1].rstrip("\n")
    call = ast.parse(line, mode="eval").body
    assert [ast.literal_eval(a) for a in call.args[1:]] == [str(archive), "v1"]
    assert ast.literal_eval(call.args[0].args[0]) == str(path)


def test_info_shows_the_safetensors_metadata_a_tag_keeps(tmp_path):
    # The metadata of an imported HF checkpoint was only visible through an export.
    import zipfile
    (tmp_path / "pt.safetensors").write_bytes(safetensors_bytes(
        {"w": np.ones(2)}, {"format": "pt", "note": "two\nlines \u00e9\x1b[2J"}))
    (tmp_path / "plain.safetensors").write_bytes(safetensors_bytes({"v": np.zeros(1)}, None))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", tmp_path / "pt.safetensors")
    run("import", archive, "--tag", "v2", tmp_path / "plain.safetensors")
    text = run("info", archive, "--tag", "v1").stdout.decode().splitlines()
    at = text.index("files     safetensors __metadata__ (2 keys; export writes it back)")
    assert text[at + 1:at + 3] == ["            format = pt",
                                   "            note = two\\nlines \u00e9\\x1b[2J"]
    info = json.loads(run("info", archive, "--tag", "v1", "--json").stdout)
    assert info["file_metadata"] == {"safetensors": {"format": "pt",
                                                     "note": "two\nlines \u00e9\x1b[2J"}}
    # A tag without any: no line, null.
    assert "files" not in run("info", archive).stdout.decode()
    assert json.loads(run("info", archive, "--json").stdout)["file_metadata"] is None
    # A malformed entry is named, and the rest of the summary still shows.
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(damaged, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "v1/metadata.toml":
                data = b"[safetensors]\nformat = 3\n"
            dst.writestr(item, data)
    p = run("info", damaged, "--tag", "v1")
    assert "files     metadata unreadable: " in p.stdout.decode()
    assert "entry 'v1/metadata.toml': line 2: safetensors.format must be a string" in \
        p.stdout.decode()
    error = json.loads(run("info", damaged, "--tag", "v1", "--json").stdout)["file_metadata"]
    assert "safetensors.format must be a string" in error["error"]


@pytest.mark.parametrize("name", ["weights.weird", "weights"])
def test_import_and_export_refuse_an_unknown_extension_alike(tensor_files, name):
    # export had its own table of formats: it said "unknown format 'weird' (safetensors, npz,
    # npy, btf; embeddings: fifu, bin, txt, vec, or --format ...)" or "OUT '...' has no
    # extension: give --format (...)" and exited 2, where import said "cannot tell the format
    # of '...' (tensors: .npy .npz .safetensors .btf; embeddings: .fifu .bin .ftz .txt .vec,
    # or --format)" and exited 1.
    archive = tensor_files / "m.zip"
    run("import", archive, "--tag", "v1", tensor_files / "layers.npz")
    path = tensor_files / name
    path.write_bytes(b"\0" * 64)  # no format's content either
    expected = (f"cannot tell the format of '{path}' by its extension (tensors: .npy .npz "
                ".safetensors .btf; embeddings: .fifu .bin .txt .vec): give --format\n")
    exported = run("export", archive, "w1", path, check=False)
    imported = run("import", archive, "--tag", "v2", path, check=False)
    assert exported.returncode == imported.returncode == 2
    assert exported.stderr.decode().startswith("modelzip export: " + expected)
    assert imported.stderr.decode().startswith("modelzip import: " + expected)
    assert path.read_bytes() == b"\0" * 64
    # Wrong usage is found before the archive is read.
    exported = run("export", tensor_files / "missing.zip", "w1", path, check=False)
    assert exported.returncode == 2 and exported.stderr.decode().startswith(
        "modelzip export: " + expected)
    # An unknown --format, the same way.
    expected = ("unknown --format 'pickle' (tensors: npy npz safetensors btf; embeddings: "
                "finalfusion word2vec text textdims fasttext floret)\n")
    exported = run("export", archive, "w1", path, "--format", "pickle", check=False)
    imported = run("import", archive, "--tag", "v2", path, "--format", "pickle", check=False)
    assert exported.returncode == imported.returncode == 2
    assert exported.stderr.decode().startswith("modelzip export: " + expected)
    assert imported.stderr.decode().startswith("modelzip import: " + expected)
    assert [t for t in run("tags", archive).stdout.decode().split()] == ["v1"]


def test_converter_messages_quote_names_as_every_other_message(tmp_path):
    # The converters quoted names their own way ("'" + name + "'"): a backslash in a tensor
    # name showed single, so the name of a, backslash, n, b read as a newline's escape; every
    # other message (Error's context, verify, listings) doubles it (docs/cli.md).
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(safetensors_file({"a\\nb": ("X9", [1], b"\0" * 4)}))
    p = run("import", tmp_path / "m.zip", "--tag", "v1", bad, check=False)
    assert p.returncode == 1 and "tensor 'a\\\\nb': unknown dtype 'X9'" in p.stderr.decode(), \
        p.stderr
    big = tmp_path / "big.safetensors"
    big.write_bytes(safetensors_file({"w\\x": ("F32", [2], b"\0" * 4)}))
    p = run("import", tmp_path / "m.zip", "--tag", "v1", big, check=False)
    assert p.returncode == 1 and "tensor 'w\\\\x'" in p.stderr.decode(), p.stderr
