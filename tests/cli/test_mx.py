"""The MX types float8_e8m0fnu and float4_e2m1fn_x2 (schemas/FORMAT.md
section 6) through `modelzip diff`: compared by the values they stand for, as
the other float types are. Values worked by hand from the section's
definitions: an E8M0 byte e is 2^(e-127), 0xFF NaN; an FP4 byte holds two
E2M1 values, the first in the low nibble; nibble 0x1 is 0.5, 0x2 1, 0x3 1.5,
0x7 6, 0x8-0xF the negations of 0x0-0x7."""
import json

from conftest import run, safetensors_file

# scale: 1, 2, 2^-127, 2^127.  w (safetensors F4 counts values: 4 of them
# in 2 bytes): 0.5, 1, 0, 0.
BEFORE = {"scale": ("F8_E8M0", [4], bytes([0x7F, 0x80, 0x00, 0xFE])),
          "w": ("F4", [4], bytes([0x21, 0x00]))}


def diff_rows(tmp_path, after):
    archive = tmp_path / "m.zip"
    for tag, tensors in (("a", BEFORE), ("b", after)):
        (tmp_path / f"{tag}.safetensors").write_bytes(safetensors_file(tensors))
        run("import", archive, "--tag", tag, tmp_path / f"{tag}.safetensors")
    p = run("diff", archive, "a", "b", "--json", check=False)
    assert p.returncode == 1
    text = run("diff", archive, "a", "b", check=False).stdout.decode()
    return {r["name"]: r for r in json.loads(p.stdout)}, text


def test_diff_reports_the_largest_difference_of_the_values(tmp_path):
    # scale element 1: 2 -> 8 (0x82), |a - b| = 6 (as bytes it would be 2).
    # w: 0.5, 1.5 (0x3, high nibble of byte 0), 0, -6 (0xF, high nibble of
    # byte 1): the differences 0, 0.5, 0, 6; the largest is in the second
    # value of the second byte.
    rows, text = diff_rows(tmp_path, {"scale": ("F8_E8M0", [4], bytes([0x7F, 0x82, 0x00, 0xFE])),
                                      "w": ("F4", [4], bytes([0x31, 0xF0]))})
    assert rows["scale"]["change"] == "changed" and rows["scale"]["max_abs_diff"] == 6.0
    assert rows["scale"]["detail"] == "max |a - b| = 6"
    assert rows["w"]["change"] == "changed" and rows["w"]["max_abs_diff"] == 6.0
    assert "changed\tscale\tmax |a - b| = 6\n" in text
    assert "changed\tw\tmax |a - b| = 6\n" in text


def test_diff_of_a_nan_scale_is_nan(tmp_path):
    # scale element 0: 1 -> NaN (0xFF): NaN (JSON null), as for the other
    # float types; w: -0 (0x8) against 0 in the low nibble of byte 1 and
    # 0.5 -> -0.5 (0x9): the largest difference 1.
    rows, _ = diff_rows(tmp_path, {"scale": ("F8_E8M0", [4], bytes([0xFF, 0x80, 0x00, 0xFE])),
                                   "w": ("F4", [4], bytes([0x29, 0x08]))})
    assert rows["scale"]["change"] == "changed" and rows["scale"]["max_abs_diff"] is None
    assert rows["w"]["change"] == "changed" and rows["w"]["max_abs_diff"] == 1.0
