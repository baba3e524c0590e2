"""What the two levels of the mechanism checks share: the world's sealed and released
variables loaded once (:class:`Ctx`), the thresholds both levels judge by, and the
fidelity band and underpowered-skip records.  ``mechanisms`` (fidelity, the entry
point) and ``analyst`` (the release-only view) both build on this module and on
nothing of each other's but ``mechanisms`` calling ``analyst``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import bundle
from .core import Check, band, underpowered
from .stats import standardise
from .targets import V

K_SE = 4.0  # fidelity tolerance in standard errors
SUPPLEMENT_MIN_WEIGHT = V.driver_weight[0]  # SPEC: |w| ~ U(0.30, 0.45)
MIN_POWER_Z = 5.0  # analyst checks run when the expected |z| at this scale reaches this
Z_SIG = 3.0  # significance threshold of analyst tests
Z_NULL = 3.5  # "no association" threshold (a null test at roughly 1 in 2,000)


def _fid(name, group, est, se, target, scale=1.0, source="", detail=""):
    """Fidelity band: estimated coefficient (times ``scale``) vs target within K_SE SE
    (with a 1e-4 floor for deterministic relations, where the SE is numerically zero)."""
    half = max(K_SE * se * abs(scale), 1e-4)
    return band(name, group, est * scale, target, half, source, detail, se=se * abs(scale), level="fidelity")


def _skip(name: str, group: str, expected_z: float, detail: str = "") -> Check:
    return underpowered(name, group, expected_z, MIN_POWER_Z, detail)


class Ctx:
    """Everything the checks share, loaded once."""

    G = "mechanisms"

    def __init__(self, world):
        self.w = world
        self.truth = world.truth
        self.hid = world.hidden
        self.roles = world.hidden["roles"]
        self.hp = bundle.read_sealed(world.sealed, bundle.HIDDEN_PARTICIPANTS)
        self.lat = world.latent
        self.L = self.lat["latent"].to_numpy()
        self.Ll = self.lat["latent_late"].to_numpy()
        self.cov = world.covariates
        self.n = len(self.cov)
        self.hard = bool(self.truth["hard"])
        self.biases = set(self.truth["biases"])
        self.sd_raw = float(self.hid["latent_raw_sd"])
        self.sd_late = float(self.hid["latent_late_raw_sd"])
        self.smoking = self.cov["p20116_i0"].to_numpy(float).clip(0, 1)
        self.sex = self.cov["p31_i0"].to_numpy(float)
        self.imaged = self.cov["imaged"].to_numpy(bool)
        r = self.roles
        self.role_ids = set(r["drivers"]) | set(r["decoys"].values()) | {
            p for p in (r.get("t4_partner"), r.get("a9_partner"), r.get("surrogate")) if p}

    def true(self, protein):
        return self.hp[f"true_{protein}"].to_numpy()

    def gcis(self, protein):
        return self.hp[f"gcis_{protein}"].to_numpy()

    def systematic(self, protein):
        """A bias equation's ordinary part other than its residual (sealed)."""
        return self.hp[f"systematic_{protein}"].to_numpy()

    def centre_index(self) -> np.ndarray:
        """Each participant's index into the hidden model's per-centre arrays."""
        codes = self.w.centre_codes
        return pd.Series(range(len(codes)), index=codes)[self.cov["p54_i0"].to_numpy()].to_numpy()

    def selection_offset(self) -> np.ndarray:
        """The centre and ancestry terms (r + s) of the T3 selection score (sealed)."""
        anc = self.cov["p21000_i0"].to_numpy().clip(1, 6) - 1
        return np.asarray(self.hid["centre_selection"])[self.centre_index()] + np.asarray(self.hid["ancestry_selection"])[anc]

    def f(self, p):
        if self.hard:
            s = V.hard_saturation
            return s * np.tanh(p / s)
        return p

    def latent_design(self, extra=(), extra_names=()):
        """Regressors of L's structural equation (drivers and covariate terms)."""
        X, names = [], []
        for prot in self.roles["drivers"]:
            X.append(self.f(self.true(prot)))
            names.append(prot)
        hid_inter = self.hid.get("interaction")
        if hid_inter:
            X.append(self.true(hid_inter["a"]) * self.true(hid_inter["b"]))
            names.append("interaction")
        X += [self.hp["z_bmi"].to_numpy(), self.smoking, self.hp["g_direct"].to_numpy(), self.hp["z_age"].to_numpy()]
        names += ["z_bmi", "smoking", "g_direct", "z_age"]
        if self.hard:
            X.append(standardise(self.hp["g_poly"].to_numpy()))
            names.append("g_poly")
        if "T7" in self.roles["decoys"]:
            X.append(self.gcis(self.roles["decoys"]["T7"]))
            names.append("g_T7")
        X += list(extra)
        names += list(extra_names)
        return X, names
