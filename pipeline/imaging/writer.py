"""Fast, deterministic writers for the released images.

``write_npz`` writes the standard ``.npz`` that ``np.load`` reads (a zip of
``cine.npy``, ``t1map.npy`` and the acquisition geometry, :data:`GEOMETRY`).
The cine is stored (zip method 0, :data:`STORED_MEMBERS`): its noisy 8-bit pixels
deflate only ~10 %, which did not pay for the CPU.  The T1 map and the geometry
are compressed (zip method 8, raw deflate) with :func:`kernels.deflate.deflate_member`
instead of zlib (the NaN background of a T1 map is long runs; the kernel gets
within a few per cent of zlib's size in a fraction of its time).  It is a pure function of the pixels (ISA-L, which is
faster still, was dropped because it does not give the same bytes in every
process).  Members carry a fixed 1980-01-01 00:00:00 timestamp and no extra
fields, so identical arrays give identical bytes.

``ImagingZarrWriter`` writes the same arrays into one Zarr (format 2) group,
``imaging.zarr``: ``cine`` [n, 3, 25, 128, 128] uint8 and ``t1map`` [n, 3, 128,
128] float32 chunked one participant per chunk, plus ``subject_id``; the
geometry is in the attributes of ``cine`` and ``t1map``.  The
store's metadata and ``subject_id`` are written once by ``create``; afterwards
each process writes whole chunks of its own subject range, so writers of
disjoint ranges never touch the same object.
"""
from __future__ import annotations

import io
import struct
from functools import lru_cache

import numpy as np
from isal import isal_zlib  # CRC-32 only (a checksum is the same everywhere)

#: Input bytes per Huffman block of an npz member: measured on rendered cine +
#: T1 maps, 65,535-byte blocks give files ~2 % larger than np.savez_compressed's
#: (4 KiB blocks follow the local intensities closely enough to be ~5 % smaller,
#: at twice the time).
NPZ_BLOCK_SIZE = 65535
#: 1980-01-01 00:00:00 in MS-DOS date/time fields (the earliest a zip can hold).
_DOS_TIME = 0
_DOS_DATE = (1980 - 1980) << 9 | 1 << 5 | 1
_VERSION = 20           # 2.0: deflate
_VERSION_STORED = 10    # 1.0: stored
_FLAGS = 0
_METHOD_DEFLATE = 8
_METHOD_STORED = 0
#: Members written uncompressed (zip method 0) by default: the cine's noisy 8-bit
#: pixels deflate only ~10 % (1.23 MB -> ~1.1 MB a participant), while coding them
#: was more than half of a build's image-writing CPU; T1 maps (NaN background,
#: ~92 % smaller) and the geometry stay deflated.  Any zip reader (np.load,
#: zipfile, unzip) reads a stored member, and more cheaply.
STORED_MEMBERS = ("cine",)

#: In-plane pixel spacing (row, column) in mm: the template's nominal spacing, at
#: which a wall of ``lv_wall_mm`` is rendered that many pixels thick.
PIXEL_SPACING_MM = (1.0, 1.0)
#: Nominal slice thickness in mm, as in UK Biobank's short-axis cine (8 mm).  The
#: three slices (base, mid, apex) are separate planes, not a contiguous stack.
SLICE_THICKNESS_MM = 8.0
#: Time between cine frames in ms: the renderer's cycle is in fractions of the
#: R-R interval (25 frames from end-diastole), here given a nominal 1,000 ms
#: (60 beats per minute) for every participant.
FRAME_INTERVAL_MS = 40.0
#: The geometry stored with every released image: npz members and Zarr attributes.
GEOMETRY = {
    "pixel_spacing_mm": np.array(PIXEL_SPACING_MM, dtype=np.float64),
    "slice_thickness_mm": np.array(SLICE_THICKNESS_MM, dtype=np.float64),
    "frame_interval_ms": np.array(FRAME_INTERVAL_MS, dtype=np.float64),
}


def _npy_header(array: np.ndarray) -> bytes:
    fortran = bool(array.flags.f_contiguous and not array.flags.c_contiguous)
    return _npy_header_of(array.dtype, array.shape, fortran)


