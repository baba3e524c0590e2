"""BGZF (blocked gzip) compression of independent chunks.

A BGZF file is a series of gzip members, each holding at most 64 KiB of
uncompressed data and recording its own compressed size in a ``BC`` extra
subfield, followed by a fixed 28-byte empty member that marks a complete file
(SAM/BAM specification §4.1).  Members concatenate, so chunks of text can be
compressed in separate processes and written one after another; a chunk always
starts a new block, which is what makes the output independent of who
compressed which chunk.

Positions inside a BGZF file are *virtual offsets*: the compressed offset of a
block's first byte shifted left by 16, ORed with the offset inside that block's
uncompressed data.  :func:`virtual_offsets` turns chunk-relative positions into
file virtual offsets once the chunk's place in the file is known.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np
from isal import isal_zlib  # CRC-32 only: a checksum is the same in every process

# bgzip's choice: leaves room for incompressible data to be stored verbatim and
# still fit the 16-bit block size.
BLOCK_DATA_SIZE = 0xFF00
MAX_BLOCK_SIZE = 1 << 16
# zlib at bgzip's default level for blocks not compressed by a caller-supplied
# stream (headers, indexes, the "zlib" VCF mode).  Not ISA-L: its output for the
# same input differed between processes, and a release must be byte-identical.
COMPRESS_LEVEL = 6

_HEADER = struct.Struct("<4BI2BH2BHH")
_TRAILER = struct.Struct("<II")
_HEADER_TRAILER_SIZE = _HEADER.size + _TRAILER.size
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def _deflate_raw(data: memoryview, level: int = COMPRESS_LEVEL) -> bytes:
    # Level 0 writes stored deflate blocks (what an incompressible block falls back to).
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def _header(block_size: int) -> bytes:
    # gzip magic, deflate, FEXTRA; no mtime; XFL 0; OS unknown; one 'BC' subfield: BSIZE - 1
    return _HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, block_size - 1)


# A member's header with BSIZE left 0; join_gzip_members fills it in (its last two bytes).
_HEADER_TEMPLATE = np.frombuffer(_header(1), dtype=np.uint8).copy()


def _member(view: memoryview, payload: bytes) -> bytes:
    block_size = len(payload) + _HEADER_TRAILER_SIZE
    header = _header(block_size)
    trailer = _TRAILER.pack(isal_zlib.crc32(view), len(view))
    return b"".join((header, payload, trailer))


def compress_block(data, payload: bytes | None = None) -> bytes:
    """One BGZF block (a complete gzip member) holding ``data`` (≤ BLOCK_DATA_SIZE bytes).

    ``payload``, if given, is a raw deflate stream of ``data`` made elsewhere;
    it is used when it fits the block's 16-bit size.
    """
    view = memoryview(data).cast("B")
    if len(view) > BLOCK_DATA_SIZE:
        raise ValueError(f"BGZF block data is {len(view)} bytes; at most {BLOCK_DATA_SIZE} fit one block")
    for make in ((lambda: payload) if payload is not None else None, lambda: _deflate_raw(view), lambda: _deflate_raw(view, 0)):
        if make is None:
            continue
        candidate = make()
        if len(candidate) + _HEADER_TRAILER_SIZE <= MAX_BLOCK_SIZE:
            return _member(view, candidate)
    raise AssertionError("stored deflate of a BGZF block always fits")


def compress_chunk(data, streams=None, sizes=None) -> tuple[bytes, np.ndarray]:
    """Compress ``data`` into consecutive BGZF blocks (no EOF marker).

    Block k holds uncompressed bytes ``[k * BLOCK_DATA_SIZE, (k + 1) * BLOCK_DATA_SIZE)``.
    ``streams`` and ``sizes``, if given, hold a raw deflate stream per block made
    elsewhere: block k's is the next ``sizes[k]`` bytes of ``streams`` (uint8),
    or none when ``sizes[k]`` is -1 (that block is compressed here).
    Returns (compressed bytes, block_starts int64[n_blocks + 1]) where
    ``block_starts[k]`` is block k's offset in the compressed bytes and the last
    entry is their total length.
    """
    view = memoryview(data).cast("B")
    n_blocks = -(-len(view) // BLOCK_DATA_SIZE)
    blocks = [view[k * BLOCK_DATA_SIZE:(k + 1) * BLOCK_DATA_SIZE] for k in range(n_blocks)]
    payloads = [None] * n_blocks
    if streams is not None:
        sizes = np.asarray(sizes, dtype=np.int64)
        if len(sizes) != n_blocks:
            raise ValueError(f"{len(sizes)} stream sizes for {n_blocks} blocks")
        if n_blocks and sizes.min() > 0 and sizes.max() + _HEADER_TRAILER_SIZE <= MAX_BLOCK_SIZE:
            # Every block has a stream that fits: members are assembled in one compiled pass.
            from kernels.deflate import join_gzip_members

            crcs = np.array([isal_zlib.crc32(block) for block in blocks], dtype=np.uint32)
            lengths = np.array([len(block) for block in blocks], dtype=np.int64)
            out, block_starts = join_gzip_members(_HEADER_TEMPLATE, np.asarray(streams, dtype=np.uint8), sizes, crcs, lengths)
            return out.tobytes(), block_starts
        ends = np.cumsum(np.maximum(sizes, 0)).tolist()
        payloads = [bytes(streams[end - size:end]) if size > 0 else None for size, end in zip(sizes.tolist(), ends)]
    members = [compress_block(block, payload) for block, payload in zip(blocks, payloads)]
    block_starts = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum([len(b) for b in members], out=block_starts[1:])
    return b"".join(members), block_starts


def virtual_offsets(positions, block_starts, chunk_offset: int, data_length: int) -> np.ndarray:
    """Virtual file offsets of uncompressed positions inside one compressed chunk.

    positions : int64[n], offsets into the chunk's uncompressed data, 0 ≤ p ≤ data_length.
    block_starts : the array :func:`compress_chunk` returned for that chunk.
    chunk_offset : where the chunk's first block starts in the file.
    data_length : the chunk's uncompressed length.
    A position at the end of a block maps to offset 0 of the next block (for the
    chunk's end, the block after the chunk), which is how htslib reports the
    position after reading up to it, so indexes match the ones htslib builds.
    """
    positions = np.asarray(positions, dtype=np.int64)
    n_blocks = len(block_starts) - 1
    if n_blocks != -(-data_length // BLOCK_DATA_SIZE):
        raise ValueError(f"{n_blocks} blocks cannot hold {data_length} bytes of chunk data")
    if positions.size and (positions.min() < 0 or positions.max() > data_length):
        raise ValueError(f"position lies outside the chunk's {data_length} bytes of uncompressed data")
    block = positions // BLOCK_DATA_SIZE
    # Only the chunk's last block can be short; its end is the chunk's end.
    block = np.where(positions == data_length, n_blocks, block)
    within = positions - block * BLOCK_DATA_SIZE
    within = np.where(block == n_blocks, 0, within)
    coffset = np.asarray(block_starts, dtype=np.int64)[block] + np.int64(chunk_offset)
    return (coffset.astype(np.uint64) << np.uint64(16)) | within.astype(np.uint64)


def compress_file(data) -> bytes:
    """A whole BGZF file (blocks plus EOF marker) holding ``data``."""
    compressed, _ = compress_chunk(data)
    return compressed + EOF_BLOCK
