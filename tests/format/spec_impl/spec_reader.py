"""A second reader of the modelzip archive format, written from
schemas/FORMAT.md and schemas/tensor.fbs alone (stdlib and numpy only).

    read(path) -> {tag: {name: numpy array}}

Tensors come back as numpy arrays of their values: bfloat16, the two
8-bit floats and the two MX types decoded to float32 (every value of theirs
is a float32; a float4_e2m1fn_x2 tensor of shape [..., n] as its 2n values
[..., 2n], low nibble first), quantized tensors dequantized (§6.1) to their original dtype (bfloat16 to
float32 again), strings as object arrays of str, sparse COO tensors as
`SparseCOO`, embedding parameters (`.fifu`, FINALFUSION.md) as
`spec_finalfusion.Fifu`. `SpecArchive` gives the parts: tags, params and
updater rows, dtype names.

Every rule the specification says a reader MUST check is checked here, and
a violation raises `SpecError` naming the entry. `writer_layout_problems`
checks, in addition, the rules the specification sets for writers only
(alignment and padding fields, §1), which a reader must not rely on.
"""
import os
import re
import struct
import tomllib
import zlib

import numpy as np

import flatbuf


class SpecError(ValueError):
    pass


# --------------------------------------------------------------------------
# §1 Container


class Entry:
    __slots__ = ("name", "method", "flags", "crc", "csize", "usize", "offset",
                 "data_start", "local_extra", "central_extra", "central_size_zip64")


def _find_eocd(data):
    """§1 End records: the last PK\\5\\6 whose comment ends at the end of the
    file, else the last one whose comment ends before it."""
    start = max(0, len(data) - 65557)
    tail = data[start:]
    exact = loose = None
    pos = tail.rfind(b"PK\5\6")
    while pos >= 0:
        if pos + 22 <= len(tail):
            (clen,) = struct.unpack_from("<H", tail, pos + 20)
            end = start + pos + 22 + clen
            if end == len(data) and exact is None:
                exact = start + pos
            elif end < len(data) and loose is None:
                loose = start + pos
        pos = tail.rfind(b"PK\5\6", 0, pos)
    if exact is not None:
        return exact
    if loose is not None:
        return loose
    raise SpecError("no end-of-central-directory record")


def _zip64_extra(extra, want):
    """Values of the ZIP64 extra field (ID 1) for the escaped fields `want`
    (names in APPNOTE order: usize, csize, offset, disk)."""
    pos = 0
    while pos + 4 <= len(extra):
        hid, size = struct.unpack_from("<HH", extra, pos)
        if pos + 4 + size > len(extra):
            break
        if hid == 1:
            out, p = {}, pos + 4
            for key in want:
                width = 4 if key == "disk" else 8
                if p + width > pos + 4 + size:
                    raise SpecError("ZIP64 extra field too short")
                out[key] = struct.unpack_from("<I" if width == 4 else "<Q", extra, p)[0]
                p += width
            return out
        pos += 4 + size
    if want:
        raise SpecError("escaped size or offset without a ZIP64 extra field")
    return {}


