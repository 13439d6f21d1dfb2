"""A second writer of the modelzip archive format, written from
schemas/FORMAT.md and schemas/tensor.fbs alone (stdlib and numpy only).

    write(path, [(tag, {name: value}), ...])

`value` is a numpy array (its dtype decides the blob's: bool, the 8- to
64-bit integers, float16/32/64, complex64/128; object arrays of str are
UTF8), `Typed("bfloat16" | "float8_e4m3fn" | "float8_e5m2" |
"float8_e8m0fnu" | "float4_e2m1fn_x2", bits)` for the types numpy lacks
(uint16 / uint8 bit patterns; a float4_e2m1fn_x2 byte is a pair of values),
or `Shared(tag, name)`: the
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


def tensor_header(dtype_no, shape, segments, big=False, alignment=64):
    """The TensorHeader FlatBuffer (tensor.fbs) of a DENSE tensor, with
    `segments` {field index: (offset, length)} (4 values, 5 offsets).
    Fields at their schema defaults are left out (layout, byte_order
    LITTLE, nnz, alignment 64), and so are the Segments not given (§6:
    absent reads as {0, 0})."""
    b = flatbuf.Builder(b"MZTB")
    fields = [(0, "b", dtype_no), (1, "ref", lambda: b.vector("q", list(shape), 8))]
    fields += [(index, "QQ", seg) for index, seg in segments.items()]
    if big:
        fields.append((3, "b", 1))
    if alignment != 64:
        fields.append((8, "I", alignment))
    return b.finish(b.table(fields))


def encode_blob(value, big=False, alignment=64):
    """The bytes of a `.fb` entry (§6) for a numpy array or Typed value:
    header, zero bytes, then the segments (values, then offsets for
    strings), each at the next multiple of `alignment` (writers: 64).
    `big`: byte order BIG (a writer's rule is LITTLE; readers convert)."""
    order = ">" if big else "<"
    if isinstance(value, Quantized):
        return encode_quantized(value)
    if isinstance(value, Typed):
        dname, arr = value.dtype, np.asarray(value.bits)
        if arr.dtype.itemsize != (2 if dname == "bfloat16" else 1):
            raise TypeError(f"{dname} bits of itemsize {arr.dtype.itemsize}")
    else:
        arr = np.asarray(value)
        dname = "utf8" if arr.dtype == object else \
            NUMPY_NAMES["b" if arr.dtype.kind == "b" else arr.dtype.kind + str(arr.dtype.itemsize)]
    if dname == "utf8":
        parts = [x.encode("utf-8") for x in arr.reshape(-1)]
        offsets = np.cumsum([0] + [len(x) for x in parts]).astype(order + "u8").tobytes()
        payload = [(4, b"".join(parts)), (5, offsets)]
    else:
        # astype, not ascontiguousarray: that would make a 0-d array 1-d.
        payload = [(4, arr.astype(arr.dtype.newbyteorder(order), order="C").tobytes())]
    dtype_no = DTYPE_NUMBERS[dname]
    # The header's size does not depend on the offsets (Segment is a fixed
    # size struct): build it once to learn S, then with the final offsets.
    S = len(tensor_header(dtype_no, arr.shape, {i: (0, 0) for i, _ in payload}, big, alignment))
    out = bytearray(struct.pack("<I", S) + bytes(S))
    segments = {}
    for index, data in payload:
        if not data:
            segments[index] = (0, 0)
            continue
        at = align_up(len(out), alignment)
        segments[index] = (at, len(data))
        out += bytes(at - len(out)) + data
    fb = tensor_header(dtype_no, arr.shape, segments, big, alignment)
    assert len(fb) == S
    out[4:4 + S] = fb
    return bytes(out)


class Quantized:
    """A quantized tensor (§6.1): `ints` the stored integers in the original
    shape; `scheme` "affine-per-tensor" (scale, zero_point), "affine-per-axis"
    (axis, float64 scales, int64 zero_points) or "block-symmetric" (axis,
    block_size, scales of scale_type float16 or float32, row-major (row,
    block)); `storage` "int8", "uint8" or "int4"; `dtype` the original type."""

    def __init__(self, dtype, ints, scheme, storage, scale=0.0, zero_point=0, axis=0,
                 scales=None, zero_points=None, block_size=0):
        self.dtype, self.ints, self.scheme, self.storage = dtype, np.asarray(ints), scheme, storage
        self.scale, self.zero_point, self.axis, self.block_size = scale, zero_point, axis, block_size
        self.scales, self.zero_points = scales, zero_points


SCHEMES = {"affine-per-tensor": 0, "affine-per-axis": 1, "block-symmetric": 2}
STORAGES = {"int8": 0, "uint8": 1, "int4": 2}


def encode_quantized(q):
    """The bytes of a `.fb` entry of layout QUANTIZED: values (INT4: element
    2k in the low nibble of byte k, 2k+1 in its high one), then the scales,
    then the zero points, each at the next multiple of 64."""
    flat = q.ints.reshape(-1).astype(np.int64)
    if q.storage == "int4":
        nib = (flat & 0xF).astype(np.uint8)
        if len(nib) % 2:
            nib = np.append(nib, np.uint8(0))  # the padding nibble is 0
        values = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
    else:
        values = flat.astype(np.int8 if q.storage == "int8" else np.uint8).tobytes()
    scales = b"" if q.scales is None else np.asarray(q.scales).astype(
        np.asarray(q.scales).dtype.newbyteorder("<")).tobytes()
    zero_points = b"" if q.zero_points is None else np.asarray(q.zero_points, "<i8").tobytes()
    scale_type = None if q.scales is None else DTYPE_NUMBERS[NUMPY_NAMES[
        "f" + str(np.asarray(q.scales).dtype.itemsize)]]

    def header(seg):
        b = flatbuf.Builder(b"MZTB")
        qfields = [(0, "b", SCHEMES[q.scheme]), (1, "b", STORAGES[q.storage])]
        if q.scheme == "affine-per-tensor":
            qfields += [(2, "d", q.scale), (3, "q", q.zero_point)]
        else:
            qfields += [(4, "q", q.axis), (6, "b", scale_type), (7, "QQ", seg[1])]
            if q.scheme == "block-symmetric":
                qfields.append((5, "Q", q.block_size))
            else:
                qfields.append((8, "QQ", seg[2]))
        return b.finish(b.table([
            (0, "b", DTYPE_NUMBERS[q.dtype]), (1, "ref", lambda: b.vector("q", list(q.ints.shape), 8)),
            (2, "b", 2), (4, "QQ", seg[0]), (9, "ref", lambda: b.table(qfields))]))

    S = len(header([(0, 0)] * 3))
    out = bytearray(struct.pack("<I", S) + bytes(S))
    segs = []
    for data in (values, scales, zero_points):
        if not data:
            segs.append((0, 0))
            continue
        at = align_up(len(out), 64)
        segs.append((at, len(data)))
        out += bytes(at - len(out)) + data
    fb = header(segs)
    assert len(fb) == S
    out[4:4 + S] = fb
    return bytes(out)


class ZipWriter:
    """Stored entries, each padded (§1) so that its data starts at a
    multiple of 64; no ZIP64 (this writer refuses 4 GiB and more)."""

    def __init__(self):
        self.out = bytearray()
        self.central = []

    def add(self, name, data, deflate=False, align=True):
        """Appends an entry; `align` False leaves out the padding field (a
        writer's rule; readers must not rely on it)."""
        name_b = name.encode("utf-8")
        offset = len(self.out)
        u = offset + 30 + len(name_b)
        pad = (64 - u % 64) % 64
        if 0 < pad < 4:
            pad += 64
        if deflate or not align:
            pad = 0  # §1: deflated entries are never padded
        extra = struct.pack("<HH", 0x7A6D, pad - 4) + bytes(pad - 4) if pad else b""
        crc, size = zlib.crc32(data), len(data)
        if deflate:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = c.compress(data) + c.flush()
        if len(data) >= 0xFFFFFFFF or offset >= 0xFFFFFFFF:
            raise ValueError("this writer does not write ZIP64 entries")
        method = 8 if deflate else 0
        self.out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, DOS_TIME, DOS_DATE,
                                crc, len(data), size, len(name_b), len(extra))
        self.out += name_b + extra + data
        # The central header's padding field accounts for the local one (F = L, no ZIP64).
        self.central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method,
                                        DOS_TIME, DOS_DATE, crc, len(data), size,
                                        len(name_b), len(extra), 0, 0, 0, 0, offset)
                            + name_b + extra)

    def finish(self, comment=b""):
        """The archive: entries, central directory, end record with `comment`."""
        cd_offset = len(self.out)
        cd = b"".join(self.central)
        self.out += cd
        self.out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(self.central),
                                len(self.central), len(cd), cd_offset, len(comment))
        return bytes(self.out + comment)


