"""What the audit looks for, read from ``sealed/`` through the bundle contract: the seed
and oracle key (seed material), the roles and their identifiers, role variants, hidden
numbers, the latent severity and the evaluation mask.  A missing or unreadable sealed
file is a problem of the audit's first finding, never a silent pass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from .. import bundle
from .release_files import MOLECULE_ID


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

        try:
            bundle.check_sealed(sealed)
        except bundle.BundleError as exc:
            problems.append(str(exc))

        def read(name):
            try:
                return bundle.read_sealed(sealed, name)
            except bundle.MissingFile:
                problems.append(f"{bundle.SEALED}/{name} is missing")
            except Exception as exc:  # a corrupt sealed file must fail the audit, not crash it
                problems.append(f"{bundle.SEALED}/{name} unreadable: {exc}")
            return None

        cfg = read(bundle.WORLD_CONFIG) or {}
        truth = read(bundle.TRUTH) or {}
        oracle = read(bundle.ORACLE) or {}
        hidden = read(bundle.HIDDEN_MODEL) or {}
        latent = read(bundle.LATENT)
        mask = read(bundle.EVAL_MASK)
        world = cfg.get("world") or {}
        seed_texts = [str(world["seed"])] if world.get("seed") not in (None, "") else []
        seed = None
        if cfg.get("seed_int") is not None:
            seed = int(str(cfg["seed_int"]))
        elif seed_texts:
            t = seed_texts[0].lower()
            seed = int(t, 16) if t.startswith("0x") else int(t)
        if seed is None:
            problems.append(f"{bundle.SEALED}/{bundle.WORLD_CONFIG} holds neither world.seed nor seed_int")
        key = oracle.get("oracle_key")
        oracle_key = int(str(key), 16) if key else None
        if oracle_key is None:
            problems.append(f"{bundle.SEALED}/{bundle.ORACLE} has no oracle_key")

        roles = _roles(truth, hidden)
        proteins = list(oracle.get("proteins") or [])
        role_variants, ordinary = _role_variants(proteins, roles, truth, hidden)
        numbers = _hidden_numbers(truth, oracle, hidden)

        if latent is not None and not {"latent", "latent_late"} <= set(latent.columns):
            problems.append(f"{bundle.SEALED}/{bundle.LATENT} lacks latent / latent_late")
            latent = None
        if mask is not None and latent is not None and len(mask) != len(latent):
            problems.append(f"{bundle.SEALED}/{bundle.EVAL_MASK} has {len(mask)} entries for {len(latent)} "
                            "participants")
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
            m = MOLECULE_ID.match(pid)
            if m and m.group(1) == "PROT":
                out[f"TRANS_{m.group(2)}"] = f"transcript of {role} {pid}"
        return out


def _roles(truth: dict, hidden: dict) -> dict:
    """Protein id -> role label, from the truth and the hidden model's role list."""
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
    return roles


def _role_variants(proteins: list, roles: dict, truth: dict, hidden: dict) -> tuple[dict, list]:
    """(variant id -> role label, the ordinary proteins' cis variants)."""
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
    return role_variants, [v for v in ordinary if v not in role_variants]


def _hidden_numbers(truth: dict, oracle: dict, hidden: dict) -> dict:
    """Text forms of hidden numbers (weights, the interaction, raw SDs) -> what each is."""
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
    return numbers


def _add_number(out: dict, value, what: str) -> None:
    """Text forms of a hidden number, kept only when long enough not to occur by chance."""
    if value is None:
        return
    x = abs(float(value))
    for text in {repr(round(x, 6)), f"{x:.6f}", repr(x)}:
        digits = text.replace(".", "").lstrip("0")
        if len(digits) >= 5:
            out[text] = what
