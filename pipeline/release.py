"""Open a built release: checked against its manifest, then tables, genotypes and images.

    from pipeline import release
    rel = release.open("worlds/standard-01/release")       # or a world folder, or any fsspec URL
    cov = rel.table("covariates")                           # pandas (arrow=True: a pyarrow Table)
    dosage = rel.genotypes()                                # subjects x variants int8 (load_genotypes)
    ds = rel.genotype_dataset()                             # xarray Dataset with sgkit's names
    img = rel.image("SUBJ_00012")                           # lazy: pixels read on first use
    img.cine, img.t1map, img.geometry, img.nifti("cine")

    python -m pipeline.release <path_or_url> [--no-verify | --sizes-only] [--psam FILE]

:func:`open` refuses a release that is incomplete (no ``MANIFEST.json``: a
build writes it last), whose files differ from the manifest (size and SHA-256,
naming the file; ``verify=False`` skips the check, ``verify="sizes"`` compares
sizes only), or whose ``format_version`` this reader does not know.
"""
from __future__ import annotations

import posixpath
import sys
from collections.abc import Iterator, Mapping
from functools import cached_property

import fsspec
import numpy as np
import pandas as pd

from . import bundle
from .bundle import GENOTYPE_STORE, IMAGING, MANIFEST
from .bundle import IMAGE_GEOMETRY_KEYS as GEOMETRY_KEYS
_VERIFY = (True, False, "sizes")
_SHOWN_PROBLEMS = 5


class ReleaseError(Exception):
    """The release cannot be used as it is (incomplete, altered or of an unknown format)."""


def open(path_or_url: str, verify: bool | str = True, threads: int = 4) -> "Release":  # noqa: A001 (the module's API)
    """The release at ``path_or_url`` (its ``release/`` folder, or the world folder holding one).

    verify : True checks every file's size and SHA-256 against ``MANIFEST.json``;
        "sizes" only the sizes (fast on a large release); False neither (the
        manifest must still be there).
    threads : files hashed at once.
    """
    if verify not in _VERIFY:
        raise ValueError(f"verify: {verify!r}; valid: True, False or 'sizes'")
    fs, root = fsspec.core.url_to_fs(str(path_or_url))
    root = root.rstrip("/") or "/"
    if not fs.exists(posixpath.join(root, MANIFEST)) and fs.exists(posixpath.join(root, bundle.RELEASE, MANIFEST)):
        root = posixpath.join(root, bundle.RELEASE)
    return Release(str(path_or_url), fs, root, verify, threads)


