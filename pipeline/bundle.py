"""The bundle contract: every name in a world's ``release/`` and ``sealed/`` folders, the
format version, the release tables' schema, and readers that say what is wrong.

    <out>/<id>/release/   what an agent or analyst may read (SPEC section 5)
    <out>/<id>/sealed/    what only the scorer, the oracle, validation and the audit read (section 6)

Each folder ends with ``MANIFEST.json`` (written last: a folder without it is an
incomplete bundle), whose ``format_version`` says which version of this contract the
files follow.  Readers accept the versions in :data:`FORMAT_VERSIONS` and refuse others
by name, in the manner of bio2zarr's ``format_version`` checked on load.  Bump
:data:`FORMAT_VERSION` when a file, column or key changes meaning.

The module imports nothing from the generator and nothing heavy at import time (numpy,
pandas, pyarrow, yaml and jsonschema are imported by the readers that need them), so
the judging side, the release loader and agent code can all depend on it, and the
agent sandbox can copy it beside its runtime as it copies ``genotypes_io.py``.
"""
from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from typing import Any

#: The version this package writes.
FORMAT_VERSION = "1"
#: The versions its readers understand.
FORMAT_VERSIONS = (FORMAT_VERSION,)

RELEASE = "release"
SEALED = "sealed"
MANIFEST = "MANIFEST.json"
#: Every top-level key a manifest may carry (``created`` only with SOURCE_DATE_EPOCH); the
#: world's id is in the sealed manifest only, since it is not the agent's to know.
MANIFEST_KEYS = {
    RELEASE: ("generator", "generator_version", "format_version", "created", "n_files", "total_bytes", "files",
              "bundle", "scale"),
}
MANIFEST_KEYS[SEALED] = MANIFEST_KEYS[RELEASE] + ("world_id",)
MANIFEST_FILE_KEYS = ("path", "size", "sha256")

# ----------------------------------------------------------------------------- release/

#: Parquet tables, ``<name>.parquet``; their columns, types and index are in TABLE_SCHEMA.
TABLES = ("covariates", "proteomics", "transcriptomics", "metabolomics", "ecg_features", "coronary_ct",
          "mortality", "mace_events", "ehr_diagnoses", "ehr_medications", "covariates_visit2",
          "proteomics_visit2", "targetability")
TABLE_SUFFIX = ".parquet"
#: How every table is compressed (release and sealed alike; a build's config may not change it).
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
DATA_DICTIONARY_TSV = "data_dictionary.tsv"
DATA_DICTIONARY_MD = "data_dictionary.md"
GENOTYPES_VCF = "genotypes.vcf.gz"
GENOTYPES_INDEX = GENOTYPES_VCF + ".tbi"
GENOTYPE_STORE = "genotypes.zarr"
#: Image folders by visit (instance 0 baseline, 2 the repeat assessment): ``<folder>/<subject>.npz``
#: files, or with ``release=zarr`` one store ``<folder>.zarr``.
IMAGING = {0: "imaging", 2: "imaging_visit2"}
ZARR_SUFFIX = ".zarr"
IMAGE_SUFFIX = ".npz"
#: Geometry every image carries beside its pixels (npz members, or attributes of ``cine``/``t1map``).
IMAGE_GEOMETRY_KEYS = ("pixel_spacing_mm", "slice_thickness_mm", "frame_interval_ms")
#: The schemas: inside the package of a wheel (pipeline/schemas), else the repository's root schemas/
#: (a checkout or an editable install; this module imports nothing of the package, see pipeline.paths).
_HERE = Path(__file__).resolve().parent
_SCHEMAS = next((d for d in (_HERE / "schemas", _HERE.parent / "schemas") if d.is_dir()), _HERE / "schemas")
TABLE_SCHEMA = _SCHEMAS / "release_tables.schema.json"

# ----------------------------------------------------------------------------- sealed/

