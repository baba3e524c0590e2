"""Agent-side code of the active-learning reference strategies.

This file is never imported by the harness: the ``invariant_al`` and
``pose_al`` agents emit its source in their first program, which saves it as
``WORK/screening_al.py``; later programs import it from WORK (the prelude puts
WORK on ``sys.path``).  It uses only what agent code has: the release, the
label oracle (through the prelude's functions), numpy, pyarrow, RDKit and
LightGBM.  Memory: fingerprints and grid occupancies are kept as sparse CSR
(indices of set features per conformation), never as a dense n x features matrix.

Specification (fixed before calibration; docs/screening.md, "Reference strategies"):

* features ``invariant``: Morgan fingerprint, radius 2, 2,048 folded bits (RDKit),
  from the SMILES alone: invariant to rotation and translation.
* features ``pose``: the same bits plus atom-type occupancy of a 1.5 Å grid over
  the box [-12, 12)^3 Å of the pocket frame (16^3 cells x 6 atom types: aromatic C,
  aliphatic C, N with H, other N, O, S or halogen; count of atoms per cell), from the
  released coordinates: not invariant to rotation or translation.
* learner: LightGBM regression (one thread, 400 trees, 63 leaves, learning rate 0.05, feature
  fraction 0.5, bagging 0.8, min 20 per leaf, seed 0) on every label so far.
* ten rounds of B/10 labels: round 1 at random, rounds 2-10 90 % the unlabelled
  conformations with the highest prediction and 10 % at random among the rest.
* submissions: (1) the S best labelled conformations, whose overlap o1 reveals
  that exactly the o1 best labelled are in the top-K and so where the top-K's
  threshold lies; (2) those o1 plus the S - o1 unlabelled with the highest
  regression prediction; (3) those o1 plus the S - o1 unlabelled most likely
  above the threshold by a LightGBM classifier trained on "label >= threshold"
  (the threshold taken midway between the o1-th and (o1+1)-th best labels).
"""
from __future__ import annotations

import os

import numpy as np

GRID_LO, GRID_STEP, GRID_N = -12.0, 1.5, 16
ATOM_TYPES = 6
FP_BITS = 2048
PARAMS = {"objective": "regression", "num_leaves": 63, "learning_rate": 0.05, "feature_fraction": 0.5,
          "bagging_fraction": 0.8, "bagging_freq": 1, "min_data_in_leaf": 20, "seed": 0, "verbose": -1,
          "num_threads": 1, "deterministic": True, "force_row_wise": True}
N_TREES = 400
ROUNDS = 10
EXPLORE = 0.10


def _atom_type(atom) -> int:
    z = atom.GetAtomicNum()
    if z == 6:
        return 0 if atom.GetIsAromatic() else 1
    if z == 7:
        return 2 if atom.GetTotalNumHs() > 0 else 3
    if z == 8:
        return 4
    return 5


def featurize(release: str, work: str, kind: str) -> None:
    """Compute the features of every conformation once and cache them in WORK/features_<kind>.npz."""
    path = os.path.join(work, f"features_{kind}.npz")
    if os.path.exists(path):
        return
    import pyarrow.parquet as pq
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    RDLogger.DisableLog("rdApp.*")
    table = pq.read_table(os.path.join(release, "library.parquet"), columns=["id", "smiles", "coordinates"])
    ids = np.asarray(table.column("id").to_numpy(zero_copy_only=False), dtype=object)
    smiles = table.column("smiles").to_pylist()
    coords = table.column("coordinates").combine_chunks()
    offsets = np.asarray(coords.offsets, dtype=np.int64)
    xyz = np.asarray(coords.values.values, dtype=np.float32).reshape(-1, 3)
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=FP_BITS)
    indptr = [0]
    indices = []
    for i, smi in enumerate(smiles):
        mol = Chem.MolFromSmiles(smi)
        bits = list(gen.GetFingerprint(mol).GetOnBits())
        cols = bits
        if kind == "pose":
            cell = np.floor((xyz[offsets[i]:offsets[i + 1]] - GRID_LO) / GRID_STEP).astype(np.int64)
            inside = np.all((cell >= 0) & (cell < GRID_N), axis=1)
            types = np.array([_atom_type(a) for a in mol.GetAtoms()], dtype=np.int64)
            flat = ((cell[:, 0] * GRID_N + cell[:, 1]) * GRID_N + cell[:, 2]) * ATOM_TYPES + types
            cols = bits + (FP_BITS + flat[inside]).tolist()
        indices.extend(cols)
        indptr.append(len(indices))
    np.savez(path, ids=ids.astype("U"), indptr=np.array(indptr, dtype=np.int64), indices=np.array(indices, dtype=np.int32),
             n_features=FP_BITS + (GRID_N ** 3 * ATOM_TYPES if kind == "pose" else 0))


