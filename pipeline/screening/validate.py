"""Validation report of a screening world: chemistry, geometry, the hidden score.

    python -m pipeline.validate <screening world dir>     (dispatches here)

Figures, each with its band where one applies (``checks``):

* drug-likeness on a random sample (RDKit descriptors of the released SMILES:
  MW, cLogP, HBD, HBA, rotatable bonds, rings, Lipinski and Veber compliance,
  Bemis-Murcko scaffold diversity) beside the rule-of-five / Veber ranges that
  purchasable screening libraries are filtered to;
* geometry on a sample of the SDF (RDKit sanitisation; every bond length and
  angle against MMFF94's reference values; the closest pair of heavy atoms
  more than three bonds apart; SDF and SMILES the same molecule; Open Babel
  reads the shard when it is installed);
* the score: distribution, the hidden term's realised share, the top-K's
  threshold; enrichment of the top-K by each part of the score; pose
  sensitivity: the rank correlation between the scores (whole, and its
  structural part, which the hidden per-molecule term does not dilute) of the
  released poses and of the same conformations moved by a random rotation about
  their centroid and a 2 Å random shift.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .. import bundle

SAMPLE = 2000
GEOMETRY_SAMPLE = 300
BOND_TOLERANCE = 0.15  # Å, largest |length - MMFF94 r0| allowed
ANGLE_TOLERANCE_99 = 15.0  # degrees, 99th percentile of |angle - MMFF94 theta0|
CLASH = 2.5  # Å: heavy atoms more than three bonds apart closer than this clash (ETKDG+MMFF poses of the same molecules: >= 2.58)
POSE_SPEARMAN_MAX = 0.8  # a pose-sensitive score keeps less than this rank correlation under a random rigid motion
REPOSE_SHIFT = 2.0


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def chemistry(smiles: list) -> dict:
    from rdkit import Chem
    from rdkit.Chem import Crippen, Descriptors, Lipinski, rdMolDescriptors
    from rdkit.Chem.Scaffolds import MurckoScaffold

    rows = []
    scaffolds = set()
    failed = 0
    for smi in smiles:
        mol = Chem.MolFromSmiles(smi)
        if mol is None:
            failed += 1
            continue
        rows.append({"mw": Descriptors.MolWt(mol), "clogp": Crippen.MolLogP(mol), "hbd": Lipinski.NumHDonors(mol),
                     "hba": Lipinski.NumHAcceptors(mol), "rotatable": rdMolDescriptors.CalcNumRotatableBonds(mol),
                     "rings": rdMolDescriptors.CalcNumRings(mol), "heavy_atoms": mol.GetNumHeavyAtoms()})
        scaffolds.add(MurckoScaffold.MurckoScaffoldSmiles(mol=mol))
    df = pd.DataFrame(rows)
    lipinski = ((df.mw <= 500) & (df.clogp <= 5) & (df.hbd <= 5) & (df.hba <= 10))
    veber = (df.rotatable <= 10)
    summary = {k: {"mean": float(df[k].mean()), "p05": float(df[k].quantile(0.05)), "median": float(df[k].median()),
                   "p95": float(df[k].quantile(0.95))} for k in df.columns}
    return {"n": len(smiles), "unparsed": failed, "descriptors": summary,
            "lipinski_fraction": float(lipinski.mean()), "veber_fraction": float(veber.mean()),
            "scaffold_fraction": len(scaffolds) / max(1, len(rows)),
            "reference": "rule of five (MW <= 500, cLogP <= 5, HBD <= 5, HBA <= 10) and Veber (rotatable bonds <= 10): "
                         "the filters purchasable screening libraries are built to"}


def geometry(sdf_path: Path, smiles_by_id: dict, limit: int = GEOMETRY_SAMPLE) -> dict:
    from rdkit import Chem, RDLogger
    from rdkit.Chem import AllChem

    RDLogger.DisableLog("rdApp.*")
    bond_dev, angle_dev, closest = [], [], []
    read = sanitised = same = 0
    with gzip.open(sdf_path, "rb") as handle:
        supplier = Chem.ForwardSDMolSupplier(handle, sanitize=False, removeHs=False)
        for mol in supplier:
            if read >= limit:
                break
            read += 1
            if mol is None:
                continue
            try:
                Chem.SanitizeMol(mol)
            except Exception:
                continue
            sanitised += 1
            ref = Chem.MolFromSmiles(smiles_by_id[mol.GetProp("_Name")])
            same += int(Chem.MolToSmiles(mol, isomericSmiles=False) == Chem.MolToSmiles(ref, isomericSmiles=False))
            mh = Chem.AddHs(mol, addCoords=True)
            props = AllChem.MMFFGetMoleculeProperties(mh)
            pos = mh.GetConformer().GetPositions()
            for b in mol.GetBonds():
                i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
                bond_dev.append(abs(np.linalg.norm(pos[i] - pos[j]) - props.GetMMFFBondStretchParams(mh, i, j)[2]))
            for atom in mol.GetAtoms():
                nb = [x.GetIdx() for x in atom.GetNeighbors()]
                c = atom.GetIdx()
                for x in range(len(nb)):
                    for y in range(x + 1, len(nb)):
                        par = props.GetMMFFAngleBendParams(mh, nb[x], c, nb[y])
                        if par is None:
                            continue
                        v1, v2 = pos[nb[x]] - pos[c], pos[nb[y]] - pos[c]
                        cos = np.dot(v1, v2) / (np.linalg.norm(v1) * np.linalg.norm(v2))
                        angle_dev.append(abs(np.degrees(np.arccos(np.clip(cos, -1, 1))) - par[2]))
            topo = Chem.GetDistanceMatrix(mol)
            xyz = pos[:mol.GetNumAtoms()]
            dist = np.linalg.norm(xyz[:, None] - xyz[None], axis=2)
            far = topo >= 4
            closest.append(float(dist[far].min()) if far.any() else float("inf"))
    bond_dev, angle_dev, closest = np.array(bond_dev), np.array(angle_dev), np.array(closest)
    out = {"read": read, "sanitised": sanitised, "same_as_smiles": same,
           "bond_dev_max": float(bond_dev.max()), "bond_dev_p99": float(np.percentile(bond_dev, 99)),
           "angle_dev_p99": float(np.percentile(angle_dev, 99)), "angle_dev_max": float(angle_dev.max()),
           "closest_nonbonded_min": float(closest.min()), "clashing_molecules": int((closest < CLASH).sum())}
    try:
        from openbabel import pybel

        n_ob = sum(1 for _ in pybel.readfile("sdf", str(sdf_path)))
        out["openbabel_read"] = n_ob
    except ImportError:
        out["openbabel_read"] = None
    return out


def pose_sensitivity(world: Path, sample_rows: np.ndarray, scores: pd.DataFrame) -> dict:
    """Scores of the sampled conformations as released and after a random rigid motion."""
    from kernels.screening import repose

    from .pocket import pocket_score, softplus
    from .writers import COORD_DECIMALS

    pockets = json.loads((world / "sealed" / "pockets.json").read_text())
    oracle = json.loads((world / "sealed" / "oracle.json").read_text())
    import yaml

    cfg = yaml.safe_load((world / "sealed" / "world.yaml").read_text())["world"]
    sc = cfg["score"]
    table = pq.read_table(world / "release" / "library.parquet", columns=["smiles", "coordinates"]).take(sample_rows)
    coords = table.column("coordinates").combine_chunks()
    offsets = np.asarray(coords.offsets, dtype=np.int64)
    xyz = np.asarray(coords.values.values, dtype=np.float64).reshape(-1, 3)
    bits = _bits_of(table.column("smiles").to_pylist())
    moved = np.empty_like(xyz)
    repose(np.uint64(0x5EED), sample_rows.astype(np.int64), xyz, offsets, REPOSE_SHIFT, moved)
    moved = np.round(moved, COORD_DECIMALS)

    def structural(pose):
        parts = {"target": pocket_score(pockets["target"], pose, offsets, bits)}
        for k, p in enumerate(pockets["offtargets"]):
            parts[f"offtarget_{k + 1}"] = pocket_score(p, pose, offsets, bits)
        z = lambda name, x: (x - scores[name].mean()) / scores[name].std(ddof=0)  # noqa: E731  the library's own standardisation
        off = sum(softplus(z(f"offtarget_{k + 1}", parts[f"offtarget_{k + 1}"]) - sc["offtarget_threshold"])
                  for k in range(len(pockets["offtargets"])))
        prop = scores["property_penalty"].to_numpy()[sample_rows]
        t = z("target", parts["target"]) - sc["offtarget_weight"] * off - sc["property_weight"] * prop
        return t, parts["target"]

    t_rel, target_rel = structural(xyz)
    t_mov, target_mov = structural(moved)
    h = float(sc["hidden_share"])
    hidden = scores["hidden"].to_numpy()[sample_rows]
    s_rel = scores["score"].to_numpy()[sample_rows]
    # the moved score with the released score's scale (structural part rescaled as in the library)
    struct_sd = np.std(t_rel)
    s_mov = np.sqrt(1 - h) * (t_mov - np.mean(t_rel)) / struct_sd + np.sqrt(h) * hidden
    return {"n": int(len(sample_rows)), "shift_A": REPOSE_SHIFT,
            "spearman_score": _spearman(s_rel, s_mov), "spearman_structural": _spearman(t_rel, t_mov),
            "spearman_target": _spearman(target_rel, target_mov),
            "recomputed_vs_sealed": _spearman(s_rel, np.sqrt(1 - h) * (t_rel - np.mean(t_rel)) / struct_sd + np.sqrt(h) * hidden),
            "mean_target_released": float(target_rel.mean()), "mean_target_moved": float(target_mov.mean()),
            "top_k": int(oracle["top_k"])}


def _bits_of(smiles: list) -> np.ndarray:
    """Feature bits of the atoms (same SMARTS typing as the build) by re-typing the released SMILES."""
    from rdkit import Chem

    from .fragments import feature_bits

    return np.concatenate([feature_bits(Chem.MolFromSmiles(s)) for s in smiles]).astype(np.uint8)


def score_figures(scores: pd.DataFrame, top_k: int, hidden_share: float) -> dict:
    s = scores["score"].to_numpy()
    top = np.zeros(len(s), dtype=bool)
    top[np.argsort(-s, kind="stable")[:top_k]] = True

    def enrichment(values: np.ndarray, fraction: float, high: bool = True) -> float:
        k = max(1, int(round(fraction * len(values))))
        sel = np.argsort(-values if high else values, kind="stable")[:k]
        return float(top[sel].mean() / top.mean())

    realised = float(np.var(np.sqrt(hidden_share) * scores["hidden"].to_numpy()) / np.var(s))
    return {
        "mean": float(s.mean()), "sd": float(s.std()), "quantiles": {q: float(np.quantile(s, float(q))) for q in ("0.01", "0.5", "0.9", "0.99", "0.999")},
        "top_k": top_k, "threshold": float(np.sort(s)[-top_k]),
        "hidden_share_configured": hidden_share, "hidden_share_realised": realised,
        "enrichment_top1pct": {"target": enrichment(scores["target"].to_numpy(), 0.01),
                               "low_offtarget_penalty": enrichment(scores["offtarget_penalty"].to_numpy(), 0.01, high=False),
                               "low_property_penalty": enrichment(scores["property_penalty"].to_numpy(), 0.01, high=False),
                               "structural": enrichment(scores["structural"].to_numpy(), 0.01)},
        "enrichment_top10pct": {"target": enrichment(scores["target"].to_numpy(), 0.10),
                                "structural": enrichment(scores["structural"].to_numpy(), 0.10)},
        "spearman_with": {c: _spearman(s, scores[c]) for c in ("target", "offtarget_penalty", "property_penalty", "heavy_atoms", "mw", "logp")},
    }


def validate(world_dir, sample: int = SAMPLE, geometry_sample: int = GEOMETRY_SAMPLE) -> dict:
    world = Path(world_dir)
    oracle = json.loads((world / "sealed" / "oracle.json").read_text())
    import yaml

    cfg = yaml.safe_load((world / "sealed" / "world.yaml").read_text())["world"]
    scores = pq.read_table(world / "sealed" / "scores.parquet").to_pandas()
    n = len(scores)
    rng = np.random.default_rng(20260)
    rows = np.sort(rng.choice(n, min(sample, n), replace=False))
    lib = pq.read_table(world / "release" / "library.parquet", columns=["id", "smiles"])
    smiles = lib.column("smiles").to_pylist()
    ids = lib.column("id").to_pylist()
    chem = chemistry([smiles[i] for i in rows])
    first_shard = sorted((world / "release" / "sdf").glob("*.sdf.gz"))[0]
    geo = geometry(first_shard, dict(zip(ids, smiles)), geometry_sample)
    figures = score_figures(scores, int(oracle["top_k"]), float(cfg["score"]["hidden_share"]))
    pose = pose_sensitivity(world, rows, scores)
    checks = [
        ("every sampled SMILES parses", chem["unparsed"] == 0, chem["unparsed"]),
        ("rule-of-five compliance >= 0.8", chem["lipinski_fraction"] >= 0.8, chem["lipinski_fraction"]),
        ("distinct Murcko scaffolds >= 0.3 of the sample", chem["scaffold_fraction"] >= 0.3, chem["scaffold_fraction"]),
        ("every SDF molecule sanitises", geo["sanitised"] == geo["read"], f"{geo['sanitised']}/{geo['read']}"),
        ("SDF and SMILES are the same molecules", geo["same_as_smiles"] == geo["sanitised"], f"{geo['same_as_smiles']}/{geo['sanitised']}"),
        (f"bond lengths within {BOND_TOLERANCE} Å of MMFF94", geo["bond_dev_max"] <= BOND_TOLERANCE, geo["bond_dev_max"]),
        (f"99 % of angles within {ANGLE_TOLERANCE_99} deg of MMFF94", geo["angle_dev_p99"] <= ANGLE_TOLERANCE_99, geo["angle_dev_p99"]),
        (f"no heavy-atom clash (< {CLASH} Å, > 3 bonds apart)", geo["clashing_molecules"] == 0, geo["closest_nonbonded_min"]),
        (f"pose-sensitive: Spearman(released, re-posed structural score) < {POSE_SPEARMAN_MAX}",
         pose["spearman_structural"] < POSE_SPEARMAN_MAX, pose["spearman_structural"]),
        ("the validation recomputes the sealed score", pose["recomputed_vs_sealed"] > 0.999, pose["recomputed_vs_sealed"]),
    ]
    return {"world_id": oracle["world_id"], "kind": "screening", "conformations": n, "chemistry": chem, "geometry": geo,
            "score": figures, "pose_sensitivity": pose,
            "checks": [{"check": c, "ok": bool(ok), "value": v} for c, ok, v in checks],
            "ok": all(bool(ok) for _, ok, _ in checks)}


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m pipeline.validate <screening world dir>")
        return 2
    report = validate(argv[0])
    # sealed-grade (the hidden score's figures): inside sealed/, outside its manifest (pipeline.bundle.SEALED_REPORTS)
    out = Path(bundle.reports_dir(argv[0]))
    out.mkdir(exist_ok=True)
    (out / "validation.json").write_text(json.dumps(report, indent=2, default=float))
    for c in report["checks"]:
        print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['value']}")
    s = report["score"]
    print(f"score: threshold {s['threshold']:.3f} for top-{s['top_k']}; hidden share {s['hidden_share_realised']:.3f}; "
          f"enrichment of the top-K in the top 1 % by target {s['enrichment_top1pct']['target']:.1f}x")
    print(f"report: {out / 'validation.json'} (sealed-grade: it quotes the hidden score)")
    return 0 if report["ok"] else 1