@lru_cache(maxsize=64)
def _npy_header_of(dtype: np.dtype, shape: tuple, fortran: bool) -> bytes:
    """The .npy (1.0) header of an array of this dtype, shape and order (the same bytes for
    every image of a release: made once per process)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(
        np.empty(shape, dtype=dtype, order="F" if fortran else "C")))
    return buffer.getvalue()


def _deflate_member(array: np.ndarray, block_size: int) -> tuple[np.ndarray, int, int]:
    """(raw deflate of header + data, CRC-32, uncompressed size) of one .npy member."""
    from kernels.deflate import deflate_member

    # np.require keeps a 0-d array 0-d (np.ascontiguousarray would make it 1-d).
    array = np.require(array, requirements="C")
    header = np.frombuffer(_npy_header(array), dtype=np.uint8)
    data = array.reshape(-1).view(np.uint8)
    # Runs only pay where whole regions repeat (the NaN background of a float map);
    # 8-bit noisy pixels are coded as literals.
    payload = deflate_member(header, data, block_size, array.dtype.itemsize > 1)
    crc = isal_zlib.crc32(data, isal_zlib.crc32(header))
    return payload, crc & 0xFFFFFFFF, header.size + data.size


def _stored_member(array: np.ndarray) -> tuple[list, int, int]:
    """([npy header, data view], CRC-32, size) of one uncompressed .npy member (no copy of the data)."""
    array = np.require(array, requirements="C")
    header = _npy_header(array)
    data = array.reshape(-1).view(np.uint8)
    crc = isal_zlib.crc32(data, isal_zlib.crc32(header))
    return [header, memoryview(data)], crc & 0xFFFFFFFF, len(header) + data.size


@lru_cache(maxsize=16)
def _geometry_member(name: str, block_size: int, stored: bool) -> tuple:
    """(payload parts, method, version, payload size, CRC-32, size) of one :data:`GEOMETRY` member:
    the same bytes in every image, coded once per process."""
    array = GEOMETRY[name]
    if stored:
        payload, crc, size = _stored_member(array)
        return [bytes(b"".join(payload))], _METHOD_STORED, _VERSION_STORED, size, crc, size
    deflated, crc, size = _deflate_member(array, block_size)
    return [deflated.tobytes()], _METHOD_DEFLATE, _VERSION, len(deflated), crc, size


def npz_parts(arrays: dict, block_size: int = NPZ_BLOCK_SIZE, geometry: bool = True,
              stored: tuple = STORED_MEMBERS) -> list:
    """The buffers that make up an .npz holding ``arrays`` ({name: ndarray}, in order)
    followed, for a released image (``geometry``), by the members of :data:`GEOMETRY`.
    Members named in ``stored`` are written uncompressed (zip method 0), the others deflated."""
    members = dict(arrays)
    if geometry:
        clash = sorted(set(members) & set(GEOMETRY))
        if clash:
            raise ValueError(f"arrays {clash} are written with the geometry; pass geometry=False to write them yourself")
        members.update(GEOMETRY)
    parts = []
    central = []
    offset = 0
    for name, array in members.items():
        filename = f"{name}.npy".encode()
        if geometry and name in GEOMETRY:
            payload, method, version, n_payload, crc, size = _geometry_member(name, block_size, name in stored)
        elif name in stored:
            payload, crc, size = _stored_member(np.asarray(array))
            method, version, n_payload = _METHOD_STORED, _VERSION_STORED, size
        else:
            deflated, crc, size = _deflate_member(np.asarray(array), block_size)
            payload, method, version, n_payload = [deflated], _METHOD_DEFLATE, _VERSION, len(deflated)
        if n_payload >= 0xFFFFFFFF or size >= 0xFFFFFFFF:
            raise ValueError(f"npz member {name} exceeds the 4 GiB a zip without ZIP64 can hold")
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", version, _FLAGS, method, _DOS_TIME, _DOS_DATE,
                            crc, n_payload, size, len(filename), 0) + filename
        central.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", version, version, _FLAGS, method,
                                   _DOS_TIME, _DOS_DATE, crc, n_payload, size, len(filename), 0, 0, 0, 0,
                                   0o100644 << 16, offset) + filename)
        parts += [local, *payload]
        offset += len(local) + n_payload
    directory = b"".join(central)
    parts += [directory, struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(central), len(central), len(directory),
                                     offset, 0)]
    return parts


def npz_bytes(arrays: dict, block_size: int = NPZ_BLOCK_SIZE, geometry: bool = True,
              stored: tuple = STORED_MEMBERS) -> bytes:
    """The bytes of an .npz holding ``arrays`` ({name: ndarray}, written in the given order)
    and, for a released image (``geometry``), the members of :data:`GEOMETRY`."""
    return b"".join(npz_parts(arrays, block_size, geometry, stored))


def write_npz(path_or_fileobj, cine: np.ndarray, t1map: np.ndarray, block_size: int = NPZ_BLOCK_SIZE) -> int:
    """Write one participant's ``cine``, ``t1map`` and :data:`GEOMETRY` as a deterministic .npz;
    returns the byte count.

    ``path_or_fileobj`` is a filesystem path or a binary file object (e.g. from
    ``fsspec.open(url, "wb")``).
    """
    parts = npz_parts({"cine": cine, "t1map": t1map}, block_size)
    if hasattr(path_or_fileobj, "write"):
        path_or_fileobj.writelines(parts)
    else:
        with open(path_or_fileobj, "wb") as handle:
            handle.writelines(parts)
    return sum(memoryview(part).nbytes for part in parts)


# ----------------------------------------------------------------------------- Zarr

ZARR_GROUP = "imaging.zarr"


def _zarr_compressor():
    from numcodecs import Zstd

    # Noisy pixels gain little from harder work; level 1 keeps writes cheap.
    return Zstd(level=1)


def _geometry_attributes(frames: bool) -> dict:
    names = [n for n in GEOMETRY if frames or n != "frame_interval_ms"]
    return {name: GEOMETRY[name].tolist() for name in names}


class ImagingZarrWriter:
    """Writer of the imaging Zarr group (format 2), safe for disjoint subject ranges across processes.

    Usage: ``ImagingZarrWriter.create(url, subject_ids)`` once (driver), then in any
    process ``ImagingZarrWriter.open(url).write(start, cine, t1map)`` for
    contiguous subject ranges.  ``url`` is the group itself (``.../imaging.zarr``)
    and may be any fsspec URL zarr accepts.
    """

    def __init__(self, group):
        self.group = group
        self.cine = group["cine"]
        self.t1map = group["t1map"]

    @classmethod
    def create(cls, url, subject_ids, slices: int = 3, frames: int = 25, size: int = 128,
               attributes: dict | None = None) -> "ImagingZarrWriter":
        import zarr

        ids = [str(s) for s in subject_ids]
        n = len(ids)
        group = zarr.open_group(url, mode="w", zarr_format=2)
        compressor = _zarr_compressor()
        cine = group.create_array("cine", shape=(n, slices, frames, size, size), chunks=(1, slices, frames, size, size),
                                  dtype="uint8", compressors=compressor, fill_value=None)
        cine.attrs["_ARRAY_DIMENSIONS"] = ["subject", "slice", "frame", "y", "x"]
        cine.attrs.update(_geometry_attributes(frames=True))
        t1 = group.create_array("t1map", shape=(n, slices, size, size), chunks=(1, slices, size, size),
                                dtype="float32", compressors=compressor, fill_value=float("nan"))
        t1.attrs["_ARRAY_DIMENSIONS"] = ["subject", "slice", "y", "x"]
        t1.attrs["units"] = "ms"
        t1.attrs.update(_geometry_attributes(frames=False))
        sid = group.create_array("subject_id", shape=(n,), chunks=(max(n, 1),), dtype=str)
        sid.attrs["_ARRAY_DIMENSIONS"] = ["subject"]
        if n:
            sid[:] = np.array(ids, dtype=object)
        group.attrs.update({"slices": ["base", "mid", "apex"], **(attributes or {})})
        return cls(group)

    @classmethod
    def open(cls, url) -> "ImagingZarrWriter":
        import zarr

        return cls(zarr.open_group(url, mode="r+", zarr_format=2))

    def write(self, start: int, cine: np.ndarray, t1map: np.ndarray) -> None:
        """Write subjects ``start`` .. ``start + len(cine) - 1`` (whole chunks only)."""
        stop = start + cine.shape[0]
        if t1map.shape[0] != cine.shape[0]:
            raise ValueError("cine and t1map hold different numbers of subjects")
        if start < 0 or stop > self.cine.shape[0]:
            raise ValueError(f"subject range {start}..{stop - 1} outside 0..{self.cine.shape[0] - 1}")
        self.cine[start:stop] = cine
        self.t1map[start:stop] = t1map


def write_zarr_range(url, start: int, cine: np.ndarray, t1map: np.ndarray) -> None:
    """Open the group at ``url`` and write one subject range (a picklable task for worker processes)."""
    ImagingZarrWriter.open(url).write(start, cine, t1map)
