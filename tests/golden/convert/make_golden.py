#!/usr/bin/python3
"""Generates the reference files read by tests/convert/golden_test.cpp.

Run with Debian's Python (numpy and torch installed):
    /usr/bin/python3 tests/golden/convert/make_golden.py tests/golden/convert

.npy/.npz files are written by numpy itself; the bfloat16 bit patterns come
from torch. safetensors and BTF files are written here by hand, byte by byte,
following the safetensors library (safetensors/src/tensor.rs: header size u64
LE, compact JSON with __metadata__ first, tensors ordered by descending dtype
alignment then name, spaces to a multiple of 8) and TFRT's BTF
(documents/binary_tensor_format.md, lib/tensor/btf_util.cc).

The script prints every file's contents as numpy sees them; the C++ test
states the same values by hand.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(out, name)


def save_npy(name, array, version=None, allow_pickle=False):
    with open(path(name), "wb") as f:
        if version is None:
            np.save(f, array, allow_pickle=allow_pickle)
        else:
            np.lib.format.write_array(f, array, version=version, allow_pickle=allow_pickle)
    print(name, repr(array), array.dtype.str, "fortran" if np.isfortran(array) else "C")


def bf16_bits(values):
    """bfloat16 bit patterns (as uint16) of `values`, rounded by torch."""
    return torch.tensor(values, dtype=torch.bfloat16).view(torch.int16).numpy().view("<u2")


# ---- .npy -------------------------------------------------------------------
save_npy("f4.npy", np.array([[1.5, -2.0, 3.25], [4.0, -0.5, 100.0]], dtype="<f4"))
save_npy("i4_big_endian.npy", np.array([1, -2, 65536, 2147483647], dtype=">i4"))
save_npy("f8_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)))
save_npy("i2_fortran_3d.npy", np.asfortranarray(np.arange(24, dtype="<i2").reshape(2, 3, 4)))
# Larger than the 32x32 tiles of the transposition, odd sizes.
save_npy("i4_fortran_tiles.npy",
         np.asfortranarray(np.arange(33 * 5 * 40, dtype="<i4").reshape(33, 5, 40)))
save_npy("bool.npy", np.array([True, False, True]))
save_npy("f2.npy", np.array([1.0, -2.5, 65504.0], dtype="<f2"))
save_npy("unicode.npy", np.array(["a", "h\u00e9llo", "", "\u65e5\u672c"]))
save_npy("unicode_big_endian.npy", np.array(["xy", "\U0001F600"], dtype=">U2"))
save_npy("scalar.npy", np.array(3.5, dtype="<f8"))
save_npy("empty.npy", np.zeros((0, 3), dtype="<f4"))
save_npy("u1.npy", np.array([0, 255], dtype="|u1"))
save_npy("u2_big_endian.npy", np.array([1, 65535], dtype=">u2"))
save_npy("u4.npy", np.array([4000000000], dtype="<u4"))
save_npy("u8_big_endian.npy", np.array([2**64 - 1, 1], dtype=">u8"))
save_npy("i1.npy", np.array([-128, 127], dtype="|i1"))
save_npy("i8.npy", np.array([-(2**63), 2**63 - 1], dtype="<i8"))
save_npy("f8_big_endian.npy", np.array([-1.25, 1e300], dtype=">f8"))
save_npy("v2.npy", np.array([7.0, 8.0], dtype="<f4"), version=(2, 0))
save_npy("v3.npy", np.array([9.0, 10.0], dtype="<f4"), version=(3, 0))
save_npy("object.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
save_npy("bf16_as_u2.npy", bf16_bits([1.0, -2.0, 0.5]))
# Complex: big-endian files swap each part (real, imaginary) on its own.
save_npy("c8.npy", np.array([[1 + 2j, -0.5 + 0j], [0 - 1j, 4 + 0.25j]], dtype="<c8"))
save_npy("c8_big_endian.npy", np.array([1 - 2j, 0 + 0.5j], dtype=">c8"))
save_npy("c16_big_endian.npy", np.array([0.5 - 1j, -1.25 + 1e300j], dtype=">c16"))

# ---- .npz -------------------------------------------------------------------
np.savez(path("savez.npz"),
         weights=np.array([[1.0, 2.0], [3.0, 4.0]], dtype="<f4"),
         bias=np.array([1, -2, 3], dtype="<i8"),
         flags=np.array([False, True]))
print("savez.npz: weights f4 [[1,2],[3,4]], bias i8 [1,-2,3], flags [False,True]")
big = np.zeros(10000, dtype="<f4")
big[0] = 1.0
big[9999] = -3.0
np.savez_compressed(path("savez_compressed.npz"), big=big,
                    names=np.array(["alpha", "\u03b2eta"]))
print("savez_compressed.npz: big f4 zeros(10000) with [0]=1, [9999]=-3; names ['alpha','\u03b2eta']")

# ---- safetensors --------------------------------------------------------------
# Dtype order of the safetensors library (increasing alignment).
ST_ORDER = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
            "I64", "U64"]


def save_safetensors(name, tensors, metadata=None, pad=True, order=None):
    """tensors: {name: (dtype, shape, bytes)}"""
    keys = order or sorted(tensors, key=lambda k: (-ST_ORDER.index(tensors[k][0]), k))
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    data = b""
    for k in keys:
        dtype, shape, raw = tensors[k]
        header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(path(name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    print(name, text.decode().rstrip(), "data", data.hex())


save_safetensors("model.safetensors", {
    "weight": ("F32", [2, 2], np.array([[0.5, -1.0], [2.0, 8.0]], dtype="<f4").tobytes()),
    "ids": ("I64", [3], np.array([5, -6, 7], dtype="<i8").tobytes()),
    "half": ("F16", [2], np.array([1.0, -0.25], dtype="<f2").tobytes()),
    "brain": ("BF16", [3], bf16_bits([1.0, -2.0, 0.5]).tobytes()),
    "mask": ("BOOL", [2, 1], np.array([[True], [False]]).tobytes()),
    "bytes": ("U8", [0], b""),
    "u64": ("U64", [], np.array(2**63 + 5, dtype="<u8").tobytes()),
}, metadata={"format": "pt", "note": "caf\u00e9 \"quoted\""})
# Valid but unusual: header not padded (data misaligned), keys in name order.
save_safetensors("unpadded.safetensors", {
    "a": ("U8", [3], bytes([1, 2, 3])),
    "b": ("F32", [2], np.array([1.0, 2.0], dtype="<f4").tobytes()),
    "c": ("I16", [1], np.array([-300], dtype="<i2").tobytes()),
}, pad=False, order=["a", "b", "c"])

# ---- BTF --------------------------------------------------------------------
BTF_DTYPES = {"i1": 0, "i2": 1, "i4": 2, "i8": 3, "f4": 4, "f8": 5, "u1": 6, "u2": 7, "u4": 8,
              "u8": 9}


def btf_dense_payload(array):
    return struct.pack("<%dQ" % array.ndim, *array.shape) + array.astype(array.dtype.newbyteorder("<")).tobytes()


def btf_record(header_rank, dtype, layout, payload, pad=True):
    rec = struct.pack("<QBB6x", header_rank, BTF_DTYPES[dtype], layout) + payload
    if pad:
        rec += b"\0" * ((8 - len(rec) % 8) % 8)
    return rec


def save_btf(name, records):
    n = len(records)
    offsets = []
    pos = 8 * (n + 1)
    for r in records:
        offsets.append(pos)
        pos += len(r)
    with open(path(name), "wb") as f:
        f.write(struct.pack("<Q", n) + struct.pack("<%dQ" % n, *offsets) + b"".join(records))


dense_f4 = np.array([[1.0, 2.0, 3.0], [-4.0, 5.5, 6.0]], dtype="<f4")
dense_u2 = np.array([1, 2, 65535], dtype="<u2")
scalar_i8 = np.array(-42, dtype="<i8")
coo_indices = np.array([[0, 1], [2, 3]], dtype="<i8")
coo_values = np.array([1.5, -2.5], dtype="<f8")
last_i1 = np.array([-1, 0, 1], dtype="<i1")
records = [
    btf_record(2, "f4", 0, btf_dense_payload(dense_f4)),
    btf_record(1, "u2", 0, btf_dense_payload(dense_u2)),
    btf_record(0, "i8", 0, btf_dense_payload(scalar_i8)),
    btf_record(2, "f8", 1, struct.pack("<2Q", 3, 4) + btf_dense_payload(coo_indices) +
               btf_dense_payload(coo_values)),
    btf_record(1, "i1", 0, btf_dense_payload(last_i1), pad=False),
]
save_btf("tensors.btf", records)
print("tensors.btf: 0 f32", dense_f4.tolist(), "1 u16", dense_u2.tolist(), "2 i64 scalar",
      int(scalar_i8), "3 COO f64 shape (3,4) indices", coo_indices.tolist(), "values",
      coo_values.tolist(), "4 i8", last_i1.tolist(), "(last record unpadded)")