def parse_zip(data):
    """The entries of the zip `data` (bytes), checked as §1 requires."""
    eocd = _find_eocd(data)
    (disk, cd_disk, n_disk, n_total, cd_size, cd_offset, _clen) = struct.unpack_from(
        "<HHHHIIH", data, eocd + 4)
    if disk or cd_disk or n_disk != n_total:
        raise SpecError("multi-disk archive")
    escaped = n_total == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF
    loc = eocd - 20
    has_locator = loc >= 0 and data[loc:loc + 4] == b"PK\6\7"
    cd_end_expected = eocd
    if escaped or (has_locator and cd_offset + cd_size != eocd):
        if not has_locator:
            raise SpecError("an escape value in the end record without a ZIP64 locator")
        z_disk, z_off, z_disks = struct.unpack_from("<IQI", data, loc + 4)
        if z_disk != 0 or z_disks > 1:
            raise SpecError("multi-disk ZIP64 locator")
        if data[z_off:z_off + 4] != b"PK\6\6":
            raise SpecError("no ZIP64 end record at the locator's offset")
        (rec_size,) = struct.unpack_from("<Q", data, z_off + 4)
        if rec_size < 44 or z_off + 12 + rec_size != loc:
            raise SpecError("ZIP64 end record does not end at the locator")
        (d1, d2, z_n_disk, z_n_total, z_size, z_offset) = struct.unpack_from(
            "<IIQQQQ", data, z_off + 16)
        if d1 or d2 or z_n_disk != z_n_total:
            raise SpecError("multi-disk ZIP64 end record")
        for v32, esc, v64 in ((n_total, 0xFFFF, z_n_total), (cd_size, 0xFFFFFFFF, z_size),
                              (cd_offset, 0xFFFFFFFF, z_offset)):
            if v32 != esc and v32 != v64:
                raise SpecError("ZIP64 end record disagrees with the end record")
        n_total, cd_size, cd_offset = z_n_total, z_size, z_offset
        cd_end_expected = z_off
    if cd_offset + cd_size != cd_end_expected:
        raise SpecError("the central directory does not end where the end records begin")
    if n_total > 10_000_000:
        raise SpecError("more than 10,000,000 entries (limit, §10)")

    entries, names = [], set()
    pos = cd_offset
    for _ in range(n_total):
        if pos + 46 > cd_end_expected or data[pos:pos + 4] != b"PK\1\2":
            raise SpecError(f"central directory header at {pos}: bad signature")
        (flags, method, crc, csize, usize, nlen, elen, klen, disk_start,
         offset) = struct.unpack_from("<4xHH4xIIIHHHH6xI", data, pos + 4)
        name_b = data[pos + 46:pos + 46 + nlen]
        extra = data[pos + 46 + nlen:pos + 46 + nlen + elen]
        pos += 46 + nlen + elen + klen
        if pos > cd_end_expected:
            raise SpecError("central directory header overruns the directory")
        want = [k for k, v, esc in (("usize", usize, 0xFFFFFFFF), ("csize", csize, 0xFFFFFFFF),
                                    ("offset", offset, 0xFFFFFFFF), ("disk", disk_start, 0xFFFF))
                if v == esc]
        z = _zip64_extra(extra, want)
        e = Entry()
        e.central_size_zip64 = "usize" in z or "csize" in z
        usize, csize, offset = z.get("usize", usize), z.get("csize", csize), z.get("offset", offset)
        try:
            e.name = name_b.decode("utf-8")
        except UnicodeDecodeError:
            raise SpecError(f"entry name {name_b!r} is not UTF-8") from None
        _check_entry_name(e.name)
        if e.name in names:
            raise SpecError(f"{e.name}: duplicate entry name")
        names.add(e.name)
        if flags & 1:
            raise SpecError(f"{e.name}: encrypted")
        if method not in (0, 8):
            raise SpecError(f"{e.name}: compression method {method}")
        if method == 0 and csize != usize:
            raise SpecError(f"{e.name}: stored entry with different sizes")
        if method == 8 and usize > 1100 * csize + 1024:
            raise SpecError(f"{e.name}: deflated entry declares more than 1100 times its size")
        if offset + 30 > cd_offset or data[offset:offset + 4] != b"PK\3\4":
            raise SpecError(f"{e.name}: no local header at {offset}")
        lnlen, lelen = struct.unpack_from("<HH", data, offset + 26)
        if data[offset + 30:offset + 30 + lnlen] != name_b:
            raise SpecError(f"{e.name}: local header name differs")
        e.method, e.flags, e.crc, e.csize, e.usize, e.offset = method, flags, crc, csize, usize, offset
        e.data_start = offset + 30 + lnlen + lelen
        e.local_extra = data[offset + 30 + lnlen:e.data_start]
        e.central_extra = extra
        if e.data_start + csize > cd_offset:
            raise SpecError(f"{e.name}: data runs into the central directory")
        entries.append(e)
    if pos != cd_end_expected:
        raise SpecError("central directory size disagrees with its headers")
    spans = sorted((e.offset, e.data_start + e.csize, e.name) for e in entries)
    for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
        if start_b < end_a:
            raise SpecError(f"{a} and {b} overlap")
    return entries, cd_offset


def _check_entry_name(name):
    bad = (name == "" or name.startswith("/") or "\\" in name or re.match(r"^[A-Za-z]:", name)
           or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name))
    parts = name[:-1].split("/") if name.endswith("/") else name.split("/")
    if bad or any(p in ("", ".", "..") for p in parts):
        raise SpecError(f"invalid entry name {name!r}")


def entry_bytes(data, e):
    """The uncompressed bytes of an entry, CRC-32 checked."""
    raw = data[e.data_start:e.data_start + e.csize]
    if e.method == 8:
        d = zlib.decompressobj(-15)
        out = d.decompress(raw, e.usize + 1)
        if len(out) != e.usize or not d.eof:
            raise SpecError(f"{e.name}: deflated data does not give {e.usize} bytes")
    else:
        out = bytes(raw)
    if zlib.crc32(out) != e.crc:
        raise SpecError(f"{e.name}: CRC-32 mismatch")
    return out


