"""Check records, the world reader shared by all checks, and the targets file."""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

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

    def as_dict(self) -> dict:
        d = asdict(self)
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


def targets() -> dict:
    with open(TARGETS_FILE) as fh:
        return yaml.safe_load(fh)


class WorldDir:
    """Lazy reader of a built world: ``<dir>/release`` and ``<dir>/sealed``."""

    def __init__(self, world_dir: str):
        self.dir = os.path.abspath(world_dir)
        self.release = os.path.join(self.dir, "release")
        self.sealed = os.path.join(self.dir, "sealed")
        if not os.path.isdir(self.release):
            raise FileNotFoundError(f"{world_dir}: no release/ folder (is this a built world directory?)")

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(os.path.join(self.release, f"{name}.parquet"))

    @cached_property
    def covariates(self):
        return self.table("covariates")

    @cached_property
    def proteomics(self):
        return self.table("proteomics")

    @cached_property
    def truth(self) -> dict:
        with open(os.path.join(self.sealed, "truth.json")) as fh:
            return json.load(fh)

    @cached_property
    def hidden(self) -> dict:
        with open(os.path.join(self.sealed, "hidden_model.json")) as fh:
            return json.load(fh)

    @cached_property
    def config(self) -> dict:
        with open(os.path.join(self.sealed, "world.yaml")) as fh:
            return yaml.safe_load(fh)

    @cached_property
    def latent(self) -> pd.DataFrame:
        return pd.read_parquet(os.path.join(self.sealed, "latent.parquet"))

    @cached_property
    def eval_mask(self) -> np.ndarray:
        return np.load(os.path.join(self.sealed, "eval_mask.npy"))

    @cached_property
    def genotypes(self) -> pd.DataFrame:
        from ..genotypes_io import load_genotypes

        return load_genotypes(self.release)

    @cached_property
    def haplotypes(self) -> np.ndarray:
        """int8 [variants, samples, 2] from the genotype store."""
        import zarr

        g = zarr.open_group(os.path.join(self.release, "genotypes.zarr"), mode="r")
        return np.asarray(g["call_genotype"][:])

    @cached_property
    def variants(self) -> pd.DataFrame:
        import zarr

        g = zarr.open_group(os.path.join(self.release, "genotypes.zarr"), mode="r")
        contig_id = [str(x) for x in np.asarray(g["contig_id"][:]).tolist()]
        return pd.DataFrame({
            "id": [str(x) for x in np.asarray(g["variant_id"][:]).tolist()],
            "contig": np.asarray(contig_id, dtype=object)[np.asarray(g["variant_contig"][:])],
            "position": np.asarray(g["variant_position"][:]),
        })

    @property
    def n(self) -> int:
        return len(self.covariates)