class Release:
    """A release checked on opening; everything else is read when first asked for."""

    def __init__(self, url: str, fs, root: str, verify: bool | str = True, threads: int = 4):
        self.url, self.fs, self.root = url, fs, root
        path = posixpath.join(root, MANIFEST)
        if not fs.exists(path):
            if not fs.exists(root):
                raise ReleaseError(f"{url}: no such folder")
            raise ReleaseError(bundle.incomplete_message(url, bundle.RELEASE))
        try:
            self.manifest = bundle.parse_manifest(fs.cat_file(path), url, bundle.RELEASE)
        except bundle.BundleError as exc:
            raise ReleaseError(str(exc)) from None
        self._listed = {f["path"]: f for f in self.manifest["files"]}
        if verify:
            problems = bundle.manifest_problems(fs, root, self._listed, hashes=verify is True, threads=threads)
            if problems:
                more = f" (and {len(problems) - _SHOWN_PROBLEMS} more)" if len(problems) > _SHOWN_PROBLEMS else ""
                raise ReleaseError(f"{url}: differs from its {MANIFEST}: " + "; ".join(problems[:_SHOWN_PROBLEMS]) + more)

    # ---- manifest -------------------------------------------------------------------------
    def _abs(self, rel: str) -> str:
        return posixpath.join(self.root, rel)

    @property
    def format_version(self) -> str:
        return self.manifest["format_version"]

    @property
    def files(self) -> list[str]:
        return sorted(self._listed)

    # ---- tables ---------------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """Names of the Parquet tables (``covariates``, ``proteomics``, ...)."""
        return [f[: -len(bundle.TABLE_SUFFIX)] for f in self.files if "/" not in f and f.endswith(bundle.TABLE_SUFFIX)]

    def table(self, name: str, *, arrow: bool = False, columns: list[str] | None = None):
        """Table ``name`` as a pandas DataFrame (wide tables indexed by ``subject_id``, or
        ``protein``), or with ``arrow`` a pyarrow Table (the index is then a column)."""
        if name not in self.tables:
            raise ReleaseError(f"table {name!r} is not in this release; valid: {', '.join(self.tables)}")
        import pyarrow.parquet as pq

        with self.fs.open(self._abs(name + bundle.TABLE_SUFFIX), "rb") as fh:
            table = pq.read_table(fh, columns=columns)
        return table if arrow else table.to_pandas()

    @cached_property
    def dictionary(self) -> pd.DataFrame:
        """``data_dictionary.tsv``: one row per column (table, field_id, coding, sentinel codes, ...)."""
        with self.fs.open(self._abs(bundle.DATA_DICTIONARY_TSV), "rb") as fh:
            return pd.read_csv(fh, sep="\t", dtype=str, keep_default_na=False)

    # ---- genotypes ------------------------------------------------------------------------
    @property
    def genotype_url(self) -> str:
        if GENOTYPE_STORE not in {f.split("/")[0] for f in self.files}:
            raise ReleaseError(f"{self.url}: this release has no {GENOTYPE_STORE}")
        return self._url(GENOTYPE_STORE)

    def _url(self, rel: str) -> str:
        protocol = self.fs.protocol[0] if isinstance(self.fs.protocol, (tuple, list)) else self.fs.protocol
        path = self._abs(rel)
        return path if protocol in ("file", "local") else f"{protocol}://{path.lstrip('/')}"

    def genotypes(self, threads: int | None = None) -> pd.DataFrame:
        """ALT dosages int8 [subjects, variants] (``pipeline.genotypes_io.load_genotypes``)."""
        from .genotypes_io import load_genotypes

        self.genotype_url  # noqa: B018 (names the problem if the store is absent)
        return load_genotypes(self._url(""), threads=threads)

    def genotype_dataset(self):
        """The genotype store as a lazy xarray Dataset with the VCF Zarr / sgkit names
        (``call_genotype`` int8 [variants, samples, ploidy], ``variant_position``,
        ``sample_id``, ...): what ``sgkit.load_dataset`` returns, for sgkit's functions."""
        import xarray as xr

        return xr.open_zarr(self.genotype_url, consolidated=True, concat_characters=False)

    def psam(self) -> str:
        """A plink2 ``.psam`` (``#IID``, ``SEX``: 1 male, 2 female) from ``covariates.p31_i0``, in the
        VCF's sample order: ``plink2 --vcf genotypes.vcf.gz --psam genotypes.psam`` then knows every sex."""
        sex = self.table("covariates", columns=["subject_id", "p31_i0"])
        codes = np.where(sex["p31_i0"].to_numpy() == 1, "1", "2")
        return "#IID\tSEX\n" + "".join(f"{s}\t{c}\n" for s, c in zip(sex.index.astype(str), codes))

    def write_psam(self, path: str) -> None:
        with fsspec.open(path, "w") as fh:
            fh.write(self.psam())

    # ---- images ---------------------------------------------------------------------------
    def images(self, visit: int = 0) -> "Images":
        """Lazy mapping subject id -> :class:`Image` of ``visit`` (0 baseline, 2 the repeat assessment)."""
        if visit not in IMAGING:
            raise ValueError(f"visit: {visit!r}; valid: {', '.join(str(v) for v in IMAGING)} (instance numbers)")
        return Images(self, IMAGING[visit])

    def image(self, subject_id: str, visit: int = 0) -> "Image":
        return self.images(visit)[subject_id]