def walk_local_headers(data):
    """What a streaming reader sees (§1, §8.5): (offset, name) of the local
    headers from offset 0, each entry's size taken from its local header (ZIP64 field
    when escaped), up to the central directory. Raises SpecError if a byte
    before the central directory belongs to no local header and its data."""
    entries, cd_offset = parse_zip(data)
    names, pos = [], 0
    while pos < cd_offset:
        if data[pos:pos + 4] != b"PK\3\4":
            raise SpecError(f"offset {pos}: no local header where a streaming reader looks")
        flags, csize, usize, nlen, elen = struct.unpack_from("<2xH10xIIHH", data, pos + 4)
        if flags & 8:
            raise SpecError(f"offset {pos}: a data descriptor")
        name = data[pos + 30:pos + 30 + nlen].decode("utf-8")
        extra = data[pos + 30 + nlen:pos + 30 + nlen + elen]
        if csize == 0xFFFFFFFF:
            csize = _zip64_extra(extra, ["usize", "csize"])["csize"]
        body = data[pos + 30 + nlen + elen:pos + 30 + nlen + elen + csize]
        (crc,) = struct.unpack_from("<I", data, pos + 14)
        if zlib.crc32(body if struct.unpack_from("<H", data, pos + 8)[0] == 0
                      else zlib.decompress(body, -15)) != crc:
            raise SpecError(f"offset {pos}: {name}: local header CRC-32 mismatch")
        names.append((pos, name))
        pos += 30 + nlen + elen + csize
    if pos != cd_offset:
        raise SpecError("the last entry runs past the central directory's start")
    return names


def writer_layout_problems(data):
    """The writer rules an archive breaks (readers must not rely on them):
    every stored entry's data at a multiple of 64, with the local and the
    central padding fields as §1 sizes them; every `.fb` blob laid out as §6
    says (blob_writer_problems)."""
    entries, _ = parse_zip(data)
    problems = []
    for e in entries:
        if re.fullmatch(r"[^/]+/(params|updater)/(0|[1-9][0-9]{0,14})\.fb", e.name):
            problems += blob_writer_problems(e.name, entry_bytes(data, e))
        zip64_local = len(e.local_extra) >= 20 and e.local_extra[:2] == b"\1\0"
        u = e.offset + 30 + len(e.name.encode()) + (20 if zip64_local else 0)
        pad = (64 - u % 64) % 64
        if 0 < pad < 4:
            pad += 64
        if e.method != 0:
            pad = 0
        want_local = b"" if pad == 0 else struct.pack("<HH", 0x7A6D, pad - 4) + bytes(pad - 4)
        have_local = e.local_extra[20:] if zip64_local else e.local_extra
        if have_local != want_local:
            problems.append(f"{e.name}: local padding field {have_local.hex()} != {want_local.hex()}")
        if e.method == 0 and e.data_start % 64:
            problems.append(f"{e.name}: stored data at {e.data_start}, not a multiple of 64")
        F = len(e.local_extra) - (20 if e.central_size_zip64 else 0)
        want_central = b"" if F < 4 else struct.pack("<HH", 0x7A6D, F - 4) + bytes(F - 4)
        ce = e.central_extra
        if ce[:2] == b"\1\0":
            (zsize,) = struct.unpack_from("<H", ce, 2)
            ce = ce[4 + zsize:]
        if ce != want_central:
            problems.append(f"{e.name}: central padding field {ce.hex()} != {want_central.hex()}")
    return problems


# --------------------------------------------------------------------------
# §8.2, §8.3 The append journal: a reader reads the previous archive while a
# valid journal exists.


def _journal_image(path, data):
    folder, base = os.path.split(os.path.abspath(path))
    jpath = os.path.join(folder, f".{base}.modelzip-append")
    try:
        with open(jpath, "rb") as f:
            j = f.read()
    except FileNotFoundError:
        return data
    if j.startswith(b"modelzip-append v3\n") or j.startswith(b"modelzip-append v2\n"):
        v3 = j[17] == ord("3")
        head = 51 if v3 else 43
        if len(j) < head + 4:
            return data  # torn
        T, S = struct.unpack_from("<QQ", j, 27)
        N = struct.unpack_from("<Q", j, 43)[0] if v3 else 0
        tags = j[51:51 + N] if v3 else b""
        if (S < T or len(j) != head + N + (S - T) + 4 or (tags and not tags.endswith(b"\n"))
                or zlib.crc32(j[:-4]) != struct.unpack_from("<I", j, len(j) - 4)[0]):
            return data  # torn
        tail = j[head + N:head + N + S - T]
    elif j.startswith(b"modelzip-append v1 "):
        m = re.fullmatch(rb"modelzip-append v1 ([0-9]+)\n", j)
        if not m or int(m.group(1)) >= 2**64:
            return data  # torn
        T = S = int(m.group(1))
        tail = b""
    else:
        return data  # torn
    if len(data) < T:
        raise SpecError(f"{jpath}: the journal does not belong to the archive (T beyond its end)")
    return data[:T] + tail


# --------------------------------------------------------------------------
# §4 Text tables

TAG_RE = re.compile(r"[A-Za-z0-9._+=@-]{1,100}")
DEVICE_RE = re.compile(r"(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])(\..*)?", re.IGNORECASE)
BLOB_RE = re.compile(r"(?:([^/]+)/)?(0|[1-9][0-9]{0,14})(\.fifu)?")


