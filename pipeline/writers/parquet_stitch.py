"""One Parquet file from Parquet parts encoded separately: the bytes pyarrow's single
``ParquetWriter`` gives when it writes the parts' row groups one after another.

A Parquet file is ``PAR1``, the row groups' column chunks, the footer (a Thrift
compact-protocol ``FileMetaData``), the footer's length and ``PAR1``.  A column chunk's
pages hold no file offsets, so a row group that pyarrow encodes on its own (with the
file's schema and writer options) has the bytes it has inside the whole file; only the
footer differs: the row groups' metadata concatenated, each file offset in them moved by
the bytes written before its part, each row group's ordinal renumbered, the row count
summed.  The file-level fields (schema, key-value metadata with the pandas and Arrow
schemas, ``created_by``, column orders) are the first part's, as the single writer
takes them from its first table.

So the row groups of a wide table are encoded in parallel tasks of fixed size and
stitched by copying bytes.  :func:`part_layout` walks a part's footer once (in the task
that encoded it) and notes where its row groups are and where each value the stitch
changes sits (``PATCH_OFFSET``: the row group's and the pages' file offsets, but
never an offset of 0, which marks a page a column chunk does not have; ``PATCH_ORDINAL``:
the row group's ordinal); :func:`stitch_footer` then builds the
file's footer from the parts' footers by splicing re-encoded values into copied bytes,
without decoding anything again.  A layout is checked on the part it came from (spliced
back unchanged it must give the part's footer byte for byte).  Parts with a page index,
bloom filters or encryption (stored after the row groups, with offsets of their own) are
refused rather than stitched wrongly; the release's writer options write none of them.
"""
from __future__ import annotations

import struct

MAGIC = b"PAR1"
TRAILER_BYTES = 8  # footer length (little-endian uint32) and PAR1

# Thrift compact protocol type codes
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)

# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData field ids (parquet.thrift) the stitch reads
_FMD_SCHEMA, _FMD_NUM_ROWS, _FMD_ROW_GROUPS = 2, 3, 4
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CMD_OFFSETS = (9, 10, 11)  # data, index and dictionary page offsets
_REFUSED = {"file": {8: "file encryption", 9: "a footer signing key"},
            "column": {4: "an offset index", 6: "a column index", 8: "column encryption", 9: "encrypted column metadata"},
            "meta": {14: "a bloom filter"}}

PATCH_OFFSET, PATCH_ORDINAL = 0, 1


class StitchError(ValueError):
    """A part that cannot be stitched (not Parquet, or with structures stored after the row groups)."""


_INTS = frozenset((_I16, _I32, _I64))
_BOOLS = frozenset((_TRUE, _FALSE))


class _Reader:
    """Walks Thrift compact-protocol bytes; values it does not need are skipped.  Reading
    past the end raises IndexError (``part_layout`` reports a truncated footer)."""

    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        data, pos = self.data, self.pos
        b = data[pos]
        value, shift = b & 0x7F, 7
        while b & 0x80:
            pos += 1
            b = data[pos]
            value |= (b & 0x7F) << shift
            shift += 7
        self.pos = pos + 1
        return value

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def field(self, last: int) -> tuple:
        """(field id, type) of the next field of a struct, (0, STOP) at its end."""
        head = self.byte()
        if head == _STOP:
            return 0, _STOP
        delta = head >> 4
        return (last + delta if delta else self.zigzag()), head & 0x0F

    def list_header(self) -> tuple:
        head = self.byte()
        size = head >> 4
        return head & 0x0F, (self.varint() if size == 15 else size)

    def skip(self, kind: int) -> None:
        data = self.data
        if kind in _INTS:
            pos = self.pos
            while data[pos] & 0x80:
                pos += 1
            self.pos = pos + 1
        elif kind in _BOOLS:  # a bool field's value is in its header
            return
        elif kind == _BINARY:
            n = self.varint()
            self.pos += n
        elif kind == _STRUCT:
            last = 0
            while True:
                head = data[self.pos]
                self.pos += 1
                if head == _STOP:
                    return
                if not head >> 4:
                    self.zigzag()  # a field id of its own
                k = head & 0x0F
                if k in _INTS:
                    pos = self.pos
                    while data[pos] & 0x80:
                        pos += 1
                    self.pos = pos + 1
                elif k not in _BOOLS:
                    self.skip(k)
        elif kind in (_LIST, _SET):
            elem, size = self.list_header()
            if elem in _BOOLS:  # in a list a bool is one byte
                self.pos += size
            else:
                for _ in range(size):
                    self.skip(elem)
        elif kind == _BYTE:
            self.pos += 1
        elif kind == _DOUBLE:
            self.pos += 8
        else:
            raise StitchError(f"Parquet footer: Thrift type {kind} is not expected in a FileMetaData")
        if self.pos > len(data):
            raise IndexError("past the end")