def write(path, tags, model=None, deflate=False, align=True, big=False, alignment=64):
    """Writes a new archive at `path` with `tags`: [(tag, {name: value})] or
    [(tag, {name: value}, {(variable, state): value})] with updater state.
    The other arguments break writers' rules that readers must not rely on
    (§1, §6): deflated blobs, unaligned stored data, byte order BIG, segment
    alignment other than 64."""
    z = ZipWriter()
    toml = 'format_version = 1\nwriter = "spec_writer"\n'
    if model:
        toml += "[model]\n" + "".join(f'{k} = "{v}"\n' for k, v in model.items())
    z.add("modelzip.toml", toml.encode())
    blob_of = {}  # (folder, tag, key) -> (owner tag, n)
    names = []
    for tag, *tables in tags:
        if not spec_reader.TAG_RE.fullmatch(tag):
            raise ValueError(f"invalid tag {tag!r}")
        names.append(tag)
        texts, blobs = {}, {}
        for folder, table in zip(("params", "updater"), tables):
            rows, blobs[folder] = [], []
            for key, value in table.items():
                if isinstance(value, Shared):
                    owner, n = blob_of[(folder, value.tag, value.name)]
                else:
                    owner, n = tag, len(blobs[folder])
                    blobs[folder].append(encode_blob(value, big=big, alignment=alignment))
                blob_of[(folder, tag, key)] = (owner, n)
                ref = str(n) if owner == tag else f"{owner}/{n}"
                fields = (key,) if folder == "params" else key
                rows.append(" ".join([*map(spec_reader.escape, fields), ref]) + "\n")
            texts[folder] = "".join(rows).encode("utf-8")
        # §1's order: params.txt, updater.txt, then the blobs.
        z.add(f"{tag}/params.txt", texts["params"])
        if "updater" in texts:
            z.add(f"{tag}/updater.txt", texts["updater"])
        for folder, folder_blobs in blobs.items():
            for n, blob in enumerate(folder_blobs):
                z.add(f"{tag}/{folder}/{n}.fb", blob, deflate=deflate, align=align)
    z.add("tags.txt", "".join(t + "\n" for t in names).encode())
    with open(path, "wb") as f:
        f.write(z.finish())