TRUTH = "truth.json"
LATENT = "latent.parquet"
EVAL_MASK = "eval_mask.npy"
ORACLE = "oracle.json"
WORLD_CONFIG = "world.yaml"
HIDDEN_MODEL = "hidden_model.json"
HIDDEN_PARTICIPANTS = "hidden_participants.parquet"
PHENOTYPE_BASELINE = "phenotype_baseline.json"
IMAGING_FEATURES = "imaging_features.parquet"
#: What each sealed file holds.
SEALED_FILES = {
    TRUTH: "roles: drivers and their directions, decoys, pairs, the surrogate",
    LATENT: "L and L_late per participant (index subject_id)",
    EVAL_MASK: "the scorer's evaluation mask, aligned with latent.parquet's rows",
    ORACLE: "the experiment oracle's parameters and key",
    WORLD_CONFIG: "the world-determining config with the seed",
    HIDDEN_MODEL: "hidden world parameters for validation and the audit",
    HIDDEN_PARTICIPANTS: "hidden per-participant variables for the fidelity checks",
    PHENOTYPE_BASELINE: "the frozen baseline phenotype's correlation b (builds with imaging only)",
    IMAGING_FEATURES: "the baseline pipeline's measurements of the released pixels (builds with imaging only)",
    MANIFEST: "every sealed file with its size and SHA-256, written last",
}
#: Written by every build; the others only when the release has images.
SEALED_REQUIRED = (TRUTH, LATENT, EVAL_MASK, ORACLE, WORLD_CONFIG, HIDDEN_MODEL, HIDDEN_PARTICIPANTS, MANIFEST)
#: ``sealed/validation/``: the reports ``python -m pipeline.validate`` writes after the build
#: (validation.json, validation.html).  They name the drivers and quote the hidden parameters,
#: so they are sealed-grade and live with the truth they come from, never beside ``sealed/``.
#: The sealed manifest is the build's record of what the build wrote: this one folder is outside
#: it (neither listed when the manifest is made nor reported when it is checked), so validating
#: a world changes none of the build's bytes and leaves its manifest valid.  No reader of the
#: sealed bundle (scorer, oracle, audit) reads it.
SEALED_REPORTS = "validation"


def reports_dir(world_dir: str | os.PathLike) -> str:
    """``<world_dir>/sealed/validation``: where a world's validation reports go by default."""
    return os.path.join(os.fspath(world_dir), SEALED, SEALED_REPORTS)


def sealed_grade_warning(folder: str | os.PathLike, world_dir: str | os.PathLike) -> str | None:
    """The warning to print when a validation report is written outside the world's ``sealed/``
    (``--out``); None when ``folder`` is inside it."""
    sealed = os.path.realpath(os.path.join(os.fspath(world_dir), SEALED))
    real = os.path.realpath(os.fspath(folder))
    if real == sealed or real.startswith(sealed + os.sep):
        return None
    return (f"WARNING: {folder} now holds a validation report, which names the world's drivers and hidden "
            f"parameters (as sealed/ does) and is outside {os.path.join(os.fspath(world_dir), SEALED)}: keep it "
            "from anyone (or any agent) who may see the release only")


class BundleError(Exception):
    """A bundle cannot be read as this contract describes it."""


class IncompleteBundle(BundleError):
    """No MANIFEST.json: the build has not finished (or the folder is not a bundle)."""


class UnknownFormat(BundleError):
    """A format_version this reader does not know."""


class MissingFile(BundleError, FileNotFoundError):
    """A file the contract requires is absent (also a FileNotFoundError, for callers that tolerate it)."""


def source_date(environ=None) -> str | None:
    """The manifest's ``created`` time: ``SOURCE_DATE_EPOCH`` (https://reproducible-builds.org/specs/source-date-epoch/)
    as an ISO 8601 UTC time, or None when it is unset.  A malformed value is an
    error, as the specification asks, rather than silently ignored."""
    import datetime as _dt

    value = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    if value is None:
        return None
    if not value.isdigit():
        raise ValueError(f"SOURCE_DATE_EPOCH: {value!r} is not a time; valid: a non-negative integer of seconds since 1970-01-01 UTC")
    try:
        when = _dt.datetime.fromtimestamp(int(value), _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"SOURCE_DATE_EPOCH: {value} is out of range; valid: seconds since 1970-01-01 UTC up to year 9999") from None
    return when.isoformat()


