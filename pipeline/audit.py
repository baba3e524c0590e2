"""Leak audit of a built world: nothing in ``<world>/release/`` may reveal a seed,
a role, a latent value or a hidden parameter (SPEC sections 3, 5 and 6).

    python -m pipeline.audit <world_dir> [--against <other_world_dir>] [--json]

``audit(world_dir, against=None) -> dict`` returns the report; the CLI prints a
table of findings and exits 1 when any fails.  ``sealed/`` is read only to know
what to look for (seed, oracle key, roles, latent values, eval mask, weights).

What the release is made of, for the purposes of the audit:

* metadata and text: file names, Parquet key-value metadata (pandas metadata,
  the decoded Arrow schema), Parquet schemas, the vocabularies of string
  columns, Zarr ``.zarray``/``.zattrs``/``.zgroup``/``.zmetadata``, the VCF
  header, the tabix index header, npz member names, zip headers and npy
  headers, ``MANIFEST.json``, ``data_dictionary.md``/``.tsv`` and any other
  text file;
* data: Parquet column values (string columns decoded), Zarr arrays, the VCF
  body, image pixels.

Seed material is searched in both (compressed payloads are searched in decoded
form; image pixel payloads are data values and are not decoded).  Role words,
role identifiers and hidden numbers are searched in metadata and text only,
where they would be a statement rather than a value.

Rules that a naive search would get wrong, made precise here:

* ``T1`` is also the MRI quantity: "native T1", "T1 map"/"T1 mapping"/"T1
  relaxation" are not the bias code.  ``weight`` is allowed as "body weight".
* "selection" (or "selected") is the T3 role word.  It is allowed only in a
  sentence that is about imaging participation (mentions imaging, MRI or
  imaged) and names none of disease, severity, latent, outcome or a protein:
  imaging participation by age, body size, ancestry and centre is a property of
  every world and of real imaging sub-studies.  The current data dictionary
  says "participation is not random" and never needs the exception.  Beyond
  words, ``data_dictionary.md`` must be exactly the text that
  ``pipeline.data_dictionary.render_markdown`` renders from public quantities
  (number of variants, protein missing rate, the messy flag), so it cannot
  depend on biases or roles.
* Role identifiers appear legitimately in metadata that enumerates every
  protein (the proteomics schema).  A role identifier is flagged when it occurs
  a different number of times than ordinary identifiers in the same stream.
  Parquet column statistics (min/max) are data, not statements, and are not
  counted.

Two findings look at what a reader sees of the data without modelling it:

* ``column_summaries``: a role molecule column must follow its table's scale
  convention (proteins and transcripts are standardised within the cohort; a
  column is tested for whether it could have been standardised before its
  missing values went missing) and must not be an outlier in the Parquet footer
  statistics (min/max, robust z above ``SUMMARY_Z_MAX``).
* ``cis_locus_sharing``: role proteins must share their cis locus with another
  protein (within ``LOCUS_WINDOW_BP``) as often as ordinary proteins do, since
  an analyst maps lead variants from the released genotypes.

Role-shuffle invariance (``compare_nondata``): two builds of one world whose
roles are re-dealt over identifiers (``world.roles_salt``).  Everything that is
not a data value must be identical.  Some quantities look structural but are
outcomes of the simulation, which re-dealt roles legitimately change:

* the number of rows of event tables (diagnoses, medications, MACE) and of the
  visit-2 tables (attendees are drawn among those alive), and so their
  row-group sizes and ``subject_id`` dictionaries;
* which participants are imaged (T3 worlds select on L) and attend visit 2, and
  so the names of per-participant image files and the subject extent of a
  visit-2 imaging Zarr store;
* the order of a Parquet dictionary of a value column (first appearance in the
  rows); the set of its values is compared.

Tables with one row per participant (row count equal to the cohort) or per
protein are compared strictly: row counts, row groups, identifier dictionaries
in order, encodings.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import os
import re
import struct
import sys
import time
import zipfile
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

ZARR_META = (".zarray", ".zattrs", ".zgroup", ".zmetadata")
TEXT_SUFFIXES = (".md", ".tsv", ".json", ".txt", ".csv", ".yaml", ".yml", ".html")
PER_PARTICIPANT_DIRS = ("imaging", "imaging_visit2", "angiograms")
#: Zarr stores whose subject extent is an outcome (who attended visit 2 and was imaged).
OUTCOME_STORES = ("imaging_visit2.zarr",)
MANIFEST = "MANIFEST.json"
#: Correlation with L, L_late or the eval mask at or above this reproduces it.
LATENT_R_MAX = 0.99
#: Family-wise false-alarm rate of the statistical checks (missingness, targetability).
ALPHA = 1e-3
#: A role column whose summary lies this many robust SDs from the others' stands out.
SUMMARY_Z_MAX = 8.0
#: Two proteins whose cis variants lie this close share a locus, as an analyst would see it.
LOCUS_WINDOW_BP = 100_000
#: Hex windows of this length (8 hex digits = 32 bits) identify seed material;
#: decimal windows are longer because 8-digit numbers occur naturally (positions).
HEX_WINDOW, DEC_WINDOW, BIN_WINDOW = 8, 12, 8
_CHUNK = 16 << 20
_OVERLAP = 64

_ROLE_WORDS = re.compile(
    r"(?<![a-z])(drivers?|decoys?|surrogates?|latent|truth|causal|causation|reverse[_ ]causation|pleiotrop[a-z]*"
    r"|confound[a-z]*|selection|selected|measurement[_ ]artifacts?|weights?|seeds?|seeded|bias|biases|planted"
    r"|oracle|eval[_ ]mask|roles?)(?![a-z])",
    re.IGNORECASE,
)
_BIAS_CODE = re.compile(r"(?<![A-Za-z0-9])(T[1-9]|A9)(?![A-Za-z0-9])")
_MRI_T1 = re.compile(r"native\s+T1|T1[\s-]*(map|maps|mapping|relaxation)\b|t1map", re.IGNORECASE)
_BODY_WEIGHT = re.compile(r"body\s+weight", re.IGNORECASE)
_IMAGING_CONTEXT = re.compile(r"imaging|\bMRI\b|imaged", re.IGNORECASE)
_L_CONTEXT = re.compile(r"disease|severity|latent|outcome|PROT_|protein", re.IGNORECASE)
_MOLECULE_ID = re.compile(r"^(PROT|TRANS|MET)_(\d+)$")
_SUBJECT_ID = re.compile(r"^SUBJ_(\d+)$")
_PER_ENTITY_NAME = re.compile(r"(PROT|TRANS|MET)_\d+|(?<![a-z])rs\d+")
_RESIDUE = re.compile(
    r"(^|/)(\.hydra|outputs|multirun|\.build|__pycache__|\.ipynb_checkpoints)(/|$)"
    r"|\.(log|wip|tmp|temp|lock|pyc|swp|bak|orig)$|\.partial|~$|(^|/)\.DS_Store$|(^|/)(nohup\.out|core)$"
)
_HEX_LUT = np.zeros(256, dtype=bool)
_HEX_LUT[np.frombuffer(b"0123456789abcdefABCDEF", dtype=np.uint8)] = True


@dataclass
class Finding:
    name: str
    passed: bool
    detail: str
    problems: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "problems": self.problems}


# ----------------------------------------------------------------------------- sealed


@dataclass
class Secrets:
    """What the audit looks for, read from ``sealed/``."""

    seed: Optional[int]
    seed_texts: list
    oracle_key: Optional[int]
    salt: Optional[str]
    config: dict
    truth: dict
    roles: dict  # protein id -> role label
    role_variants: dict  # variant id -> role label
    ordinary_variants: list
    hidden_numbers: dict  # text form -> what it is
    proteins: list
    hidden: dict  # sealed hidden_model.json
    latent: Optional[pd.DataFrame]
    eval_mask: Optional[np.ndarray]
    problems: list

    @classmethod
    def load(cls, sealed: str) -> "Secrets":
        problems = []

        def read(name, loader):
            path = os.path.join(sealed, name)
            if not os.path.exists(path):
                problems.append(f"sealed/{name} is missing")
                return None
            try:
                return loader(path)
            except Exception as exc:  # a corrupt sealed file must fail the audit, not crash it
                problems.append(f"sealed/{name} unreadable: {exc}")
                return None

        cfg = read("world.yaml", lambda p: yaml.safe_load(open(p))) or {}
        truth = read("truth.json", lambda p: json.load(open(p))) or {}
        oracle = read("oracle.json", lambda p: json.load(open(p))) or {}
        hidden = read("hidden_model.json", lambda p: json.load(open(p))) or {}
        latent = read("latent.parquet", pd.read_parquet)
        mask = read("eval_mask.npy", lambda p: np.load(p, allow_pickle=False))
        world = cfg.get("world") or {}
        seed_texts = [str(world["seed"])] if world.get("seed") not in (None, "") else []
        seed = None
        if cfg.get("seed_int") is not None:
            seed = int(str(cfg["seed_int"]))
        elif seed_texts:
            t = seed_texts[0].lower()
            seed = int(t, 16) if t.startswith("0x") else int(t)
        if seed is None:
            problems.append("sealed/world.yaml holds neither world.seed nor seed_int")
        key = oracle.get("oracle_key")
        oracle_key = int(str(key), 16) if key else None
        if oracle_key is None:
            problems.append("sealed/oracle.json has no oracle_key")

        roles = {}
        for d in truth.get("drivers", []):
            roles[d["protein"]] = "driver"
        for d in truth.get("decoys", []):
            roles[d["protein"]] = f"decoy {d.get('bias')}"
        for p in truth.get("pairs", []):
            roles.setdefault(p["causal"], f"{p['kind']} causal")
            roles[p["partner"]] = f"{p['kind']} partner"
        if truth.get("surrogate"):
            roles[truth["surrogate"]] = "surrogate"
        extra_roles = hidden.get("roles", {})
        for k in ("t4_partner", "a9_partner", "surrogate"):
            if extra_roles.get(k):
                roles.setdefault(extra_roles[k], k)
        for b, p in (extra_roles.get("decoys") or {}).items():
            roles.setdefault(p, f"decoy {b}")
        proteins = list(oracle.get("proteins") or [])

        cis = hidden.get("protein_cis_variant") or []
        role_variants, ordinary = {}, []
        for pid, v in zip(proteins, cis):
            if pid in roles:
                role_variants[v] = f"cis variant of {roles[pid]} {pid}"
            else:
                ordinary.append(v)
        for p in truth.get("pairs", []):
            if p.get("variant"):
                role_variants[p["variant"]] = f"{p['kind']} shared variant"
        if hidden.get("direct_variant"):
            role_variants[hidden["direct_variant"]] = "direct genetic effect on L"
        ordinary = [v for v in ordinary if v not in role_variants]

        numbers = {}
        for d in truth.get("drivers", []):
            for k in ("weight", "weight_late"):
                _add_number(numbers, d.get(k), f"driver {d['protein']} {k}")
        inter = oracle.get("interaction") or {}
        _add_number(numbers, inter.get("coef"), "interaction coefficient")
        for k in ("latent_raw_sd", "latent_late_raw_sd"):
            _add_number(numbers, hidden.get(k), k)
        for pid, v in (hidden.get("special_raw_sd") or {}).items():
            _add_number(numbers, v, f"raw SD of {pid}")

        if latent is not None and not {"latent", "latent_late"} <= set(latent.columns):
            problems.append("sealed/latent.parquet lacks latent / latent_late")
            latent = None
        if mask is not None and latent is not None and len(mask) != len(latent):
            problems.append(f"sealed/eval_mask.npy has {len(mask)} entries for {len(latent)} participants")
            mask = None
        return cls(seed=seed, seed_texts=seed_texts, oracle_key=oracle_key, salt=world.get("roles_salt"), config=cfg,
                   truth=truth, roles=roles, role_variants=role_variants, ordinary_variants=ordinary,
                   hidden_numbers=numbers, proteins=proteins, hidden=hidden, latent=latent,
                   eval_mask=None if mask is None else np.asarray(mask, dtype=bool), problems=problems)

    @property
    def role_ids(self) -> dict:
        """Role protein identifiers and their paired transcripts (TRANS_n pairs PROT_n)."""
        out = dict(self.roles)
        for pid, role in self.roles.items():
            m = _MOLECULE_ID.match(pid)
            if m and m.group(1) == "PROT":
                out[f"TRANS_{m.group(2)}"] = f"transcript of {role} {pid}"
        return out


def _add_number(out: dict, value, what: str) -> None:
    """Text forms of a hidden number, kept only when long enough not to occur by chance."""
    if value is None:
        return
    x = abs(float(value))
    for text in {repr(round(x, 6)), f"{x:.6f}", repr(x)}:
        digits = text.replace(".", "").lstrip("0")
        if len(digits) >= 5:
            out[text] = what


# ----------------------------------------------------------------------------- needles


class Needles:
    """Seed material in every form the audit searches: hex and decimal windows,
    binary windows (little and big endian) and 64-bit words."""

    def __init__(self, secrets: Secrets):
        self.hex, self.dec, self.binary, self.literal = {}, {}, {}, {}
        self.words64 = {}
        for label, value in (("seed", secrets.seed), ("oracle_key", secrets.oracle_key)):
            if value is None:
                continue
            texts = {format(value, "x"), format(value, "032x")}
            if label == "seed":
                for t in secrets.seed_texts:
                    t = t.lower()
                    texts.add(t[2:] if t.startswith("0x") else format(int(t), "x"))
            for t in texts:
                for i in range(len(t) - HEX_WINDOW + 1):
                    self.hex.setdefault(t[i:i + HEX_WINDOW].encode(), f"{label} (hex digits {i}-{i + HEX_WINDOW})")
            d = str(value)
            for i in range(len(d) - DEC_WINDOW + 1):
                self.dec.setdefault(d[i:i + DEC_WINDOW].encode(), f"{label} (decimal digits {i}-{i + DEC_WINDOW})")
            nbytes = max(16, (value.bit_length() + 7) // 8)
            for order in ("little", "big"):
                raw = value.to_bytes(nbytes, order)
                for i in range(0, len(raw) - BIN_WINDOW + 1, 4):
                    self.binary.setdefault(raw[i:i + BIN_WINDOW], f"{label} ({order}-endian bytes {i}-{i + BIN_WINDOW})")
                    self.words64.setdefault(int.from_bytes(raw[i:i + BIN_WINDOW], "little"), f"{label} (64-bit word)")
        if secrets.salt and len(str(secrets.salt)) >= 6:
            self.literal[str(secrets.salt).lower().encode()] = "world.roles_salt"
        self._words64 = np.array(sorted(self.words64), dtype=np.uint64)

    def scan(self, label: str, buf: bytes, binary: bool, hits: list, base: int = 0, limit: int = 50) -> None:
        """Search ``buf`` (which starts at byte ``base`` of the stream ``label``) for
        textual (and, with ``binary``, binary) seed material; append hits."""
        if not buf or len(hits) >= limit:
            return
        for pos, what in self._text_hits(buf):
            hits.append(f"{label} @ byte {base + pos}: {what}")
        if self.literal:
            low = buf.lower()
            for needle, what in self.literal.items():
                pos = low.find(needle)
                if pos >= 0:
                    hits.append(f"{label} @ byte {base + pos}: {what}")
        if binary:
            for needle, what in self.binary.items():
                pos = buf.find(needle)
                if pos >= 0:
                    hits.append(f"{label} @ byte {base + pos}: {what}")

    def _text_hits(self, buf: bytes) -> Iterator[tuple]:
        a = np.frombuffer(buf, dtype=np.uint8)
        m = _HEX_LUT[a].view(np.int8)
        edges = np.diff(m, prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        keep = ends - starts >= HEX_WINDOW
        for s, e in zip(starts[keep].tolist(), ends[keep].tolist()):
            run = buf[s:e].lower()
            for i in range(len(run) - HEX_WINDOW + 1):
                what = self.hex.get(run[i:i + HEX_WINDOW])
                if what:
                    yield s + i, what
                    break
            for dm in re.finditer(rb"[0-9]{%d,}" % DEC_WINDOW, run):
                digits = dm.group()
                for i in range(len(digits) - DEC_WINDOW + 1):
                    what = self.dec.get(digits[i:i + DEC_WINDOW])
                    if what:
                        yield s + dm.start() + i, what
                        break

    def scan_stream(self, label: str, chunks: Iterable[bytes], hits: list) -> None:
        """Textual search over a long stream in pieces that overlap, so no window is cut.
        A hit inside the overlap may be reported twice; any hit fails the check."""
        tail, offset = b"", 0
        for chunk in chunks:
            self.scan(label, tail + chunk, False, hits, base=offset - len(tail))
            offset += len(chunk)
            tail = (tail + chunk)[-_OVERLAP:]

    def scan_words(self, label: str, values: np.ndarray, hits: list) -> None:
        """64-bit seed words stored as 8-byte numbers (int64, uint64, float64, timestamps)."""
        values = np.ascontiguousarray(values)
        if values.dtype.itemsize != 8 or values.size == 0:
            return
        found = np.isin(values.view(np.uint64).ravel(), self._words64)
        if found.any():
            i = int(np.flatnonzero(found)[0])
            hits.append(f"{label} @ element {i}: {self.words64[int(values.view(np.uint64).ravel()[i])]}")


# ----------------------------------------------------------------------------- release files


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


def _numeric_float(col: pa.ChunkedArray) -> Optional[np.ndarray]:
    """A column as float64 with NaN for null, or None for non-numeric columns."""
    t = col.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t):
        col = pc.cast(col, pa.int64()) if not pa.types.is_date32(t) else pc.cast(col, pa.int32())
        t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return None


def _column_batches(path: str, columns: list, size: int = 256) -> Iterator[pa.Table]:
    for i in range(0, len(columns), size):
        yield pq.read_table(path, columns=columns[i:i + size])


def _vcf_chunks(path: str) -> Iterator[bytes]:
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


def _strings(arr) -> list:
    """A Zarr string array's values as Python strings (numpy StringDType included)."""
    return [str(v) for v in np.asarray(arr[...]).ravel().tolist()]


