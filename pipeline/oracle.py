"""The sealed experiment oracle (Supplement S1.5) and the harness's budget ledger.

An experiment clamps one protein's standardized abundance to -1.645 (about its
5th percentile) in a simulated cohort and reports four readout deltas,
intervention minus paired control::

    L        = sum_j w_j f(P_j) [+ coef * P_a * P_b]  + r        r ~ N(0, latent_residual_sd^2)
    e        ~ N(0, morphology_residual_sd^2)
    cavity_r = 10 + 1.9 L - 0.45 b + e
    wall_t   = 4.6 - 0.55 L + 0.12 b + 0.5 e
    ef       = clip(0.62 - 0.09 L + 0.025 b + 0.08 e, 0.20, 0.78)
    surv5y   = exp(-5 * 0.006 * exp(0.70 L + 0.40 b))

f is the identity, or ``saturation * tanh(P / saturation)`` in hard worlds, where
the interaction term also applies (on the raw abundances).  b is the T8
surrogate's abundance when the surrogate is the queried protein and 0 otherwise.
Knockdown uses the late weights and n = 800 with no assay noise; cell
perturbation uses the baseline weights and n = 120, and each rounded delta gets
N(0, (0.45|delta| + 0.0225)^2) noise and is rounded again.

Draw protocol (a contract: tests re-derive it independently, and changing it
changes every world's experiment results).  The generator is
``seeds.stream(int(oracle_key, 16), "oracle/" + kind, protein_index)`` and draws,
in this order::

    r = latent_residual_sd    * standard_normal(n)
    e = morphology_residual_sd * standard_normal(n)
    z = standard_normal(n)                       # the queried protein's control abundance
    V = standard_normal((n, m))                  # the model proteins, see OracleSpec.model_proteins
    noise = standard_normal(4)                   # cell perturbation only: cavity_r, wall_t, ef, surv5y

If the queried protein is a model protein its column of V is replaced by z in the
control arm and by -1.645 in the intervention arm; everything else is shared by
both arms, so an experiment on a protein outside the model returns exactly zero
deltas (the paper's behaviour).

Why the kind is part of the stream name: the paper seeded both actions by
``world seed + 777 + protein index``, so a cell perturbation and a knockdown of
the same protein re-used one simulated cohort.  They are different experiments
(a dish and an animal cohort) bought separately; sharing the draws would make the
two results' sampling errors correlated, so buying both would tell an agent less
than two experiments should.  Both are still deterministic per world, kind and
protein.  The four noise draws are taken even when surv5y is withheld, so the
paper_compat switch changes nothing but the surv5y field.

``realism`` (off by default; it never touches a draw made without it) replaces
the paper's perfectly specific reagents with imperfect ones:

* off-target effect: every protein has a fixed shift of L in the intervention
  arm, ``OFF_TARGET_SD * standard_normal()`` from stream ``"oracle/off_target"``
  (block = protein index).  It is a property of the reagent's biology, so both
  kinds see the same shift; with SD 0.03 a null protein's knockdown moves
  cavity_r by about 0.06, against at least ~0.9 for a driver with |w| >= 0.30.
* knockdown assay noise: each rounded delta gets
  ``N(0, (0.05|delta| + KNOCKDOWN_NOISE_FLOOR[readout])^2)`` from stream
  ``"oracle/assay/knockdown"`` (block = protein index) and is rounded again.  The
  floors are about 1 % of each readout's change per unit of L, so they are on
  the readouts' own scales rather than the paper's single 0.0225 floor.
  Cell perturbation already carries the paper's assay noise and gets nothing
  more.
Both apply to every protein, causal or not: a reagent does not know whether its
target is a driver.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import numpy as np

from . import bundle, seeds, streams
from .ledger import JsonlLedger, LedgerError, read_rows
from .paths import SCHEMA_DIR

ORACLE_SCHEMA = SCHEMA_DIR / "oracle.schema.json"
EXPERIMENT_SCHEMA = SCHEMA_DIR / "experiment.schema.json"

KINDS = ("cell_perturbation", "knockdown")
READOUTS = ("cavity_r", "wall_t", "ef", "surv5y")
CLAMP = -1.645
# Simulated turnaround from S1.5; reported in the ledger, never enforced here.
LATENCY_DAYS = {"cell_perturbation": 90, "knockdown": 180}

# Readout equations (S1.5): fixed generic constants, not world parameters.
CAVITY = (10.0, 1.9, -0.45, 1.0)  # intercept, L, b, e
WALL = (4.6, -0.55, 0.12, 0.5)
EF = (0.62, -0.09, 0.025, 0.08)
EF_RANGE = (0.20, 0.78)
SURV_YEARS = 5.0
SURV_BASE_HAZARD = 0.006
SURV_L = 0.70
SURV_B = 0.40

CELL_NOISE_REL = 0.45
CELL_NOISE_FLOOR = 0.0225

OFF_TARGET_SD = 0.03
KNOCKDOWN_NOISE_REL = 0.05
KNOCKDOWN_NOISE_FLOOR = {"cavity_r": 0.02, "wall_t": 0.006, "ef": 0.001, "surv5y": 0.0003}


class OracleError(ValueError):
    """oracle.json is missing or does not describe a usable oracle."""


@dataclass(frozen=True)
class Driver:
    protein: str
    index: int
    weight: float
    weight_late: float


@dataclass(frozen=True)
class Interaction:
    a: str
    b: str
    coef: float


@dataclass(frozen=True)
class OracleSpec:
    world_id: str
    key: int = field(repr=False)  # secret: kept out of reprs and tracebacks' locals summaries
    hard: bool
    latent_residual_sd: float
    morphology_residual_sd: float
    saturation: float
    interaction: Optional[Interaction]
    drivers: tuple[Driver, ...]
    surrogate: Optional[str]
    proteins: tuple[str, ...]
    costs: Mapping[str, float]
    n: Mapping[str, int]
    paper_compat: bool
    realism: bool
    index: Mapping[str, int] = field(repr=False)

    @property
    def model_proteins(self) -> tuple[str, ...]:
        """Proteins whose abundance enters L: drivers in listed order, then interaction members not already listed."""
        out = [d.protein for d in self.drivers]
        if self.hard and self.interaction is not None:
            for p in (self.interaction.a, self.interaction.b):
                if p not in out:
                    out.append(p)
        return tuple(out)

    @classmethod
    def from_dict(cls, data: Any) -> "OracleSpec":
        if isinstance(data, dict) and "format_version" in data:
            try:
                bundle.check_format_version(data["format_version"], bundle.ORACLE, bundle.SEALED)
            except bundle.UnknownFormat as exc:
                raise OracleError(str(exc)) from None
        _validate_schema(data)
        proteins = tuple(data["proteins"])
        index = {p: i for i, p in enumerate(proteins)}
        if len(index) != len(proteins):
            raise OracleError("oracle.json: proteins lists an identifier twice")

        def idx(p: str, where: str, given: Optional[int] = None) -> int:
            if p not in index:
                raise OracleError(f"oracle.json: {where} {p!r} is not in proteins")
            if given is not None and given != index[p]:
                raise OracleError(f"oracle.json: {where} {p!r} has index {given} but is at position {index[p]} of proteins")
            return index[p]

        drivers = []
        for k, d in enumerate(data["drivers"]):
            idx(d["protein"], f"drivers[{k}]", d["index"])
            drivers.append(Driver(d["protein"], int(d["index"]), float(d["weight"]), float(d["weight_late"])))
        if len({d.protein for d in drivers}) != len(drivers):
            raise OracleError("oracle.json: drivers lists a protein twice")
        sur = data["surrogate"]
        if sur is not None:
            idx(sur["protein"], "surrogate", sur["index"])
        inter = data["interaction"]
        if inter is not None:
            idx(inter["a"], "interaction.a")
            idx(inter["b"], "interaction.b")
            if inter["a"] == inter["b"]:
                raise OracleError("oracle.json: interaction.a and interaction.b are the same protein")
        return cls(
            world_id=data["world_id"],
            key=int(data["oracle_key"], 16),
            hard=bool(data["hard"]),
            latent_residual_sd=float(data["latent_residual_sd"]),
            morphology_residual_sd=float(data["morphology_residual_sd"]),
            saturation=float(data["saturation"]),
            interaction=None if inter is None else Interaction(inter["a"], inter["b"], float(inter["coef"])),
            drivers=tuple(drivers),
            surrogate=None if sur is None else sur["protein"],
            proteins=proteins,
            costs={k: float(data["costs"][k]) for k in KINDS},
            n={k: int(data["n"][k]) for k in KINDS},
            paper_compat=bool(data["paper_compat"]),
            realism=bool(data["realism"]),
            index=index,
        )


def _load_schema(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise OracleError(f"{path}: JSON Schema missing; the oracle needs the package's schemas/ folder") from None


def _validate_schema(data: Any) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(_load_schema(ORACLE_SCHEMA))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        # The message can quote the oracle key; never echo it.
        msg = err.message if "oracle_key" not in where else "is not 0x followed by at least 32 hex digits"
        raise OracleError(f"oracle.json: {where}: {msg}")


def load_oracle(sealed_dir: Union[str, os.PathLike]) -> OracleSpec:
    """Read and validate ``<sealed_dir>/oracle.json`` (and the sealed manifest's format
    version, when the folder has a manifest: the oracle also runs on hand-made folders)."""
    path = bundle.sealed_path(sealed_dir, bundle.ORACLE)
    try:
        bundle.check_sealed(sealed_dir, require_manifest=False)
    except bundle.BundleError as exc:
        raise OracleError(str(exc)) from None
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise OracleError(f"{path}: not found; --sealed must be a world's {bundle.SEALED}/ folder") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OracleError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return OracleSpec.from_dict(data)


# --------------------------------------------------------------------------- experiments


def refused(kind: Any, protein: Any, reason: str) -> dict:
    return {
        "action": kind if isinstance(kind, str) else str(kind),
        "status": "refused",
        "protein": protein if isinstance(protein, str) else str(protein),
        "delta": None,
        "reason": reason,
    }


def _short(value: Any) -> str:
    # Agents choose these strings; keep a runaway one from bloating the ledger.
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_request(spec: OracleSpec, kind: Any, protein: Any) -> Optional[str]:
    """The reason a request is malformed, or None."""
    if not isinstance(kind, str) or kind not in KINDS:
        return f"unknown experiment kind {_short(kind)}; valid: {', '.join(KINDS)}"
    if not isinstance(protein, str) or protein not in spec.index:
        return f"unknown protein {_short(protein)}; valid: a protein identifier of this world ({spec.proteins[0]} to {spec.proteins[-1]})"
    return None


def _readouts(L: np.ndarray, b: np.ndarray, e: np.ndarray) -> dict:
    ef = np.clip(EF[0] + EF[1] * L + EF[2] * b + EF[3] * e, *EF_RANGE)
    hazard = SURV_BASE_HAZARD * np.exp(SURV_L * L + SURV_B * b)
    return {
        "cavity_r": float(np.mean(CAVITY[0] + CAVITY[1] * L + CAVITY[2] * b + CAVITY[3] * e)),
        "wall_t": float(np.mean(WALL[0] + WALL[1] * L + WALL[2] * b + WALL[3] * e)),
        "ef": float(np.mean(ef)),
        "surv5y": float(np.mean(np.exp(-SURV_YEARS * hazard))),
    }


def _round4(x: float) -> float:
    # Adding 0.0 turns a rounded -0.0 into 0.0, so a null result prints as 0.0.
    return round(float(x), 4) + 0.0


def _cohort_means(spec: OracleSpec, kind: str, protein: str, realism: bool) -> tuple[dict, dict, np.random.Generator]:
    q = spec.index[protein]
    n = spec.n[kind]
    g = seeds.stream(spec.key, streams.ORACLE_ASSAY.format(kind=kind), q)
    r = spec.latent_residual_sd * g.standard_normal(n)
    e = spec.morphology_residual_sd * g.standard_normal(n)
    z = g.standard_normal(n)
    model = spec.model_proteins
    V = g.standard_normal((n, len(model)))
    col = {p: j for j, p in enumerate(model)}
    weights = {d.protein: (d.weight if kind == "cell_perturbation" else d.weight_late) for d in spec.drivers}

    def f(x: np.ndarray) -> np.ndarray:
        return spec.saturation * np.tanh(x / spec.saturation) if spec.hard else x

    def latent(clamped: Optional[float]) -> np.ndarray:
        P = V.copy()
        if protein in col:
            P[:, col[protein]] = z if clamped is None else clamped
        L = r.copy()
        for p, w in weights.items():
            L += w * f(P[:, col[p]])
        if spec.hard and spec.interaction is not None:
            it = spec.interaction
            L += it.coef * P[:, col[it.a]] * P[:, col[it.b]]
        return L

    zero = np.zeros(n)
    b_ctrl, b_int = (z, np.full(n, CLAMP)) if protein == spec.surrogate else (zero, zero)
    L_ctrl, L_int = latent(None), latent(CLAMP)
    if realism:
        off = OFF_TARGET_SD * seeds.stream(spec.key, streams.ORACLE_OFF_TARGET, q).standard_normal()
        L_int = L_int + off
    return _readouts(L_ctrl, b_ctrl, e), _readouts(L_int, b_int, e), g


def run_experiment(
    spec: OracleSpec,
    kind: Any,
    protein: Any,
    *,
    paper_compat: Optional[bool] = None,
    realism: Optional[bool] = None,
) -> dict:
    """The S1.5 payload for one experiment; malformed requests give a refused payload.

    ``paper_compat`` and ``realism`` default to the values recorded in oracle.json.
    """
    reason = check_request(spec, kind, protein)
    if reason is not None:
        return refused(kind, protein, reason)
    paper_compat = spec.paper_compat if paper_compat is None else bool(paper_compat)
    realism = spec.realism if realism is None else bool(realism)

    ctrl, inter, g = _cohort_means(spec, kind, protein, realism)
    delta = {k: _round4(inter[k] - ctrl[k]) for k in READOUTS}
    if kind == "cell_perturbation":
        noise = g.standard_normal(len(READOUTS))
        delta = {k: _round4(delta[k] + (CELL_NOISE_REL * abs(delta[k]) + CELL_NOISE_FLOOR) * u) for k, u in zip(READOUTS, noise)}
    elif realism:
        noise = seeds.stream(spec.key, streams.ORACLE_KNOCKDOWN_ASSAY, spec.index[protein]).standard_normal(len(READOUTS))
        delta = {
            k: _round4(delta[k] + (KNOCKDOWN_NOISE_REL * abs(delta[k]) + KNOCKDOWN_NOISE_FLOOR[k]) * u)
            for k, u in zip(READOUTS, noise)
        }
    if kind == "cell_perturbation" and not paper_compat:
        # S1.5's prompt promised no survival readout from a dish; the paper's code returned one anyway.
        delta["surv5y"] = None
    return {"action": kind, "status": "ok", "protein": protein, "delta": delta}


# --------------------------------------------------------------------------- ledger


class Ledger:
    """Budget accounting for one episode, kept in a JSON-Lines file.

    Every request, delivered or refused, appends one row
    ``{"turn", "kind", "protein", "status", "cost", "reason"?, "latency_days"?}``
    and the row is written (and flushed to disk) before the payload is returned,
    so the file is the record the scorer trusts.  Constructing a Ledger on an
    existing file resumes it: the spend and the delivered (kind, protein) pairs
    are replayed from the rows.  A final row cut short by a crash is dropped,
    since its payload was never handed out.

    ``spec`` is an OracleSpec or a sealed folder.  ``paper_compat`` and
    ``realism`` are fixed for the ledger's lifetime (default: oracle.json's).
    """

    def __init__(
        self,
        budget: float,
        path: Union[str, os.PathLike],
        spec: Union[OracleSpec, str, os.PathLike],
        *,
        paper_compat: Optional[bool] = None,
        realism: Optional[bool] = None,
    ):
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget < 0:
            raise ValueError(f"budget: {budget!r} is invalid; valid: a finite number of dollars >= 0")
        self.budget = float(budget)
        self.path = Path(path)
        self.spec = spec if isinstance(spec, OracleSpec) else load_oracle(spec)
        self.paper_compat = self.spec.paper_compat if paper_compat is None else bool(paper_compat)
        self.realism = self.spec.realism if realism is None else bool(realism)
        self.rows: list[dict] = []
        self.delivered: dict[tuple[str, str], dict] = {}
        self.spent = 0.0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._replay()

    def _replay(self) -> None:
        self.file = JsonlLedger(self.path, sort_keys=True)
        for lineno, row in self.file.numbered:
            try:
                status, cost = row["status"], float(row["cost"])
                key = (row["kind"], row["protein"])
            except (ValueError, KeyError, TypeError):
                raise LedgerError(f"{self.path}:{lineno}: not a ledger row; refusing to resume from it") from None
            self.rows.append(row)
            if status == "delivered":
                self.delivered[key] = row
                self.spent += cost

    @property
    def remaining(self) -> float:
        return self.budget - self.spent

    def _append(self, row: dict) -> None:
        self.file.append(row)
        self.rows.append(row)

    def _refuse(self, turn: Any, kind: Any, protein: Any, reason: str) -> dict:
        payload = refused(kind, protein, reason)
        self._append(
            {"turn": turn, "kind": payload["action"], "protein": payload["protein"], "status": "refused", "cost": 0, "reason": reason}
        )
        return payload

    def refuse_malformed(self, turn: Any, reason: str) -> None:
        """Record a request refused at intake (unparseable, oversize, wrong types): it never reached the oracle."""
        self._append({"turn": turn, "kind": None, "protein": None, "status": "refused", "cost": 0, "reason": reason})

    def request(self, kind: Any, protein: Any, turn: Any) -> dict:
        """Charge for and run one experiment, or refuse it; never raises for a bad request."""
        reason = check_request(self.spec, kind, protein)
        if reason is not None:
            return self._refuse(turn, kind, protein, reason)
        prior = self.delivered.get((kind, protein))
        if prior is not None:
            return self._refuse(
                turn, kind, protein,
                f"duplicate: {kind} of {protein} was delivered at turn {prior['turn']}; the original result remains available",
            )
        cost = self.spec.costs[kind]
        if cost > self.remaining:
            return self._refuse(
                turn, kind, protein,
                f"over budget: {kind} costs ${cost:,.0f} but ${self.remaining:,.0f} remains",
            )
        payload = run_experiment(self.spec, kind, protein, paper_compat=self.paper_compat, realism=self.realism)
        row = {
            "turn": turn, "kind": kind, "protein": protein, "status": "delivered",
            "cost": int(cost) if float(cost).is_integer() else cost, "latency_days": LATENCY_DAYS[kind],
        }
        self._append(row)
        self.delivered[(kind, protein)] = row
        self.spent += cost
        return payload

    def result(self, kind: str, protein: str) -> Optional[dict]:
        """The payload of an experiment already delivered (recomputed; the oracle is deterministic), else None."""
        if (kind, protein) not in self.delivered:
            return None
        return run_experiment(self.spec, kind, protein, paper_compat=self.paper_compat, realism=self.realism)


def read_ledger(path: Union[str, os.PathLike]) -> list[dict]:
    """The rows of a ledger file, for the scorer (which trusts only this record of deliveries).

    An unterminated final fragment is ignored, as a resuming Ledger would: it is
    a row cut short by a crash, whose payload was never handed out.
    """
    return read_rows(path)