def _text_lines(entry, raw):
    if raw.startswith(b"\xef\xbb\xbf"):
        raise SpecError(f"{entry} line 1: starts with a byte-order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{entry}: not UTF-8 ({err})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the last line's LF (or an empty entry)
    for i, line in enumerate(lines, 1):
        if "\r" in line or "\0" in line:
            raise SpecError(f"{entry} line {i}: CR or NUL")
    return lines


def parse_tags(raw):
    tags, seen = [], set()
    for i, tag in enumerate(_text_lines("tags.txt", raw), 1):
        if (not TAG_RE.fullmatch(tag) or tag.startswith(".") or tag.endswith(".")
                or DEVICE_RE.fullmatch(tag)):
            raise SpecError(f"tags.txt line {i}: invalid tag {tag!r}")
        if tag.lower() in seen:
            raise SpecError(f"tags.txt line {i}: duplicate tag {tag!r}")
        seen.add(tag.lower())
        tags.append(tag)
    return tags


def unescape(entry, line_no, field):
    """§4.2 name escaping."""
    out = bytearray()
    raw = field.encode("utf-8")
    i = 0
    while i < len(raw):
        b = raw[i]
        if b == 0x25:
            hx = raw[i + 1:i + 3]
            if len(hx) != 2 or not all(c in b"0123456789abcdefABCDEF" for c in hx):
                raise SpecError(f"{entry} line {line_no}: '%' not followed by two hex digits")
            out.append(int(hx, 16))
            i += 3
            continue
        if b == 0x23 or b <= 0x20 or b == 0x7F:
            raise SpecError(f"{entry} line {line_no}: unescaped byte 0x{b:02X}")
        out.append(b)
        i += 1
    if not out:
        raise SpecError(f"{entry} line {line_no}: empty name")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{entry} line {line_no}: name is not UTF-8 after unescaping") from None


def escape(name):
    """§4.2 name escaping (the writer's side)."""
    raw = name.encode("utf-8")
    leading_bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    out = bytearray()
    for i, b in enumerate(raw):
        if b in (0x25, 0x23) or b <= 0x20 or b == 0x7F or i < leading_bom:
            out += b"%%%02X" % b
        else:
            out.append(b)
    return out.decode("utf-8")


def parse_table(entry, raw, nfields, tag, tags, names, folder):
    """Rows of params.txt (nfields 2) or updater.txt (3): list of
    (key, blob entry name), key a name or a (variable, state) pair."""
    rows, keys = [], set()
    for i, line in enumerate(_text_lines(entry, raw), 1):
        if line.startswith("#"):
            continue
        fields = line.split(" ")
        if len(fields) != nfields:
            raise SpecError(f"{entry} line {i}: {len(fields)} fields, not {nfields}")
        key = tuple(unescape(entry, i, f) for f in fields[:-1])
        key = key[0] if nfields == 2 else key
        if key in keys:
            raise SpecError(f"{entry} line {i}: {key!r} appears twice")
        keys.add(key)
        m = BLOB_RE.fullmatch(fields[-1])
        if not m:
            raise SpecError(f"{entry} line {i}: bad blob reference {fields[-1]!r}")
        owner, n, fifu = m.group(1) or tag, m.group(2), m.group(3)
        if owner not in tags:
            raise SpecError(f"{entry} line {i}: tag {owner!r} is not in tags.txt")
        if fifu and nfields != 2:
            raise SpecError(f"{entry} line {i}: .fifu in updater.txt")
        blob = f"{owner}/{folder}/{n}{'.fifu' if fifu else '.fb'}"
        if blob not in names:
            raise SpecError(f"{entry} line {i}: {blob} does not exist")
        rows.append((key, blob))
    return rows


# --------------------------------------------------------------------------
# §6 Tensor blobs

DTYPES = {  # DataType number -> (name, element size, numpy dtype of the stored element)
    1: ("bool", 1, np.dtype(np.bool_)), 3: ("float16", 2, np.dtype("<f2")),
    5: ("float32", 4, np.dtype("<f4")), 6: ("float64", 8, np.dtype("<f8")),
    7: ("int8", 1, np.dtype("i1")), 8: ("int16", 2, np.dtype("<i2")),
    9: ("int32", 4, np.dtype("<i4")), 10: ("int64", 8, np.dtype("<i8")),
    11: ("uint8", 1, np.dtype("u1")), 12: ("uint16", 2, np.dtype("<u2")),
    13: ("uint32", 4, np.dtype("<u4")), 14: ("uint64", 8, np.dtype("<u8")),
    17: ("bfloat16", 2, np.dtype("<u2")), 18: ("float8_e4m3fn", 1, np.dtype("u1")),
    19: ("float8_e5m2", 1, np.dtype("u1")), 20: ("complex64", 8, np.dtype("<c8")),
    21: ("complex128", 16, np.dtype("<c16")),
    # §6: the MX types, stored as bytes (an FP4 element is a byte of two values).
    22: ("float8_e8m0fnu", 1, np.dtype("u1")), 23: ("float4_e2m1fn_x2", 1, np.dtype("u1")),
    50: ("utf8", 0, None),
}
DENSE, SPARSE_COO, QUANTIZED = 0, 1, 2


def bfloat16_to_float32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float8_e5m2_to_float32(bits):
    """§6: exactly the high byte of an IEEE binary16."""
    return (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)


def float8_e4m3fn_to_float32(bits):
    """§6: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
    subnormal (m * 2^-9); S.1111.111 is NaN; no infinity."""
    b = bits.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e, m = (b >> 3) & 0xF, b & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7))
    mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return (sign * mag).astype(np.float32)


