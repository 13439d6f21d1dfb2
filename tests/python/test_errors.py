"""modelzip.Error carries the full message, the code and the context fields."""
import errno
import io
import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

import numpy as np
import pytest

import modelzip
from conftest import CLI, save


def test_error_hierarchy():
    assert issubclass(modelzip.Error, Exception)
    assert issubclass(modelzip.NotFoundError, modelzip.Error)
    assert issubclass(modelzip.NotFoundError, KeyError)
    assert modelzip.Error.__module__ == "modelzip"


def test_missing_file(tmp_path):
    path = tmp_path / "missing.zip"
    with pytest.raises(modelzip.Error) as e:
        modelzip.open(path)
    err = e.value
    assert err.code == "io"
    assert err.archive == str(path)
    assert str(err).startswith(str(path) + ": ")
    assert err.message in str(err) and err.message != str(err)
    assert err.entry is None and err.tag is None and err.line is None
    assert not isinstance(err, KeyError)


def test_missing_parameter_and_tag(archive_path):
    save(archive_path, "step-1", {"w": np.zeros(2)})
    with modelzip.open(archive_path) as ar:
        with pytest.raises(KeyError) as e:  # NotFoundError is a KeyError
            ar.tensor("nope")
        err = e.value
        assert isinstance(err, modelzip.NotFoundError)
        assert err.code == "not_found" and err.tag == "step-1" and err.archive == str(archive_path)
        assert str(err) == f"{archive_path}: tag 'step-1': no parameter 'nope'"  # not quoted
        with pytest.raises(modelzip.NotFoundError, match="no-such-tag"):
            ar.load("no-such-tag")
        with pytest.raises(modelzip.NotFoundError):
            ar.param("w", tag="missing")


def test_corrupt_archive_reports_where(archive_path, tmp_path):
    save(archive_path, "t", {"w": np.arange(4, dtype=np.int32)})
    data = bytearray(archive_path.read_bytes())
    bad = tmp_path / "bad.zip"
    bad.write_bytes(data[: len(data) // 2])  # truncated: central directory gone
    with pytest.raises(modelzip.Error) as e:
        modelzip.open(bad)
    assert e.value.code == "corrupt" and e.value.archive == str(bad)


def replace_in_entry(data, entry, old, new):
    """`data` (a zip) with `old` replaced by `new` (same length) in `entry`, CRC-32 fixed in
    the local header and the central directory, so only the content is wrong."""
    assert len(old) == len(new)
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(entry)
    assert info.compress_type == zipfile.ZIP_STORED
    out = bytearray(data)
    local = info.header_offset
    name_len, extra_len = struct.unpack_from("<HH", out, local + 26)
    start = local + 30 + name_len + extra_len
    content = bytes(out[start:start + info.file_size])
    assert content.count(old) == 1
    content = content.replace(old, new)
    out[start:start + info.file_size] = content
    crc = struct.pack("<I", zlib.crc32(content))
    out[local + 14:local + 18] = crc
    eocd = out.rindex(b"PK\x05\x06")
    (central,) = struct.unpack_from("<I", out, eocd + 16)  # start of the central directory
    while True:
        n, m, k = struct.unpack_from("<HHH", out, central + 28)
        if bytes(out[central + 46:central + 46 + n]) == entry.encode():
            out[central + 16:central + 20] = crc
            return bytes(out)
        central += 46 + n + m + k


def test_corrupt_text_entry_reports_entry_and_line(archive_path, tmp_path):
    """A params.txt escape broken on purpose (CRC fixed): the archive opens (the tag is
    damaged, FORMAT.md), and reading the tag fails cleanly naming the entry and the line."""
    save(archive_path, "t", {"ok": np.ones(1), "a b": np.zeros(2)})  # line 2 is a%20b
    bad = tmp_path / "bad.zip"
    bad.write_bytes(replace_in_entry(archive_path.read_bytes(), "t/params.txt", b"a%20b", b"a%G0b"))
    archive = modelzip.open(bad)
    assert archive.tags == ["t"]
    with pytest.raises(modelzip.Error) as e:
        archive.params("t")
    err = e.value
    assert err.code == "corrupt"
    assert err.entry == "t/params.txt" and err.line == 2
    assert "t/params.txt" in str(err) and "line 2" in str(err)


def test_damaged_blob_is_found_by_copy_reads_and_verify(archive_path, tmp_path):
    """Zero-copy reads skip CRC-32 checks (documented); copy=True and verify() do not."""
    w = np.arange(16, dtype=np.int32)
    save(archive_path, "t", {"w": w})
    data = bytearray(archive_path.read_bytes())
    at = bytes(data).index(w.tobytes())
    data[at] ^= 0xFF
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(data))
    with modelzip.open(bad) as ar:
        assert ar.tensor("w")[0] == 0xFF  # the damaged byte, seen through the view
        with pytest.raises(modelzip.Error) as e:
            ar.tensor("w", copy=True)
        assert e.value.code == "corrupt" and e.value.entry == "t/params/0.fb"
        assert "CRC" in str(e.value)
        problems = ar.verify()
    assert [entry for entry, _ in problems] == ["t/params/0.fb"]


def test_verify_lists_20_problems_of_an_entry_and_problems_found_counts_all(archive_path,
                                                                              tmp_path):
    save(archive_path, "t", {"w": np.arange(4, dtype=np.int32)})
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(archive_path) as zin, \
            zipfile.ZipFile(damaged, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "t/params.txt":
                data = b"".join(b"bad line %d\n" % i for i in range(25))
            zout.writestr(info.filename, data)
    with modelzip.open(damaged) as ar:
        problems = ar.verify()
    assert len(problems) == 21 and {entry for entry, _ in problems} == {"t/params.txt"}
    assert problems[20] == ("t/params.txt", "... and 5 more problems in this entry")
    assert modelzip.problems_found(problems) == 25
    assert modelzip.problems_found([]) == 0
    assert modelzip.problems_found([("a", "... and 1 more problem in this entry"),
                                    ("b", "... and 7 more problem in this entry")]) == 2


def test_invalid_arguments(archive_path):
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "bad/tag", {"w": np.zeros(1)})
    assert e.value.code == "invalid_argument" and "bad/tag" in str(e.value)
    save(archive_path, "Step", {"w": np.zeros(1)})
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "STEP", {"w": np.zeros(1)})
    assert e.value.code == "already_exists"
    # The hint names the option of the call made, not the C++ Writer's.
    assert str(e.value).endswith("tag 'Step' exists already (tags ignore case); "
                                 "replace=True replaces it")
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "x", {"": np.zeros(1)})
    assert e.value.code == "invalid_argument"