def _refuse(where: str, fid: int) -> None:
    what = _REFUSED[where].get(fid)
    if what:
        raise StitchError(f"cannot stitch a Parquet part with {what}")


def _column_meta(r: _Reader, patches: list) -> None:
    refused = _REFUSED["meta"]
    last = 0
    while True:
        last, kind = r.field(last)
        if kind == _STOP:
            return
        if last in refused:
            _refuse("meta", last)
        if last in _CMD_OFFSETS:
            _patch(r, kind, PATCH_OFFSET, patches)
        else:
            r.skip(kind)


def _patch(r: _Reader, kind: int, what: int, patches: list) -> None:
    """Note the integer value at the reader's position as one the stitch rewrites.  An
    offset of 0 is not a position (the file starts with PAR1): pyarrow writes it for a
    page a column chunk does not have (an empty row group's) and in the deprecated
    ColumnChunk.file_offset, and the single writer leaves it 0 wherever the group is."""
    start = r.pos
    value = r.zigzag() if kind in (_I16, _I32, _I64) else None
    if value is None:
        raise StitchError(f"Parquet footer: an offset of Thrift type {kind}")
    if what == PATCH_ORDINAL or value != 0:
        patches.append((start, r.pos, what, value))


def _column_chunk(r: _Reader, patches: list) -> None:
    last = 0
    while True:
        last, kind = r.field(last)
        if kind == _STOP:
            return
        if last in _REFUSED["column"]:
            _refuse("column", last)
        if last == _CC_META:
            _column_meta(r, patches)
        elif last == _CC_FILE_OFFSET:
            _patch(r, kind, PATCH_OFFSET, patches)
        else:
            r.skip(kind)


def _row_group(r: _Reader, patches: list) -> None:
    last = 0
    while True:
        last, kind = r.field(last)
        if kind == _STOP:
            return
        if last == _RG_COLUMNS:
            _, size = r.list_header()
            for _ in range(size):
                _column_chunk(r, patches)
        elif last in (_RG_FILE_OFFSET, _RG_ORDINAL):
            _patch(r, kind, PATCH_OFFSET if last == _RG_FILE_OFFSET else PATCH_ORDINAL, patches)
        else:
            r.skip(kind)


def part_layout(footer: bytes) -> dict:
    """Where a part's footer holds what the stitch changes: ``head`` (bytes before the
    row count), ``num_rows`` and its field header, the row groups' list header, each row
    group's byte span, ``patches`` ([start, end, kind, value]) and ``tail`` (the fields
    after the row groups and the struct's end).  Plain lists and ints (JSON-able)."""
    try:
        return _layout(footer)
    except IndexError:
        raise StitchError("Parquet footer: truncated") from None


