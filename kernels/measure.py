"""Binary morphology of the baseline image analysis (``pipeline.imaging.measure``).

Exact integer/boolean re-implementations of the scipy.ndimage calls that step 2 of
the baseline pipeline makes on every slice (fill holes, 4-connected labelling of
the holes, the largest inscribed circle of each hole, dilation and erosion with
the cross), in one pass per slice: the same masks as scipy's, bit for bit (tests
compare them), at a fraction of the Python overhead of ~15 scipy calls a slice.
Distances are compared as exact integer squared distances (scipy's Euclidean
distance is the square root of the same integer, so the order is the same).
"""
from __future__ import annotations

import numpy as np

from .numba_util import njit

_BIG = 1 << 20  # beyond any image side; its square still fits int64


@njit
def crop_box(mask, margin):
    """(y0, y1, x0, x1) of the nonzero pixels of ``mask`` widened by ``margin`` and clipped;
    y0 = -1 when the mask is empty."""
    h, w = mask.shape
    y0, y1, x0, x1 = h, -1, w, -1
    for y in range(h):
        for x in range(w):
            if mask[y, x]:
                if y < y0:
                    y0 = y
                if y > y1:
                    y1 = y
                if x < x0:
                    x0 = x
                if x > x1:
                    x1 = x
    if y1 < 0:
        return -1, -1, -1, -1
    return max(y0 - margin, 0), min(y1 + margin + 1, h), max(x0 - margin, 0), min(x1 + margin + 1, w)


@njit
def fill_holes(mask, filled):
    """scipy.ndimage.binary_fill_holes (cross connectivity): ``filled`` = mask plus every
    background pixel not 4-connected to the border through background."""
    h, w = mask.shape
    outside = np.zeros((h, w), dtype=np.bool_)
    stack = np.empty(h * w, dtype=np.int64)
    top = 0
    for y in range(h):
        for x in range(w):
            if (y == 0 or y == h - 1 or x == 0 or x == w - 1) and not mask[y, x] and not outside[y, x]:
                outside[y, x] = True
                stack[top] = y * w + x
                top += 1
    while top > 0:
        top -= 1
        p = stack[top]
        y = p // w
        x = p - y * w
        for d in range(4):
            yy, xx = y, x
            if d == 0:
                yy = y - 1
            elif d == 1:
                yy = y + 1
            elif d == 2:
                xx = x - 1
            else:
                xx = x + 1
            if 0 <= yy < h and 0 <= xx < w and not mask[yy, xx] and not outside[yy, xx]:
                outside[yy, xx] = True
                stack[top] = yy * w + xx
                top += 1
    for y in range(h):
        for x in range(w):
            filled[y, x] = not outside[y, x]


@njit
def label4(image, labels):
    """scipy.ndimage.label with the cross: components numbered 1.. in raster order of
    their first pixel; returns their count."""
    h, w = image.shape
    labels[:, :] = 0
    stack = np.empty(h * w, dtype=np.int64)
    n = 0
    for y0 in range(h):
        for x0 in range(w):
            if image[y0, x0] and labels[y0, x0] == 0:
                n += 1
                labels[y0, x0] = n
                stack[0] = y0 * w + x0
                top = 1
                while top > 0:
                    top -= 1
                    p = stack[top]
                    y = p // w
                    x = p - y * w
                    for d in range(4):
                        yy, xx = y, x
                        if d == 0:
                            yy = y - 1
                        elif d == 1:
                            yy = y + 1
                        elif d == 2:
                            xx = x - 1
                        else:
                            xx = x + 1
                        if 0 <= yy < h and 0 <= xx < w and image[yy, xx] and labels[yy, xx] == 0:
                            labels[yy, xx] = n
                            stack[top] = yy * w + xx
                            top += 1
    return n


@njit
def squared_edt(image, out):
    """Exact squared Euclidean distance of each nonzero pixel of ``image`` to the nearest
    zero pixel (scipy.ndimage.distance_transform_edt squared; zeros get 0).  Separable:
    column distances, then a row pass that searches outwards from each pixel and stops once
    the column offset alone reaches the best distance found (the same minimum)."""
    h, w = image.shape
    g = np.empty((h, w), dtype=np.int64)
    for x in range(w):
        d = _BIG
        for y in range(h):
            if not image[y, x]:
                d = 0
            elif d < _BIG:
                d += 1
            g[y, x] = d
        d = _BIG
        for y in range(h - 1, -1, -1):
            if not image[y, x]:
                d = 0
            elif d < _BIG:
                d += 1
            if d < g[y, x]:
                g[y, x] = d
    for y in range(h):
        for x in range(w):
            if not image[y, x]:
                out[y, x] = 0
                continue
            best = np.int64(1) << 62
            d = 0
            while d < w and d * d < best:
                xx = x - d
                if xx >= 0:
                    gv = g[y, xx]
                    if gv < _BIG:
                        v = d * d + gv * gv
                        if v < best:
                            best = v
                xx = x + d
                if d > 0 and xx < w:
                    gv = g[y, xx]
                    if gv < _BIG:
                        v = d * d + gv * gv
                        if v < best:
                            best = v
                d += 1
            out[y, x] = best