def test_saves_given_the_other_argument_order_say_so(archive_path):
    """modelzip.save takes (path, tag, arrays), modelzip.torch.save (tensors, path, tag) as
    safetensors' save_file: either mixed up is a TypeError naming the argument and the order."""
    torch = pytest.importorskip("torch")
    import modelzip.torch as mzt
    tensors = {"w": np.zeros(1)}
    for call, argument in [(lambda: modelzip.save(tensors, archive_path, "t"), "modelzip.save() "
                            "argument 'path'"),
                           (lambda: modelzip.save_async(tensors, archive_path, "t"),
                            "modelzip.save_async() argument 'path'"),
                           (lambda: mzt.save(archive_path, "t", tensors), "modelzip.torch.save() "
                            "argument 'tensors'"),
                           (lambda: mzt.save(str(archive_path), tensors, "t"),
                            "modelzip.torch.save() argument 'tensors'")]:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value).startswith(argument), str(e.value)
        assert "modelzip.torch.save takes the tensors first" in str(e.value)
    with pytest.raises(TypeError, match=r"not Linear \(save module.state_dict\(\)\)"):
        mzt.save(torch.nn.Linear(1, 1), archive_path, "t")
    assert not archive_path.exists()


def test_arrays_that_are_not_a_mapping_are_named_by_type(archive_path):
    # modelzip.save(path, tag, model) (the module, not its state dict), or one array without a
    # name, raised "arrays must be a mapping name -> array", naming neither what was given nor
    # what to pass instead.
    torch = pytest.importorskip("torch")
    cases = [(torch.nn.Linear(1, 1), "not Linear (save module.state_dict())"),
             (np.ones(3), "not ndarray (name each array: {'weight': array})"),
             (torch.ones(3), "not Tensor (name each array: {'weight': array})"),
             ([np.ones(3)], "not list (name each array: {'weight': array})")]
    for arrays, what in cases:
        for call in (lambda: modelzip.save(archive_path, "t", arrays),
                     lambda: modelzip.save_async(archive_path, "t", arrays).result(60),
                     lambda: modelzip.Writer(archive_path).add_tag("t", arrays)):
            with pytest.raises(TypeError) as e:
                call()
            assert str(e.value) == "arrays must be a mapping of names to arrays, " + what
    assert not archive_path.exists()