def table_file(name: str) -> str:
    """``<name>.parquet`` for a release table; an unknown name is an error naming the valid ones."""
    if name not in TABLES:
        raise BundleError(f"table {name!r} is not a release table; valid: {', '.join(TABLES)}")
    return name + TABLE_SUFFIX


def check_format_version(version: Any, where: str, kind: str = RELEASE, generator: Any = None) -> None:
    """Refuse a ``format_version`` outside :data:`FORMAT_VERSIONS`, naming what was found, what this
    reader reads and (when known) the generator version that wrote it."""
    if version not in FORMAT_VERSIONS:
        readable = ", ".join(repr(v) for v in FORMAT_VERSIONS)
        by = "" if generator is None else f"; the {_noun(kind)} was written by generator version {generator}"
        raise UnknownFormat(f"{where}: format_version {version!r} is not one this reader knows (it reads {readable})"
                            + by)


def parse_manifest(data: bytes, where: str, kind: str = RELEASE) -> dict:
    """A manifest's document from its bytes, its format version checked."""
    try:
        doc = json.loads(data)
        {f["path"]: f for f in doc["files"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"{where}: {MANIFEST} is not a {kind} manifest ({exc})") from None
    check_format_version(doc.get("format_version"), where, kind, doc.get("generator_version", "unknown"))
    return doc


def incomplete_message(where: str, kind: str = RELEASE) -> str:
    return (f"{where}: no {MANIFEST}: the {_noun(kind)} is incomplete (a build writes its manifest last; "
            "rebuild or wait for the build to finish)")


def read_manifest(folder: str | os.PathLike, kind: str = RELEASE, where: str | None = None) -> dict:
    """The checked manifest of a local ``release/`` or ``sealed/`` folder."""
    where = str(folder) if where is None else where
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise IncompleteBundle(incomplete_message(where, kind)) from None
    return parse_manifest(data, where, kind)


def check_sealed(sealed_dir: str | os.PathLike, require_manifest: bool = True) -> dict | None:
    """The sealed manifest, its format version checked; None when it is absent and not required.

    The scorer and the oracle take ``require_manifest=False``: each needs only a file or
    two, and callers (tests, a hand-made truth) give them folders no build wrote.  A
    manifest that is there must still name a format they read."""
    if not require_manifest and not os.path.exists(os.path.join(sealed_dir, MANIFEST)):
        return None
    return read_manifest(sealed_dir, SEALED)


def sealed_path(sealed_dir: str | os.PathLike, name: str) -> Path:
    """Where sealed file ``name`` lives; a name outside the contract is an error."""
    if name not in SEALED_FILES:
        raise BundleError(f"{name!r} is not a sealed file; valid: {', '.join(SEALED_FILES)}")
    return Path(sealed_dir) / name


def read_sealed(sealed_dir: str | os.PathLike, name: str) -> Any:
    """Sealed file ``name`` parsed by its kind: JSON, YAML, Parquet (pandas) or npy (no pickles).

    Raises :class:`MissingFile` naming the file when it is absent; a damaged file raises
    what its parser raises."""
    path = sealed_path(sealed_dir, name)
    if not path.exists():
        raise MissingFile(f"{path}: not found; a world's {SEALED}/{name} holds {SEALED_FILES[name]}")
    if name.endswith(".json"):
        return json.loads(path.read_bytes().decode("utf-8"))
    if name.endswith(".yaml"):
        import yaml

        with open(path) as fh:
            return yaml.safe_load(fh)
    if name.endswith(".parquet"):
        import pandas as pd

        return pd.read_parquet(path)
    import numpy as np

    return np.load(path, allow_pickle=False)


def outside_manifest(rel: str, kind: str = RELEASE) -> bool:
    """Whether ``rel`` (a path relative to a ``kind`` folder) is outside that folder's manifest:
    the manifest itself, and in ``sealed/`` the reports folder :data:`SEALED_REPORTS`."""
    if rel == MANIFEST:
        return True
    return kind == SEALED and (rel == SEALED_REPORTS or rel.startswith(SEALED_REPORTS + "/"))


def manifest_problems(fs, root: str, listed: dict, hashes: bool = True, threads: int = 4, kind: str = RELEASE) -> list[str]:
    """Every way the files under ``root`` (an fsspec filesystem; a ``kind`` folder) differ from
    the manifest's ``listed`` entries (path -> entry): missing, unlisted, another size, another
    SHA-256.  What :func:`outside_manifest` names is not looked at."""
    from concurrent.futures import ThreadPoolExecutor

    present = {}
    for path, info in fs.find(root, detail=True).items():
        rel = posixpath.relpath(path, root)
        if not outside_manifest(rel, kind):
            present[rel] = int(info["size"])
    problems = [f"{rel}: listed in the manifest but missing" for rel in sorted(set(listed) - set(present))]
    problems += [f"{rel}: present but not in the manifest" for rel in sorted(set(present) - set(listed))]
    same_size = []
    for rel in sorted(set(present) & set(listed)):
        expected = int(listed[rel]["size"])
        if present[rel] != expected:
            problems.append(f"{rel}: {present[rel]} bytes, the manifest says {expected}")
        else:
            same_size.append(rel)
    if hashes:
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            digests = pool.map(lambda rel: sha256(posixpath.join(root, rel), fs), same_size)
            for rel, sha in zip(same_size, digests):
                if sha != listed[rel]["sha256"]:
                    problems.append(f"{rel}: SHA-256 {sha[:12]}... differs from the manifest's "
                                    f"{listed[rel]['sha256'][:12]}...")
    return problems


def verify(folder: str | os.PathLike, kind: str = RELEASE) -> list[str]:
    """Problems of a local bundle folder against its manifest (empty when intact)."""
    import fsspec

    try:
        doc = read_manifest(folder, kind)
    except BundleError as exc:
        return [str(exc)]
    return manifest_problems(fsspec.filesystem("file"), os.path.abspath(folder), {f["path"]: f for f in doc["files"]},
                             kind=kind)


def describe_tables(release_dir: str | os.PathLike) -> dict:
    """What the release's Parquet files hold, in the form TABLE_SCHEMA validates:
    ``{table: {"index": [[name, type]], "columns": [[name, type], ...]}}`` with Arrow type
    names, the pandas index (stored as a column) apart from the value columns."""
    import pyarrow.parquet as pq

    out = {}
    for name in sorted(os.listdir(release_dir)):
        if not name.endswith(TABLE_SUFFIX):
            continue
        schema = pq.read_schema(os.path.join(release_dir, name))
        pandas_meta = json.loads((schema.metadata or {}).get(b"pandas", b"{}"))
        index = [c for c in pandas_meta.get("index_columns", []) if isinstance(c, str)]
        fields = [[f.name, str(f.type)] for f in schema]
        out[name[: -len(TABLE_SUFFIX)]] = {"index": [f for f in fields if f[0] in index],
                                           "columns": [f for f in fields if f[0] not in index]}
    return out


def table_problems(release_dir: str | os.PathLike) -> list[str]:
    """Where the release's tables depart from TABLE_SCHEMA, one line each (empty when they match)."""
    import jsonschema

    schema = json.loads(TABLE_SCHEMA.read_text())
    described = describe_tables(release_dir)
    out = []
    for err in sorted(jsonschema.Draft202012Validator(schema).iter_errors(described), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(tables)"
        value = err.instance if not isinstance(err.instance, (dict, list)) or len(str(err.instance)) < 120 \
            else f"{type(err.instance).__name__} of {len(err.instance)}"
        out.append(f"{where}: {value!r} does not match the table schema ({err.validator}: "
                   f"{_short(err.validator_value)})")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."


def _noun(kind: str) -> str:
    return "sealed bundle" if kind == SEALED else kind


def sha256(path: str | os.PathLike, fs=None) -> str:
    """Hex SHA-256 of a file, read in 4 MiB pieces (``fs``: an fsspec filesystem; local by default)."""
    import hashlib

    h = hashlib.sha256()
    with (open(path, "rb") if fs is None else fs.open(path, "rb")) as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()