def _read_text(path: str) -> bytes:
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
        if "covariates.parquet" not in self.kinds:
            return None
        t = pq.read_table(self.abs("covariates.parquet"), columns=["subject_id"])
        return t.column("subject_id").to_pylist()

    def covariate_flags(self) -> Optional[pd.DataFrame]:
        if "covariates.parquet" not in self.kinds:
            return None
        cols = [c for c in ("imaged", "visit2") if c in self.parquet("covariates.parquet").columns]
        df = pd.read_parquet(self.abs("covariates.parquet"), columns=cols)
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
                yield e.rel, _read_text(path)
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
                data = _read_text(path)
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                yield e.rel, data


# ----------------------------------------------------------------------------- findings


def _limit(items: list, n: int = 20) -> list:
    return items[:n] + ([f"... and {len(items) - n} more"] if len(items) > n else [])


def check_seed_material(rel: Release, needles: Needles) -> Finding:
    hits: list = []
    n_streams = 0
    for label, data in rel.metadata_streams():
        needles.scan(label, data, True, hits)
        n_streams += 1
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        needles.scan(f"{r} [footer]", info.footer, True, hits)
        for batch in _column_batches(rel.abs(r), info.columns):
            for name in batch.column_names:
                col = batch.column(name)
                if name in info.string_columns:
                    text = "\n".join(v for v in col.to_pylist() if v is not None).encode()
                    needles.scan(f"{r} [values of {name}]", text, False, hits)
                else:
                    arr = col.drop_null().to_numpy(zero_copy_only=False)
                    if arr.dtype.kind in "iufMm":
                        needles.scan_words(f"{r} [values of {name}]", arr, hits)
                n_streams += 1
    for r in rel.of_kind("vcf"):
        needles.scan_stream(f"{r} [decompressed]", _vcf_chunks(rel.abs(r)), hits)
        n_streams += 1
    for r in rel.of_kind("index"):
        needles.scan(f"{r} [decompressed]", gzip.open(rel.abs(r), "rb").read(), True, hits)
        n_streams += 1
    for root in sorted(rel.roots):
        import zarr

        group = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
        for name, arr in group.members(max_depth=None):
            if not hasattr(arr, "dtype"):
                continue
            kind = np.dtype(arr.dtype).kind if not str(arr.dtype).startswith("StringDType") else "U"
            if kind in "OUS":
                values = [str(v) for v in np.asarray(arr[...]).ravel().tolist()]
                needles.scan(f"{root}/{name} [values]", "\n".join(values).encode(), False, hits)
            elif np.dtype(arr.dtype).itemsize == 8:
                needles.scan_words(f"{root}/{name} [values]", np.asarray(arr[...]), hits)
            n_streams += 1
    for r in rel.of_kind("other"):
        needles.scan(r, _read_text(rel.abs(r)), True, hits)
    ok = not hits
    detail = (f"{n_streams} streams searched for the seed, seed_int, oracle_key ({len(needles.hex)} hex, "
              f"{len(needles.dec)} decimal, {len(needles.binary)} binary windows)")
    return Finding("seed_material", ok, detail if ok else f"{len(hits)} hit(s); " + detail, _limit(hits))