def test_error_can_be_raised_and_pickled_like_any_exception():
    import pickle
    err = modelzip.Error("full", code="io", message="bare", archive="a.zip", line=3)
    assert (err.code, err.message, err.archive, err.line, err.offset) == ("io", "bare", "a.zip", 3, None)
    assert str(pickle.loads(pickle.dumps(err))) == "full"


def test_missing_file_is_also_file_not_found_error(tmp_path):
    path = tmp_path / "missing.zip"
    for call in (lambda: modelzip.open(path), lambda: modelzip.load(path),
                 lambda: modelzip.read_tensor_file(tmp_path / "missing.npy")):
        with pytest.raises(FileNotFoundError) as e:
            call()
        err = e.value
        assert isinstance(err, modelzip.Error) and isinstance(err, modelzip.FileError)
        assert isinstance(err, OSError) and err.code == "io"
        assert err.errno == errno.ENOENT and err.strerror == os.strerror(errno.ENOENT)
        assert err.filename == err.archive and str(err).startswith(err.archive + ": ")
    with pytest.raises(FileNotFoundError):  # a folder that does not exist, when writing
        save(tmp_path / "no" / "such" / "m.zip", "t", {"w": np.zeros(1)})


UNINITIALIZED_SCRIPT = """
import sys
import numpy as np
import modelzip
from modelzip.distributed import CollectiveWriter, Communicator

path, missing = sys.argv[1], sys.argv[2]
kept = []


class KeepsSelf(modelzip.Archive):  # the C++ __init__ raises after self escaped
    def __init__(self, p):
        kept.append(self)
        super().__init__(p)


try:
    KeepsSelf(missing)
except FileNotFoundError:
    pass
half = kept[0]
bare = {cls: cls.__new__(cls) for cls in (modelzip.Archive, modelzip.Writer, modelzip.Embeddings,
                                          modelzip.Metadata, modelzip.WriteStats, Communicator)}
w = modelzip.Writer(path, durable=False)
calls = {
    "subclass tags": lambda: half.tags,
    "subclass load": lambda: half.load(),
    "subclass close": lambda: half.close(),
    "Archive.name": lambda: bare[modelzip.Archive].name,
    "Archive.param": lambda: bare[modelzip.Archive].param("w"),
    "Writer.add_tag": lambda: bare[modelzip.Writer].add_tag("t", {"w": np.zeros(1)}),
    "Writer.commit": lambda: bare[modelzip.Writer].commit(),
    "Embeddings.dims": lambda: bare[modelzip.Embeddings].dims,
    "Embeddings.words": lambda: bare[modelzip.Embeddings].words(),
    "Metadata.model_name": lambda: bare[modelzip.Metadata].model_name,
    "WriteStats.bytes_written": lambda: bare[modelzip.WriteStats].bytes_written,
    # As an argument, not self:
    "update_metadata(Metadata)": lambda: w.update_metadata(bare[modelzip.Metadata]),
    "add_tag(Embeddings)": lambda: w.add_tag("t", {"e": bare[modelzip.Embeddings]}),
    "CollectiveWriter(Communicator)": lambda: CollectiveWriter(path, bare[Communicator]),
}
calls["CollectiveWriter.commit"] = lambda: CollectiveWriter.__new__(CollectiveWriter).commit("t")
BackgroundSave = modelzip._modelzip.BackgroundSave
calls["BackgroundSave.wait"] = lambda: BackgroundSave.__new__(BackgroundSave).wait()
calls["BackgroundSave.cancel"] = lambda: BackgroundSave.__new__(BackgroundSave).cancel()
BackgroundCollectiveSave = modelzip._modelzip.BackgroundCollectiveSave
calls["BackgroundCollectiveSave.wait"] = \
    lambda: BackgroundCollectiveSave.__new__(BackgroundCollectiveSave).wait()
calls["BackgroundCollectiveSave.done"] = \
    lambda: BackgroundCollectiveSave.__new__(BackgroundCollectiveSave).done()
StagingArea = modelzip._modelzip._StagingArea
calls["_StagingArea.array"] = lambda: StagingArea.__new__(StagingArea).array()
calls["_StagingArea.filled"] = lambda: StagingArea.__new__(StagingArea).filled(0, 1)
# Every property of every bound class, so that a class added later without
# the guard (MODELZIP_PY_INITIALIZED_CASTER) shows up here.
without_properties = []
for cls in vars(modelzip._modelzip).values():
    if not isinstance(cls, type) or type(cls).__name__ != "pybind11_type":
        continue
    properties = [a for a in dir(cls) if isinstance(getattr(cls, a), property)]
    if not properties:
        without_properties.append(cls.__name__)
    for a in properties:
        calls[cls.__name__ + "." + a] = lambda cls=cls, a=a: getattr(cls.__new__(cls), a)
for name, call in calls.items():
    try:
        print(name + ": returned", repr(call())[:80])
    except Exception as e:
        print(name + ": raised", type(e).__name__, e)
print("without properties", sorted(without_properties))
print("reprs", repr(half), repr(bare[modelzip.Writer]))
"""