@njit
def dilate_cross(image, out):
    """scipy.ndimage.binary_dilation with the cross (border 0)."""
    h, w = image.shape
    for y in range(h):
        for x in range(w):
            out[y, x] = (image[y, x] or (y > 0 and image[y - 1, x]) or (y < h - 1 and image[y + 1, x])
                         or (x > 0 and image[y, x - 1]) or (x < w - 1 and image[y, x + 1]))


@njit
def erode_cross(image, out):
    """scipy.ndimage.binary_erosion with the cross (border 0: pixels on the edge erode)."""
    h, w = image.shape
    for y in range(h):
        for x in range(w):
            out[y, x] = (image[y, x] and y > 0 and image[y - 1, x] and y < h - 1 and image[y + 1, x]
                         and x > 0 and image[y, x - 1] and x < w - 1 and image[y, x + 1])


@njit
def lv_cavity(mask, min_cavity_px, cavity, filled, region):
    """Step 2 of the baseline pipeline on one cropped slice mask: ``filled`` (holes filled),
    ``cavity`` (the hole with the largest inscribed circle, ties to the larger and then
    the later-labelled hole) and ``region`` (the cavity dilated by the cross, within
    ``filled``).  Returns False (and leaves ``cavity``/``region`` empty) when there is
    no hole or the chosen one has fewer than ``min_cavity_px`` pixels."""
    h, w = mask.shape
    fill_holes(mask, filled)
    holes = np.empty((h, w), dtype=np.bool_)
    for y in range(h):
        for x in range(w):
            holes[y, x] = filled[y, x] and not mask[y, x]
    labels = np.empty((h, w), dtype=np.int64)
    n = label4(holes, labels)
    cavity[:, :] = False
    region[:, :] = False
    if n == 0:
        return False
    d2 = np.empty((h, w), dtype=np.int64)
    squared_edt(holes, d2)
    inscribed = np.full(n + 1, -1, dtype=np.int64)
    sizes = np.zeros(n + 1, dtype=np.int64)
    for y in range(h):
        for x in range(w):
            lab = labels[y, x]
            if lab > 0:
                sizes[lab] += 1
                if d2[y, x] > inscribed[lab]:
                    inscribed[lab] = d2[y, x]
    best = 1
    for lab in range(2, n + 1):  # np.lexsort((sizes, inscribed))[-1]: the last of the largest keys
        if inscribed[lab] > inscribed[best] or (inscribed[lab] == inscribed[best] and sizes[lab] >= sizes[best]):
            best = lab
    if sizes[best] < min_cavity_px:
        return False
    for y in range(h):
        for x in range(w):
            cavity[y, x] = labels[y, x] == best
    dilate_cross(cavity, region)
    for y in range(h):
        for x in range(w):
            region[y, x] = region[y, x] and filled[y, x]
    return True


@njit
def gaussian_constant(image, weights, out):
    """scipy.ndimage.gaussian_filter(image, sigma, mode="constant") for float64 ``image``
    given its 1-D ``weights`` (odd, symmetric: ``scipy.ndimage._filters._gaussian_kernel1d``):
    rows then columns as scipy's correlate1d sums a symmetric filter (centre term first,
    then the mirrored pairs from the outermost in), zeros beyond the edges.  Each output's
    sum is made in that order; the loops run across outputs (rows of the image), so they
    vectorise."""
    h, w = image.shape
    r = weights.shape[0] // 2
    padded = np.zeros((h + 2 * r, w), dtype=np.float64)  # axis 0: zero rows above and below
    padded[r:r + h] = image
    tmp = np.zeros((h, w + 2 * r), dtype=np.float64)     # axis 1: zero columns either side
    acc = np.empty(w, dtype=np.float64)
    centre = weights[r]
    for y in range(h):
        c = y + r
        for x in range(w):
            acc[x] = padded[c, x] * centre
        for j in range(-r, 0):
            wj = weights[r + j]
            above = padded[c + j]
            below = padded[c - j]
            for x in range(w):
                acc[x] += (above[x] + below[x]) * wj
        for x in range(w):
            tmp[y, r + x] = acc[x]
    for y in range(h):
        row = tmp[y]
        for x in range(w):
            acc[x] = row[r + x] * centre
        for j in range(-r, 0):
            wj = weights[r + j]
            for x in range(w):
                acc[x] += (row[r + x + j] + row[r + x - j]) * wj
        for x in range(w):
            out[y, x] = acc[x]
