#!/usr/bin/python3
"""Checks the files written by tests/convert/python_test.cpp with numpy.

Usage: /usr/bin/python3 check_written.py DIR

DIR holds all.npz, npy/<name>.npy, model.safetensors and model.btf. The
expected values below are written by hand (the C++ test states the same
values); numpy loads .npy/.npz itself, the safetensors rules and the TFRT BTF
layout are checked byte by byte here. Prints "ok" and exits 0 when every
check passes; raises (exit 1) naming the first failed check otherwise.
"""
import collections
import json
import os
import struct
import sys
import zipfile

import numpy as np

try:
    import torch
except ImportError:  # bfloat16 values are then checked as bit patterns only
    torch = None

d = sys.argv[1]

EXPECTED = {
    "weights": ("<f4", (2, 3), [1.5, -2.0, 3.25, 4.0, -0.5, 100.0]),
    "ids": ("<i8", (3,), [5, -6, 7]),
    "flags": ("|b1", (2, 2), [True, False, False, True]),
    "half": ("<f2", (2,), [1.0, -0.25]),
    "brain": ("<u2", (2,), [0x3F80, 0xC000]),  # bfloat16 1.0, -2.0 as raw '<u2'
    "u8": ("|u1", (3,), [0, 128, 255]),
    "scalar": ("<f8", (), [2.5]),
    "names": ("<U5", (3,), ["alpha", "\u03b2eta", ""]),
    "u16": ("<u2", (2,), [0, 65535]),
    "i16": ("<i2", (2,), [-32768, 32767]),
    "u32": ("<u4", (2,), [7, 4000000000]),
    "i32": ("<i4", (2,), [-5, 2**30]),
    "u64": ("<u8", (1,), [2**64 - 1]),
    "i8": ("|i1", (3,), [-128, 0, 127]),
    "empty": ("<f4", (0, 4), []),
    # 8-bit floats as raw '|u1': e4m3fn 1.0, -448, 2^-9, NaN; e5m2 1.0, +inf, -3 * 2^-16
    "e4m3": ("|u1", (4,), [0x38, 0xFE, 0x01, 0x7F]),
    "e5m2": ("|u1", (3,), [0x3C, 0x7C, 0x83]),
    # MX types as raw '|u1': e8m0fnu 1, 2, 2^-127, NaN; float4_e2m1fn_x2 one byte per pair
    "e8m0": ("|u1", (4,), [0x7F, 0x80, 0x00, 0xFF]),
    "fp4": ("|u1", (2, 2), [0x21, 0x97, 0x70, 0xF8]),
    # complex: numpy's own '<c8' / '<c16' (real part, then imaginary part)
    "c64": ("<c8", (2,), [1 + 2j, -0.5 + 0j]),
    "c128": ("<c16", (1,), [3 - 4j]),
}

# The values the 8-bit float patterns stand for, decoded here from the formats'
# definitions (sign, exponent, mantissa; e4m3fn: bias 7, S.1111.111 NaN, no
# infinity; e5m2: bias 15, IEEE infinity and NaN).
def float8_value(b, exponent_bits, mantissa_bits, bias, ieee):
    sign = -1.0 if b & 0x80 else 1.0
    e = (b >> mantissa_bits) & ((1 << exponent_bits) - 1)
    m = b & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if ieee and e == top:
        return sign * float("inf") if m == 0 else float("nan")
    if not ieee and e == top and m == (1 << mantissa_bits) - 1:
        return float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + m / 2.0 ** mantissa_bits) * 2.0 ** (e - bias)


# name: (safetensors dtype, decoder arguments, values, torch dtype name)
FLOAT8 = {
    "e4m3": ("F8_E4M3", (4, 3, 7, False), [1.0, -448.0, 2.0 ** -9, float("nan")],
             "float8_e4m3fn"),
    "e5m2": ("F8_E5M2", (5, 2, 15, True), [1.0, float("inf"), -3 * 2.0 ** -16], "float8_e5m2"),
}


# The MX values, decoded here from the definitions (FORMAT.md section 6): e8m0fnu is 2^(e - 127),
# 0xFF NaN; an e2m1 nibble is sign (bit 3), 2 exponent bits (bias 1), 1 mantissa bit, and each
# float4_e2m1fn_x2 byte holds two, the first in the low nibble.
def e8m0_value(b):
    return float("nan") if b == 0xFF else 2.0 ** (b - 127)


def e2m1_value(n):
    sign = -1.0 if n & 0x8 else 1.0
    e, m = (n >> 1) & 0x3, n & 0x1
    return sign * (m * 0.5 if e == 0 else (1 + m / 2.0) * 2.0 ** (e - 1))