def _sentence_at(text: str, pos: int) -> str:
    start = max(text.rfind(".", 0, pos), text.rfind("\n\n", 0, pos), text.rfind("\n#", 0, pos)) + 1
    ends = [i for i in (text.find(". ", pos), text.find(".\n", pos), text.find("\n\n", pos)) if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def role_word_problems(label: str, text: str) -> list:
    """Role and truth words in one metadata/text stream, with the documented exceptions."""
    out = []
    mri = [m.span() for m in _MRI_T1.finditer(text)]
    body = [m.span() for m in _BODY_WEIGHT.finditer(text)]
    for m in _ROLE_WORDS.finditer(text):
        word = m.group(1).lower()
        if word.startswith("weight") and any(s <= m.start() < e for s, e in body):
            continue
        if word in ("selection", "selected"):
            sentence = _sentence_at(text, m.start())
            if _IMAGING_CONTEXT.search(sentence) and not _L_CONTEXT.search(sentence):
                continue
        out.append(f"{label}: role/truth word {m.group(0)!r} near {text[max(0, m.start() - 30):m.end() + 30]!r}")
    for m in _BIAS_CODE.finditer(text):
        if m.group(1) == "T1" and any(s <= m.start() < e for s, e in mri):
            continue
        out.append(f"{label}: bias code {m.group(1)!r} near {text[max(0, m.start() - 30):m.end() + 30]!r}")
    return out


class _PublicWorld:
    """The public quantities a data dictionary may be rendered from; any other
    attribute the renderer asks for is a dependence on the hidden world."""

    def __init__(self, n_variants: int, protein_missing: float, messy: bool):
        self.n_variants = n_variants
        self.params = {"protein_missing": protein_missing}
        self.messy = messy

    def __getattr__(self, name):
        raise AttributeError(f"the data dictionary reads world.{name}, which is not a public quantity")


def check_role_words(rel: Release, secrets: Secrets) -> Finding:
    problems = []
    n = 0
    for label, data in rel.metadata_streams():
        problems += role_word_problems(label, data.decode("utf-8", "replace"))
        n += 1
    dd = rel.abs("data_dictionary.md")
    note = ""
    if os.path.exists(dd):
        from .data_dictionary import render_markdown

        w = secrets.config.get("world") or {}
        scale = secrets.config.get("scale") or {}
        try:
            expected = render_markdown(_PublicWorld(int(scale.get("variants", 0)), float(w.get("protein_missing", 0.0)),
                                                    bool(w.get("messy", False))))
            if expected != _read_text(dd).decode("utf-8", "replace"):
                problems.append("data_dictionary.md differs from the text rendered from public quantities only "
                                "(n_variants, protein_missing, messy): it depends on something hidden")
            else:
                note = "; data_dictionary.md is a function of n_variants, protein_missing and messy only"
        except AttributeError as exc:
            problems.append(f"data_dictionary.md: {exc}")
    return Finding("role_words", not problems, f"{n} metadata/text streams{note}", _limit(problems))


def _count_ids(text: str, prefix: str) -> dict:
    counts: dict = {}
    for m in re.finditer(r"(?<![A-Za-z0-9])%s_(\d+)(?![0-9])" % prefix, text):
        key = f"{prefix}_{m.group(1)}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def check_role_identifiers(rel: Release, secrets: Secrets) -> Finding:
    """A role identifier may occur in metadata only as often as every ordinary one
    (e.g. once per protein in a schema), never singled out."""
    problems = []
    role_ids = secrets.role_ids
    numbers = {pid: _MOLECULE_ID.match(pid).group(2) for pid in secrets.proteins if _MOLECULE_ID.match(pid)}
    universe = {"PROT": list(secrets.proteins), "TRANS": [f"TRANS_{n}" for n in numbers.values()]}
    for label, data in rel.metadata_streams():
        text = data.decode("utf-8", "replace")
        for prefix, ids in universe.items():
            counts = _count_ids(text, prefix)
            if not counts or not ids:
                continue
            values, freq = np.unique([counts.get(i, 0) for i in ids], return_counts=True)
            modal = int(values[np.argmax(freq)])
            for rid, role in role_ids.items():
                if rid.startswith(prefix + "_") and counts.get(rid, 0) != modal:
                    problems.append(f"{label}: {rid} ({role}) occurs {counts.get(rid, 0)} time(s), "
                                    f"ordinary {prefix} identifiers {modal}")
        if secrets.role_variants:
            counts = {}
            for m in re.finditer(r"(?<![A-Za-z0-9])rs\d+(?![0-9])", text):
                counts[m.group(0)] = counts.get(m.group(0), 0) + 1
            if counts:
                ordinary = [counts.get(v, 0) for v in secrets.ordinary_variants] or [0]
                values, freq = np.unique(ordinary, return_counts=True)
                modal = int(values[np.argmax(freq)])
                for v, role in secrets.role_variants.items():
                    if counts.get(v, 0) != modal:
                        problems.append(f"{label}: {v} ({role}) occurs {counts.get(v, 0)} time(s), ordinary variants {modal}")
        for textform, what in secrets.hidden_numbers.items():
            if re.search(r"(?<![0-9])%s(?![0-9])" % re.escape(textform), text):
                problems.append(f"{label}: hidden number {textform} ({what})")
    detail = (f"{len(role_ids)} role identifiers (proteins and paired transcripts), {len(secrets.role_variants)} role "
              f"variants and {len(secrets.hidden_numbers)} hidden numbers looked for in metadata/text")
    return Finding("role_identifiers", not problems, detail, _limit(problems))


def _sequential(ids: list, prefix: str) -> Optional[str]:
    """None when ``ids`` are prefix_0, prefix_1, ... in order with one zero-padded width."""
    if not ids:
        return None
    widths, numbers = set(), []
    for i in ids:
        m = re.fullmatch(r"%s_(\d+)" % prefix, str(i))
        if not m:
            return f"identifier {i!r} is not {prefix}_<number>"
        widths.add(len(m.group(1)))
        numbers.append(int(m.group(1)))
    if len(widths) != 1:
        return f"{prefix} identifiers have several widths {sorted(widths)}"
    if numbers != list(range(len(numbers))):
        bad = next(k for k, v in enumerate(numbers) if v != k)
        return f"{prefix} identifiers are not sequential in order: position {bad} holds {ids[bad]}"
    return None


def check_identifier_order(rel: Release) -> Finding:
    problems = []
    cohort = rel.cohort()
    checked = []
    if cohort is None:
        problems.append("covariates.parquet is missing: no cohort order to check against")
        cohort = []
    else:
        err = _sequential(cohort, "SUBJ")
        if err:
            problems.append(f"covariates.parquet: {err}")
    pos = pd.Index(cohort)
    protein_ids = None
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        molecule_cols = [c for c in info.value_columns if _MOLECULE_ID.match(c)]
        if molecule_cols:
            prefixes = {_MOLECULE_ID.match(c).group(1) for c in molecule_cols}
            if len(prefixes) != 1 or len(molecule_cols) != len(info.value_columns):
                problems.append(f"{r}: mixes identifier kinds or other columns among molecule columns")
            else:
                prefix = prefixes.pop()
                err = _sequential(molecule_cols, prefix)
                if err:
                    problems.append(f"{r}: column order: {err}")
                if prefix == "PROT":
                    protein_ids = protein_ids or molecule_cols
                    if molecule_cols != protein_ids:
                        problems.append(f"{r}: protein columns differ from the other proteomics table's")
                checked.append(f"{r} columns")
        if info.index_columns == ["protein"]:
            ids = pq.read_table(info.path, columns=["protein"]).column("protein").to_pylist()
            err = _sequential(ids, "PROT")
            if err:
                problems.append(f"{r}: protein index: {err}")
            checked.append(f"{r} rows")
        if "subject_id" in info.columns:
            ids = pq.read_table(info.path, columns=["subject_id"]).column("subject_id").to_pylist()
            where = pos.get_indexer(ids)
            if (where < 0).any():
                problems.append(f"{r}: subject {ids[int(np.flatnonzero(where < 0)[0])]!r} is not in the cohort")
            elif "subject_id" in info.index_columns:
                if np.any(np.diff(where) <= 0):
                    problems.append(f"{r}: subject_id index is not in cohort order")
            elif np.any(np.diff(where) < 0):
                problems.append(f"{r}: rows are not grouped in cohort order of subject_id")
            for c in info.index_columns:
                if c.startswith("__index_level_"):
                    idx = pq.read_table(info.path, columns=[c]).column(c).to_numpy()
                    if not np.array_equal(idx, np.arange(len(idx))):
                        problems.append(f"{r}: stored row index {c} is not 0..n-1 (it would keep a former row order)")
            checked.append(f"{r} rows")
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        tx = [c for c in info.value_columns if c.startswith("TRANS_")]
        if tx and protein_ids and [c.split("_", 1)[1] for c in tx] != [p.split("_", 1)[1] for p in protein_ids]:
            problems.append(f"{r}: transcripts are not paired one-to-one, in order, with the proteins")
    for r in rel.of_kind("vcf"):
        header = vcf_header(rel.abs(r)).decode("utf-8", "replace").splitlines()
        samples = header[-1].split("\t")[9:] if header else []
        if samples != list(cohort):
            problems.append(f"{r}: sample columns differ from the cohort order")
        checked.append(f"{r} samples")
    for root in sorted(rel.roots):
        import zarr

        g = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
        names = {n for n, _ in g.members()}
        if "sample_id" in names:
            if _strings(g["sample_id"]) != list(cohort):
                problems.append(f"{root}/sample_id differs from the cohort order")
            checked.append(f"{root} samples")
        if "variant_id" in names:
            vids = _strings(g["variant_id"])
            nums = [int(v[2:]) if re.fullmatch(r"rs\d+", v) else -1 for v in vids]
            if min(nums, default=0) < 0 or np.any(np.diff(nums) <= 0):
                problems.append(f"{root}/variant_id: identifiers are not increasing rs numbers along the genome")
            checked.append(f"{root} variants")
        if "subject_id" in names:
            sids = _strings(g["subject_id"])
            where = pos.get_indexer(sids)
            if (where < 0).any() or np.any(np.diff(where) <= 0):
                problems.append(f"{root}/subject_id is not an ordered subset of the cohort")
            checked.append(f"{root} subjects")
    return Finding("identifier_order", not problems, f"checked: {', '.join(checked)}", _limit(problems))


def _abs_corr(X: np.ndarray, y: np.ndarray, min_n: int = 20) -> np.ndarray:
    """|Pearson r| of each column of X with y over rows where both are finite."""
    M = np.isfinite(X) & np.isfinite(y)[:, None]
    n = M.sum(axis=0)
    nn = np.maximum(n, 1)
    Xz = np.where(M, X, 0.0)
    Yz = np.where(M, y[:, None], 0.0)
    Xc = np.where(M, X - (Xz.sum(axis=0) / nn), 0.0)
    Yc = np.where(M, y[:, None] - (Yz.sum(axis=0) / nn), 0.0)
    sxx, syy = (Xc * Xc).sum(axis=0), (Yc * Yc).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs((Xc * Yc).sum(axis=0) / np.sqrt(sxx * syy))
    r[(n < min_n) | ~(sxx > 1e-12 * np.maximum(n, 1)) | ~(syy > 0)] = np.nan
    return r


def _ranks(X: np.ndarray) -> np.ndarray:
    return pd.DataFrame(X).rank(method="average").to_numpy(dtype=np.float64)


def check_latent(rel: Release, secrets: Secrets) -> Finding:
    """No released number reproduces L, L_late or the eval mask (Pearson or Spearman)."""
    if secrets.latent is None:
        return Finding("latent_values", False, "sealed latent.parquet unavailable: cannot check")
    lat = secrets.latent
    index = pd.Index(lat.index.astype(str))
    targets = {"L": lat["latent"].to_numpy(float), "L_late": lat["latent_late"].to_numpy(float)}
    if secrets.eval_mask is not None:
        targets["eval_mask"] = secrets.eval_mask.astype(float)
    ranked = {k: pd.Series(v).rank().to_numpy(float) for k, v in targets.items()}
    problems, best = [], {k: (0.0, "") for k in targets}
    n_cols = 0

    def judge(label_cols: list, X: np.ndarray, rows: np.ndarray) -> None:
        nonlocal n_cols
        n_cols += X.shape[1]
        Xr = _ranks(X)
        for k in targets:
            y, yr = targets[k][rows], ranked[k][rows]
            r = np.fmax(_abs_corr(X, y), _abs_corr(Xr, yr))
            for j in np.flatnonzero(r >= LATENT_R_MAX):
                problems.append(f"{label_cols[j]}: |r| = {r[j]:.4f} with {k}")
            if np.isfinite(r).any():
                j = int(np.nanargmax(r))
                if r[j] > best[k][0]:
                    best[k] = (float(r[j]), label_cols[j])

    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        if info.subject_key is None:
            continue
        ids = pq.read_table(info.path, columns=["subject_id"]).column("subject_id").to_pylist()
        where = index.get_indexer(ids)
        keep = where >= 0
        rows = where[keep]
        long = "subject_id" not in info.index_columns
        cols = [c for c in info.columns if c != "subject_id" and not c.startswith("__index_level_")]
        for batch in _column_batches(info.path, cols):
            arrays, labels = [], []
            for name in batch.column_names:
                x = _numeric_float(batch.column(name))
                if x is not None:
                    arrays.append(x[keep])
                    labels.append(f"{r}:{name}")
            if arrays:
                judge(labels, np.column_stack(arrays), rows)
        # Who appears in a table, and how often, is itself a released per-participant number.
        counts = np.bincount(rows, minlength=len(index)).astype(float)
        if long or len(rows) < len(index):
            judge([f"{r}:[rows per participant]"], counts[:, None], np.arange(len(index)))
    if secrets.eval_mask is not None:
        for folder in PER_PARTICIPANT_DIRS:
            names = [e.rel for e in rel.files if e.rel.startswith(folder + "/") and e.rel.endswith(".npz")]
            if names:
                have = np.zeros(len(index))
                where = index.get_indexer([n.rsplit("/", 1)[1][:-4] for n in names])
                have[where[where >= 0]] = 1.0
                judge([f"{folder}/ [has file]"], have[:, None], np.arange(len(index)))
    detail = f"{n_cols} released numeric columns; max |r|: " + ", ".join(
        f"{k} {v[0]:.3f} ({v[1]})" for k, v in best.items())
    return Finding("latent_values", not problems, detail, _limit(problems))


def _binom_two_sided(k: int, n: int, p: float) -> float:
    from scipy.special import bdtr, bdtrc

    lo = bdtr(k, n, p)
    hi = bdtrc(k - 1, n, p) if k > 0 else 1.0
    return float(min(1.0, 2.0 * min(lo, hi)))


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value (normal approximation with tie correction)."""
    from scipy.special import ndtr

    x = np.concatenate([a, b])
    ranks = pd.Series(x).rank(method="average").to_numpy()
    n1, n2 = len(a), len(b)
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, t = np.unique(x, return_counts=True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - (t ** 3 - t).sum() / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / np.sqrt(var)
    return float(min(1.0, 2 * ndtr(-max(z, 0.0))))


def check_missingness(rel: Release, secrets: Secrets) -> Finding:
    """Per-molecule missing counts: role molecules within the binomial range of the
    others, and no molecule-level heterogeneity beyond binomial dispersion (missingness
    may depend on the participant, as in messy worlds, not on the molecule)."""
    from scipy.special import chdtrc

    problems, notes = [], []
    role_ids = secrets.role_ids
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        mols = [c for c in info.value_columns if _MOLECULE_ID.match(c) and not c.startswith("MET_")]
        if not mols:
            continue
        n = info.md.num_rows
        counts, row_missing = [], np.zeros(n)
        for batch in _column_batches(info.path, mols):
            for name in batch.column_names:
                x = _numeric_float(batch.column(name))
                miss = ~np.isfinite(x)
                counts.append(int(miss.sum()))
                row_missing += miss
        counts = np.array(counts)
        is_role = np.array([c in role_ids for c in mols])
        if n == 0 or (~is_role).sum() < 2:
            continue
        p = counts[~is_role].sum() / (n * (~is_role).sum())
        if p <= 0:
            if counts[is_role].any():
                problems.append(f"{r}: only role molecules have missing values")
            continue
        alpha = ALPHA / max(1, is_role.sum())
        for c, k in zip(np.array(mols)[is_role], counts[is_role]):
            pv = _binom_two_sided(int(k), n, p)
            if pv < alpha:
                problems.append(f"{r}: {c} ({role_ids[c]}) has {k} missing of {n} (others {p:.4%}; p = {pv:.2g})")
        var = n * p * (1 - p)
        d = float(((counts - counts.mean()) ** 2).sum() / var)
        pd_ = float(chdtrc(len(counts) - 1, d))
        if pd_ < ALPHA:
            problems.append(f"{r}: per-molecule missing counts are over-dispersed (dispersion {d:.0f} on "
                            f"{len(counts) - 1} df, p = {pd_:.2g}): missingness depends on the molecule")
        per_row = row_missing.var() / max(row_missing.mean() * (1 - p), 1e-12)
        notes.append(f"{r}: {p:.3%} missing, molecule dispersion p = {pd_:.2g}, participant dispersion index {per_row:.2f}")
    return Finding("missingness_by_role", not problems, "; ".join(notes) or "no molecular tables", _limit(problems))


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = np.nanmedian(x)
    scale = 1.4826 * np.nanmedian(np.abs(x - med))
    if not scale > 0:
        scale = np.nanstd(x)
    return (x - med) / max(scale, 1e-12)


def _could_be_standardised(x_obs: np.ndarray, n: int) -> bool:
    """Whether a column with these observed values could have been standardised to
    mean 0 and SD 1 (ddof 0) over all ``n`` rows before ``n - len(x_obs)`` values went
    missing: the missing values, no more extreme than the observed ones, must be
    able to make up the observed sum and sum of squares."""
    k = n - x_obs.size
    if x_obs.size == 0:
        return True
    m = float(np.abs(x_obs).max())
    s1, s2 = float(x_obs.sum()), float(np.square(x_obs).sum())
    tol = 1e-4 * n
    return abs(s1) <= k * m + tol and n - k * m * m - tol <= s2 <= n + tol


def check_column_summaries(rel: Release, secrets: Secrets) -> Finding:
    """Role molecule columns do not stand out in what a reader sees without any
    modelling: the Parquet footer statistics (min and max: metadata) and whether
    the column follows its table's scale convention (the data dictionary says
    proteins and transcripts are standardised within the cohort)."""
    problems, notes = [], []
    role_ids = secrets.role_ids
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        mols = [c for c in info.value_columns if _MOLECULE_ID.match(c)]
        is_role = np.array([c in role_ids for c in mols])
        if not is_role.any():
            continue
        n = info.md.num_rows
        where = {info.md.schema.column(i).path: i for i in range(info.md.num_columns)}
        footer = {k: np.full(len(mols), np.nan) for k in ("min", "max")}
        for j, c in enumerate(mols):
            lo, hi = [], []
            for g in range(info.md.num_row_groups):
                st = info.md.row_group(g).column(where[c]).statistics
                if st is not None and st.has_min_max:
                    lo.append(st.min)
                    hi.append(st.max)
            if lo:
                footer["min"][j], footer["max"][j] = min(lo), max(hi)
        worst = (0.0, "")
        for stat, values in footer.items():
            if np.isfinite(values).sum() < 10:
                continue
            z = _robust_z(values)
            for k in np.flatnonzero(is_role & (np.abs(z) > SUMMARY_Z_MAX)):
                problems.append(f"{r}: footer statistics: {mols[k]} ({role_ids[mols[k]]}) {stat} {values[k]:.4g} "
                                f"is an outlier (robust z {z[k]:.1f}; median of the columns {np.nanmedian(values):.4g})")
            zr = np.abs(z[is_role])
            if np.isfinite(zr).any() and np.nanmax(zr) > worst[0]:
                worst = (float(np.nanmax(zr)), f"{mols[int(np.flatnonzero(is_role)[np.nanargmax(zr)])]} {stat}")
        standard = np.zeros(len(mols), dtype=bool)
        j = 0
        for batch in _column_batches(info.path, mols):
            for name in batch.column_names:
                x = _numeric_float(batch.column(name))
                standard[j] = _could_be_standardised(x[np.isfinite(x)], n)
                j += 1
        share = standard[~is_role].mean() if (~is_role).any() else 0.0
        if share >= 0.9:
            for k in np.flatnonzero(is_role & ~standard):
                problems.append(f"{r}: {mols[k]} ({role_ids[mols[k]]}) is not standardised within the cohort, "
                                f"unlike {share:.0%} of the ordinary columns")
        notes.append(f"{r}: {share:.0%} of ordinary columns standardised; largest role footer |robust z| "
                     f"{worst[0]:.1f} ({worst[1]})")
    return Finding("column_summaries", not problems, "; ".join(notes) or "no role columns", _limit(problems))


def check_cis_locus_sharing(rel: Release, secrets: Secrets) -> Finding:
    """Role proteins share their cis locus with other proteins as often as ordinary
    proteins do.  An analyst maps each protein's lead variant from the released
    genotypes; if roles alone sat on private loci, a private locus would mark a role."""
    from scipy.special import bdtr

    root = "genotypes.zarr"
    if root not in rel.roots:
        return Finding("cis_locus_sharing", True, "no genotype store released: loci are not reachable")
    cis = secrets.hidden.get("protein_cis_variant") or []
    if len(cis) != len(secrets.proteins) or not cis:
        return Finding("cis_locus_sharing", False, "sealed hidden_model.json lacks protein_cis_variant: cannot check")
    import zarr

    g = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
    index = {v: i for i, v in enumerate(_strings(g["variant_id"]))}
    where = np.array([index.get(v, -1) for v in cis])
    if (where < 0).any():
        return Finding("cis_locus_sharing", False, "a protein's cis variant is not among the released variants")
    contig = np.asarray(g["variant_contig"][...]).astype(np.int64)[where]
    position = np.asarray(g["variant_position"][...]).astype(np.int64)[where]
    order = np.lexsort((position, contig))
    close = (np.diff(contig[order]) == 0) & (np.diff(position[order]) <= LOCUS_WINDOW_BP)
    shared = np.zeros(len(cis), dtype=bool)
    shared[order[1:][close]] = True
    shared[order[:-1][close]] = True
    is_role = np.array([p in secrets.roles for p in secrets.proteins])
    n_role, k = int(is_role.sum()), int(shared[is_role].sum())
    p_ord = float(shared[~is_role].mean()) if (~is_role).any() else 0.0
    if n_role == 0:
        return Finding("cis_locus_sharing", True, "no role proteins")
    pv = min(1.0, 2.0 * min(float(bdtr(k, n_role, p_ord)), float(1.0 - bdtr(k - 1, n_role, p_ord)) if k else 1.0))
    detail = (f"{p_ord:.0%} of ordinary proteins share a cis locus (within {LOCUS_WINDOW_BP // 1000} kb) with another "
              f"protein; {k} of {n_role} role proteins do (binomial p = {pv:.2g})")
    problems = [] if pv >= ALPHA else [
        f"role proteins on private loci: {sorted(p for p, sh, r in zip(secrets.proteins, shared, is_role) if r and not sh)}"]
    return Finding("cis_locus_sharing", not problems, detail, problems)


def check_targetability(rel: Release, secrets: Secrets) -> Finding:
    """Role proteins' targetability rows are drawn like everyone else's."""
    path = rel.abs("targetability.parquet")
    if not os.path.exists(path):
        return Finding("targetability_rows", False, "targetability.parquet is missing")
    df = pd.read_parquet(path)
    roles = [p for p in df.index if p in secrets.roles]
    if len(roles) != len(secrets.roles):
        return Finding("targetability_rows", False,
                       f"{len(secrets.roles) - len(roles)} role protein(s) have no targetability row")
    is_role = df.index.isin(roles)
    problems, notes = [], []
    alpha = ALPHA / max(1, df.shape[1])
    rng = np.random.default_rng(0)
    for col in df.columns:
        a, b = df.loc[is_role, col], df.loc[~is_role, col]
        if a.isna().any() != b.isna().any() and a.isna().mean() > b.isna().mean():
            problems.append(f"{col}: role rows have missing values the others lack")
        numeric = pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]) and df[col].nunique() > 10
        if numeric:
            pv = _mann_whitney_p(a.dropna().to_numpy(float), b.dropna().to_numpy(float))
            notes.append(f"{col} U-test p = {pv:.2g}")
        else:
            values = df[col].astype(str)
            # Null: role rows are a random subset of all rows, so the expected
            # category frequencies are the pooled ones.
            pooled = values.value_counts(normalize=True)
            obs = a.astype(str).value_counts().reindex(pooled.index, fill_value=0)
            freq = pooled.to_numpy()
            only_roles = obs.index[(obs.to_numpy() > 0) & ~obs.index.isin(b.astype(str).unique())]
            if len(only_roles):
                # A rare value can land only on role rows by chance: the probability that
                # all c of its rows are among the k role rows is C(k, c) / C(n, c).
                c = int(obs[only_roles].sum())
                p_only = math.comb(len(a), c) / math.comb(len(df), c)
                notes.append(f"{col} values only on role rows {list(only_roles)}: p = {p_only:.2g}")
                if p_only < alpha:
                    problems.append(f"{col}: values {list(only_roles)} occur only among role proteins (p = {p_only:.2g})")
                    continue
            k = len(a)
            exp = freq * k
            stat = float(((obs.to_numpy() - exp) ** 2 / np.where(exp > 0, exp, 1)).sum())
            sims = rng.multinomial(k, freq, size=4000)
            sim_stat = ((sims - exp) ** 2 / np.where(exp > 0, exp, 1)).sum(axis=1)
            pv = float((1 + (sim_stat >= stat - 1e-12).sum()) / (1 + len(sim_stat)))
            notes.append(f"{col} chi-square p = {pv:.2g}")
        if pv < alpha:
            problems.append(f"{col}: role proteins' values differ from the others' (p = {pv:.2g})")
    return Finding("targetability_rows", not problems, f"{len(roles)} role rows vs {(~is_role).sum()}: " + "; ".join(notes),
                   problems)


_MANIFEST_KEYS = {"generator", "generator_version", "format_version", "created", "n_files", "total_bytes", "files",
                  "bundle", "scale"}


def check_manifest_contents(rel: Release) -> Finding:
    path = rel.abs(MANIFEST)
    if not os.path.exists(path):
        return Finding("manifest_contents", False, "no MANIFEST.json: the release is incomplete")
    doc = json.load(open(path))
    problems = [f"unexpected key {k!r}" for k in sorted(set(doc) - _MANIFEST_KEYS)]
    problems += [f"missing key {k!r}" for k in sorted({"files", "created", "generator_version"} - set(doc))]
    for f in doc.get("files", []):
        extra = set(f) - {"path", "size", "sha256"}
        if extra:
            problems.append(f"file entry {f.get('path')!r} carries {sorted(extra)}")
    if doc.get("bundle") not in (None, "release"):
        problems.append(f"bundle is {doc.get('bundle')!r}, not 'release'")
    if "scale" in doc and not re.fullmatch(r"[a-z0-9_-]{1,32}", str(doc["scale"])):
        problems.append(f"scale {doc['scale']!r} is not a scale name")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z)?", str(doc.get("created", ""))):
        problems.append(f"created {doc.get('created')!r} is not an ISO timestamp")
    for k in ("generator_version", "format_version"):
        if k in doc and not re.fullmatch(r"[0-9A-Za-z.+-]{1,32}", str(doc[k])):
            problems.append(f"{k} {doc[k]!r} is not a version")
    files = doc.get("files", [])
    if doc.get("n_files") != len(files):
        problems.append(f"n_files {doc.get('n_files')} != {len(files)} entries")
    if doc.get("total_bytes") != sum(int(f.get("size", 0)) for f in files):
        problems.append("total_bytes is not the sum of the file sizes")
    return Finding("manifest_contents", not problems, f"keys: {', '.join(sorted(doc))}", problems)


def check_file_layout(rel: Release) -> Finding:
    """No per-protein (or per-variant) files; per-participant files only where the
    release's own flags say so; every Zarr chunk file exists whatever its content."""
    problems = []
    for e in rel.entries:
        m = _PER_ENTITY_NAME.search(e.rel)
        if m:
            problems.append(f"{e.rel}: a file per molecule or variant ({m.group(0)})")
    flags = rel.covariate_flags()
    expected = {}
    if flags is not None:
        imaged = flags["imaged"].astype(bool) if "imaged" in flags else None
        visit2 = flags["visit2"].astype(bool) if "visit2" in flags else None
        if imaged is not None:
            expected["imaging"] = set(flags.index[imaged])
            if visit2 is not None:
                expected["imaging_visit2"] = set(flags.index[imaged & visit2])
    cohort = set(flags.index) if flags is not None else set()
    per_dir: dict = {}
    for e in rel.files:
        name = e.rel.rsplit("/", 1)[-1]
        stem = name.split(".", 1)[0]
        if _SUBJECT_ID.match(stem):
            folder = e.rel.rsplit("/", 1)[0] if "/" in e.rel else ""
            if folder not in PER_PARTICIPANT_DIRS or not name.endswith(".npz"):
                problems.append(f"{e.rel}: a per-participant file outside {', '.join(PER_PARTICIPANT_DIRS)}")
            else:
                per_dir.setdefault(folder, set()).add(stem)
    for folder, names in sorted(per_dir.items()):
        if folder in expected and names != expected[folder]:
            problems.append(f"{folder}/: {len(names)} files, but covariates flag {len(expected[folder])} participants "
                            f"({len(names - expected[folder])} unexpected, {len(expected[folder] - names)} missing)")
        elif cohort and not names <= cohort:
            problems.append(f"{folder}/: files for participants not in the cohort")
    for root in sorted(rel.roots):
        problems += _zarr_grid_problems(rel, root)
        folder = root[: -len(".zarr")] if root.endswith(".zarr") else root
        if folder in expected and os.path.exists(rel.abs(f"{root}/subject_id/.zarray")):
            import zarr

            ids = _strings(zarr.open_group(rel.abs(root), mode="r", zarr_format=2)["subject_id"])
            if set(ids) != expected[folder] or len(ids) != len(expected[folder]):
                problems.append(f"{root}/subject_id lists {len(ids)} participants, but covariates flag "
                                f"{len(expected[folder])}")
            per_dir[root] = set(ids)
    sizes = [e.size for e in rel.files]
    top = sorted(rel.files, key=lambda e: -e.size)[:3]
    detail = (f"{len(rel.files)} files, {sum(sizes) / 1e6:.1f} MB; largest: "
              + ", ".join(f"{e.rel} {e.size / 1e6:.2f} MB" for e in top)
              + "".join(f"; {f}/: {len(n)} {'subjects' if f.endswith('.zarr') else 'npz'}"
                        for f, n in sorted(per_dir.items())))
    return Finding("file_layout", not problems, detail, _limit(problems))


