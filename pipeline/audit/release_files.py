"""What a release is made of, for the purposes of the audit: every entry under
``release/`` classified, and the non-data parts of each file parsed (and cached).

* metadata and text: file names, Parquet key-value metadata (pandas metadata,
  the decoded Arrow schema), Parquet schemas, the vocabularies of string
  columns, Zarr ``.zarray``/``.zattrs``/``.zgroup``/``.zmetadata``, the VCF
  header, the tabix index header, npz member names, zip headers and npy
  headers, ``MANIFEST.json``, ``data_dictionary.md``/``.tsv`` and any other
  text file;
* data: Parquet column values (string columns decoded), Zarr arrays, the VCF
  body, image pixels.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import struct
import zipfile
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import bundle

ZARR_META = (".zarray", ".zattrs", ".zgroup", ".zmetadata")
TEXT_SUFFIXES = (".md", ".tsv", ".json", ".txt", ".csv", ".yaml", ".yml", ".html")
#: Folders holding one file per participant of a subset ("angiograms": none is released today).
PER_PARTICIPANT_DIRS = (*bundle.IMAGING.values(), "angiograms")
#: Zarr stores whose subject extent is an outcome (who attended visit 2 and was imaged).
OUTCOME_STORES = (bundle.IMAGING[2] + bundle.ZARR_SUFFIX,)
MANIFEST = bundle.MANIFEST
COVARIATES = bundle.table_file("covariates")
TARGETABILITY = bundle.table_file("targetability")
MOLECULE_ID = re.compile(r"^(PROT|TRANS|MET)_(\d+)$")
SUBJECT_ID = re.compile(r"^SUBJ_(\d+)$")
_CHUNK = 16 << 20


@dataclass
class Entry:
    rel: str
    kind: str  # file | dir | symlink
    size: int


def inventory(release: str) -> list:
    """Every entry under ``release`` in sorted path order (symlinks are not followed)."""
    out = []
    for root, dirs, files in os.walk(release, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, release).replace(os.sep, "/")
            if os.path.islink(path):
                out.append(Entry(rel, "symlink", 0))
            elif os.path.isdir(path):
                out.append(Entry(rel, "dir", 0))
            else:
                out.append(Entry(rel, "file", os.path.getsize(path)))
    return sorted(out, key=lambda e: e.rel)


def _zarr_root(rel: str, roots: set) -> Optional[str]:
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        cand = "/".join(parts[:i])
        if cand in roots:
            return cand
    return None


def zarr_roots(entries: list) -> set:
    """Outermost directories that are Zarr stores (hold a .zgroup or .zarray)."""
    stores = set()
    for e in entries:
        base = e.rel.rsplit("/", 1)
        if len(base) == 2 and base[1] in (".zgroup", ".zarray"):
            stores.add(base[0])
    return {s for s in stores if not any(s.startswith(o + "/") for o in stores)}


def classify(rel: str, roots: set) -> str:
    if _zarr_root(rel, roots) is not None:
        return "zarr-meta" if rel.rsplit("/", 1)[-1] in ZARR_META else "zarr-chunk"
    if rel == MANIFEST:
        return "manifest"
    if rel.endswith(".parquet"):
        return "parquet"
    if rel.endswith((".vcf.gz", ".vcf.bgz")):
        return "vcf"
    if rel.endswith((".tbi", ".csi")):
        return "index"
    if rel.endswith(".npz"):
        return "npz"
    if rel.endswith(TEXT_SUFFIXES):
        return "text"
    return "other"


class ParquetInfo:
    """The non-data parts of one Parquet file."""

    def __init__(self, path: str):
        self.path = path
        self.md = pq.read_metadata(path)
        self.kv = dict(self.md.metadata or {})
        self.arrow_schema = self.md.schema.to_arrow_schema()
        pandas_meta = self.kv.get(b"pandas")
        self.pandas = json.loads(pandas_meta) if pandas_meta else {}
        idx = self.pandas.get("index_columns", [])
        self.index_columns = [c for c in idx if isinstance(c, str)]
        self.columns = [f.name for f in self.arrow_schema]
        self.value_columns = [c for c in self.columns if c not in self.index_columns]
        self.string_columns = [f.name for f in self.arrow_schema
                               if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        with open(path, "rb") as fh:
            fh.seek(-8, os.SEEK_END)
            n = struct.unpack("<I", fh.read(4))[0]
            fh.seek(-8 - n, os.SEEK_END)
            self.footer = fh.read(n)

    @property
    def parquet_schema(self) -> str:
        """The physical schema as text (``str(ParquetSchema)`` starts with an object address)."""
        text = str(self.md.schema)
        return text.split("\n", 1)[1] if text.startswith("<") else text

    @property
    def subject_key(self) -> Optional[str]:
        return "subject_id" if "subject_id" in self.columns else None

    def metadata_streams(self, rel: str) -> Iterator[tuple]:
        for k, v in self.kv.items():
            key = k.decode("utf-8", "replace")
            yield f"{rel} [key-value metadata key]", k
            yield f"{rel} [key-value metadata {key!r}]", v
            if k == b"ARROW:schema":
                try:
                    yield f"{rel} [decoded ARROW:schema]", base64.b64decode(v)
                except ValueError:
                    pass
        yield f"{rel} [schema]", (self.parquet_schema + "\n" + self.arrow_schema.to_string(show_schema_metadata=False)).encode()
        yield f"{rel} [created_by]", str(self.md.created_by).encode()

    def vocabulary(self, column: str) -> list:
        col = pq.read_table(self.path, columns=[column]).column(column)
        return [v for v in pc.unique(col).to_pylist() if v is not None]

    def dictionaries(self, columns: list) -> dict:
        """Dictionary-page values of dictionary-encoded string columns, per row group."""
        cols = [c for c in columns if c in self.string_columns]
        if not cols:
            return {}
        table = pq.read_table(self.path, columns=cols, read_dictionary=cols)
        out = {}
        for c in cols:
            chunks = table.column(c).chunks
            out[c] = [ch.dictionary.to_pylist() if pa.types.is_dictionary(ch.type) else None for ch in chunks]
        return out


def numeric_float(col: pa.ChunkedArray) -> Optional[np.ndarray]:
    """A column as float64 with NaN for null, or None for non-numeric columns."""
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t):
        col = pc.cast(col, pa.int64()) if not pa.types.is_date32(t) else pc.cast(col, pa.int32())
        t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return None


def column_batches(path: str, columns: list, size: int = 256) -> Iterator[pa.Table]:
    for i in range(0, len(columns), size):
        yield pq.read_table(path, columns=columns[i:i + size])


def vcf_chunks(path: str) -> Iterator[bytes]:
    with gzip.open(path, "rb") as fh:
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                return
            yield chunk


def vcf_header(path: str) -> bytes:
    """The VCF header (``##`` lines and the ``#CHROM`` line)."""
    out = []
    with gzip.open(path, "rb") as fh:
        for line in fh:
            if not line.startswith(b"#"):
                break
            out.append(line)
            if line.startswith(b"#CHROM"):
                break
    return b"".join(out)


def tabix_header(path: str) -> bytes:
    """Everything of a .tbi before the bins: magic, sizes, column layout and the sequence names."""
    data = gzip.open(path, "rb").read()
    if data[:4] != b"TBI\x01" or len(data) < 36:
        return data[:64]
    l_nm = struct.unpack_from("<i", data, 32)[0]
    return data[:36 + l_nm]


def npz_structure(path: str) -> dict:
    """Zip and npy structure of an npz without its pixel payloads: member names and
    order, zip header fields except CRC/sizes/offsets, extra fields, comments, the
    raw npy header of each member."""
    members = []
    with open(path, "rb") as raw, zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            raw.seek(info.header_offset)
            local = raw.read(30)
            sig, ver, flags, method, mtime, mdate, _crc, _cs, _us, nlen, xlen = struct.unpack("<4s5H3L2H", local)
            lname = raw.read(nlen)
            lextra = raw.read(xlen)
            with zf.open(info) as fh:
                head = fh.read(10)
                hlen = struct.unpack("<H", head[8:10])[0] if head[6:7] == b"\x01" else None
                if hlen is None:
                    head += fh.read(2)
                    hlen = struct.unpack("<I", head[8:12])[0]
                npy_header = head + fh.read(hlen)
            members.append({
                "name": info.filename, "local_name": lname.decode("utf-8", "replace"),
                "version": [ver, info.create_version, info.extract_version], "flags": [flags, info.flag_bits],
                "method": [method, info.compress_type], "time": [mtime, mdate, list(info.date_time)],
                "extra": [lextra.hex(), info.extra.hex()], "comment": info.comment.hex(),
                "external_attr": info.external_attr, "create_system": info.create_system,
                "npy_header": npy_header.decode("latin-1"),
            })
        comment = zf.comment.hex()
    return {"members": members, "comment": comment}


def strings(arr) -> list:
    """A Zarr string array's values as Python strings (numpy StringDType included)."""
    return [str(v) for v in np.asarray(arr[...]).ravel().tolist()]


def read_text(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


class Release:
    """A release folder and the parsed non-data parts of its files (cached)."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.entries = inventory(self.path)
        self.files = [e for e in self.entries if e.kind == "file"]
        self.roots = zarr_roots(self.entries)
        self.kinds = {e.rel: classify(e.rel, self.roots) for e in self.files}
        self._parquet: dict = {}
        self._streams: Optional[list] = None

    def abs(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def of_kind(self, kind: str) -> list:
        return [e.rel for e in self.files if self.kinds[e.rel] == kind]

    def parquet(self, rel: str) -> ParquetInfo:
        if rel not in self._parquet:
            self._parquet[rel] = ParquetInfo(self.abs(rel))
        return self._parquet[rel]

    def cohort(self) -> Optional[list]:
        """Participant identifiers in cohort order (covariates.parquet)."""
        if COVARIATES not in self.kinds:
            return None
        t = pq.read_table(self.abs(COVARIATES), columns=["subject_id"])
        return t.column("subject_id").to_pylist()

    def covariate_flags(self) -> Optional[pd.DataFrame]:
        if COVARIATES not in self.kinds:
            return None
        cols = [c for c in ("imaged", "visit2") if c in self.parquet(COVARIATES).columns]
        df = pd.read_parquet(self.abs(COVARIATES), columns=cols)
        return df if df.index.name == "subject_id" else None

    def metadata_streams(self) -> list:
        """(label, bytes) of every piece of metadata and text in the release."""
        if self._streams is None:
            self._streams = list(self._metadata_streams())
        return self._streams

    def _metadata_streams(self) -> Iterator[tuple]:
        yield "[file names]", "\n".join(e.rel for e in self.entries).encode()
        for e in self.files:
            kind, path = self.kinds[e.rel], self.abs(e.rel)
            if kind in ("zarr-meta", "manifest", "text"):
                yield e.rel, read_text(path)
            elif kind == "parquet":
                info = self.parquet(e.rel)
                yield from info.metadata_streams(e.rel)
                for c in info.string_columns:
                    if c not in info.index_columns and c != "subject_id":
                        yield f"{e.rel} [vocabulary of {c}]", "\n".join(map(str, info.vocabulary(c))).encode()
            elif kind == "vcf":
                yield f"{e.rel} [header]", vcf_header(path)
            elif kind == "index":
                yield f"{e.rel} [header]", tabix_header(path)
            elif kind == "npz":
                yield f"{e.rel} [zip/npy structure]", json.dumps(npz_structure(path), sort_keys=True).encode()
            elif kind == "other":
                data = read_text(path)
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                yield e.rel, data