MX_VALUES = {"e8m0": (lambda raw: [e8m0_value(b) for b in raw],
                      [1.0, 2.0, 2.0 ** -127, float("nan")]),
             "fp4": (lambda raw: [e2m1_value(v) for b in raw for v in (b & 0xF, b >> 4)],
                     [0.5, 1.0, 6.0, -0.5, 0.0, 6.0, -0.0, -6.0])}


def same_floats(got, want):
    return len(got) == len(want) and all(
        (g != g and w != w) or g == w for g, w in zip(got, want))


def check_float8(where, name, raw_bytes):
    _, args, want, torch_name = FLOAT8[name]
    got = [float8_value(b, *args) for b in raw_bytes]
    check(same_floats(got, want), "%s %s: decodes to %r, expected %r" % (where, name, got, want))
    if torch is not None and hasattr(torch, torch_name):  # torch >= 2.1
        t = torch.frombuffer(bytearray(raw_bytes), dtype=getattr(torch, torch_name))
        got = t.float().tolist()
        check(same_floats(got, want), "%s %s: torch reads %r" % (where, name, got))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def check_array(where, a, name):
    dtype, shape, values = EXPECTED[name]
    check(a.dtype == np.dtype(dtype), "%s %s: dtype %s, expected %s" % (where, name, a.dtype, dtype))
    check(a.shape == shape, "%s %s: shape %s, expected %s" % (where, name, a.shape, shape))
    check(a.flags.c_contiguous, "%s %s: not C order" % (where, name))
    expected = np.array(values, dtype=dtype).reshape(shape)
    check(np.array_equal(a, expected), "%s %s: values %r, expected %r" % (where, name, a, expected))


# ---- .npz and .npy, loaded by numpy ---------------------------------------------
with np.load(os.path.join(d, "all.npz")) as z:
    check(sorted(z.files) == sorted(EXPECTED), "npz keys %r" % (z.files,))
    for name in EXPECTED:
        check_array("npz", z[name], name)
with zipfile.ZipFile(os.path.join(d, "all.npz")) as zf:
    check(zf.testzip() is None, "npz: a member fails its CRC")
    for info in zf.infolist():
        check(info.compress_type == zipfile.ZIP_STORED, "npz member %s not stored" % info.filename)

for name in EXPECTED:
    path = os.path.join(d, "npy", name + ".npy")
    check_array("npy", np.load(path), name)
    with open(path, "rb") as f:
        raw = f.read()
    check(raw[:8] == b"\x93NUMPY\x01\x00", "npy %s: magic/version %r" % (name, raw[:8]))
    hlen = struct.unpack("<H", raw[8:10])[0]
    check((10 + hlen) % 64 == 0, "npy %s: data not 64-byte aligned" % name)
    check(raw[10 + hlen - 1:10 + hlen] == b"\n", "npy %s: header does not end with newline" % name)

# ---- safetensors: the library's rules, checked by hand ---------------------------
ST_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16",
            "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
ST_NUMPY = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "F8_E5M2": "|u1", "F8_E4M3": "|u1",
            "F8_E8M0": "|u1", "F4": "|u1",
            "I16": "<i2", "U16": "<u2", "F16": "<f2", "BF16": "<u2", "I32": "<i4", "U32": "<u4",
            "F32": "<f4", "C64": "<c8", "F64": "<f8", "I64": "<i8", "U64": "<u8"}
ST_EXPECTED_DTYPE = {"weights": "F32", "ids": "I64", "flags": "BOOL", "half": "F16",
                     "brain": "BF16", "u8": "U8", "scalar": "F64", "u16": "U16", "i16": "I16",
                     "u32": "U32", "i32": "I32", "u64": "U64", "i8": "I8", "empty": "F32",
                     "e4m3": "F8_E4M3", "e5m2": "F8_E5M2", "c64": "C64", "e8m0": "F8_E8M0",
                     "fp4": "F4"}
with open(os.path.join(d, "model.safetensors"), "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
check(n % 8 == 0, "safetensors: header size %d is not a multiple of 8" % n)
header = raw[8:8 + n].decode("utf-8")
text = header.rstrip(" ")
check(len(header) - len(text) < 8, "safetensors: more padding than needed")
check(text.startswith("{"), "safetensors: header does not start with '{'")
doc = json.loads(text, object_pairs_hook=collections.OrderedDict)
check(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) == text,
      "safetensors: header is not compact JSON")
keys = list(doc)
check(keys[0] == "__metadata__", "safetensors: __metadata__ is not first")
check(doc["__metadata__"] == {"format": "pt", "note": "caf\u00e9"},
      "safetensors: metadata %r" % (doc["__metadata__"],))
names = keys[1:]
check(sorted(names) == sorted(ST_EXPECTED_DTYPE), "safetensors: tensors %r" % (names,))
check(names == sorted(names, key=lambda k: (-ST_ORDER.index(doc[k]["dtype"]), k)),
      "safetensors: not ordered by descending alignment, then name: %r" % (names,))
