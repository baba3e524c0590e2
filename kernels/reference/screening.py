"""Slow, obvious twins of ``kernels.screening`` (the same arithmetic, atom by atom, in Python)."""
import math

import numpy as np

from .rng import Xoshiro


def pocket_terms(xyz, bits, point_xyz, point_type, point_weight, point_inv2s2, excl_xyz, excl_radius, excl_weight):
    match = 0.0
    for p in range(len(point_xyz)):
        acc = 0.0
        for a in range(len(xyz)):
            if int(bits[a]) & (1 << int(point_type[p])):
                d2 = sum((xyz[a][k] - point_xyz[p][k]) ** 2 for k in range(3))
                acc += math.exp(-d2 * point_inv2s2[p])
        match += point_weight[p] * (1.0 - math.exp(-2.0 * acc))
    overlap = 0.0
    for e in range(len(excl_xyz)):
        for a in range(len(xyz)):
            d = math.sqrt(sum((xyz[a][k] - excl_xyz[e][k]) ** 2 for k in range(3)))
            if d < excl_radius[e]:
                overlap += (excl_radius[e] - d) ** 2
    return match - excl_weight * overlap


def pocket_scores(xyz, atom_offset, bits, *pocket):
    return np.array([pocket_terms(xyz[atom_offset[m]:atom_offset[m + 1]], bits[atom_offset[m]:atom_offset[m + 1]], *pocket)
                     for m in range(len(atom_offset) - 1)])


def random_rotation(g):
    u1 = g.next_double()
    u2 = g.next_double() * 2.0 * math.pi
    u3 = g.next_double() * 2.0 * math.pi
    a, b = math.sqrt(1.0 - u1), math.sqrt(u1)
    qw, qx, qy, qz = a * math.sin(u2), a * math.cos(u2), b * math.sin(u3), b * math.cos(u3)
    return np.array([
        [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
        [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
        [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)],
    ])


def axis_rotation(axis, angle):
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array([[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                     [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                     [t * x * z - s * y, t * y * z + s * x, t * z * z + c]])


def _apply(xyz, centre, rot, shift):
    out = np.empty_like(xyz)
    for a in range(len(xyz)):
        v = [xyz[a][k] - centre[k] for k in range(3)]
        for r in range(3):
            out[a, r] = rot[r][0] * v[0] + rot[r][1] * v[1] + rot[r][2] * v[2] + shift[r]
    return out


def _centre(xyz):
    c = [0.0, 0.0, 0.0]
    for a in range(len(xyz)):
        for k in range(3):
            c[k] += xyz[a][k]
    return [v / len(xyz) for v in c]


def dock(key, rows, xyz, atom_offset, bits, n_starts, n_steps, spread, step_angle, step_shift, *pocket):
    out = np.empty_like(xyz)
    scores = np.empty(len(atom_offset) - 1)
    for m in range(len(atom_offset) - 1):
        lo, hi = atom_offset[m], atom_offset[m + 1]
        g = Xoshiro(key, rows[m])
        mol, b = xyz[lo:hi], bits[lo:hi]
        centre = _centre(mol)
        best, best_rot, best_shift = -1e300, np.eye(3), np.zeros(3)
        for _ in range(n_starts):
            rot = random_rotation(g)
            g0, g1 = g.next_normal_pair()
            g2, _ = g.next_normal_pair()
            shift = np.array([spread * g0, spread * g1, spread * g2])
            sc = pocket_terms(_apply(mol, centre, rot, shift), b, *pocket)
            if sc > best:
                best, best_rot, best_shift = sc, rot, shift
        for _ in range(n_steps):
            g0, g1 = g.next_normal_pair()
            g2, _ = g.next_normal_pair()
            nrm = math.sqrt(g0 * g0 + g1 * g1 + g2 * g2) + 1e-12
            step = axis_rotation((g0 / nrm, g1 / nrm, g2 / nrm), (2.0 * g.next_double() - 1.0) * step_angle * math.pi / 180.0)
            cand_rot = np.array([[sum(step[r][k] * best_rot[k][c] for k in range(3)) for c in range(3)] for r in range(3)])
            cand_shift = np.array([best_shift[r] + (2.0 * g.next_double() - 1.0) * step_shift for r in range(3)])
            sc = pocket_terms(_apply(mol, centre, cand_rot, cand_shift), b, *pocket)
            if sc > best:
                best, best_rot, best_shift = sc, cand_rot, cand_shift
        out[lo:hi] = _apply(mol, centre, best_rot, best_shift)
        scores[m] = best
    return out, scores


def repose(key, rows, xyz, atom_offset, spread):
    out = np.empty_like(xyz)
    for m in range(len(atom_offset) - 1):
        lo, hi = atom_offset[m], atom_offset[m + 1]
        g = Xoshiro(key, rows[m])
        centre = _centre(xyz[lo:hi])
        rot = random_rotation(g)
        g0, g1 = g.next_normal_pair()
        g2, _ = g.next_normal_pair()
        shift = [centre[0] + spread * g0, centre[1] + spread * g1, centre[2] + spread * g2]
        out[lo:hi] = _apply(xyz[lo:hi], centre, rot, shift)
    return out
