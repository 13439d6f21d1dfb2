"""8-bit floats (float8_e4m3fn, float8_e5m2) through the command: a
safetensors file written here by hand with numpy (safetensors F8_E4M3 and
F8_E5M2) is imported, listed, printed, compared, left alone by quantize and
exported again byte for byte; the exported header and data are checked by
hand. Values from the formats' definitions (schemas/FORMAT.md section 6)."""
import json

import numpy as np

from conftest import read_safetensors, run, safetensors_file

# e4m3fn: 1.0, -448, 2^-9 (smallest subnormal), 2^-6 (smallest normal), 2 x 2
E4M3 = bytes([0x38, 0xFE, 0x01, 0x08])
# e5m2: 1.0, +inf, -3 * 2^-16
E5M2 = bytes([0x3C, 0x7C, 0x83])


# F8_E4M3 sorts after F8_E5M2 in the library's dtype enum: written first.
ORIGINAL = safetensors_file({"e4": ("F8_E4M3", [2, 2], E4M3), "e5": ("F8_E5M2", [3], E5M2)})


def test_import_export_is_byte_identical(tmp_path):
    src = tmp_path / "fp8.safetensors"
    src.write_bytes(ORIGINAL)
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", src)
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--json").stdout)}
    assert rows["e4"]["dtype"] == "float8_e4m3fn" and rows["e4"]["shape"] == [2, 2]
    assert rows["e5"]["dtype"] == "float8_e5m2" and rows["e5"]["shape"] == [3]
    assert b"e4\tfloat8_e4m3fn\t[2, 2]\t4 B" in run("ls", archive).stdout
    assert run("verify", archive).returncode == 0

    out = tmp_path / "out.safetensors"
    run("export", archive, out)
    exported = out.read_bytes()
    assert exported == ORIGINAL
    header, data = read_safetensors(exported)
    assert header["e4"]["dtype"] == "F8_E4M3" and header["e5"]["dtype"] == "F8_E5M2"
    assert data == {"e4": E4M3, "e5": E5M2}


def test_cat_gives_the_bit_patterns_raw_and_as_uint8_npy(tmp_path):
    src = tmp_path / "fp8.safetensors"
    src.write_bytes(ORIGINAL)
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "v1", src)
    assert run("cat", archive, "e4").stdout == E4M3
    (tmp_path / "e4.npy").write_bytes(run("cat", archive, "e4", "--npy").stdout)
    a = np.load(tmp_path / "e4.npy")
    assert a.dtype == np.uint8 and a.shape == (2, 2) and a.tobytes() == E4M3
    # export to .npz: the same '|u1' bits, which import reads back as uint8.
    run("export", archive, tmp_path / "all.npz")
    with np.load(tmp_path / "all.npz") as z:
        assert z["e5"].dtype == np.uint8 and z["e5"].tobytes() == E5M2


def test_diff_compares_the_values(tmp_path):
    archive = tmp_path / "m.zip"
    (tmp_path / "a.safetensors").write_bytes(ORIGINAL)
    run("import", archive, "--tag", "a", tmp_path / "a.safetensors")
    # e4 element 0: 1.0 -> 1.5 (0x3C), element 1: -448 -> -416 (0xFD:
    # -(1 + 5/8) * 2^8); e5 element 2: -3 * 2^-16 -> -2^-14 (0x84).
    changed = safetensors_file({"e4": ("F8_E4M3", [2, 2], bytes([0x3C, 0xFD, 0x01, 0x08])),
                                "e5": ("F8_E5M2", [3], bytes([0x3C, 0x7C, 0x84]))})
    (tmp_path / "b.safetensors").write_bytes(changed)
    run("import", archive, "--tag", "b", tmp_path / "b.safetensors")
    p = run("diff", archive, "a", "b", "--json", check=False)
    assert p.returncode == 1
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["e4"]["change"] == "changed" and rows["e4"]["max_abs_diff"] == 32.0
    # Both hold +inf at element 1: |inf - inf| is NaN (JSON null), as for
    # the other float types.
    assert rows["e5"]["change"] == "changed" and rows["e5"]["max_abs_diff"] is None
    assert "max |a - b| = 32" in run("diff", archive, "a", "b", check=False).stdout.decode()


def test_quantize_leaves_float8_alone(tmp_path):
    w8 = bytes((i * 7) & 0x77 for i in range(64 * 64))  # finite e4m3fn patterns
    w32 = np.linspace(-1, 1, 64 * 64, dtype="<f4")
    src = tmp_path / "w.safetensors"
    src.write_bytes(safetensors_file({"w32": ("F32", [64, 64], w32.tobytes()),
                                      "w8": ("F8_E4M3", [64, 64], w8)}))
    archive = tmp_path / "m.zip"
    run("import", archive, "--tag", "float", src)
    out = json.loads(run("quantize", archive, "--from", "float", "--tag", "q", "--scheme",
                         "int8-per-channel", "--json").stdout)
    assert out["quantized"] == ["w32"] and out["referenced"] == ["w8"]
    assert run("cat", archive, "w8", "--tag", "q").stdout == w8
    before = archive.read_bytes()
    p = run("quantize", archive, "--from", "float", "--tag", "q8", "--scheme", "int4-block32",
            "--params", "w8", check=False)
    assert p.returncode != 0
    assert b"not float8_e4m3fn (a quantized tensor cannot stand for 8-bit floats)" in p.stderr
    assert archive.read_bytes() == before
