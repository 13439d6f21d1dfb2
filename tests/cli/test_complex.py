"""complex64 and complex128 through the command: arrays numpy writes
(np.savez, '>c8' / '>c16' .npy) and a safetensors file built here by hand
(C64) are imported, listed, printed, compared, left alone by quantize and
exported again; values are checked against numpy's and by hand
(schemas/FORMAT.md section 6: the real part, then the imaginary part)."""
import json
import math
import struct

import numpy as np

from conftest import run, safetensors_file

# [[1 + 2j, -0.5], [-1j, 4 + 0.25j]] and [3 - 4j, 1e300 + 0.5j]
C64 = np.array([[1 + 2j, -0.5 + 0j], [0 - 1j, 4 + 0.25j]], dtype="<c8")
C128 = np.array([3 - 4j, 1e300 + 0.5j], dtype="<c16")


def imported(tmp_path, tag="v1"):
    """An archive with tag `tag` imported from np.savez output."""
    src = tmp_path / "c.npz"
    np.savez(src, spectral=C64, wide=C128, real=np.arange(3, dtype="<f4"))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", tag, src)
    return archive


def test_savez_output_imports_with_its_values(tmp_path):
    archive = imported(tmp_path)
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--json").stdout)}
    assert rows["spectral"]["dtype"] == "complex64" and rows["spectral"]["shape"] == [2, 2]
    assert rows["wide"]["dtype"] == "complex128" and rows["wide"]["shape"] == [2]
    assert b"spectral\tcomplex64\t[2, 2]\t32 B" in run("ls", archive).stdout
    assert run("verify", archive).returncode == 0
    # Raw: the little-endian parts, real first: numpy's own bytes.
    assert run("cat", archive, "spectral").stdout == C64.tobytes()
    assert struct.unpack("<4d", run("cat", archive, "wide").stdout) == (3, -4, 1e300, 0.5)
    (tmp_path / "w.npy").write_bytes(run("cat", archive, "wide", "--npy").stdout)
    back = np.load(tmp_path / "w.npy")
    assert back.dtype == np.dtype("<c16") and np.array_equal(back, C128)
    # export to .npz and .npy: numpy reads the complex arrays back.
    run("export", archive, tmp_path / "all.npz")
    with np.load(tmp_path / "all.npz") as z:
        assert z["spectral"].dtype == np.complex64 and np.array_equal(z["spectral"], C64)
        assert z["wide"].dtype == np.complex128 and np.array_equal(z["wide"], C128)
    run("export", archive, "spectral", tmp_path / "s.npy")
    assert np.array_equal(np.load(tmp_path / "s.npy"), C64)


def test_big_endian_npy_is_swapped_per_part(tmp_path):
    archive = tmp_path / "m.zip"
    np.save(tmp_path / "b8.npy", np.array([1 - 2j, 0.5j], dtype=">c8"))
    np.save(tmp_path / "b16.npy", np.array([[-1.25 + 1e300j]], dtype=">c16"))
    run("import", archive, "--tag", "v1", tmp_path / "b8.npy", tmp_path / "b16.npy")
    assert struct.unpack("<4f", run("cat", archive, "b8").stdout) == (1, -2, 0, 0.5)
    assert struct.unpack("<2d", run("cat", archive, "b16").stdout) == (-1.25, 1e300)


def test_safetensors_c64_round_trips_byte_for_byte(tmp_path):
    # F64 sorts after C64 in the library's dtype enum: written first.
    original = safetensors_file({"scale": ("F64", [1], struct.pack("<d", 2.0)),
                                 "spectral": ("C64", [2, 2], C64.tobytes())})
    src = tmp_path / "c.safetensors"
    src.write_bytes(original)
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", src)
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--json").stdout)}
    assert rows["spectral"]["dtype"] == "complex64"
    assert run("cat", archive, "spectral").stdout == C64.tobytes()
    out = tmp_path / "out.safetensors"
    run("export", archive, out)
    assert out.read_bytes() == original


def test_safetensors_has_no_complex128(tmp_path):
    archive = imported(tmp_path)
    out = tmp_path / "out.safetensors"
    p = run("export", archive, out, check=False)
    assert p.returncode != 0
    assert (b"safetensors cannot hold tensor 'wide': complex128 tensors are not supported "
            b"(safetensors has no such dtype; C64 is complex64)") in p.stderr
    assert not out.exists()
    # complex64 alone goes, as C64.
    run("export", archive, "spectral", out)
    (n,) = struct.unpack_from("<Q", out.read_bytes())
    assert json.loads(out.read_bytes()[8:8 + n])["spectral"]["dtype"] == "C64"


def test_diff_compares_complex_values_by_modulus(tmp_path):
    archive = imported(tmp_path, "a")
    # spectral element 3: 4 + 0.25j -> 1 - 3.75j: |3 + 4j| = 5;
    # wide element 1: 1e300 + 0.5j -> 1e300 + nan j: NaN (JSON null).
    changed = C64.copy()
    changed[1, 1] = 1 - 3.75j
    wide = C128.copy()
    wide[1] = complex(1e300, math.nan)
    np.savez(tmp_path / "b.npz", spectral=changed, wide=wide, real=np.arange(3, dtype="<f4"))
    run("import", archive, "--tag", "b", tmp_path / "b.npz")
    p = run("diff", archive, "a", "b", "--json", check=False)
    assert p.returncode == 1
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["spectral"]["change"] == "changed" and rows["spectral"]["max_abs_diff"] == 5.0
    assert rows["wide"]["change"] == "changed" and rows["wide"]["max_abs_diff"] is None
    assert rows["real"]["change"] == "shared"  # equal data, deduplicated
    assert "max |a - b| = 5" in run("diff", archive, "a", "b", check=False).stdout.decode()


def test_quantize_leaves_complex_alone(tmp_path):
    w32 = np.linspace(-1, 1, 64 * 64, dtype="<f4")
    wc = (w32 + 1j * w32[::-1]).astype("<c8")
    src = tmp_path / "w.npz"
    np.savez(src, w32=w32.reshape(64, 64), spectral=wc.reshape(64, 64))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "float", src)
    out = json.loads(run("quantize", archive, "--from", "float", "--tag", "q", "--scheme",
                         "int8-per-channel", "--json").stdout)
    assert out["quantized"] == ["w32"] and out["referenced"] == ["spectral"]
    assert run("cat", archive, "spectral", "--tag", "q").stdout == wc.tobytes()
    before = archive.read_bytes()
    p = run("quantize", archive, "--from", "float", "--tag", "q2", "--scheme", "int8-block32",
            "--params", "spectral", check=False)
    assert p.returncode != 0
    assert b"not complex64 (complex tensors are not quantized" in p.stderr
    assert archive.read_bytes() == before


def test_btf_and_embeddings_refuse_complex(tmp_path):
    archive = imported(tmp_path)
    p = run("export", archive, "spectral", tmp_path / "s.btf", check=False)
    assert p.returncode != 0 and b"dtype complex64 has no BTF number" in p.stderr
    p = run("similar", archive, "spectral", "word", check=False)
    assert p.returncode != 0 and b"parameter 'spectral' is a tensor, not an embedding" in p.stderr
