"""A pocket's excluded-volume term through a lookup grid (the screening kernels' hot loop).

The excluded-volume overlap of a pose is

    sum over spheres e (in order), then atoms a (in order), of (r_e - |x_a - x_e|)^2
    for the pairs closer than r_e,

and the all-pairs loop (every atom against all ~50 wall spheres, 16 times a
molecule while docking) was about 85 % of the docking's time, although a pose
touches few spheres.  :func:`excluded_grid` lists, for each cubic cell of a
grid over the spheres' extent, the spheres that a point in the cell (its box
widened by ``MARGIN``) could be inside; :func:`excluded_overlap` looks each
atom's cell up, tests only those spheres with the same arithmetic as the
all-pairs loop, and adds the overlapping pairs' terms in the all-pairs order
(sphere, then atom), so the sum is the same float, bit for bit.  A sphere left
out of a cell is farther than its radius plus ``MARGIN`` from every point of
the cell, far beyond any rounding of the distance; an atom outside the grid
(or not finite) is inside no sphere.

Dimension key: e = excluded-volume spheres, c = grid cells.
"""
from __future__ import annotations

import math

import numpy as np

from .numba_util import njit

CELL = 1.0  # Å: grid spacing
MARGIN = 1e-3  # Å: each cell's box is widened by this much when listing its spheres
_GRIDS: dict = {}


def excluded_grid(excl_xyz: np.ndarray, excl_radius: np.ndarray) -> tuple:
    """(origin float64 [3], inverse cell size, dims int64 [3], cell_start int64 [c+1],
    cell_sphere int64 [*]: each cell's spheres in ascending order) of a pocket's spheres."""
    excl_xyz = np.ascontiguousarray(excl_xyz, dtype=np.float64).reshape(-1, 3)
    excl_radius = np.ascontiguousarray(excl_radius, dtype=np.float64)
    key = (excl_xyz.tobytes(), excl_radius.tobytes())
    if key in _GRIDS:
        return _GRIDS[key]
    if len(excl_xyz) == 0:
        grid = (np.zeros(3), 1.0 / CELL, np.ones(3, dtype=np.int64), np.zeros(2, dtype=np.int64),
                np.zeros(0, dtype=np.int64))
    else:
        origin = (excl_xyz - excl_radius[:, None]).min(axis=0) - 2 * MARGIN
        far = (excl_xyz + excl_radius[:, None]).max(axis=0) + 2 * MARGIN
        dims = np.maximum(1, np.ceil((far - origin) / CELL)).astype(np.int64)
        cells, spheres = [], []
        for e, (centre, r) in enumerate(zip(excl_xyz, excl_radius)):
            reach = r + 2 * MARGIN
            first = np.maximum(0, np.floor((centre - reach - origin) / CELL).astype(np.int64) - 1)
            last = np.minimum(dims - 1, np.floor((centre + reach - origin) / CELL).astype(np.int64) + 1)
            axes = [np.arange(first[d], last[d] + 1) for d in range(3)]
            # per axis, the distance from the centre to each cell's widened interval
            gap = [np.maximum(0.0, np.maximum(origin[d] + axes[d] * CELL - MARGIN - centre[d],
                                              centre[d] - (origin[d] + (axes[d] + 1) * CELL + MARGIN)))
                   for d in range(3)]
            d2 = gap[0][:, None, None] ** 2 + gap[1][None, :, None] ** 2 + gap[2][None, None, :] ** 2
            i, j, k = np.nonzero(d2 < (r + MARGIN) ** 2)
            cells.append((axes[0][i] * dims[1] + axes[1][j]) * dims[2] + axes[2][k])
            spheres.append(np.full(len(i), e, dtype=np.int64))
        cell = np.concatenate(cells)
        sphere = np.concatenate(spheres)
        order = np.argsort(cell, kind="stable")  # spheres stay ascending within a cell
        cell_start = np.concatenate([[0], np.cumsum(np.bincount(cell, minlength=int(np.prod(dims))))]).astype(np.int64)
        grid = (origin, 1.0 / CELL, dims, cell_start, sphere[order])
    if len(_GRIDS) > 64:
        _GRIDS.clear()
    _GRIDS[key] = grid
    return grid


@njit
def max_cell(cell_start):
    """The most spheres any cell lists."""
    most = 0
    for c in range(cell_start.shape[0] - 1):
        most = max(most, cell_start[c + 1] - cell_start[c])
    return most


@njit
def excluded_overlap(xyz, lo, hi, excl_xyz, excl_radius, origin, inv_cell, dims, cell_start, cell_sphere,
                     hit_sphere, hit_term):
    """Sum of (r_e - d)^2 over the (sphere, atom) pairs of atoms lo..hi closer than r_e, in
    sphere-then-atom order.  hit_sphere int64, hit_term float64: scratch of at least
    (hi - lo) x the longest cell list."""
    n = 0
    for a in range(lo, hi):
        fx = (xyz[a, 0] - origin[0]) * inv_cell
        fy = (xyz[a, 1] - origin[1]) * inv_cell
        fz = (xyz[a, 2] - origin[2]) * inv_cell
        if not (fx >= 0.0 and fx < dims[0] and fy >= 0.0 and fy < dims[1] and fz >= 0.0 and fz < dims[2]):
            continue
        c = (int(fx) * dims[1] + int(fy)) * dims[2] + int(fz)
        for q in range(cell_start[c], cell_start[c + 1]):
            e = cell_sphere[q]
            r = excl_radius[e]
            r2 = r * r
            dx = xyz[a, 0] - excl_xyz[e, 0]
            dy = xyz[a, 1] - excl_xyz[e, 1]
            dz = xyz[a, 2] - excl_xyz[e, 2]
            d2 = dx * dx + dy * dy + dz * dz
            if d2 < r2:
                g = r - math.sqrt(d2)
                # insertion after every earlier pair of a sphere <= e: sphere order, atoms ascending within it
                j = n
                while j > 0 and hit_sphere[j - 1] > e:
                    hit_sphere[j] = hit_sphere[j - 1]
                    hit_term[j] = hit_term[j - 1]
                    j -= 1
                hit_sphere[j] = e
                hit_term[j] = g * g
                n += 1
    overlap = 0.0
    for j in range(n):
        overlap += hit_term[j]
    return overlap