def load_features(work: str, kind: str):
    import scipy.sparse as sp

    with np.load(os.path.join(work, f"features_{kind}.npz")) as data:
        ids = data["ids"].astype(object)
        indptr, indices, n_features = data["indptr"], data["indices"], int(data["n_features"])
    # count features: several atoms of a type may share a grid cell
    ones = np.ones(len(indices), dtype=np.float32)
    matrix = sp.csr_matrix((ones, indices, indptr), shape=(len(ids), n_features))
    matrix.sum_duplicates()
    return ids, matrix


def train(matrix, rows, y, objective: str = "regression", trees: int = N_TREES):
    import lightgbm as lgb

    params = dict(PARAMS, objective=objective)
    return lgb.train(params, lgb.Dataset(matrix[rows], label=y, free_raw_data=True), num_boost_round=trees)


def predict(model, matrix, rows, chunk: int = 100_000) -> np.ndarray:
    out = np.empty(len(rows))
    for lo in range(0, len(rows), chunk):
        out[lo:lo + chunk] = model.predict(matrix[rows[lo:lo + chunk]])
    return out


def labelled_rows(ids, labels_frame) -> tuple:
    index = {v: i for i, v in enumerate(ids)}
    rows = np.array([index[v] for v in labels_frame["id"]], dtype=np.int64)
    return rows, labels_frame["score"].to_numpy(dtype=float)


def al_round(work: str, kind: str, round_no: int, status: dict, labels_frame, request, rounds: int = ROUNDS,
             trees: int = N_TREES) -> int:
    """Request the batch of round ``round_no`` (1-based) of ``rounds``; returns its size."""
    ids, matrix = load_features(work, kind)
    n = len(ids)
    batch = status["budget"] // rounds
    if round_no == rounds:
        batch = status["labels_remaining"]
    rng = np.random.default_rng(1000 + round_no)
    labelled = np.zeros(n, dtype=bool)
    if len(labels_frame):
        rows, y = labelled_rows(ids, labels_frame)
        labelled[rows] = True
    pool = np.flatnonzero(~labelled)
    batch = min(batch, len(pool))
    if round_no == 1 or not labelled.any():
        pick = rng.choice(pool, batch, replace=False)
    else:
        model = train(matrix, rows, y, trees=trees)
        pred = predict(model, matrix, pool)
        n_top = int(round(batch * (1 - EXPLORE)))
        order = np.argsort(-pred, kind="stable")
        top = pool[order[:n_top]]
        rest = pool[order[n_top:]]
        pick = np.concatenate([top, rng.choice(rest, batch - n_top, replace=False)])
    request([ids[i] for i in pick])
    return batch


def submission(work: str, kind: str, number: int, status: dict, labels_frame, results: list,
               trees: int = N_TREES) -> list:
    """The ids of submission ``number`` (1, 2 or 3) by the specification above."""
    ids, matrix = load_features(work, kind)
    size = status["submission_size"]
    frame = labels_frame.sort_values(["score", "id"], ascending=[False, True])
    if number == 1:
        return frame["id"].head(size).tolist()
    accepted = [r for r in results if "overlap" in r]
    o1 = accepted[0]["overlap"] if accepted else 0
    known_in = frame["id"].head(o1).tolist()
    rows, y = labelled_rows(ids, labels_frame)
    labelled = np.zeros(len(ids), dtype=bool)
    labelled[rows] = True
    pool = np.flatnonzero(~labelled)
    fill = size - len(known_in)
    if number == 2:
        model = train(matrix, rows, y, trees=trees)
        pred = predict(model, matrix, pool)
    else:
        scores = frame["score"].to_numpy()
        if o1 == 0:
            threshold = scores[0] + 1e-9
        elif o1 >= len(scores):
            threshold = scores[-1]
        else:
            threshold = 0.5 * (scores[o1 - 1] + scores[o1])
        positives = y >= threshold
        if positives.sum() >= 5:
            model = train(matrix, rows, positives.astype(float), objective="binary", trees=trees)
        else:  # too few labelled conformations above the threshold to learn a class from
            model = train(matrix, rows, y, trees=trees)
        pred = predict(model, matrix, pool)
    order = np.argsort(-pred, kind="stable")[:fill]
    return known_in + [ids[i] for i in pool[order]]
