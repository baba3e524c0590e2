"""Screening-world kernels: pose assembly from synthon conformers, a rigid-body
docking search in the pocket frame, and pharmacophore pocket scores.

Dimension key: m = molecules, a = atoms (concatenated over molecules, offsets
``atom_offset`` [m+1]), s = synthon slots of a product (root, child, grandchild),
p = pocket feature points, e = excluded-volume centres, t = torsion trials.

Every random draw comes from ``kernels.rng`` keyed by ``(key, molecule row)``,
so a molecule's pose depends only on the world's key and its row, never on
the thread count or how rows are grouped into tasks.  The slow twins are in
``kernels.reference.screening``.

Compile time is part of every fresh checkout's test run and of every build on
a machine without the on-disk cache, so these kernels are written to compile
quickly (about a third of the CPU time of their first, ``parallel=True`` form):

* each compiled kernel is serial over a row range ``lo..hi`` and releases the
  GIL; the public functions split the rows over this thread's Numba width of
  Python threads (``_over_rows``).  A parfor would compile every loop body a
  second time as a gufunc.
* helpers are ordinary compiled functions, not ``inline="always"``: Numba's IR
  inlining copies and retypes a helper's body at every call site, and the
  random draws go through ``_uniform`` and ``_normal_pair`` for the same
  reason (run time per row is unchanged).
* no array slice assignment, ``np.arange`` expression or ``np.linalg.det``:
  a 3 x 3 slice copy alone cost about 5 s of typing and lowering.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .numba_util import njit
from .rng import next_double, next_normal_pair, seed_state
from .screening_grid import excluded_grid, excluded_overlap, max_cell

CLASH_DISTANCE = 2.6  # Å: heavy atoms more than three bonds apart closer than this clash
BONDED_DISTANCE = 1.75  # Å: atoms this close to a bond's end are its neighbours (1-3 and 1-4 pairs are exempt)
MAX_SLOTS = 3
ATTEMPTS = 12  # rebuilds of a clashing molecule with fresh conformer picks (the last ones on a 15-degree torsion grid)
FINE_ATTEMPTS = 4
CHUNKS_PER_THREAD = 8  # row ranges per thread: molecules differ in cost (clashing ones are rebuilt)


def _over_rows(kernel, n: int, *args) -> None:
    """``kernel(lo, hi, *args)`` over rows 0..n in ranges on ``numba.get_num_threads()`` threads.

    The width is this thread's Numba width, so a build's per-task cap
    (``numba.set_num_threads``) holds as it did for ``prange``.  Rows are
    independent and write disjoint outputs: the result is the same for any split.
    """
    import numba

    threads = max(1, min(numba.get_num_threads(), n))
    if threads == 1:
        kernel(0, n, *args)
        return
    cuts = np.linspace(0, n, threads * CHUNKS_PER_THREAD + 1).astype(np.int64)
    ranges = [(int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo]
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(lambda r: kernel(r[0], r[1], *args), ranges):
            pass


@njit
def _uniform(state):
    return next_double(state)


@njit
def _normal_pair(state):
    return next_normal_pair(state)


@njit
def _kabsch(p, q, w, rot, shift):
    """Rotation ``rot`` [3, 3] and shift [3] mapping points p [k, 3] onto q [k, 3] (weights w [k])."""
    k = p.shape[0]
    pc = np.zeros(3)
    qc = np.zeros(3)
    tw = 0.0
    for i in range(k):
        tw += w[i]
        for d in range(3):
            pc[d] += w[i] * p[i, d]
            qc[d] += w[i] * q[i, d]
    for d in range(3):
        pc[d] /= tw
        qc[d] /= tw
    h = np.zeros((3, 3))
    for i in range(k):
        for r in range(3):
            for c in range(3):
                h[r, c] += w[i] * (p[i, r] - pc[r]) * (q[i, c] - qc[c])
    u, s, vt = np.linalg.svd(h)
    # vt.T @ u.T is orthogonal (determinant +-1): its sign by cofactors is the sign LAPACK's
    # determinant gave, without compiling np.linalg.det
    m = vt.T @ u.T
    det = (m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
           + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]))
    dmat = np.zeros((3, 3))
    for d in range(3):
        dmat[d, d] = 1.0
    if det < 0:
        dmat[2, 2] = -1.0
    r_ = vt.T @ dmat @ u.T
    for r in range(3):
        for c in range(3):
            rot[r, c] = r_[r, c]
        shift[r] = qc[r] - (r_[r, 0] * pc[0] + r_[r, 1] * pc[1] + r_[r, 2] * pc[2])


@njit
def _axis_rotation(axis, angle, rot):
    """Rotation matrix about the unit vector ``axis`` by ``angle`` radians (Rodrigues)."""
    x, y, z = axis[0], axis[1], axis[2]
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    rot[0, 0] = t * x * x + c
    rot[0, 1] = t * x * y - s * z
    rot[0, 2] = t * x * z + s * y
    rot[1, 0] = t * x * y + s * z
    rot[1, 1] = t * y * y + c
    rot[1, 2] = t * y * z - s * x
    rot[2, 0] = t * x * z - s * y
    rot[2, 1] = t * y * z + s * x
    rot[2, 2] = t * z * z + c


@njit
def _dist2(a, i, b, j):
    dx = a[i, 0] - b[j, 0]
    dy = a[i, 1] - b[j, 1]
    dz = a[i, 2] - b[j, 2]
    return dx * dx + dy * dy + dz * dz


@njit
def _place_child(placed, n_placed, parent_attach, down_ref, child_xyz, child_attach, child_ref0, child_nb,
                 torsions, n_torsions, start, out_xyz):
    """Put one child synthon conformer onto its parent; returns the smallest
    non-bonded heavy-atom distance achieved (the clash measure).

    placed [n_placed, 3]: atoms already in place (the parent's among them, its
    attachment atom at row ``parent_attach``); down_ref [2, 3]: the parent's
    probe cap atom and its neighbour; child_xyz [k, 3] the child's own frame;
    child_ref0 [3]: the child's probe cap (where the parent's attachment atom
    belongs); child_nb: the child's own neighbour of its attachment atom (-1:
    none, two-point alignment).  The best torsion's coordinates go to out_xyz.
    """
    k = child_xyz.shape[0]
    n_ref = 3 if child_nb >= 0 else 2
    p = np.empty((n_ref, 3))
    q = np.empty((n_ref, 3))
    w = np.ones(n_ref)
    for d in range(3):
        p[0, d] = child_xyz[child_attach, d]
        q[0, d] = down_ref[0, d]
        p[1, d] = child_ref0[d]
        q[1, d] = placed[parent_attach, d]
    if n_ref == 3:
        for d in range(3):
            p[2, d] = child_xyz[child_nb, d]
            q[2, d] = down_ref[1, d]
        w[2] = 0.5  # the neighbour sets the torsion only; the bond itself is matched exactly
    rot = np.empty((3, 3))
    shift = np.empty(3)
    _kabsch(p, q, w, rot, shift)
    base = np.empty((k, 3))
    for i in range(k):
        for r in range(3):
            base[i, r] = rot[r, 0] * child_xyz[i, 0] + rot[r, 1] * child_xyz[i, 1] + rot[r, 2] * child_xyz[i, 2] + shift[r]
    # the bond axis: parent attachment -> child attachment
    axis = np.empty(3)
    norm = 0.0
    for d in range(3):
        axis[d] = base[child_attach, d] - placed[parent_attach, d]
        norm += axis[d] * axis[d]
    norm = math.sqrt(norm)
    for d in range(3):
        axis[d] /= norm
    # neighbours of the two bond ends (exempt from the clash test)
    bonded2 = BONDED_DISTANCE * BONDED_DISTANCE
    near_parent = np.zeros(n_placed, dtype=np.bool_)
    for j in range(n_placed):
        near_parent[j] = _dist2(placed, j, placed, parent_attach) < bonded2
    near_child = np.zeros(k, dtype=np.bool_)
    for i in range(k):
        near_child[i] = _dist2(base, i, base, child_attach) < bonded2
    trial = np.empty((k, 3))
    trot = np.empty((3, 3))
    best = -1.0
    for tt in range(n_torsions):
        t = (start + tt) % n_torsions
        _axis_rotation(axis, torsions[t] * math.pi / 180.0, trot)
        for i in range(k):
            v0 = base[i, 0] - placed[parent_attach, 0]
            v1 = base[i, 1] - placed[parent_attach, 1]
            v2 = base[i, 2] - placed[parent_attach, 2]
            for r in range(3):
                trial[i, r] = trot[r, 0] * v0 + trot[r, 1] * v1 + trot[r, 2] * v2 + placed[parent_attach, r]
        closest = 1e30
        for i in range(k):
            for j in range(n_placed):
                if near_child[i] and near_parent[j]:
                    continue
                d2 = _dist2(trial, i, placed, j)
                if d2 < closest:
                    closest = d2
        closest = math.sqrt(closest)
        if closest > best:
            best = closest
            for i in range(k):
                for r in range(3):
                    out_xyz[i, r] = trial[i, r]
        if closest >= CLASH_DISTANCE:
            break
    return best


@njit
def _assemble_once(state, m, conf_pick, slot_synthon, n_slots, torsions, n_torsions, atom_offset, conf_offset,
                   conf_atom_offset, coords, up_attach, up_neighbour, up_ref, down_attach, down_ref, o, out_xyz, fine):
    """One assembly of molecule m into out_xyz[o:...] with the given conformer picks; returns its min distance."""
    s0 = slot_synthon[m, 0]
    c0 = conf_offset[s0] + conf_pick[0]
    a0 = conf_atom_offset[c0]
    n0 = atom_offset[s0 + 1] - atom_offset[s0]
    for i in range(n0):
        for d in range(3):
            out_xyz[o + i, d] = coords[a0 + i, d]
    n_placed = n0
    parent = s0
    parent_conf = c0
    parent_start = o
    min_d = 1e30
    ref = np.empty((2, 3))
    for r in range(2):
        for d in range(3):
            ref[r, d] = down_ref[c0, r, d]
    for s in range(1, n_slots[m]):
        child = slot_synthon[m, s]
        nc = atom_offset[child + 1] - atom_offset[child]
        n_conf = conf_offset[child + 1] - conf_offset[child]
        placed = out_xyz[o:o + n_placed]
        pa = parent_start - o + down_attach[parent]
        if fine:
            tors = np.empty(24)
            for i in range(24):
                tors[i] = i * 15.0
            n_tors = 24
        else:
            tors = torsions[m, s - 1]
            n_tors = n_torsions[m, s - 1]
        start = int(_uniform(state) * n_tors)
        best = -1.0
        best_xyz = np.empty((nc, 3))
        trial_xyz = np.empty((nc, 3))
        best_conf = 0
        for cc in range(n_conf):
            conf = (conf_pick[s] + cc) % n_conf
            ci = conf_offset[child] + conf
            ca = conf_atom_offset[ci]
            got = _place_child(placed, n_placed, pa, ref, coords[ca:ca + nc], up_attach[child], up_ref[ci, 0],
                               up_neighbour[child], tors, n_tors, start, trial_xyz)
            if got > best:
                best = got
                best_conf = ci
                for i in range(nc):
                    for d in range(3):
                        best_xyz[i, d] = trial_xyz[i, d]
            if got >= CLASH_DISTANCE:
                break
        for i in range(nc):
            for d in range(3):
                out_xyz[o + n_placed + i, d] = best_xyz[i, d]
        if best < min_d:
            min_d = best
        if s + 1 < n_slots[m]:
            # this child's own probe cap (toward its child), carried into the placed frame
            ca = conf_atom_offset[best_conf]
            rot = np.empty((3, 3))
            shift = np.empty(3)
            _kabsch(coords[ca:ca + nc], best_xyz, np.ones(nc), rot, shift)
            for r in range(2):
                for d in range(3):
                    ref[r, d] = (rot[d, 0] * down_ref[best_conf, r, 0] + rot[d, 1] * down_ref[best_conf, r, 1]
                                 + rot[d, 2] * down_ref[best_conf, r, 2] + shift[d])
        parent = child
        parent_conf = best_conf
        parent_start = o + n_placed
        n_placed += nc
    return min_d


def assemble(key, rows, slot_synthon, slot_conf, n_slots, torsions, n_torsions,
             atom_offset, conf_offset, conf_atom_offset, coords, up_attach, up_neighbour, up_ref,
             down_attach, down_ref, out_offset, out_xyz, out_min_distance) -> None:
    """Assemble every molecule of a task from its synthons' conformers.

    rows int64 [m] (the molecules' library rows: the random key's counter);
    slot_synthon, slot_conf int64 [m, 3] (synthon id and preferred conformer per
    slot, -1 unused; slot 0 is the root, slot s+1 the child of slot s);
    n_slots int64 [m]; torsions float64 [m, 2, 3] and n_torsions int64 [m, 2]
    (the rule's rotations about each new bond).  Synthon tables as in
    ``SynthonTable``.  Writes out_xyz [a, 3] in *assembly order* (slot 0's
    atoms, then slot 1's, then slot 2's) at out_offset [m+1], and
    out_min_distance [m] (smallest non-bonded heavy-atom distance across the
    new bonds; >= CLASH_DISTANCE when clash-free).  A child that clashes at
    every torsion of its preferred conformer tries its other conformers; a
    molecule still clashing is rebuilt up to ``ATTEMPTS`` times with freshly
    drawn conformers for every slot (the last FINE_ATTEMPTS on a 15-degree
    torsion grid), keeping the least-clashing build.
    """
    _over_rows(_assemble_rows, rows.shape[0], key, rows, slot_synthon, slot_conf, n_slots, torsions, n_torsions,
               atom_offset, conf_offset, conf_atom_offset, coords, up_attach, up_neighbour, up_ref, down_attach,
               down_ref, out_offset, out_xyz, out_min_distance)


@njit
def _assemble_rows(lo, hi, key, rows, slot_synthon, slot_conf, n_slots, torsions, n_torsions,
                   atom_offset, conf_offset, conf_atom_offset, coords, up_attach, up_neighbour, up_ref,
                   down_attach, down_ref, out_offset, out_xyz, out_min_distance):
    for m in range(lo, hi):
        state = np.empty(4, dtype=np.uint64)
        seed_state(key, rows[m], state)
        o = out_offset[m]
        n_atoms = out_offset[m + 1] - o
        pick = np.empty(MAX_SLOTS, dtype=np.int64)
        for s in range(MAX_SLOTS):
            pick[s] = slot_conf[m, s] if slot_conf[m, s] > 0 else 0
        keep = np.empty((n_atoms, 3))
        best = -1.0
        for attempt in range(ATTEMPTS):
            if attempt > 0:
                for s in range(n_slots[m]):
                    syn = slot_synthon[m, s]
                    pick[s] = int(_uniform(state) * (conf_offset[syn + 1] - conf_offset[syn]))
            got = _assemble_once(state, m, pick, slot_synthon, n_slots, torsions, n_torsions, atom_offset, conf_offset,
                                 conf_atom_offset, coords, up_attach, up_neighbour, up_ref, down_attach, down_ref, o, out_xyz,
                                 attempt >= ATTEMPTS - FINE_ATTEMPTS)
            if got > best:
                best = got
                for i in range(n_atoms):
                    for d in range(3):
                        keep[i, d] = out_xyz[o + i, d]
            if got >= CLASH_DISTANCE:
                break
        for i in range(n_atoms):
            for d in range(3):
                out_xyz[o + i, d] = keep[i, d]
        out_min_distance[m] = best


# --------------------------------------------------------------------------- pocket scores


@njit
def _pocket_terms(xyz, lo, hi, bits, point_xyz, point_type, point_weight, point_inv2s2,
                  excl_xyz, excl_radius, excl_weight, grid_origin, grid_inv_cell, grid_dims, cell_start, cell_sphere,
                  hit_sphere, hit_term):
    """Feature match minus excluded-volume overlap of one pose (atoms lo..hi of xyz; the
    overlap through the pocket's grid, ``kernels.screening_grid``)."""
    match = 0.0
    for p in range(point_xyz.shape[0]):
        mask = np.uint8(1) << np.uint8(point_type[p])
        acc = 0.0
        for a in range(lo, hi):
            if bits[a] & mask:
                dx = xyz[a, 0] - point_xyz[p, 0]
                dy = xyz[a, 1] - point_xyz[p, 1]
                dz = xyz[a, 2] - point_xyz[p, 2]
                acc += math.exp(-(dx * dx + dy * dy + dz * dz) * point_inv2s2[p])
        # a feature point is satisfied once: several matching atoms saturate
        match += point_weight[p] * (1.0 - math.exp(-2.0 * acc))
    overlap = excluded_overlap(xyz, lo, hi, excl_xyz, excl_radius, grid_origin, grid_inv_cell, grid_dims, cell_start,
                               cell_sphere, hit_sphere, hit_term)
    return match - excl_weight * overlap


@njit
def _scratch(atom_offset, lo_m, hi_m, cell_start):
    """Hit buffers for excluded_overlap, large enough for every molecule of rows lo_m..hi_m."""
    most = 0
    for m in range(lo_m, hi_m):
        most = max(most, atom_offset[m + 1] - atom_offset[m])
    size = max(1, most * max_cell(cell_start))
    return np.empty(size, dtype=np.int64), np.empty(size)


def pocket_scores(xyz, atom_offset, bits, point_xyz, point_type, point_weight, point_inv2s2,
                  excl_xyz, excl_radius, excl_weight, out) -> None:
    """out[m] = the pocket's score of each pose (xyz [a, 3], bits uint8 [a])."""
    _over_rows(_pocket_score_rows, atom_offset.shape[0] - 1, xyz, atom_offset, bits, point_xyz, point_type,
               point_weight, point_inv2s2, excl_xyz, excl_radius, excl_weight, *excluded_grid(excl_xyz, excl_radius), out)


@njit
def _pocket_score_rows(lo, hi, xyz, atom_offset, bits, point_xyz, point_type, point_weight, point_inv2s2,
                       excl_xyz, excl_radius, excl_weight, origin, inv_cell, dims, cell_start, cell_sphere, out):
    hit_sphere, hit_term = _scratch(atom_offset, lo, hi, cell_start)
    for m in range(lo, hi):
        out[m] = _pocket_terms(xyz, atom_offset[m], atom_offset[m + 1], bits, point_xyz, point_type, point_weight,
                               point_inv2s2, excl_xyz, excl_radius, excl_weight, origin, inv_cell, dims, cell_start,
                               cell_sphere, hit_sphere, hit_term)


@njit
def _random_rotation(state, rot):
    """A uniformly random rotation (Shoemake's quaternion from three uniforms)."""
    u1 = _uniform(state)
    u2 = _uniform(state) * 2.0 * math.pi
    u3 = _uniform(state) * 2.0 * math.pi
    a = math.sqrt(1.0 - u1)
    b = math.sqrt(u1)
    qw, qx, qy, qz = a * math.sin(u2), a * math.cos(u2), b * math.sin(u3), b * math.cos(u3)
    rot[0, 0] = 1 - 2 * (qy * qy + qz * qz)
    rot[0, 1] = 2 * (qx * qy - qz * qw)
    rot[0, 2] = 2 * (qx * qz + qy * qw)
    rot[1, 0] = 2 * (qx * qy + qz * qw)
    rot[1, 1] = 1 - 2 * (qx * qx + qz * qz)
    rot[1, 2] = 2 * (qy * qz - qx * qw)
    rot[2, 0] = 2 * (qx * qz - qy * qw)
    rot[2, 1] = 2 * (qy * qz + qx * qw)
    rot[2, 2] = 1 - 2 * (qx * qx + qy * qy)


@njit
def _centroid(xyz, lo, hi):
    centre = np.zeros(3)
    for a in range(lo, hi):
        for d in range(3):
            centre[d] += xyz[a, d]
    for d in range(3):
        centre[d] /= hi - lo
    return centre


@njit
def _copy3(rot, shift, rot_to, shift_to):
    for r in range(3):
        shift_to[r] = shift[r]
        for c in range(3):
            rot_to[r, c] = rot[r, c]


@njit
def _apply(src, lo, hi, centre, rot, shift, dst):
    for a in range(lo, hi):
        v0 = src[a, 0] - centre[0]
        v1 = src[a, 1] - centre[1]
        v2 = src[a, 2] - centre[2]
        for r in range(3):
            dst[a, r] = rot[r, 0] * v0 + rot[r, 1] * v1 + rot[r, 2] * v2 + shift[r]


def dock(key, rows, xyz, atom_offset, bits, n_starts, n_steps, spread, step_angle, step_shift,
         point_xyz, point_type, point_weight, point_inv2s2, excl_xyz, excl_radius, excl_weight, out_xyz,
         out_score) -> None:
    """Rigid-body docking in the pocket frame: ``n_starts`` random orientations
    with the centroid at a normal(0, ``spread``) offset from the pocket centre,
    then ``n_steps`` of greedy refinement of the best (random axis rotations of
    up to ``step_angle`` degrees and shifts of up to ``step_shift`` Å, kept
    when the pocket score improves).  Writes the pose to out_xyz [a, 3] and its
    score to out_score [m].
    """
    _over_rows(_dock_rows, atom_offset.shape[0] - 1, key, rows, xyz, atom_offset, bits, n_starts, n_steps, spread,
               step_angle, step_shift, point_xyz, point_type, point_weight, point_inv2s2, excl_xyz, excl_radius,
               excl_weight, *excluded_grid(excl_xyz, excl_radius), out_xyz, out_score)


@njit
def _dock_rows(lo_m, hi_m, key, rows, xyz, atom_offset, bits, n_starts, n_steps, spread, step_angle, step_shift,
               point_xyz, point_type, point_weight, point_inv2s2, excl_xyz, excl_radius, excl_weight, origin, inv_cell,
               dims, cell_start, cell_sphere, out_xyz, out_score):
    hit_sphere, hit_term = _scratch(atom_offset, lo_m, hi_m, cell_start)
    for m in range(lo_m, hi_m):
        lo, hi = atom_offset[m], atom_offset[m + 1]
        state = np.empty(4, dtype=np.uint64)
        seed_state(key, rows[m], state)
        centre = _centroid(xyz, lo, hi)
        rot = np.empty((3, 3))
        shift = np.empty(3)
        best_rot = np.zeros((3, 3))
        for d in range(3):
            best_rot[d, d] = 1.0
        best_shift = np.zeros(3)
        best = -1e300
        for t in range(n_starts):
            _random_rotation(state, rot)
            g0, g1 = _normal_pair(state)
            g2, _ = _normal_pair(state)
            shift[0], shift[1], shift[2] = spread * g0, spread * g1, spread * g2
            _apply(xyz, lo, hi, centre, rot, shift, out_xyz)
            sc = _pocket_terms(out_xyz, lo, hi, bits, point_xyz, point_type, point_weight, point_inv2s2,
                               excl_xyz, excl_radius, excl_weight, origin, inv_cell, dims, cell_start, cell_sphere,
                               hit_sphere, hit_term)
            if sc > best:
                best = sc
                _copy3(rot, shift, best_rot, best_shift)
        step = np.empty((3, 3))
        cand_rot = np.empty((3, 3))
        cand_shift = np.empty(3)
        axis = np.empty(3)
        for t in range(n_steps):
            g0, g1 = _normal_pair(state)
            g2, _ = _normal_pair(state)
            nrm = math.sqrt(g0 * g0 + g1 * g1 + g2 * g2) + 1e-12
            axis[0], axis[1], axis[2] = g0 / nrm, g1 / nrm, g2 / nrm
            _axis_rotation(axis, (2.0 * _uniform(state) - 1.0) * step_angle * math.pi / 180.0, step)
            for r in range(3):
                for c in range(3):
                    cand_rot[r, c] = step[r, 0] * best_rot[0, c] + step[r, 1] * best_rot[1, c] + step[r, 2] * best_rot[2, c]
                cand_shift[r] = best_shift[r] + (2.0 * _uniform(state) - 1.0) * step_shift
            _apply(xyz, lo, hi, centre, cand_rot, cand_shift, out_xyz)
            sc = _pocket_terms(out_xyz, lo, hi, bits, point_xyz, point_type, point_weight, point_inv2s2,
                               excl_xyz, excl_radius, excl_weight, origin, inv_cell, dims, cell_start, cell_sphere,
                               hit_sphere, hit_term)
            if sc > best:
                best = sc
                _copy3(cand_rot, cand_shift, best_rot, best_shift)
        _apply(xyz, lo, hi, centre, best_rot, best_shift, out_xyz)
        out_score[m] = best


def repose(key, rows, xyz, atom_offset, spread, out_xyz) -> None:
    """A random rigid motion of every pose about its centroid (rotation uniform,
    shift normal(0, spread) per axis): the validation's pose-sensitivity probe."""
    _over_rows(_repose_rows, atom_offset.shape[0] - 1, key, rows, xyz, atom_offset, spread, out_xyz)


@njit
def _repose_rows(lo_m, hi_m, key, rows, xyz, atom_offset, spread, out_xyz):
    for m in range(lo_m, hi_m):
        lo, hi = atom_offset[m], atom_offset[m + 1]
        state = np.empty(4, dtype=np.uint64)
        seed_state(key, rows[m], state)
        centre = _centroid(xyz, lo, hi)
        rot = np.empty((3, 3))
        _random_rotation(state, rot)
        g0, g1 = _normal_pair(state)
        g2, _ = _normal_pair(state)
        shift = np.empty(3)
        shift[0], shift[1], shift[2] = centre[0] + spread * g0, centre[1] + spread * g1, centre[2] + spread * g2
        _apply(xyz, lo, hi, centre, rot, shift, out_xyz)
