"""The few FlatBuffers operations a modelzip blob header needs, from the
public FlatBuffers binary format alone (no flatc, no generated code).

A FlatBuffer table starts with an i32 `soffset`; its vtable lies at
`table - soffset` and holds u16 vtable size, u16 table size, then one u16
per field: the field's offset from the table start, 0 when absent. A
reference field (table, vector) holds a u32 `uoffset` counted from the
field's own position; a vector starts with its u32 length. Structs are
stored inline in the table.

Positions here are offsets into `data`, the blob entry; the FlatBuffer
starts at `base` (4 in a blob: after the u32 size prefix). FORMAT.md §6
rule 1 asks for alignment counted from the start of the entry, which is
what `data` starts with.
"""
import struct


class FlatBufferError(ValueError):
    pass


class Table:
    """Read access to one table of a verified buffer `data[base:end]`."""

    def __init__(self, data, base, end, pos, depth=0):
        self.data, self.base, self.end, self.pos = data, base, end, pos
        self._need(pos, 4, 4, "table")
        (soffset,) = struct.unpack_from("<i", data, pos)
        vt = pos - soffset
        # As the FlatBuffers verifier: the vtable size is even and the vtable
        # lies in the buffer (size 0 or 2: every field absent); the table
        # size after it is not checked, each present field is (in the buffer,
        # aligned) when it is read.
        self._need(vt, 2, 2, "vtable")
        (vt_size,) = struct.unpack_from("<H", data, vt)
        if vt_size % 2:
            raise FlatBufferError(f"vtable at {vt}: odd size {vt_size}")
        self._need(vt, vt_size, 2, "vtable")
        self.vt, self.vt_size = vt, vt_size
        if depth > 64:
            raise FlatBufferError("tables nested deeper than 64")
        self.depth = depth

    def _need(self, pos, size, align, what):
        if pos < self.base or pos + size > self.end or pos + size < pos:
            raise FlatBufferError(f"{what} at {pos} (+{size}) lies outside the buffer")
        if pos % align:
            raise FlatBufferError(f"{what} at {pos} is not aligned to {align}")

    def field_pos(self, index, size):
        """Position of field `index` (`size` bytes inline), or None if absent."""
        slot = 4 + 2 * index
        if slot + 2 > self.vt_size:
            return None
        (off,) = struct.unpack_from("<H", self.data, self.vt + slot)
        if off == 0:
            return None
        return self.pos + off

    def scalar(self, index, fmt, default):
        size = struct.calcsize("<" + fmt)
        p = self.field_pos(index, size)
        if p is None:
            return default
        self._need(p, size, size, f"field {index}")
        return struct.unpack_from("<" + fmt, self.data, p)[0]

    def struct_(self, index, fmt, align):
        size = struct.calcsize("<" + fmt)
        p = self.field_pos(index, size)
        if p is None:
            return None
        self._need(p, size, align, f"struct field {index}")
        return struct.unpack_from("<" + fmt, self.data, p)

    def _ref(self, index):
        p = self.field_pos(index, 4)
        if p is None:
            return None
        self._need(p, 4, 4, f"offset field {index}")
        (u,) = struct.unpack_from("<I", self.data, p)
        _check_uoffset(u, p)
        return p + u

    def table(self, index):
        p = self._ref(index)
        return None if p is None else Table(self.data, self.base, self.end, p, self.depth + 1)

    def vector(self, index, fmt, elem_align):
        """The elements of a vector of scalars, or None if absent."""
        p = self._ref(index)
        if p is None:
            return None
        self._need(p, 4, 4, f"vector {index}")
        (n,) = struct.unpack_from("<I", self.data, p)
        size = struct.calcsize("<" + fmt)
        self._need(p + 4, n * size, elem_align, f"elements of vector {index}")
        return list(struct.unpack_from(f"<{n}{fmt}", self.data, p + 4))


