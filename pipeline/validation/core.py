"""Check records, the world reader shared by all checks, the targets file, and
how a report reads to a person: each row's status (PASS, FAIL, skipped with its
reason, or reported when it has no criterion) and the console table."""
from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import bundle

TARGETS_FILE = Path(__file__).resolve().parents[1] / "data" / "calibration_targets.yaml"


@dataclass
class Check:
    """One validation figure: measured beside target with an explicit band."""

    name: str
    group: str
    measured: float
    target: float | None
    lower: float | None
    upper: float | None
    passed: bool
    source: str = ""
    detail: str = ""
    se: float | None = None
    level: str = "fidelity"  # fidelity (uses the sealed latent) | analyst (release only) | calibration
    skipped: bool = False
    #: For a check skipped as underpowered: its expected |z| at this scale and the |z| it needs.
    expected_z: float | None = None
    needed_z: float | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["status"] = status(d)
        d["section"] = section(d)
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
            elif isinstance(v, (np.floating, np.integer)):
                d[k] = v.item()
            elif isinstance(v, np.bool_):
                d[k] = bool(v)
        return d


def band(name, group, measured, target, half_width, source="", detail="", se=None, level="calibration") -> Check:
    lo, hi = target - half_width, target + half_width
    ok = bool(np.isfinite(measured) and lo <= measured <= hi)
    return Check(name, group, float(measured), float(target), float(lo), float(hi), ok, source, detail,
                 None if se is None else float(se), level)


def at_least(name, group, measured, threshold, source="", detail="", level="analyst", se=None) -> Check:
    ok = bool(np.isfinite(measured) and measured >= threshold)
    return Check(name, group, float(measured), None, float(threshold), None, ok, source, detail,
                 None if se is None else float(se), level)


def at_most(name, group, measured, threshold, source="", detail="", level="analyst", se=None) -> Check:
    ok = bool(np.isfinite(measured) and measured <= threshold)
    return Check(name, group, float(measured), None, None, float(threshold), ok, source, detail,
                 None if se is None else float(se), level)


def below(value: float, threshold: float) -> tuple[str, str]:
    """``value`` and ``threshold`` printed with as few digits as keep ``value < threshold``
    visible (4.96 and 5 print as "4.96" and "5", never as "5.0" and "5.0")."""
    for digits in range(1, 10):
        a, b = f"{value:.{digits}f}", f"{threshold:.{digits}f}"
        if float(a) < float(b) or value >= threshold:
            return _trim(a), _trim(b)
    return repr(value), repr(threshold)


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def underpowered(name: str, group: str, expected_z: float, needed_z: float, detail: str = "",
                 source: str = "power calculation from S1 equations", level: str = "analyst") -> Check:
    """An analyst check not run because its expected test statistic at this world's scale,
    ``expected_z``, is below the ``needed_z`` it needs; the reason carries both figures."""
    shown, needed = below(float(expected_z), float(needed_z))
    reason = f"underpowered at this scale: expected |z| {shown}, below the {needed} needed"
    return Check(name, group, float("nan"), None, None, None, True, source,
                 f"{reason}. {detail}".strip() if detail else reason, level=level, skipped=True,
                 expected_z=float(expected_z), needed_z=float(needed_z))


#: Report sections in order: the three levels of evidence, then the imaging checks.
SECTIONS = ("calibration", "fidelity", "analyst", "imaging")
SECTION_TITLES = {
    "calibration": "Calibration: S1.1 figures against the paper's targets",
    "fidelity": "Fidelity: each mechanism against the supplement's coefficients (uses the sealed bundle)",
    "analyst": "Analyst view: the traps as seen from the release only",
    "imaging": "Imaging: files, measurability, the paper's pixel traces and site effects",
}
STATUSES = ("PASS", "FAIL", "skipped", "reported")


def section(check: dict) -> str:
    """The report section of a check (a dict from :meth:`Check.as_dict`)."""
    return "imaging" if check["group"] == "imaging" else check["level"]


def status(check: dict) -> str:
    """PASS or FAIL against the check's band; "skipped" (its detail says why); "reported"
    for a figure with no criterion, which passes nothing and fails only when it could
    not be computed."""
    if check["skipped"]:
        return "skipped"
    if check["lower"] is None and check["upper"] is None and check["passed"]:
        return "reported"
    return "PASS" if check["passed"] else "FAIL"


def counts(checks: list[dict]) -> dict:
    """{status: number of checks} for every status, in :data:`STATUSES` order."""
    out = dict.fromkeys(STATUSES, 0)
    for c in checks:
        out[status(c)] += 1
    return out


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.4g}"
    return str(v)


