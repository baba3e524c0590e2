"""The hidden pockets and the hidden score (the sealed side of a screening world).

A pocket is a cavity in the pocket frame (an ellipsoid with a random
orientation, open on one side) lined with excluded-volume spheres, holding
feature points of the six pharmacophore types (donor, acceptor, hydrophobe,
aromatic, positive, negative) at fixed 3D positions.  A pose's pocket score is

    sum_p w_p (1 - exp(-2 sum_{atoms a of p's type} exp(-|x_a - x_p|^2 / (2 sigma_p^2))))
      - lambda_ex sum_{spheres e, atoms a} max(0, r_e - |x_a - x_e|)^2

(``kernels.screening``).  Poses are docked into the *target* pocket; three
*off-target* pockets share the frame.  The hidden score of a conformation is

    S = sqrt(1 - h) z(T) + sqrt(h) eps,
    T = z(target) - w_off sum_k softplus(z(off_k) - tau) - w_prop z(property penalty)

with every z() a standardisation over the whole library (fixed summation order),
the property penalty ((cLogP - 3)/1.5)^2 + relu((MW - 450)/50) + relu(donors - 3)
from additive atom contributions, and eps a per-molecule normal draw that no
structure model can predict (share h of the variance, ``world.score.hidden_share``).
"""
from __future__ import annotations

import numpy as np

from .. import seeds
from .fragments import FEATURES
from .streams import HIDDEN, POCKET

# How often each feature type is drawn for a target point (hydrophobic and
# aromatic contacts dominate real pockets; charges are rare).
TYPE_WEIGHTS = np.array([0.16, 0.22, 0.30, 0.18, 0.08, 0.06])


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def sample_pocket(seed: int, name: str, pc) -> dict:
    """One pocket from its named stream and config (``world.pocket`` or ``world.offtarget``)."""
    rng = seeds.stream(seed, POCKET.format(pocket=name))
    axes = np.array(pc.semi_axes, dtype=float)
    rot = _rotation(rng)
    # feature points inside the cavity
    n = int(pc.n_points)
    types = rng.choice(len(FEATURES), size=n, p=TYPE_WEIGHTS)
    if n >= 4:  # a pocket always offers at least one polar handle of each kind
        types[0], types[1] = FEATURES.index("donor"), FEATURES.index("acceptor")
    direction = rng.standard_normal((n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    depth = rng.uniform(pc.point_depth[0], pc.point_depth[1], n)
    local = direction * depth[:, None] * axes
    points = local @ rot.T
    weight = rng.uniform(pc.point_weight[0], pc.point_weight[1], n)
    sigma = rng.uniform(pc.point_sigma[0], pc.point_sigma[1], n)
    # excluded volume: a Fibonacci lattice on the wall, pushed out by the sphere radius, open at +z
    m = int(pc.excluded)
    k = np.arange(m) + 0.5
    zc = 1 - 2 * k / m
    phi = np.pi * (1 + 5 ** 0.5) * k
    unit = np.stack([np.sqrt(1 - zc ** 2) * np.cos(phi), np.sqrt(1 - zc ** 2) * np.sin(phi), zc], axis=1)
    keep = unit[:, 2] < pc.opening
    wall = unit[keep] * (axes + pc.excluded_radius * 0.9)
    excluded = wall @ rot.T
    return {
        "name": name, "rotation": rot.tolist(), "semi_axes": axes.tolist(),
        "points": points.tolist(), "types": [FEATURES[t] for t in types], "weights": weight.tolist(),
        "sigmas": sigma.tolist(), "excluded": excluded.tolist(),
        "excluded_radius": float(pc.excluded_radius), "excluded_weight": float(pc.excluded_weight),
    }


def sample_pockets(seed: int, world) -> dict:
    """The target and the off-target pockets of a world."""
    return {
        "target": sample_pocket(seed, "target", world.pocket),
        "offtargets": [sample_pocket(seed, f"offtarget-{k + 1}", world.offtarget) for k in range(int(world.score.offtargets))],
    }


def kernel_args(pocket: dict) -> tuple:
    """The pocket as the arrays ``kernels.screening`` takes."""
    points = np.asarray(pocket["points"], dtype=np.float64).reshape(-1, 3)
    types = np.array([FEATURES.index(t) for t in pocket["types"]], dtype=np.int64)
    weights = np.asarray(pocket["weights"], dtype=np.float64)
    inv2s2 = 1.0 / (2.0 * np.asarray(pocket["sigmas"], dtype=np.float64) ** 2)
    excl = np.asarray(pocket["excluded"], dtype=np.float64).reshape(-1, 3)
    radius = np.full(len(excl), float(pocket["excluded_radius"]))
    return points, types, weights, inv2s2, excl, radius, float(pocket["excluded_weight"])


def pocket_score(pocket: dict, xyz: np.ndarray, atom_offset: np.ndarray, bits: np.ndarray) -> np.ndarray:
    from kernels.screening import pocket_scores

    out = np.empty(len(atom_offset) - 1)
    pocket_scores(np.ascontiguousarray(xyz, dtype=np.float64), atom_offset, bits, *kernel_args(pocket), out)
    return out


def property_penalty(logp: np.ndarray, mw: np.ndarray, donors: np.ndarray) -> np.ndarray:
    """An ADMET-style desirability penalty from additive properties (0 for an ideal molecule)."""
    return ((logp - 3.0) / 1.5) ** 2 + np.maximum(0.0, (mw - 450.0) / 50.0) + np.maximum(0.0, donors - 3.0)


def _z(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / (sd if sd > 0 else 1.0)


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def hidden_noise(seed: int, n: int, block: int) -> np.ndarray:
    """The per-molecule term of rows block*1000.., from its own stream (unpredictable by design)."""
    return seeds.stream(seed, HIDDEN, block).standard_normal(n)


def combine(components: dict, noise: np.ndarray, sc) -> dict:
    """The hidden score from per-row components (population-standardised, fixed order)."""
    target = _z(components["target"])
    off = np.zeros_like(target)
    for k in range(int(sc.offtargets)):
        off += softplus(_z(components[f"offtarget_{k + 1}"]) - float(sc.offtarget_threshold))
    prop = _z(property_penalty(components["logp"], components["mw"], components["donors"]))
    structural = _z(target - float(sc.offtarget_weight) * off - float(sc.property_weight) * prop)
    h = float(sc.hidden_share)
    score = np.sqrt(1.0 - h) * structural + np.sqrt(h) * noise
    return {"score": score, "structural": structural, "offtarget_penalty": off, "property_penalty": prop}