def float8_e8m0fnu_to_float32(bits):
    """§6: the byte e stands for 2^(e-127); 0xFF is NaN (no sign, no zero)."""
    e = bits.astype(np.int64)
    return np.where(e == 0xFF, np.nan, np.ldexp(1.0, e - 127)).astype(np.float32)


def float4_e2m1fn_x2_to_float32(pairs):
    """§6: each byte holds two values, the first in bits 3..0; a value is a
    sign (bit 3), 2 exponent bits (bias 1) and 1 mantissa bit, exponent 0
    subnormal (m * 2^-1). The values of a [..., n] tensor as [..., 2n], each
    byte's pair side by side (a 0-dimensional tensor's pair as [2])."""
    nibbles = np.stack([pairs & 0xF, pairs >> 4], axis=-1).astype(np.int64)
    sign = np.where(nibbles & 0x8, -1.0, 1.0)
    e, m = (nibbles >> 1) & 3, nibbles & 1
    mag = np.where(e == 0, m * 0.5, (1 + m / 2.0) * 2.0 ** (e - 1))
    return (sign * mag).astype(np.float32).reshape(*pairs.shape[:-1], -1)


def round_to_bfloat16(x):
    """float64 -> the nearest bfloat16 (ties to even), as float32."""
    x = np.asarray(x, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.floor(np.log2(np.abs(np.where(x == 0, 1.0, x))))
        q = np.exp2(np.maximum(e, -126) - 7)
        r = np.round(x / q) * q  # np.round: ties to even; x / q is exact
        r = np.where(np.isfinite(x), r, x)
        r = np.where(np.abs(r) > 3.3895313892515355e38, np.copysign(np.inf, x), r)
    return r.astype(np.float32)


class SparseCOO:
    def __init__(self, shape, indices, values):
        self.shape, self.indices, self.values = shape, indices, values

    def dense(self):
        """§6: coordinates may repeat; an element is the sum of its values
        (BOOL: their or), 0 where none is stored."""
        out = np.zeros(self.shape, self.values.dtype)
        if len(self.values) and not self.shape:
            out[()] = np.any(self.values) if out.dtype == np.bool_ else np.add.reduce(self.values)
        elif len(self.values):
            if out.dtype == np.bool_:
                np.logical_or.at(out, tuple(self.indices.T), self.values)
            else:
                np.add.at(out, tuple(self.indices.T), self.values)
        return out


def _segment(t, index):
    seg = t.struct_(index, "QQ", 8)
    return (0, 0) if seg is None else seg


def decode_blob(entry, blob):
    """§6 and §6.1: the value of one `.fb` entry and its dtype name."""
    def fail(msg):
        raise SpecError(f"{entry}: {msg}")

    if len(blob) < 4:
        fail("shorter than its size prefix")
    (S,) = struct.unpack_from("<I", blob, 0)
    if 4 + S > len(blob):
        fail(f"FlatBuffer size {S} exceeds the entry")
    if S > 64 << 20:
        fail("FlatBuffer over 64 MiB")
    try:
        t = flatbuf.root(blob, 4, S, b"MZTB")
        dtype_no = t.scalar(0, "b", 5)
        shape = t.vector(1, "q", 8) or []
        layout = t.scalar(2, "b", DENSE)
        byte_order = t.scalar(3, "b", 0)
        values, offsets, indices = _segment(t, 4), _segment(t, 5), _segment(t, 6)
        nnz = t.scalar(7, "Q", 0)
        alignment = t.scalar(8, "I", 64)
        q = t.table(9)
        if q is not None:
            quant = dict(scheme=q.scalar(0, "b", 0), storage=q.scalar(1, "b", 0),
                         scale=q.scalar(2, "d", 0.0), zero_point=q.scalar(3, "q", 0),
                         axis=q.scalar(4, "q", 0), block_size=q.scalar(5, "Q", 0),
                         scale_type=q.scalar(6, "b", 6), scales=_segment(q, 7),
                         zero_points=_segment(q, 8))
    except flatbuf.FlatBufferError as err:
        fail(f"blob header: {err}")
    if dtype_no not in DTYPES:
        fail(f"unsupported dtype {dtype_no}")
    dname, size, npdt = DTYPES[dtype_no]
    if len(shape) > 64:
        fail("rank over 64")
    if any(d < 0 for d in shape):
        fail("negative dimension")
    numel = 1
    for d in shape:
        numel *= d
    if numel >= 2**64:
        fail("element count overflows")
    if layout not in (DENSE, SPARSE_COO, QUANTIZED):
        fail(f"unknown layout {layout}")
    if byte_order not in (0, 1):
        fail(f"unknown byte order {byte_order}")
    if alignment < 8 or alignment > 4096 or alignment & (alignment - 1):
        fail(f"alignment {alignment}")
    if (q is not None) != (layout == QUANTIZED):
        fail("quantization present exactly when the layout is QUANTIZED: broken")
    big = byte_order == 1
    segs = {"values": values, "offsets": offsets, "indices": indices}
    if layout == QUANTIZED:
        segs["quantization.scales"] = quant["scales"]
        segs["quantization.zero_points"] = quant["zero_points"]

    # Rule 3: required lengths.
    want = {k: 0 for k in segs}
    if layout == DENSE:
        if dname == "utf8":
            want.pop("values")
            want["offsets"] = (numel + 1) * 8
        else:
            want["values"] = numel * size
        if nnz:
            fail("nnz is not 0")
    elif layout == SPARSE_COO:
        if dname in ("utf8", "float8_e8m0fnu", "float4_e2m1fn_x2"):
            fail(f"SPARSE_COO of {dname}")
        if nnz > numel:
            fail("nnz exceeds the element count")
        want["values"] = nnz * size
        want["indices"] = nnz * len(shape) * 8
    else:
        if nnz:
            fail("nnz is not 0")
        want.update(_quant_lengths(fail, dname, shape, numel, quant))
    for k, n in want.items():
        if segs[k][1] != n:
            fail(f"{k} length {segs[k][1]}, expected {n}")
    # Rule 4: placement.
    used = sorted((off, off + n, k) for k, (off, n) in segs.items() if n)
    for off, end, k in used:
        if off % alignment or off < 4 + S or end > len(blob):
            fail(f"{k} segment [{off}, {end}) misplaced")
    for (_, end_a, a), (start_b, _, b) in zip(used, used[1:]):
        if start_b < end_a:
            fail(f"segments {a} and {b} overlap")

    # BIG: numpy's big-endian dtypes swap each element; for the complex types
    # ('>c8', '>c16') that is each part on its own, as §6 requires.
    def seg_array(name, dt, count):
        off, n = segs[name]
        a = np.frombuffer(blob, dt.newbyteorder(">") if big and dt.itemsize > 1 else dt,
                          count=count, offset=off if n else 0)
        return a.astype(a.dtype.newbyteorder("="))

    if layout == DENSE and dname == "utf8":
        offs = seg_array("offsets", np.dtype("<u8"), numel + 1)
        voff, vlen = values
        if offs[0] != 0 or np.any(np.diff(offs.astype(np.int64)) < 0) or offs[-1] != vlen:
            fail("bad string offsets")
        raw = blob[voff:voff + vlen] if vlen else b""
        out = np.empty(numel, object)
        for i in range(numel):
            try:
                out[i] = raw[offs[i]:offs[i + 1]].decode("utf-8")
            except UnicodeDecodeError:
                fail(f"string {i} is not UTF-8")
        return out.reshape(shape), dname
    if layout == DENSE:
        a = seg_array("values", npdt, numel).reshape(shape)
        return _decode_special(dname, a), dname
    if layout == SPARSE_COO:
        idx = seg_array("indices", np.dtype("<i8"), nnz * len(shape)).reshape(nnz, len(shape))
        for k, d in enumerate(shape):
            if np.any((idx[:, k] < 0) | (idx[:, k] >= d)):
                fail("a COO coordinate lies outside its dimension")
        vals = _decode_special(dname, seg_array("values", npdt, nnz))
        return SparseCOO(tuple(shape), idx, vals), dname
    return _dequantize(fail, blob, dname, shape, numel, quant, seg_array), dname


def blob_writer_problems(entry, blob):
    """The §6 writer rules a valid `.fb` entry breaks (readers must not rely
    on them): byte order LITTLE, alignment 64, the non-empty segments in the
    order values, offsets, indices, scales, zero points, the first at
    align_up(4 + S, 64), each next at align_up(end of the previous, 64),
    zero gaps, and the entry ending where the last one ends (at 4 + S when
    all are empty)."""
    (S,) = struct.unpack_from("<I", blob, 0)
    t = flatbuf.root(blob, 4, S, b"MZTB")
    problems = []
    if t.scalar(3, "b", 0) != 0 or t.scalar(8, "I", 64) != 64:
        problems.append(f"{entry}: byte order or alignment not the writers'")
    q = t.table(9)
    segs = [_segment(t, 4), _segment(t, 5), _segment(t, 6)]
    if q is not None:
        segs += [_segment(q, 7), _segment(q, 8)]
    at = 4 + S
    for off, n in segs:
        if not n:
            continue
        want = -(-at // 64) * 64
        if off != want:
            problems.append(f"{entry}: a segment at {off}, not {want}")
        if any(blob[at:off]):
            problems.append(f"{entry}: gap bytes before {off} are not zero")
        at = off + n
    if len(blob) != at:
        problems.append(f"{entry}: the entry is {len(blob)} bytes, its last segment ends at {at}")
    return problems


def _decode_special(dname, a):
    if dname == "bfloat16":
        return bfloat16_to_float32(a)
    if dname == "float8_e4m3fn":
        return float8_e4m3fn_to_float32(a)
    if dname == "float8_e5m2":
        return float8_e5m2_to_float32(a)
    if dname == "float8_e8m0fnu":
        return float8_e8m0fnu_to_float32(a)
    if dname == "float4_e2m1fn_x2":
        return float4_e2m1fn_x2_to_float32(a)
    return a


AFFINE_PER_TENSOR, AFFINE_PER_AXIS, BLOCK_SYMMETRIC = 0, 1, 2
Q_INT8, Q_UINT8, Q_INT4 = 0, 1, 2
Q_RANGE = {Q_INT8: (-128, 127), Q_UINT8: (0, 255), Q_INT4: (-8, 7)}


def _quant_lengths(fail, dname, shape, numel, q):
    """§6.1 rules 1 and 2; returns the required segment lengths."""
    scheme, storage = q["scheme"], q["storage"]
    if scheme not in (0, 1, 2) or storage not in (0, 1, 2):
        fail(f"unsupported quantization scheme {scheme} / storage {storage}")
    if (scheme, storage) not in ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 2)):
        fail("quantization scheme and storage not allowed together")
    if dname not in ("float16", "bfloat16", "float32", "float64"):
        fail(f"quantized {dname}")
    rank = len(shape)
    want = {"values": (numel + 1) // 2 if storage == Q_INT4 else numel,
            "quantization.scales": 0, "quantization.zero_points": 0}
    if scheme == AFFINE_PER_TENSOR:
        lo, hi = Q_RANGE[storage]
        if not (np.isfinite(q["scale"]) and q["scale"] > 0):
            fail("quantization.scale not finite and > 0")
        if not lo <= q["zero_point"] <= hi:
            fail("quantization.zero_point out of range")
    else:
        if not 0 <= q["axis"] < rank:
            fail("quantization.axis out of range")
        if scheme == AFFINE_PER_AXIS:
            if q["scale_type"] != 6:
                fail("quantization.scale_type must be DOUBLE")
            C = shape[q["axis"]]
            want["quantization.scales"] = want["quantization.zero_points"] = C * 8
        else:
            if q["scale_type"] not in (3, 5):
                fail("quantization.scale_type must be HALF or FLOAT")
            if q["block_size"] < 1:
                fail("quantization.block_size < 1")
            R = int(np.prod(shape[:q["axis"]], dtype=object))
            K = int(np.prod(shape[q["axis"]:], dtype=object))
            B = -(-K // q["block_size"])
            want["quantization.scales"] = R * B * (2 if q["scale_type"] == 3 else 4)
    return want


def _dequantize(fail, blob, dname, shape, numel, q, seg_array):
    """§6.1: the values, computed in float64 and rounded once."""
    storage = q["storage"]
    raw = seg_array("values", np.dtype("u1"), (numel + 1) // 2 if storage == Q_INT4 else numel)
    if storage == Q_INT4:
        if numel % 2 and raw[-1] >> 4:
            fail("the INT4 padding nibble is not 0")
        nib = np.empty(2 * len(raw), np.int64)
        nib[0::2], nib[1::2] = raw & 0xF, raw >> 4
        ints = np.where(nib >= 8, nib - 16, nib)[:numel]
    elif storage == Q_INT8:
        ints = raw.view(np.int8).astype(np.int64)
    else:
        ints = raw.astype(np.int64)
    lo, hi = Q_RANGE[storage]
    scheme = q["scheme"]
    if scheme == AFFINE_PER_TENSOR:
        x = (ints - q["zero_point"]).astype(np.float64) * q["scale"]
    elif scheme == AFFINE_PER_AXIS:
        axis, C = q["axis"], shape[q["axis"]]
        scales = seg_array("quantization.scales", np.dtype("<f8"), C)
        zps = seg_array("quantization.zero_points", np.dtype("<i8"), C)
        bad = np.flatnonzero(~(np.isfinite(scales) & (scales > 0)))
        if len(bad):
            fail(f"quantization.scales[{bad[0]}] not finite and > 0")
        bad = np.flatnonzero((zps < lo) | (zps > hi))
        if len(bad):
            fail(f"quantization.zero_points[{bad[0]}] out of range")
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        c = (np.arange(numel) // inner) % C if numel else np.zeros(0, np.int64)
        x = (ints - zps[c]).astype(np.float64) * scales[c]
    else:
        axis, bs = q["axis"], q["block_size"]
        R = int(np.prod(shape[:axis], dtype=np.int64))
        K = int(np.prod(shape[axis:], dtype=np.int64))
        B = -(-K // bs)
        sdt = np.dtype("<f2") if q["scale_type"] == 3 else np.dtype("<f4")
        scales = seg_array("quantization.scales", sdt, R * B).astype(np.float64)
        bad = np.flatnonzero(~(np.isfinite(scales) & (scales > 0)))
        if len(bad):
            fail(f"quantization.scales[{bad[0]}] not finite and > 0")
        i = np.arange(numel)
        x = ints.astype(np.float64) * scales[(i // K) * B + (i % K) // bs] if numel else \
            np.zeros(0, np.float64)
    x = x.reshape(shape)
    if dname == "bfloat16":
        return round_to_bfloat16(x)
    return x.astype({"float16": np.float16, "float32": np.float32, "float64": np.float64}[dname])


# --------------------------------------------------------------------------
# §2, §3 The archive


class SpecArchive:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        self.data = _journal_image(path, data)
        entries, _ = parse_zip(self.data)
        self.entries = {e.name: e for e in entries if not e.name.endswith("/")}
        for required in ("modelzip.toml", "tags.txt"):
            if required not in self.entries:
                raise SpecError(f"{required} is missing")
        self._check_toml(self.read_entry("modelzip.toml"))
        self.tags = parse_tags(self.read_entry("tags.txt"))
        for name in self.entries:
            if "/" in name and name.split("/", 1)[0] not in self.tags:
                raise SpecError(f"{name} lies outside every tag folder")
        self.params, self.updater = {}, {}
        tagset = set(self.tags)
        for tag in self.tags:
            entry = f"{tag}/params.txt"
            if entry not in self.entries:
                raise SpecError(f"{entry} is missing")
            self.params[tag] = parse_table(entry, self.read_entry(entry), 2, tag, tagset,
                                           self.entries, "params")
            entry = f"{tag}/updater.txt"
            self.updater[tag] = parse_table(entry, self.read_entry(entry), 3, tag, tagset,
                                            self.entries, "updater") \
                if entry in self.entries else []

    def read_entry(self, name):
        return entry_bytes(self.data, self.entries[name])

    @staticmethod
    def _check_toml(raw):
        if raw.startswith(b"\xef\xbb\xbf"):
            raise SpecError("modelzip.toml line 1: starts with a byte-order mark")
        try:
            doc = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise SpecError(f"modelzip.toml: {err}") from None
        version = doc.get("format_version")
        if type(version) is not int or version < 1:
            raise SpecError("modelzip.toml: format_version is not an integer >= 1")
        if version > 1:
            raise SpecError(f"modelzip.toml: format_version {version} is newer than 1")
        if "writer" in doc and not isinstance(doc["writer"], str):
            raise SpecError("modelzip.toml: writer is not a string")
        model = doc.get("model", {})
        if not isinstance(model, dict):
            raise SpecError("modelzip.toml: model is not a table")
        for key in ("name", "version", "quantization", "description"):
            if key in model and not isinstance(model[key], str):
                raise SpecError(f"modelzip.toml: model.{key} is not a string")

    def blob(self, entry):
        """(value, dtype name) of one blob entry."""
        if entry.endswith(".fifu"):
            import spec_finalfusion  # noqa: PLC0415 (it imports SpecError from here)
            try:
                return spec_finalfusion.read(self.read_entry(entry)), "embedding"
            except SpecError as err:
                raise SpecError(f"{entry}: {err}") from None
        return decode_blob(entry, self.read_entry(entry))

    def tensors(self, tag):
        return {name: self.blob(entry)[0] for name, entry in self.params[tag]}

    def updater_tensors(self, tag):
        return {key: self.blob(entry)[0] for key, entry in self.updater[tag]}

    def verify(self):
        """Decodes every blob file (§2: referenced or not) and every entry's CRC."""
        blob_re = re.compile(r"[^/]+/(?:params/(?:0|[1-9][0-9]{0,14})\.(?:fb|fifu)"
                             r"|updater/(?:0|[1-9][0-9]{0,14})\.fb)")
        for name in self.entries:
            if blob_re.fullmatch(name):
                self.blob(name)
            else:
                self.read_entry(name)


def read(path):
    """{tag: {name: value}} of every tag, oldest first (an embedding parameter
    as a `spec_finalfusion.Fifu`)."""
    a = SpecArchive(path)
    return {tag: a.tensors(tag) for tag in a.tags}