def format_console(report: dict) -> str:
    """The console report: one table per section, each figure beside its target and
    band, the reason under every skipped row, and a summary line."""
    def row(c: dict) -> tuple:
        lo, hi = c["lower"], c["upper"]
        band = f"[{_fmt(lo)}, {_fmt(hi)}]" if (lo is not None or hi is not None) else "-"
        return f"{c['group']}: {c['name']}", _fmt(c["measured"]), _fmt(c["target"]), band, status(c)

    header = ("check", "measured", "target", "band", "result")
    rows = [row(c) for c in report["checks"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: tuple) -> str:
        return "  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip()

    by_section: dict = {s: [] for s in SECTIONS}
    for c, r in zip(report["checks"], rows):
        by_section.setdefault(section(c), []).append((c, r))
    out = []
    for name, members in by_section.items():
        if not members:
            continue
        n = counts([c for c, _ in members])
        out += [f"== {SECTION_TITLES.get(name, name)} ({', '.join(f'{v} {k}' for k, v in n.items() if v)})",
                line(header)]
        for c, r in members:
            out.append(line(r))
            if r[-1] == "skipped" and c["detail"]:
                out.append(f"    why skipped: {c['detail'].strip()}")
        out.append("")
    n = counts(report["checks"])
    out.append(f"{report['world_id']}: {len(report['checks'])} checks: " + ", ".join(f"{v} {k}" for k, v in n.items()))
    return "\n".join(out)


def targets() -> dict:
    with open(TARGETS_FILE) as fh:
        return yaml.safe_load(fh)


class WorldDir:
    """Lazy reader of a built world: ``<dir>/release`` and ``<dir>/sealed``."""

    def __init__(self, world_dir: str):
        self.dir = os.path.abspath(world_dir)
        self.release = os.path.join(self.dir, bundle.RELEASE)
        self.sealed = os.path.join(self.dir, bundle.SEALED)
        if not os.path.isdir(self.release):
            raise FileNotFoundError(f"{world_dir}: no {bundle.RELEASE}/ folder (is this a built world directory?)")
        # Both manifests name a format this reader knows (when they are there: validation also
        # reads worlds a test has assembled by hand).
        for folder, kind in ((self.release, bundle.RELEASE), (self.sealed, bundle.SEALED)):
            if os.path.exists(os.path.join(folder, bundle.MANIFEST)):
                bundle.read_manifest(folder, kind)

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(os.path.join(self.release, bundle.table_file(name)))

    @cached_property
    def covariates(self):
        return self.table("covariates")

    @cached_property
    def proteomics(self):
        return self.table("proteomics")

    @cached_property
    def truth(self) -> dict:
        return bundle.read_sealed(self.sealed, bundle.TRUTH)

    @cached_property
    def hidden(self) -> dict:
        return bundle.read_sealed(self.sealed, bundle.HIDDEN_MODEL)

    @cached_property
    def config(self) -> dict:
        return bundle.read_sealed(self.sealed, bundle.WORLD_CONFIG)

    @cached_property
    def latent(self) -> pd.DataFrame:
        return bundle.read_sealed(self.sealed, bundle.LATENT)

    @cached_property
    def eval_mask(self) -> np.ndarray:
        return bundle.read_sealed(self.sealed, bundle.EVAL_MASK)

    @cached_property
    def genotypes(self) -> pd.DataFrame:
        from ..genotypes_io import load_genotypes

        return load_genotypes(self.release)

    @cached_property
    def haplotypes(self) -> np.ndarray:
        """int8 [variants, samples, 2] from the genotype store."""
        import zarr

        g = zarr.open_group(os.path.join(self.release, bundle.GENOTYPE_STORE), mode="r")
        return np.asarray(g["call_genotype"][:])

    @cached_property
    def variants(self) -> pd.DataFrame:
        import zarr

        g = zarr.open_group(os.path.join(self.release, bundle.GENOTYPE_STORE), mode="r")
        contig_id = [str(x) for x in np.asarray(g["contig_id"][:]).tolist()]
        return pd.DataFrame({
            "id": [str(x) for x in np.asarray(g["variant_id"][:]).tolist()],
            "contig": np.asarray(contig_id, dtype=object)[np.asarray(g["variant_contig"][:])],
            "position": np.asarray(g["variant_position"][:]),
        })

    @cached_property
    def centre_codes(self) -> np.ndarray:
        """The assessment-centre codes of ``p54_i0`` in the order of the hidden model's
        per-centre arrays: the coding the release's data dictionary lists for the column."""
        path = os.path.join(self.release, bundle.DATA_DICTIONARY_TSV)
        with open(path, encoding="utf-8") as fh:
            header, *lines = [line.rstrip("\n").split("\t") for line in fh]
        rows = {row[0]: dict(zip(header, row)) for row in lines}
        coding = rows["p54_i0"]["coding"]
        codes = re.fullmatch(r"[^:]*:\s*(\d+(?:,\s*\d+)*)", coding)
        if codes is None:
            raise ValueError(f"{path}: p54_i0 coding {coding!r} lists no centre codes")
        return np.array([int(c) for c in codes.group(1).split(",")], dtype=np.int64)

    @property
    def n(self) -> int:
        return len(self.covariates)