def test_methods_of_an_uninitialized_instance_raise_value_error(tmp_path):
    # An instance whose C++ object was never made (its __init__ raised after
    # a subclass kept `self`, or cls.__new__(cls)): every method and
    # property, and every function given one as an argument, raises
    # ValueError instead of reading uninitialized memory. In a child process,
    # so that a crash fails this test only.
    result = subprocess.run(
        [sys.executable, "-c", UNINITIALIZED_SCRIPT, str(tmp_path / "m.zip"),
         str(tmp_path / "missing.zip")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) > 40, result.stdout  # 15 calls and every property of 8 classes
    # Checked through a method or as an argument above instead:
    assert lines[-2] == ("without properties ['BackgroundCollectiveSave', 'BackgroundSave', "
                         "'CollectiveWriter', 'Communicator', '_StagingArea']")
    for line in lines[:-2]:
        name, outcome = line.split(": ", 1)
        assert outcome.startswith("raised ValueError "), line
        assert outcome.endswith("object is not initialized (its __init__ raised or was not called)"), line
    assert "__main__.KeepsSelf object is not" in lines[0]
    assert "modelzip.Writer object is not" in lines[5]
    assert lines[-1] == "reprs <modelzip.Archive (not opened)> <modelzip.Writer (not opened)>"


PERMISSION_SCRIPT = """
import sys, modelzip
try:
    {call}
except PermissionError as e:
    assert isinstance(e, modelzip.Error) and e.code == "io", repr(e)
    print("PermissionError", e.errno, e.filename)
"""


def run_without_privileges(code, cwd):
    """Runs ``code`` in a child process that cannot bypass file permissions (not root)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in
                                        env.get("PYTHONPATH", "").split(os.pathsep) if p)
    kwargs = {}
    if os.geteuid() == 0:
        kwargs["preexec_fn"] = lambda: (os.setgid(65534), os.setuid(65534))
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, **kwargs)


@pytest.fixture
def shared_tmp_path():
    """A new folder that an unprivileged user can reach (pytest's tmp_path is private)."""
    with tempfile.TemporaryDirectory(prefix="modelzip-perm-") as d:
        os.chmod(d, 0o755)
        yield pathlib.Path(d)


def test_permission_problems_are_permission_errors(shared_tmp_path):
    tmp_path = shared_tmp_path
    readable_only_by_owner = tmp_path / "private.zip"
    save(readable_only_by_owner, "t", {"w": np.zeros(1)})
    os.chmod(readable_only_by_owner, 0o600 if os.geteuid() == 0 else 0o000)
    locked_dir = tmp_path / "locked"
    locked_dir.mkdir(mode=0o555 if os.geteuid() == 0 else 0o500)
    for call in (f"modelzip.open({str(readable_only_by_owner)!r})",
                 f"modelzip.save({str(locked_dir / 'm.zip')!r}, 't', {{'w': [1.0]}})"):
        out = run_without_privileges(PERMISSION_SCRIPT.format(call=call), tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"PermissionError {errno.EACCES} "), (call, out.stdout)


def test_an_append_in_a_folder_the_user_may_not_write_names_the_folder(shared_tmp_path):
    # An archive the user may write, in a folder they may not: an append creates its journal
    # beside the archive, and failed with "cannot create the append journal: Permission denied",
    # naming neither the journal nor the folder that refused it.
    folder = shared_tmp_path / "locked"
    folder.mkdir()
    archive = folder / "m.zip"
    save(archive, "t", {"w": np.zeros(1)})
    if os.geteuid() == 0:
        os.chown(archive, 65534, 65534)
    folder.chmod(0o555)
    before = archive.read_bytes()
    out = run_without_privileges(PERMISSION_SCRIPT.format(
        call=f"modelzip.save({str(archive)!r}, 'u', {{'w': [1.0]}})") + "    print(e)\n",
        shared_tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"PermissionError {errno.EACCES} "), out.stdout
    assert out.stdout.splitlines()[-1] == (
        f"{archive}: cannot create the append journal .m.zip.modelzip-append in {folder}/: "
        "Permission denied"), out.stdout
    assert archive.read_bytes() == before


@pytest.mark.parametrize("tag", ["", "a/b", "..", "x\n"])
def test_bad_tag_names_are_value_errors(archive_path, tag):
    with pytest.raises(ValueError) as e:
        save(archive_path, tag, {"w": np.zeros(1)})
    assert isinstance(e.value, modelzip.InvalidArgumentError) and e.value.code == "invalid_argument"


def test_missing_tag_names_the_tag(archive_path):
    save(archive_path, "t", {"w": np.zeros(1)})
    with modelzip.open(archive_path) as ar:
        for call in (lambda: ar.load("gone"), lambda: ar.params("gone"),
                     lambda: ar.tensor("w", "gone"), lambda: ar.training_config("gone")):
            with pytest.raises(modelzip.NotFoundError) as e:
                call()
            assert e.value.tag == "gone" and isinstance(e.value, KeyError)


@pytest.mark.parametrize("call, sentence", [
    (lambda ar: ar.tensor(5), "modelzip.Archive.tensor() argument 'name' must be str, not int"),
    (lambda ar: ar.load(tag=5), "modelzip.Archive.load() argument 'tag' must be str or None, "
                                "not int"),
    (lambda ar: ar.load(copy="yes"), "modelzip.Archive.load() argument 'copy' must be bool, not str"),
    (lambda ar: ar.param("w", "t", "x"), "modelzip.Archive.param() takes 2 positional arguments "
                                         "but 3 were given"),
    (lambda ar: ar.params(tga="t"), "modelzip.Archive.params() got an unexpected keyword argument "
                                    "'tga'"),
    (lambda ar: modelzip.Writer(ar.name, dedup="yes"), "modelzip.Writer() argument 'dedup' must "
                                                       "be bool, not str"),
    (lambda ar: modelzip.Metadata(model_name=1), "modelzip.Metadata() argument 'model_name' must "
                                                 "be str or None, not int"),
    (lambda ar: modelzip.Embeddings.load(3), None),
    (lambda ar: modelzip.Writer(ar.name).keep_last(-1),
     "modelzip.Writer.keep_last() argument 'n' must not be negative, not -1"),
    (lambda ar: modelzip.Embeddings.from_matrix(["a"], np.ones((1, 2), np.float32)).similar("a", -2),
     "modelzip.Embeddings.similar() argument 'k' must not be negative, not -2"),
    (lambda ar: modelzip.Writer(ar.name).keep_last(2**70),
     "modelzip.Writer.keep_last() argument 'n' is out of range: 1180591620717411303424"),
    (lambda ar: modelzip.export_tensor_file(ar.name, "x.npz", tag=1.5),
     "modelzip.export_tensor_file() argument 'tag' must be str or None, not float"),
])
def test_wrong_argument_types_raise_one_sentence(archive_path, call, sentence):
    save(archive_path, "t", {"w": np.zeros(1)})
    with modelzip.open(archive_path) as ar:
        with pytest.raises(TypeError) as e:
            call(ar)
    message = str(e.value)
    assert "incompatible" not in message and "Invoked with" not in message and "\n" not in message
    if sentence is not None:
        assert message.startswith(sentence), message


@pytest.mark.parametrize("call, sentence", [
    (lambda p: save(p, "c", {"w": np.ones(1)}, keep_last=True),
     "modelzip.save() argument 'keep_last' must be int or None, not bool"),
    (lambda p: modelzip.save_async(p, "c", {"w": np.ones(1)}, keep_last=True).result(60),
     "modelzip.save_async() argument 'keep_last' must be int or None, not bool"),
    (lambda p: modelzip.save(p, "c", {"w": np.ones(1)}, keep_last=np.True_),
     "modelzip.save() argument 'keep_last' must be int or None, not bool_"),
    (lambda p: modelzip.save(p, "c", {"w": np.ones(1)}, keep_last=-1),
     "modelzip.save() argument 'keep_last' must not be negative, not -1"),
    (lambda p: modelzip.Writer(p).keep_last(True),
     "modelzip.Writer.keep_last() argument 'n' must be int, not bool"),
])
def test_keep_last_true_is_refused_rather_than_keeping_one_tag(archive_path, call, sentence):
    # bool is an int to Python: keep_last=True (read as "keep the last ones") kept one tag and
    # removed every other one.
    save(archive_path, "a", {"w": np.zeros(1)})
    save(archive_path, "b", {"w": np.full(1, 2.0)})
    before = archive_path.read_bytes()
    with pytest.raises(TypeError) as e:
        call(archive_path)
    assert str(e.value) == sentence
    assert archive_path.read_bytes() == before
    assert modelzip.open(archive_path).tags == ["a", "b"]


def test_paths_that_are_not_utf8(tmp_path):
    # os.listdir() gives such names as str with surrogate escapes.
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9.zip")
    with pytest.raises(FileNotFoundError) as e:
        modelzip.open(path)
    assert str(e.value).startswith(str(tmp_path) + "/caf\\xe9.zip: ")
    modelzip.save(path, "t", {"w": np.ones(2)})
    assert os.listdir(tmp_path) == ["caf\udce9.zip"]
    with modelzip.open(path) as archive:
        assert archive.name == path and "caf\\udce9.zip" in repr(archive)
        assert modelzip.open(archive.name).tags == ["t"]
    with modelzip.Writer(path) as w:
        assert w.path == path and "caf\\udce9.zip" in repr(w)
    npz = path[:-4] + ".npz"
    modelzip.write_tensor_file(npz, {"w": np.ones(1)})
    assert list(modelzip.read_tensor_file(npz)[0]) == ["w"]


def test_names_and_tags_that_are_not_utf8_are_named(archive_path):
    # A name made from bytes that are not UTF-8 (os.fsdecode, a file's listing) holds lone
    # surrogates, which an archive cannot store: pybind11 raised "Unable to cast Python
    # instance of type <class 'str'> to C++ type 'std::__cxx11::basic_string...'" for a
    # parameter name and "got arguments of the wrong type" for a tag, naming neither.
    name = os.fsdecode(b"caf\xe9")
    with pytest.raises(ValueError, match=re.escape(
            "parameter 'caf\\udce9': a name must be UTF-8 text ('utf-8' codec can't encode "
            "character '\\udce9' in position 3: surrogates not allowed)")):
        save(archive_path, "t", {"w": np.ones(1), name: np.ones(2)})
    with pytest.raises(ValueError, match=re.escape(
            "modelzip.Writer.add_tag() argument 'tag' must be UTF-8 text ('utf-8' codec can't "
            "encode character '\\udce9' in position 3: surrogates not allowed)")):
        save(archive_path, name, {"w": np.ones(1)})
    assert not archive_path.exists()
    save(archive_path, "t", {"w": np.ones(1)})
    with modelzip.open(archive_path) as archive:
        with pytest.raises(ValueError, match=re.escape(
                "modelzip.Archive.tensor() argument 'name' must be UTF-8 text")):
            archive.tensor(name)


HDF5_AS_WORD2VEC = b"\x89HDF\r\n\x1a\n\0\0\0\0 3\n"  # HDF5's signature read as a header


def test_bytes_quoted_from_a_file_are_escaped_as_the_cli_shows_them(tmp_path):
    """Control characters quoted from a file reach str(e) and e.message
    escaped, never raw; context fields keep the exact name."""
    h5 = tmp_path / "vectors.bin"
    h5.write_bytes(HDF5_AS_WORD2VEC)
    quoted = "word2vec header: rows: '\\x89HDF\\r\\n\\x1a\\n' is not a number"
    with pytest.raises(modelzip.Error) as e:
        modelzip.Embeddings.load(h5, "word2vec")
    assert (str(e.value), e.value.message) == (f"{h5}: offset 0: {quoted}", quoted)
    if CLI is not None:
        done = subprocess.run([CLI, "similar", str(h5), "x"], capture_output=True, text=True,
                              timeout=60)
        assert done.stderr == f"modelzip: {e.value}\n"
    # A tensor name with an escape sequence (JSON \u001b) in a safetensors header.
    header = b'{"\\u001b[2J\\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},' \
             b'"\\u001b[2J\\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    st = tmp_path / "m.safetensors"
    st.write_bytes(struct.pack("<Q", len(header)) + header + b"x")
    with pytest.raises(modelzip.Error) as e:
        modelzip.import_tensor_files(tmp_path / "m.zip", "t", [st])
    assert "duplicate tensor '\\x1b[2J\\n'" in str(e.value), str(e.value)
    assert e.value.message.endswith("duplicate tensor '\\x1b[2J\\n'")
    assert all(c >= " " for c in str(e.value) + e.value.message)