def _layout(footer: bytes) -> dict:
    r = _Reader(footer)
    last, spans, out = 0, {}, {"row_groups": [], "patches": []}
    patches: list = []
    while True:
        start = r.pos
        last, kind = r.field(last)
        if kind == _STOP:
            break
        _refuse("file", last)
        if last == _FMD_NUM_ROWS:
            value_start = r.pos
            out["num_rows"] = r.zigzag()
            spans[last] = (start, value_start, r.pos)
        elif last == _FMD_ROW_GROUPS:
            value_start = r.pos
            _, size = r.list_header()
            for _ in range(size):
                rg_start = r.pos
                _row_group(r, patches)
                out["row_groups"].append([rg_start, r.pos])
            spans[last] = (start, value_start, r.pos)
        else:
            r.skip(kind)
    if r.pos != len(footer):
        raise StitchError("Parquet footer: bytes after the FileMetaData")
    if _FMD_NUM_ROWS not in spans or _FMD_ROW_GROUPS not in spans or spans[_FMD_NUM_ROWS][2] != spans[_FMD_ROW_GROUPS][0]:
        raise StitchError("Parquet footer: no row count followed by row groups")
    out["head"] = spans[_FMD_NUM_ROWS][0]
    out["num_rows_header"] = list(spans[_FMD_NUM_ROWS][:2])
    out["row_groups_header"] = [spans[_FMD_ROW_GROUPS][0], spans[_FMD_ROW_GROUPS][1]]
    out["tail"] = spans[_FMD_ROW_GROUPS][2]
    out["patches"] = [list(p) for p in patches]
    if stitch_footer([footer], [0], [out]) != footer:
        raise StitchError("Parquet footer: the stitch would not give the part's own footer back")
    return out


def _varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(out: bytearray, v: int) -> None:
    _varint(out, (v << 1) ^ (v >> 63))


def _list_header(out: bytearray, elem: int, size: int) -> None:
    if size < 15:
        out.append((size << 4) | elem)
    else:
        out.append(0xF0 | elem)
        _varint(out, size)


def stitch_footer(footers: list, body_sizes: list, layouts: list | None = None) -> bytes:
    """The footer of the file whose bodies are the parts' bodies in order (a part's body:
    its bytes between the leading PAR1 and its footer).  ``layouts`` are the parts'
    :func:`part_layout` (made here when not given)."""
    if not footers:
        raise StitchError("no Parquet parts to stitch")
    if layouts is None:
        layouts = [part_layout(f) for f in footers]
    first, lay0 = footers[0], layouts[0]
    out = bytearray(first[:lay0["head"]])
    a, b = lay0["num_rows_header"]
    out += first[a:b]
    _zigzag(out, sum(int(lay["num_rows"]) for lay in layouts))
    a, b = lay0["row_groups_header"]
    out += first[a:b]
    _list_header(out, _STRUCT, sum(len(lay["row_groups"]) for lay in layouts))
    delta, ordinal = 0, 0
    for footer, body, lay in zip(footers, body_sizes, layouts):
        patches = iter(lay["patches"])
        patch = next(patches, None)
        for rg_start, rg_end in lay["row_groups"]:
            pos = rg_start
            while patch is not None and patch[0] < rg_end:
                start, end, kind, value = patch
                out += footer[pos:start]
                _zigzag(out, value + delta if kind == PATCH_OFFSET else ordinal)
                pos = end
                patch = next(patches, None)
            out += footer[pos:rg_end]
            ordinal += 1
        delta += body
    out += first[lay0["tail"]:]
    return bytes(out)


def footer_span(tail: bytes, size: int) -> tuple:
    """(footer start, footer end) in a Parquet part of ``size`` bytes from its last 8 bytes."""
    if size < 12 or len(tail) < TRAILER_BYTES or tail[-4:] != MAGIC:
        raise StitchError("not a Parquet file (no PAR1 at its end)")
    n = struct.unpack("<I", tail[-8:-4])[0]
    if n + 12 > size:
        raise StitchError("Parquet footer longer than the file")
    return size - TRAILER_BYTES - n, size - TRAILER_BYTES


def trailer(footer: bytes) -> bytes:
    """What follows the last body: the footer, its length and PAR1."""
    return footer + struct.pack("<I", len(footer)) + MAGIC


def stitch(parts: list) -> bytes:
    """The parts (whole Parquet files in memory) stitched into one file."""
    footers, bodies = [], []
    for data in parts:
        if data[:4] != MAGIC:
            raise StitchError("not a Parquet file (no PAR1 at its start)")
        lo, hi = footer_span(data[-TRAILER_BYTES:], len(data))
        footers.append(bytes(data[lo:hi]))
        bodies.append(bytes(data[4:lo]))
    return MAGIC + b"".join(bodies) + trailer(stitch_footer(footers, [len(b) for b in bodies]))