def _zarr_grid_problems(rel: Release, root: str) -> list:
    present = {e.rel for e in rel.files}
    out = []
    for e in rel.files:
        if not (e.rel.startswith(root + "/") and e.rel.endswith("/.zarray")):
            continue
        meta = json.load(open(rel.abs(e.rel)))
        folder = e.rel[: -len("/.zarray")]
        sep = meta.get("dimension_separator", ".")
        grid = [-(-s // c) for s, c in zip(meta["shape"], meta["chunks"])]
        missing = 0
        for idx in np.ndindex(*grid) if grid else [()]:
            key = sep.join(map(str, idx)) if idx else "0"
            if f"{folder}/{key}" not in present:
                missing += 1
        if missing:
            out.append(f"{folder}: {missing} chunk file(s) absent, so which files exist depends on the data")
    return out


def check_build_residue(rel: Release, sealed: str) -> Finding:
    problems = []
    for e in rel.entries:
        base = e.rel.rsplit("/", 1)[-1]
        if e.kind == "symlink":
            problems.append(f"{e.rel}: a symbolic link (could reach outside the release)")
        if _RESIDUE.search(e.rel):
            problems.append(f"{e.rel}: build residue")
        elif base.startswith(".") and base not in ZARR_META:
            problems.append(f"{e.rel}: a hidden file or folder")
    sealed_names = set(os.listdir(sealed)) if os.path.isdir(sealed) else set()
    sealed_hashes = {}
    for name in sealed_names:
        p = os.path.join(sealed, name)
        if os.path.isfile(p) and name != MANIFEST:
            sealed_hashes[_sha256(p)] = name
    for e in rel.files:
        base = e.rel.rsplit("/", 1)[-1]
        if base in sealed_names - {MANIFEST}:
            problems.append(f"{e.rel}: named like sealed/{base}")
    by_size = {os.path.getsize(os.path.join(sealed, n)) for n in sealed_hashes.values()}
    for e in rel.files:
        if e.size in by_size:
            h = _sha256(rel.abs(e.rel))
            if h in sealed_hashes:
                problems.append(f"{e.rel}: a byte copy of sealed/{sealed_hashes[h]}")
    real = os.path.realpath(rel.path)
    if os.path.realpath(sealed).startswith(real + os.sep):
        problems.append("the sealed bundle lies inside the release")
    return Finding("build_residue", not problems, "no .hydra, logs, work-in-progress, hidden files, links or sealed copies"
                   if not problems else f"{len(problems)} problem(s)", _limit(problems))


def _sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def check_manifest_verifies(world_dir: str) -> Finding:
    from .manifest import verify
    from .outputs import Output

    world_dir = os.path.abspath(world_dir)
    output = Output(os.path.dirname(world_dir), os.path.basename(world_dir))
    problems = verify(output, output.release)
    return Finding("manifest_verifies", not problems, "every file listed with matching size and SHA-256"
                   if not problems else f"{len(problems)} problem(s)", _limit(problems))


# ----------------------------------------------------------------------------- role-shuffle invariance


def _per_participant(rel_path: str) -> Optional[str]:
    """The folder or store of a file that exists per participant of a data-defined
    subset (an image file, or a chunk of an outcome-sized Zarr store), else None."""
    parts = rel_path.split("/")
    if len(parts) == 2 and parts[0] in PER_PARTICIPANT_DIRS and _SUBJECT_ID.match(parts[1].split(".", 1)[0]):
        return parts[0]
    if len(parts) >= 2 and parts[0] in OUTCOME_STORES and parts[-1] not in ZARR_META:
        return parts[0]
    return None


def _structural_paths(rel: Release) -> list:
    return [e.rel + ("/" if e.kind == "dir" else "@" if e.kind == "symlink" else "")
            for e in rel.entries if _per_participant(e.rel) is None]


def _diff_lists(label: str, a: list, b: list, out: list) -> None:
    if a == b:
        return
    sa, sb = set(a), set(b)
    if sa != sb:
        out.append(f"{label}: only in A {_limit(sorted(sa - sb), 5)}, only in B {_limit(sorted(sb - sa), 5)}")
    else:
        k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        out.append(f"{label}: same members, different order (first at position {k}: {a[k]!r} vs {b[k]!r})")


def _entity_table(info: ParquetInfo, n_cohort: Optional[int]) -> bool:
    """One row per participant (the whole cohort) or per protein: rows are structure."""
    if info.index_columns == ["protein"]:
        return True
    return "subject_id" in info.index_columns and (n_cohort is None or info.md.num_rows == n_cohort)


def _parquet_diffs(r: str, a: ParquetInfo, b: ParquetInfo, entity: bool, out: list) -> None:
    if a.kv != b.kv:
        for k in sorted(set(a.kv) | set(b.kv)):
            if a.kv.get(k) != b.kv.get(k):
                out.append(f"{r}: key-value metadata {k.decode('utf-8', 'replace')!r} differs")
    if not a.arrow_schema.equals(b.arrow_schema, check_metadata=True):
        out.append(f"{r}: Arrow schema differs")
    _diff_lists(f"{r}: column order", a.columns, b.columns, out)
    if a.parquet_schema != b.parquet_schema:
        out.append(f"{r}: Parquet schema differs")
    for attr in ("created_by", "format_version", "num_columns"):
        if getattr(a.md, attr) != getattr(b.md, attr):
            out.append(f"{r}: {attr} {getattr(a.md, attr)!r} vs {getattr(b.md, attr)!r}")
    if entity:
        if a.md.num_rows != b.md.num_rows:
            out.append(f"{r}: {a.md.num_rows} vs {b.md.num_rows} rows")
        rga = [a.md.row_group(i).num_rows for i in range(a.md.num_row_groups)]
        rgb = [b.md.row_group(i).num_rows for i in range(b.md.num_row_groups)]
        if rga != rgb:
            out.append(f"{r}: row groups {rga} vs {rgb}")
    ids = set(a.index_columns) | {"subject_id"}
    skip_encoding = set() if entity else {"subject_id"}

    def chunk_meta(md, g, i):
        c = md.row_group(g).column(i)
        return (c.path_in_schema, c.physical_type, c.compression, tuple(sorted(c.encodings)),
                c.has_dictionary_page, c.is_stats_set)

    # Event tables may split into a different number of row groups; their first is compared.
    groups = range(min(a.md.num_row_groups, b.md.num_row_groups) if entity else min(1, a.md.num_row_groups, b.md.num_row_groups))
    if a.md.num_columns == b.md.num_columns:
        for g in groups:
            for i in range(a.md.num_columns):
                ma, mb = chunk_meta(a.md, g, i), chunk_meta(b.md, g, i)
                if ma[0] in skip_encoding:
                    continue
                if ma != mb:
                    out.append(f"{r}: row group {g} column chunk layout of {ma[0]} differs: {ma} vs {mb}")
    strings = [c for c in a.string_columns if c in b.string_columns]
    da, db = a.dictionaries(strings), b.dictionaries(strings)
    for c in strings:
        if c in ids:
            if entity and da.get(c) != db.get(c):
                out.append(f"{r}: dictionary of identifier column {c} differs")
        else:
            va = {v for d in da.get(c) or [] if d for v in d}
            vb = {v for d in db.get(c) or [] if d for v in d}
            if va != vb:
                out.append(f"{r}: dictionary of {c} holds different values: only A {_limit(sorted(map(str, va - vb)), 5)}, "
                           f"only B {_limit(sorted(map(str, vb - va)), 5)}")


def _zarr_json(path: str, rel_path: str) -> object:
    """Zarr metadata JSON with the subject extent of visit-2 imaging stores (an
    outcome: who attended and was imaged) set aside."""
    doc = json.load(open(path))
    if rel_path.split("/", 1)[0] not in OUTCOME_STORES:
        return doc

    def norm(meta):
        if isinstance(meta, dict) and "shape" in meta and "chunks" in meta and meta.get("shape"):
            meta = dict(meta)
            meta["shape"] = ["<subjects>"] + list(meta["shape"][1:])
            if len(meta["chunks"]) == 1:
                meta["chunks"] = ["<subjects>"]
        return meta

    if isinstance(doc, dict) and "metadata" in doc:
        doc = dict(doc)
        doc["metadata"] = {k: norm(v) for k, v in doc["metadata"].items()}
        return doc
    return norm(doc)


def compare_nondata(release_a: str, release_b: str) -> list:
    """Every difference between two releases outside data values (see the module
    docstring for what counts as data).  Empty when the non-data bytes agree."""
    A, B = Release(release_a), Release(release_b)
    out: list = []
    _diff_lists("file list", _structural_paths(A), _structural_paths(B), out)
    for folder in PER_PARTICIPANT_DIRS:
        na = sum(1 for e in A.files if _per_participant(e.rel) == folder)
        nb = sum(1 for e in B.files if _per_participant(e.rel) == folder)
        if folder == "imaging" and na != nb:
            out.append(f"imaging/: {na} vs {nb} baseline image files (the imaged count is fixed by the scale)")
    common = [e.rel for e in A.files if e.rel in B.kinds and _per_participant(e.rel) is None]
    cohort = A.cohort()
    n_cohort = len(cohort) if cohort is not None else None
    for r in common:
        kind = A.kinds[r]
        pa_, pb_ = A.abs(r), B.abs(r)
        if kind != B.kinds[r]:
            out.append(f"{r}: {kind} vs {B.kinds[r]}")
        elif kind == "parquet":
            ia = A.parquet(r)
            _parquet_diffs(r, ia, B.parquet(r), _entity_table(ia, n_cohort), out)
        elif kind == "zarr-meta":
            if _read_text(pa_) != _read_text(pb_) and _zarr_json(pa_, r) != _zarr_json(pb_, r):
                out.append(f"{r}: Zarr metadata differs")
        elif kind == "zarr-chunk":
            continue
        elif kind == "vcf":
            if vcf_header(pa_) != vcf_header(pb_):
                out.append(f"{r}: VCF header differs")
        elif kind == "index":
            if tabix_header(pa_) != tabix_header(pb_):
                out.append(f"{r}: index header (sequence names, column layout) differs")
        elif kind == "manifest":
            out += _manifest_diffs(json.load(open(pa_)), json.load(open(pb_)))
        elif kind == "npz":
            if npz_structure(pa_) != npz_structure(pb_):
                out.append(f"{r}: npz members, headers or zip fields differ")
        elif _read_text(pa_) != _read_text(pb_):
            out.append(f"{r}: bytes differ")
    out += _zarr_identifier_diffs(A, B)
    for folder in PER_PARTICIPANT_DIRS:
        shapes: dict = {}
        for R, tag in ((A, "A"), (B, "B")):
            for e in R.files:
                if _per_participant(e.rel) == folder and e.rel.endswith(".npz"):
                    s = json.dumps(npz_structure(R.abs(e.rel)), sort_keys=True)
                    shapes.setdefault(s, f"{tag}:{e.rel}")
        if len(shapes) > 1:
            out.append(f"{folder}/: npz files differ in members, headers or zip fields ({', '.join(shapes.values())})")
    return out


def _manifest_diffs(a: dict, b: dict) -> list:
    out = []
    outcome = lambda doc: sum(1 for f in doc.get("files", []) if _per_participant(f["path"]) not in (None, "imaging"))
    for k in sorted(set(a) | set(b)):
        if k in ("created", "total_bytes", "files"):
            continue
        if k == "n_files" and a.get(k, 0) - outcome(a) == b.get(k, 0) - outcome(b):
            continue
        if a.get(k) != b.get(k):
            out.append(f"MANIFEST.json: {k} {a.get(k)!r} vs {b.get(k)!r}")
    if set(a) != set(b):
        out.append(f"MANIFEST.json: keys differ {sorted(set(a) ^ set(b))}")
    pa_ = [f["path"] for f in a.get("files", []) if _per_participant(f["path"]) is None]
    pb_ = [f["path"] for f in b.get("files", []) if _per_participant(f["path"]) is None]
    _diff_lists("MANIFEST.json file list", pa_, pb_, out)
    ka = {tuple(sorted(f)) for f in a.get("files", [])}
    kb = {tuple(sorted(f)) for f in b.get("files", [])}
    if ka != kb:
        out.append(f"MANIFEST.json: file entries carry different keys {ka} vs {kb}")
    return out


def _zarr_identifier_diffs(A: Release, B: Release) -> list:
    """String arrays (sample, variant, contig, filter identifiers) are identifiers,
    not data; imaging stores list who was imaged, which is an outcome."""
    import zarr

    out = []
    for root in sorted(A.roots & B.roots):
        if root.startswith("imaging"):
            continue
        ga = zarr.open_group(A.abs(root), mode="r", zarr_format=2)
        gb = zarr.open_group(B.abs(root), mode="r", zarr_format=2)
        for name, arr in ga.members(max_depth=None):
            if not hasattr(arr, "dtype") or not str(arr.dtype).startswith(("StringDType", "<U", "|O", "object")):
                continue
            try:
                other = gb[name]
            except KeyError:
                continue
            if _strings(arr) != _strings(other):
                out.append(f"{root}/{name}: identifier values differ")
    return out


def compare_missingness(release_a: str, release_b: str) -> list:
    """Missing-value masks of the molecular tables, on the participants both hold:
    the missingness process must not depend on which protein carries which role."""
    A, B = Release(release_a), Release(release_b)
    out = []
    for r in A.of_kind("parquet"):
        if r not in B.kinds:
            continue
        ia, ib = A.parquet(r), B.parquet(r)
        mols = [c for c in ia.value_columns if _MOLECULE_ID.match(c)]
        if not mols or ia.subject_key is None:
            continue
        if mols != [c for c in ib.value_columns if _MOLECULE_ID.match(c)]:
            out.append(f"{r}: molecule columns differ")
            continue
        sa = pq.read_table(ia.path, columns=["subject_id"]).column("subject_id").to_pylist()
        sb = pq.read_table(ib.path, columns=["subject_id"]).column("subject_id").to_pylist()
        common = sorted(set(sa) & set(sb))
        ra, rb = pd.Index(sa).get_indexer(common), pd.Index(sb).get_indexer(common)
        differ = []
        for ta, tb in zip(_column_batches(ia.path, mols), _column_batches(ib.path, mols)):
            for name in ta.column_names:
                ma = ~np.isfinite(_numeric_float(ta.column(name))[ra])
                mb = ~np.isfinite(_numeric_float(tb.column(name))[rb])
                if not np.array_equal(ma, mb):
                    differ.append(name)
        if differ:
            out.append(f"{r}: missing-value pattern differs in {len(differ)} column(s), e.g. {differ[:5]}")
    return out


def _role_shuffle_pair(sa: Secrets, sb: Secrets) -> list:
    """Problems making the two worlds not a role-shuffled pair (same world, roles re-dealt)."""
    out = []
    ca, cb = json.loads(json.dumps(sa.config, default=str)), json.loads(json.dumps(sb.config, default=str))
    for c in (ca, cb):
        (c.get("world") or {}).pop("roles_salt", None)
    if ca != cb:
        keys = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
        out.append(f"the resolved configs differ beyond world.roles_salt (in {keys})")
    if sa.seed != sb.seed:
        out.append("the seeds differ")
    if sa.roles == sb.roles:
        out.append("the roles are dealt identically: the comparison would prove nothing")
    return out


# ----------------------------------------------------------------------------- audit


class Context:
    """One world under audit: its release, what sealed/ says to look for."""

    def __init__(self, world_dir: str):
        self.world_dir = os.path.abspath(world_dir)
        self.release_dir = os.path.join(self.world_dir, "release")
        self.sealed = os.path.join(self.world_dir, "sealed")
        self.secrets = Secrets.load(self.sealed)
        self.release = Release(self.release_dir)
        self.needles = Needles(self.secrets)


CHECKS = {
    "seed_material": lambda c: check_seed_material(c.release, c.needles),
    "role_words": lambda c: check_role_words(c.release, c.secrets),
    "role_identifiers": lambda c: check_role_identifiers(c.release, c.secrets),
    "identifier_order": lambda c: check_identifier_order(c.release),
    "latent_values": lambda c: check_latent(c.release, c.secrets),
    "missingness_by_role": lambda c: check_missingness(c.release, c.secrets),
    "column_summaries": lambda c: check_column_summaries(c.release, c.secrets),
    "targetability_rows": lambda c: check_targetability(c.release, c.secrets),
    "cis_locus_sharing": lambda c: check_cis_locus_sharing(c.release, c.secrets),
    "file_layout": lambda c: check_file_layout(c.release),
    "manifest_contents": lambda c: check_manifest_contents(c.release),
    "build_residue": lambda c: check_build_residue(c.release, c.sealed),
    "manifest_verifies": lambda c: check_manifest_verifies(c.world_dir),
}


def audit(world_dir: str, against: Optional[str] = None, only: Optional[Iterable[str]] = None) -> dict:
    """Audit ``<world_dir>/release`` against ``<world_dir>/sealed``; with
    ``against`` (the same world built with another ``world.roles_salt``) also
    check role-shuffle invariance.  ``only`` restricts the run to named checks of
    ``CHECKS``.  Returns the report dict."""
    t0 = time.perf_counter()
    world_dir = os.path.abspath(world_dir)
    if not os.path.isdir(os.path.join(world_dir, "release")):
        return _report(world_dir, against, [Finding("release_present", False, f"{world_dir}/release does not exist")], [], t0)
    ctx = Context(world_dir)
    findings = [Finding("sealed_inputs", not ctx.secrets.problems,
                        f"{len(ctx.secrets.roles)} role proteins, seed and oracle key known" if not ctx.secrets.problems
                        else "the audit cannot know what to look for", ctx.secrets.problems)]
    names = list(CHECKS) if only is None else list(only)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; valid: {', '.join(CHECKS)}")
    for name in names:
        try:
            findings.append(CHECKS[name](ctx))
        except Exception as exc:  # an unreadable release file is a failed finding, never a silent pass
            findings.append(Finding(name, False, f"check crashed: {type(exc).__name__}: {exc}"))
    if against is not None:
        findings += _against(world_dir, os.path.abspath(against), ctx.secrets)
    files = [{"path": e.rel, "size": e.size} for e in ctx.release.files]
    return _report(world_dir, against, findings, files, t0)


def _against(world_dir: str, other: str, secrets: Secrets) -> list:
    ra, rb = os.path.join(world_dir, "release"), os.path.join(other, "release")
    out = []
    pair = _role_shuffle_pair(secrets, Secrets.load(os.path.join(other, "sealed")))
    out.append(Finding("role_shuffle_pair", not pair, f"{other}: same world and seed, roles re-dealt"
                       if not pair else f"{other} is not a role-shuffled twin", pair))
    for name, fn, ok_text in (
        ("role_shuffle_invariance", compare_nondata, "every non-data byte identical"),
        ("missingness_invariance", compare_missingness, "missing-value masks identical on shared participants"),
    ):
        try:
            diffs = fn(ra, rb)
            out.append(Finding(name, not diffs, ok_text if not diffs else f"{len(diffs)} difference(s)", _limit(diffs, 40)))
        except Exception as exc:
            out.append(Finding(name, False, f"check crashed: {type(exc).__name__}: {exc}"))
    ta, tb = os.path.join(ra, "targetability.parquet"), os.path.join(rb, "targetability.parquet")
    same = os.path.exists(ta) and os.path.exists(tb) and _read_text(ta) == _read_text(tb)
    out.append(Finding("targetability_invariance", same, "targetability.parquet byte-identical" if same
                       else "targetability.parquet differs between the role deals (or is missing)"))
    return out


def _report(world_dir, against, findings, files, t0) -> dict:
    return {
        "world_dir": world_dir,
        "release": os.path.join(world_dir, "release"),
        "against": against,
        "passed": all(f.passed for f in findings),
        "findings": [f.as_dict() for f in findings],
        "files": files,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def format_table(report: dict) -> str:
    rows = [(f["name"], "pass" if f["passed"] else "FAIL", f["detail"]) for f in report["findings"]]
    w = max(len(r[0]) for r in rows) if rows else 10
    lines = [f"leak audit of {report['release']}" + (f" against {report['against']}" if report["against"] else ""),
             f"{'finding'.ljust(w)}  result  detail", f"{'-' * w}  ------  ------"]
    for name, result, detail in rows:
        lines.append(f"{name.ljust(w)}  {result.ljust(6)}  {detail}")
    for f in report["findings"]:
        if not f["passed"]:
            for p in f["problems"]:
                lines.append(f"  {f['name']}: {p}")
    lines.append(f"{'PASSED' if report['passed'] else 'FAILED'} in {report['seconds']:.1f}s")
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.audit", description=__doc__.split("\n\n")[0])
    ap.add_argument("world_dir", help="a built world: <out>/<id> holding release/ and sealed/")
    ap.add_argument("--against", help="the same world built with another world.roles_salt (role-shuffle invariance)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    args = ap.parse_args(argv)
    from .screening.episode import is_screening_world  # [world-kind seam: screening]

    if is_screening_world(args.world_dir):
        from .screening.audit import main as screening_main

        return screening_main([args.world_dir])
    report = audit(args.world_dir, args.against)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