def root(data, base, size, identifier):
    """The root table of the FlatBuffer `data[base:base+size]`."""
    end = base + size
    if size < 8:
        raise FlatBufferError(f"a FlatBuffer of {size} bytes is too short")
    if data[base + 4:base + 8] != identifier:
        raise FlatBufferError(f"file identifier {bytes(data[base + 4:base + 8])!r}, not {identifier!r}")
    (u,) = struct.unpack_from("<I", data, base)
    _check_uoffset(u, base)
    return Table(data, base, end, base + u)


def _check_uoffset(u, pos):
    """The FlatBuffers verifier's rule for the root offset and every offset
    field: neither 0 (pointing at itself) nor 2^31 or more."""
    if u == 0 or u >= 2**31:
        raise FlatBufferError(f"offset {u} at {pos} is 0 or too large")


class Builder:
    """Writes a FlatBuffer front to back (the format allows any order as long
    as every uoffset points forward): root offset and identifier first, then
    each table's vtable right before it, then what its reference fields
    point to. Positions are aligned counting from `base_offset` bytes before
    the buffer (4 for a size-prefixed blob header)."""

    def __init__(self, identifier, base_offset=4):
        self.buf = bytearray(4) + identifier
        self.base_offset = base_offset

    def _align(self, a):
        while (len(self.buf) + self.base_offset) % a:
            self.buf.append(0)

    def table(self, fields):
        """Appends a table; `fields` is a list of (index, kind, value) with
        kind a struct format ('b', 'I', 'd', 'QQ' for a Segment...) or 'ref'
        (value: a function that appends the target and returns its position).
        Returns the table's position."""
        # Inline layout: soffset, then fields sorted by alignment (largest first).
        inline = []
        for index, kind, value in fields:
            if kind == "ref":
                inline.append((index, 4, 4, kind, value))
            else:
                size = struct.calcsize("<" + kind)
                inline.append((index, size, 8 if kind == "QQ" else size, kind, value))
        inline.sort(key=lambda f: -f[2])
        nfields = max([f[0] for f in inline], default=-1) + 1
        vt_size = 4 + 2 * nfields
        # The vtable, zero padding, then the table: its 4-byte soffset, then
        # the fields, most aligned first, each at a multiple of its alignment.
        first_align = inline[0][2] if inline else 4
        self._align(2)
        vt_pos = len(self.buf)
        self.buf += bytes(vt_size)
        while (len(self.buf) + self.base_offset) % 4 or \
                (len(self.buf) + 4 + self.base_offset) % first_align:
            self.buf.append(0)
        tpos = len(self.buf)
        self.buf += struct.pack("<i", tpos - vt_pos)
        offsets, refs = {}, []
        for index, size, align, kind, value in inline:
            while (len(self.buf) + self.base_offset) % align:
                self.buf.append(0)
            offsets[index] = len(self.buf) - tpos
            if kind == "ref":
                refs.append((len(self.buf), value))
                self.buf += bytes(4)
            else:
                self.buf += struct.pack("<" + kind, *(value if isinstance(value, tuple) else (value,)))
        table_size = len(self.buf) - tpos
        struct.pack_into("<HH", self.buf, vt_pos, vt_size, table_size)
        for index, off in offsets.items():
            struct.pack_into("<H", self.buf, vt_pos + 4 + 2 * index, off)
        for at, make in refs:
            target = make()
            struct.pack_into("<I", self.buf, at, target - at)
        return tpos

    def vector(self, fmt, values, elem_align):
        """Appends a vector; its elements start at a multiple of elem_align."""
        while (len(self.buf) + 4 + self.base_offset) % max(elem_align, 4):
            self.buf.append(0)
        pos = len(self.buf)
        self.buf += struct.pack(f"<I{len(values)}{fmt}", len(values), *values)
        return pos

    def finish(self, root_pos):
        struct.pack_into("<I", self.buf, 0, root_pos)
        self._align(8)
        return bytes(self.buf)