class Images(Mapping):
    """One visit's images, npz files or a Zarr group; nothing is read until an image's pixels are."""

    def __init__(self, release: Release, folder: str):
        self.release, self.folder = release, folder
        npz = sorted(f for f in release.files if f.startswith(folder + "/") and f.endswith(bundle.IMAGE_SUFFIX))
        store = folder + bundle.ZARR_SUFFIX
        self._zarr = store if any(f.startswith(store + "/") for f in release.files) else None
        if npz:
            self._ids = [posixpath.basename(f)[: -len(bundle.IMAGE_SUFFIX)] for f in npz]
        elif self._zarr:
            self._ids = [str(s) for s in self._group["subject_id"][...].tolist()]
        else:
            self._ids = []
        self._row = {s: i for i, s in enumerate(self._ids)}

    @cached_property
    def _group(self):
        import zarr

        return zarr.open_group(self.release._url(self._zarr), mode="r", zarr_format=2)

    def __getitem__(self, subject_id: str) -> "Image":
        if subject_id not in self._row:
            raise KeyError(f"{subject_id}: no {self.folder} image in this release ({len(self._ids)} subjects have one)")
        return Image(self, subject_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


class Image:
    """One participant's cine, T1 map and geometry, read on first use.

    cine : uint8 [slice, frame, y, x] (slices base, mid, apex); t1map : float32
    [slice, y, x] in ms, NaN outside the myocardium; geometry :
    ``pixel_spacing_mm`` (row, column), ``slice_thickness_mm``, ``frame_interval_ms``.
    """

    def __init__(self, images: Images, subject_id: str):
        self._images, self.subject_id = images, subject_id

    def __repr__(self) -> str:
        return f"Image({self.subject_id!r}, {self._images.folder})"

    @cached_property
    def _arrays(self) -> dict:
        images = self._images
        if images._zarr is None:
            path = images.release._abs(f"{images.folder}/{self.subject_id}{bundle.IMAGE_SUFFIX}")
            with images.release.fs.open(path, "rb") as fh, np.load(fh) as z:
                return {k: z[k] for k in z.files}
        row = images._row[self.subject_id]
        group = images._group
        out = {"cine": np.asarray(group["cine"][row]), "t1map": np.asarray(group["t1map"][row])}
        out.update({k: np.asarray(v) for k, v in group["cine"].attrs.items() if k in GEOMETRY_KEYS})
        return out

    @property
    def cine(self) -> np.ndarray:
        return self._arrays["cine"]

    @property
    def t1map(self) -> np.ndarray:
        return self._arrays["t1map"]

    @property
    def geometry(self) -> dict:
        a = self._arrays
        missing = [k for k in GEOMETRY_KEYS if k not in a]
        if missing:
            raise ReleaseError(f"{self.subject_id}: the image carries no {', '.join(missing)} (written by an older "
                               "generator)")
        return {"pixel_spacing_mm": tuple(float(x) for x in a["pixel_spacing_mm"]),
                "slice_thickness_mm": float(a["slice_thickness_mm"]), "frame_interval_ms": float(a["frame_interval_ms"])}

    def affine(self) -> np.ndarray:
        """NIfTI voxel-to-mm affine for voxel (x column, y row, slice): scaling only (no patient
        orientation is simulated; the three slices are separate planes, one thickness apart here)."""
        row, col = self.geometry["pixel_spacing_mm"]
        return np.diag([col, row, self.geometry["slice_thickness_mm"], 1.0])

    def nifti(self, which: str = "cine"):
        """A nibabel ``Nifti1Image``: cine as (x, y, slice, frame) with the frame interval as the
        time step (ms), or the T1 map as (x, y, slice)."""
        import nibabel as nib

        if which == "cine":
            data = np.transpose(self.cine, (3, 2, 0, 1))
        elif which == "t1map":
            data = np.transpose(self.t1map, (2, 1, 0))
        else:
            raise ValueError(f"which: {which!r}; valid: 'cine', 't1map'")
        img = nib.Nifti1Image(np.ascontiguousarray(data), self.affine())
        img.header.set_xyzt_units("mm", "msec")
        if which == "cine":
            zooms = list(img.header.get_zooms())
            img.header.set_zooms((*zooms[:3], self.geometry["frame_interval_ms"]))
        return img


def _summary(rel: Release) -> str:
    lines = [f"{rel.url}: format_version {rel.format_version}, generator {rel.manifest.get('generator_version')}, "
             f"scale {rel.manifest.get('scale', '?')}, {len(rel.files)} files"]
    import pyarrow.parquet as pq

    for name in rel.tables:
        with rel.fs.open(rel._abs(name + bundle.TABLE_SUFFIX), "rb") as fh:
            meta = pq.read_metadata(fh)
        lines.append(f"  {name}: {meta.num_rows} rows x {meta.num_columns} columns")
    for visit, folder in IMAGING.items():
        n = len(rel.images(visit))
        if n:
            lines.append(f"  {folder}: {n} subjects")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from .commandline import Command, Option

    command = Command("pipeline.release", __doc__.splitlines()[0], [
        Option("path_or_url", "a world or release folder, or any fsspec URL", required=True, positional=True),
        Option("verify", "check every file's size and SHA-256 against the manifest (sizes: sizes only)",
               kind=lambda key, text: text if text == "sizes" else Option(key, "", kind=bool).convert(text),
               default=True),
        Option("no_verify", "skip the size and SHA-256 check (verify=false)", kind=bool, default=False),
        Option("sizes_only", "compare sizes only, not SHA-256 (verify=sizes)", kind=bool, default=False),
        Option("psam", "write a plink2 .psam (sex from covariates.p31_i0) to this file"),
    ])

    def run(args: dict) -> int:
        if args["no_verify"] and args["sizes_only"]:
            print("pipeline.release: error: no_verify and sizes_only: one of them; valid: verify=true|false|sizes",
                  file=sys.stderr)
            return 2
        verify = False if args["no_verify"] else ("sizes" if args["sizes_only"] else args["verify"])
        try:
            rel = open(args["path_or_url"], verify=verify)
        except ReleaseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(_summary(rel))
        if args["psam"]:
            rel.write_psam(args["psam"])
            print(f"wrote {args['psam']}")
        return 0

    return command.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
