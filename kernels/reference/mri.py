"""Slow, obvious twin of ``kernels.mri.render_batch``: the same model written with
numpy over whole images (every pixel composited in every frame, no heart-pixel
list or early exits) and the pure-Python generator of ``kernels.reference.rng``.

Agreement with the kernel is to floating-point round-off: a cine pixel may
differ by one grey level where the true value lies on a rounding boundary.
"""
from __future__ import annotations

import math

import numpy as np

from kernels import mri as K
from kernels.reference.rng import Xoshiro

GOLDEN = 0x9E3779B97F4A7C15


def hashed_u64(base: int, counters: np.ndarray) -> np.ndarray:
    """SplitMix64 of base + (counter + 1) * golden, on uint64 arrays (wrapping arithmetic)."""
    x = np.uint64(base) + counters.astype(np.uint64) * np.uint64(GOLDEN) + np.uint64(GOLDEN)
    z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def plane_base(key: int, row: int) -> int:
    return Xoshiro(int(key), int(row)).s[0]


def byte_sum_normals(u: np.ndarray):
    b = [((u >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.float64) for j in range(8)]
    sd = math.sqrt(4.0 * (256.0 ** 2 - 1.0) / 12.0)
    return (b[0] + b[1] + b[2] + b[3] - 510.0) / sd, (b[4] + b[5] + b[6] + b[7] - 510.0) / sd


def contraction(t, t_es, lag, tau_e, t_a, tau_a, early_fraction):
    def smooth(x):
        x = min(max(x, 0.0), 1.0)
        return x * x * (3.0 - 2.0 * x)

    if t <= t_es:
        return 0.5 * (1.0 - math.cos(math.pi * t / t_es))
    return 1.0 - early_fraction * smooth((t - t_es - lag) / tau_e) - (1.0 - early_fraction) * smooth((t - t_a) / tau_a)


def wrap(a):
    return a - 2.0 * np.pi * np.floor((a + np.pi) / (2.0 * np.pi))


def coverage(boundary, r):
    return np.clip(boundary - r + 0.5, 0.0, 1.0)


def ellipse_coverage(x, y, cx, cy, ax, ay):
    dx = (x - cx) / ax
    dy = (y - cy) / ay
    f = np.sqrt(dx * dx + dy * dy)
    with np.errstate(divide="ignore", invalid="ignore"):
        grad = np.sqrt((dx / ax) ** 2 + (dy / ay) ** 2) / f
        sdf = (f - 1.0) / grad
    return np.where(f == 0.0, 1.0, coverage(0.0, sdf))


def background(x, y, bx, by, s, tpl):
    v = np.full(np.broadcast(x, y).shape, tpl["i_mediastinum"])
    v += (tpl["i_lung"] - v) * ellipse_coverage(x, y, bx - 47.0, by - 6.0, 25.0, 52.0)
    v += (tpl["i_lung"] - v) * ellipse_coverage(x, y, bx + 45.0, by - 14.0, 23.0, 46.0)
    v += (tpl["i_liver"] - v) * ellipse_coverage(x, y, bx - 30.0, by + 64.0 - 6.0 * s, 58.0, 30.0)
    edge = by - 46.0 + 0.006 * (x - bx) * (x - bx)
    v += (tpl["i_chest_muscle"] - v) * coverage(edge, y)
    v += (tpl["i_chest_fat"] - v) * coverage(edge - 9.0, y)
    v += (tpl["i_aorta"] - v) * ellipse_coverage(x, y, bx + 22.0, by + 44.0, 7.0, 7.0)
    return v


def bspline(t):
    w = np.stack([(1 - t) ** 3 / 6, (3 * t ** 3 - 6 * t ** 2 + 4) / 6, (-3 * t ** 3 + 3 * t ** 2 + 3 * t + 1) / 6,
                  t ** 3 / 6])
    return w, np.sqrt((w * w).sum(axis=0))


def render_one(trait_row, segment, site_field, key, tpl_vec, table, frames=25, size=128):
    """(cine uint8 [s, f, y, x], t1 float32 [s, y, x]) for one subject."""
    tpl = dict(zip(K.TEMPLATE_FIELDS, map(float, tpl_vec)))
    tr = dict(zip(K.TRAIT_COLUMNS, map(float, trait_row)))
    rng = Xoshiro(int(key), K.ROW_SUBJECT)
    n_uniform = 3 + 2 * K.N_SLICES
    draws = []
    for j in range(K.N_SUBJECT_DRAWS):
        u = rng.next_double()
        draws.append(2.0 * u - 1.0 if j < n_uniform else table[int(u * 65536.0)])
    ox = math.floor(tpl["centre_jitter_px"] * draws[0] + 0.5)
    oy = math.floor(tpl["centre_jitter_px"] * draws[1] + 0.5)
    rv_angle = tpl["rv_angle_rad"] + tpl["rotation_jitter_rad"] * draws[2]
    gain = 1.0 + tpl["gain_sd"] * draws[-1]

    n_bins = K.N_ANGLE_BINS
    phi = 2.0 * np.pi * np.arange(n_bins) / n_bins
    d = wrap(phi)
    coefs = np.array(draws[n_uniform:n_uniform + 2 * K.N_HARMONICS])
    norm = math.sqrt(float((coefs ** 2).sum()) / 2.0) or 1.0
    h = sum(coefs[2 * j] * np.cos((j + 2) * phi) + coefs[2 * j + 1] * np.sin((j + 2) * phi)
            for j in range(K.N_HARMONICS))
    het = min(max(tr["motion_heterogeneity"], 0.0), 1.0)
    motion = np.maximum(1.0 + K.MOTION_HET_RMS_PER_UNIT * het * h / norm, 0.05)
    if segment >= 0:
        dd = np.abs(wrap(phi - (segment - 1.5) * np.pi / 3.0))
        hw = tpl["segment_half_width_rad"]
        window = np.where(dd < hw, np.cos(0.5 * np.pi * dd / hw) ** 2, 0.0)
        motion = motion * (1.0 - (1.0 - min(max(tr["segment_motion"], 0.0), 1.0)) * window)
    wall_shape = 1.0 + tpl["septal_wall_excess"] * np.cos(phi)
    ed_shape = 1.0 + tpl["ellipticity"] * np.cos(2.0 * (phi - tpl["ellipse_angle_rad"]))
    hs, taper = tpl["rv_half_span_rad"], tpl["rv_wall_taper_rad"]
    ad = np.abs(d)
    rv_bump = np.where(ad < hs, np.cos(0.5 * np.pi * np.minimum(ad, hs) / hs) ** tpl["rv_shape_power"], 0.0)
    rv_wall = np.where(ad <= hs, 1.0, np.where(ad < hs + taper,
                                               np.cos(0.5 * np.pi * (ad - hs) / taper) ** 2, 0.0))
    fat_shape = tpl["fat_px"] * (0.3 + 0.35 * (1.0 + np.cos(d)))
    dphi = 2.0 * np.pi / n_bins

    names = ("base", "mid", "apex")
    cine = np.empty((3, frames, size, size), dtype=np.uint8)
    t1map = np.full((3, size, size), np.nan, dtype=np.float32)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    pixel = np.arange(size * size).reshape(size, size)
    for s in range(3):
        cx = tpl["centre_x_frac"] * size + ox + tpl[f"slice_dx_{names[s]}"] + tpl["slice_jitter_px"] * draws[3 + 2 * s]
        cy = tpl["centre_y_frac"] * size + oy + tpl[f"slice_dy_{names[s]}"] + tpl["slice_jitter_px"] * draws[4 + 2 * s]
        area_ed = tpl["cavity_area_ref_px"] * (tr["lv_edv_ml"] / tpl["edv_ref_ml"]) ** (2 / 3) * tpl[f"cavity_factor_{names[s]}"]
        r_es = tr["lv_esv_ml"] / tr["lv_edv_ml"]
        ratio = r_es / (1.0 - tpl["long_axis_coupling"] * (1.0 - r_es))
        rp = tpl[f"pap_radius_{names[s]}"]
        pap_area = 2.0 * np.pi * rp * rp
        wall = tr["lv_wall_mm"] / tpl["spacing_mm"] * tpl[f"wall_factor_{names[s]}"]
        rv_area_ed = tpl["rv_area_ref_px"] * (tr["rv_edv_ml"] / tpl["rv_edv_ref_ml"]) ** (2 / 3) * tpl[f"rv_factor_{names[s]}"]
        rv_r = tr["rv_esv_ml"] / tr["rv_edv_ml"]
        rv_ratio = rv_r / (1.0 - tpl["long_axis_coupling"] * (1.0 - rv_r))
        # Thorax: the canvas is evaluated at the body position directly (an integer shift of the kernel's canvas).
        bg = background(xx, yy, tpl["centre_x_frac"] * size + ox, tpl["centre_y_frac"] * size + oy, s, tpl)
        field = site_field.astype(np.float64) * gain
        r = np.hypot(xx - cx, yy - cy)
        b = (np.arctan2(yy - cy, xx - cx) - rv_angle) / (2.0 * np.pi) * n_bins
        b = b - n_bins * np.floor(b / n_bins)
        b = np.where(b >= n_bins, b - n_bins, b)
        k0 = b.astype(np.int64)
        k1 = (k0 + 1) % n_bins
        frac = b - k0

        def at(table_k):
            return table_k[k0] + (table_k[k1] - table_k[k0]) * frac

        for f in range(frames):
            c = contraction(f / frames, tpl["t_end_systole"], tr["diastolic_lag"], tpl["tau_early"],
                            tpl["t_atrial"], tpl["tau_atrial"], tpl["early_fraction"])
            endo_area = area_ed * (1.0 - (1.0 - ratio) * c) + pap_area
            r0 = math.sqrt(2.0 * (area_ed + pap_area) / (float((ed_shape ** 2).sum()) * dphi))
            rk = r0 * ed_shape
            a2 = float((0.5 * motion ** 2 * dphi).sum())
            a1 = float((rk * motion * dphi).sum())
            a0 = max(float((0.5 * rk * rk * dphi).sum()) - endo_area, 0.0)
            excursion = 2.0 * a0 / (a1 + math.sqrt(max(a1 * a1 - 4.0 * a2 * a0, 0.0)))
            r_endo = np.maximum(rk - excursion * motion, 0.0)
            r_epi = r_endo + wall * wall_shape * (1.0 + tr["wall_thickening"] * c * motion)
            rv_area = rv_area_ed * (1.0 - (1.0 - rv_ratio) * c)
            b2 = float((0.5 * rv_bump ** 2 * dphi).sum())
            b1 = float((r_epi * rv_bump * dphi).sum())
            width = 2.0 * rv_area / (b1 + math.sqrt(b1 * b1 + 4.0 * b2 * rv_area)) if rv_area > 0 and b2 > 0 else 0.0
            r_rv_in = r_epi + width * rv_bump
            r_rv_out = r_rv_in + tpl["rv_wall_px"] * rv_wall
            r_fat = r_rv_out + fat_shape

            c_endo, c_epi = coverage(at(r_endo), r), coverage(at(r_epi), r)
            c_rv_in, c_rv_out, c_fat = coverage(at(r_rv_in), r), coverage(at(r_rv_out), r), coverage(at(r_fat), r)
            c_pap = np.zeros_like(r)
            if rp > 0:
                for angle in (tpl["pap_angle_1_rad"], tpl["pap_angle_2_rad"]):
                    pb = wrap(angle) / (2 * np.pi) * n_bins
                    pb = pb - n_bins * math.floor(pb / n_bins)
                    j0 = int(pb)
                    endo_here = r_endo[j0 % n_bins] + (r_endo[(j0 + 1) % n_bins] - r_endo[j0 % n_bins]) * (pb - j0)
                    pr = max(endo_here - tpl["pap_inset"] * rp, 0.0)
                    px = cx + pr * math.cos(rv_angle + angle)
                    py = cy + pr * math.sin(rv_angle + angle)
                    near = (np.abs(xx - px) < rp + 1.0) & (np.abs(yy - py) < rp + 1.0)
                    c_pap = np.maximum(c_pap, np.where(near, coverage(rp, np.hypot(xx - px, yy - py)), 0.0))
            blood = c_endo * (1 - c_pap) + (c_rv_in - c_epi)
            myo = (c_epi - c_endo) + (c_rv_out - c_rv_in)
            truth = (tpl["i_blood"] * blood + tpl["i_papillary"] * (c_endo * c_pap) + tpl["i_myocardium"] * myo
                     + tpl["i_fat"] * (c_fat - c_rv_out) + bg * (1 - c_fat)) * field
            n1, n2 = byte_sum_normals(hashed_u64(plane_base(key, K.ROW_CINE + s * K.MAX_FRAMES + f), pixel))
            real = truth + tpl["noise_sigma"] * n1
            imag = tpl["noise_sigma"] * n2
            cine[s, f] = np.minimum(np.sqrt(real * real + imag * imag) + 0.5, 255.0).astype(np.uint8)
            if f == 0:
                myo_ed = myo

        # T1 map.
        G = K.TEXTURE_NODES
        tex_base = plane_base(key, K.ROW_TEXTURE + s)
        nodes = table[(hashed_u64(tex_base, np.arange(G * G)) >> np.uint64(48)).astype(np.int64)].reshape(G, G)
        inside = myo_ed >= 0.5
        gx = (xx[inside] - cx) / tpl["texture_spacing_px"] + 0.5 * (G - 1)
        gy = (yy[inside] - cy) / tpl["texture_spacing_px"] + 0.5 * (G - 1)
        ix, iy = np.floor(gx).astype(int), np.floor(gy).astype(int)
        wx, nx = bspline(gx - ix)
        wy, ny = bspline(gy - iy)
        texture = np.zeros(gx.shape)
        for a in range(4):
            for c_ in range(4):
                texture += wy[a] * wx[c_] * nodes[np.clip(iy - 1 + a, 0, G - 1), np.clip(ix - 1 + c_, 0, G - 1)]
        texture /= nx * ny
        noise = table[(hashed_u64(plane_base(key, K.ROW_T1_NOISE + s), pixel[inside]) >> np.uint64(48)).astype(np.int64)]
        value = tr["t1_ms"] + tr["t1_heterogeneity_ms"] * texture + tpl["t1_noise_ms"] * noise
        t1map[s][inside] = np.maximum(value, tpl["t1_floor_ms"]).astype(np.float32)
    return cine, t1map


def render_batch(traits, segments, site_index, keys, site_fields, tpl, table, frames=25, size=128):
    """The twin of ``kernels.mri.render_batch`` returning (cine, t1map)."""
    out = [render_one(traits[i], int(segments[i]), site_fields[int(site_index[i])], int(keys[i]), tpl, table,
                      frames, size) for i in range(traits.shape[0])]
    return np.stack([o[0] for o in out]), np.stack([o[1] for o in out])
