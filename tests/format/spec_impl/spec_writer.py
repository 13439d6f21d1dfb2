"""A second writer of the modelzip archive format, written from
schemas/FORMAT.md and schemas/tensor.fbs alone (stdlib and numpy only).

    write(path, [(tag, {name: value}), ...])

`value` is a numpy array (its dtype decides the blob's: bool, the 8- to
64-bit integers, float16/32/64, complex64/128; object arrays of str are
UTF8), `Typed("bfloat16" | "float8_e4m3fn" | "float8_e5m2", bits)` for the
types numpy lacks (uint16 / uint8 bit patterns), or `Shared(tag, name)`: the
blob of parameter `name` of the earlier tag `tag`, referenced instead of
stored again (§4.2, §5). Tags are written oldest first; the archive is
written whole (a new file), in the entry order of §1, every entry stored
with its data at a multiple of 64.
"""
import struct
import zlib

import numpy as np

import flatbuf
import spec_reader


class Typed:
    def __init__(self, dtype, bits):
        self.dtype, self.bits = dtype, np.asarray(bits)


class Shared:
    def __init__(self, tag, name):
        self.tag, self.name = tag, name


DTYPE_NUMBERS = {name: no for no, (name, _, _) in spec_reader.DTYPES.items()}
NUMPY_NAMES = {"b": "bool", "f2": "float16", "f4": "float32", "f8": "float64", "i1": "int8",
               "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8", "u2": "uint16",
               "u4": "uint32", "u8": "uint64", "c8": "complex64", "c16": "complex128"}

DOS_TIME, DOS_DATE = 12 << 11, (0 << 9) | (1 << 5) | 1  # 1980-01-01 12:00 (§1)


def align_up(x, a):
    return -(-x // a) * a


def tensor_header(dtype_no, shape, values):
    """The TensorHeader FlatBuffer (tensor.fbs) of a DENSE LITTLE tensor:
    fields at their schema defaults are left out (layout, byte_order, nnz,
    alignment 64), and so are the unused Segments (§6: absent reads as
    {0, 0})."""
    b = flatbuf.Builder(b"MZTB")
    fields = [(0, "b", dtype_no),
              (1, "ref", lambda: b.vector("q", list(shape), 8)),
              (4, "QQ", values)]
    if dtype_no == DTYPE_NUMBERS["utf8"]:
        raise ValueError("use string_header")
    return b.finish(b.table(fields))


def encode_blob(value):
    """The bytes of a `.fb` entry (§6) for a numpy array or Typed value."""
    if isinstance(value, Typed):
        dname, arr = value.dtype, np.array(value.bits, order="C")
        if arr.dtype.itemsize != (2 if dname == "bfloat16" else 1):
            raise TypeError(f"{dname} bits of itemsize {arr.dtype.itemsize}")
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    else:
        arr = np.asarray(value)
        if arr.dtype == object:
            return encode_strings(arr)
        key = arr.dtype.kind + str(arr.dtype.itemsize) if arr.dtype.kind != "b" else "b"
        dname = NUMPY_NAMES[key]
        arr = arr.astype(arr.dtype.newbyteorder("<"), order="C")
    data = arr.tobytes()
    dtype_no = DTYPE_NUMBERS[dname]
    # The header's size does not depend on the offsets (Segment is a fixed
    # size struct): build it once to learn S, then with the final offset.
    S = len(tensor_header(dtype_no, arr.shape, (0, 0)))
    V = align_up(4 + S, 64)
    fb = tensor_header(dtype_no, arr.shape, (V, len(data)) if data else (0, 0))
    assert len(fb) == S
    if not data:
        return struct.pack("<I", S) + fb
    return struct.pack("<I", S) + fb + bytes(V - 4 - S) + data


def encode_strings(arr):
    """UTF8 (§6): values = the concatenated strings, offsets = numel+1 u64."""
    parts = [s.encode("utf-8") for s in arr.reshape(-1)]
    offs = np.cumsum([0] + [len(p) for p in parts]).astype("<u8")
    values, offsets = b"".join(parts), offs.tobytes()

    def header(vseg, oseg):
        b = flatbuf.Builder(b"MZTB")
        return b.finish(b.table([(0, "b", DTYPE_NUMBERS["utf8"]),
                                 (1, "ref", lambda: b.vector("q", list(arr.shape), 8)),
                                 (4, "QQ", vseg), (5, "QQ", oseg)]))

    S = len(header((0, 0), (0, 0)))
    V = align_up(4 + S, 64)
    O = align_up(V + len(values), 64) if values else V
    fb = header((V, len(values)) if values else (0, 0), (O, len(offsets)))
    out = bytearray(struct.pack("<I", S) + fb)
    if values:
        out += bytes(V - len(out)) + values
    out += bytes(O - len(out)) + offsets
    return bytes(out)


class ZipWriter:
    """Stored entries, each padded (§1) so that its data starts at a
    multiple of 64; no ZIP64 (this writer refuses 4 GiB and more)."""

    def __init__(self):
        self.out = bytearray()
        self.central = []

    def add(self, name, data):
        name_b = name.encode("utf-8")
        offset = len(self.out)
        u = offset + 30 + len(name_b)
        pad = (64 - u % 64) % 64
        if 0 < pad < 4:
            pad += 64
        extra = struct.pack("<HH", 0x7A6D, pad - 4) + bytes(pad - 4) if pad else b""
        crc = zlib.crc32(data)
        if len(data) >= 0xFFFFFFFF or offset >= 0xFFFFFFFF:
            raise ValueError("this writer does not write ZIP64 entries")
        self.out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, DOS_TIME, DOS_DATE,
                                crc, len(data), len(data), len(name_b), len(extra))
        self.out += name_b + extra + data
        # The central header's padding field accounts for the local one (F = L, no ZIP64).
        self.central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0,
                                        DOS_TIME, DOS_DATE, crc, len(data), len(data),
                                        len(name_b), len(extra), 0, 0, 0, 0, offset)
                            + name_b + extra)

    def finish(self):
        cd_offset = len(self.out)
        cd = b"".join(self.central)
        self.out += cd
        self.out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(self.central),
                                len(self.central), len(cd), cd_offset, 0)
        return bytes(self.out)


def write(path, tags, model=None):
    """Writes a new archive at `path` with `tags`: [(tag, {name: value})]."""
    z = ZipWriter()
    toml = 'format_version = 1\nwriter = "spec_writer"\n'
    if model:
        toml += "[model]\n" + "".join(f'{k} = "{v}"\n' for k, v in model.items())
    z.add("modelzip.toml", toml.encode())
    blob_of = {}  # (tag, name) -> (owner tag, n)
    names = []
    for tag, params in tags:
        if not spec_reader.TAG_RE.fullmatch(tag):
            raise ValueError(f"invalid tag {tag!r}")
        names.append(tag)
        rows, blobs = [], []
        for name, value in params.items():
            if isinstance(value, Shared):
                owner, n = blob_of[(value.tag, value.name)]
            else:
                owner, n = tag, len(blobs)
                blobs.append(encode_blob(value))
            blob_of[(tag, name)] = (owner, n)
            ref = str(n) if owner == tag else f"{owner}/{n}"
            rows.append(f"{spec_reader.escape(name)} {ref}\n")
        z.add(f"{tag}/params.txt", "".join(rows).encode("utf-8"))
        for n, blob in enumerate(blobs):
            z.add(f"{tag}/params/{n}.fb", blob)
    z.add("tags.txt", "".join(t + "\n" for t in names).encode())
    with open(path, "wb") as f:
        f.write(z.finish())