data = raw[8 + n:]
pos = 0
for name in names:
    info = doc[name]
    check(sorted(info) == ["data_offsets", "dtype", "shape"], "safetensors %s: fields" % name)
    check(info["dtype"] == ST_EXPECTED_DTYPE[name], "safetensors %s: dtype" % name)
    b, e = info["data_offsets"]
    check(b == pos, "safetensors %s: gap or overlap at %d" % (name, b))
    dt = np.dtype(ST_NUMPY[info["dtype"]])
    count = int(np.prod(info["shape"], dtype=np.int64))
    shape = list(info["shape"])
    if info["dtype"] == "F4":  # the shape counts 4-bit values, two to a byte
        check(shape and shape[-1] % 2 == 0, "safetensors %s: F4 shape %r" % (name, shape))
        count //= 2
        shape[-1] //= 2
    check(e - b == count * dt.itemsize, "safetensors %s: size" % name)
    check((8 + n + b) % dt.itemsize == 0, "safetensors %s: misaligned" % name)
    a = np.frombuffer(data[b:e], dtype=dt).reshape(shape)
    check_array("safetensors", a, name)
    if name in FLOAT8:
        check_float8("safetensors", name, data[b:e])
    if name in MX_VALUES:
        decode, want = MX_VALUES[name]
        got = decode(data[b:e])
        check(same_floats(got, want) and [str(g)[0] == "-" for g in got] ==
              [str(w)[0] == "-" for w in want], "safetensors %s: values %r" % (name, got))
    if name == "brain" and torch is not None:
        as_float = torch.frombuffer(bytearray(data[b:e]), dtype=torch.bfloat16).float().tolist()
        check(as_float == [1.0, -2.0], "safetensors brain: bfloat16 values %r" % (as_float,))
    pos = e
check(pos == len(data), "safetensors: data area has %d bytes, tensors cover %d" % (len(data), pos))

# ---- BTF: TFRT's layout, checked by hand ------------------------------------------
BTF_NAMES = ["weights", "ids", "u8", "scalar", "u16", "i16", "u32", "i32", "u64", "i8", "empty",
             "coo"]
BTF_DTYPES = {0: "<i1", 1: "<i2", 2: "<i4", 3: "<i8", 4: "<f4", 5: "<f8", 6: "<u1", 7: "<u2",
              8: "<u4", 9: "<u8"}
with open(os.path.join(d, "model.btf"), "rb") as f:
    raw = f.read()
count = struct.unpack_from("<Q", raw, 0)[0]
check(count == len(BTF_NAMES), "btf: %d tensors" % count)
offsets = struct.unpack_from("<%dQ" % count, raw, 8)
pos = 8 * (count + 1)
for i, name in enumerate(BTF_NAMES):
    check(offsets[i] == pos, "btf %s: record offset %d, expected %d" % (name, offsets[i], pos))
    rank, code, layout, reserved = struct.unpack_from("<QBB6s", raw, pos)
    check(reserved == b"\0" * 6, "btf %s: reserved bytes not zero" % name)
    p = pos + 16
    dims = struct.unpack_from("<%dQ" % rank, raw, p)
    p += 8 * rank
    dt = np.dtype(BTF_DTYPES[code])

    def dense(p, dims, dt):
        count = int(np.prod(dims, dtype=np.int64))
        a = np.frombuffer(raw, dtype=dt, count=count, offset=p).reshape(dims)
        return a, p + count * dt.itemsize

    if name == "coo":
        check(layout == 1, "btf coo: layout %d" % layout)
        check(dims == (3, 4) and dt == np.dtype("<f4"), "btf coo: dims/dtype")
        idims = struct.unpack_from("<2Q", raw, p)
        check(idims == (2, 2), "btf coo: index dims %r" % (idims,))
        indices, p = dense(p + 16, idims, np.dtype("<i8"))
        check(indices.tolist() == [[0, 1], [2, 3]], "btf coo: indices %r" % indices)
        vdims = struct.unpack_from("<Q", raw, p)
        check(vdims == (2,), "btf coo: value dims")
        values, p = dense(p + 8, vdims, dt)
        check(values.tolist() == [1.5, -2.5], "btf coo: values %r" % values)
    else:
        check(layout == 0, "btf %s: layout %d" % (name, layout))
        a, p = dense(p, dims, dt)
        check_array("btf", a, name)
    padded = (p + 7) // 8 * 8
    check(raw[p:padded] == b"\0" * (padded - p), "btf %s: padding not zero" % name)
    pos = padded
check(pos == len(raw), "btf: %d trailing bytes" % (len(raw) - pos))
print("ok")
