"""The genetics of the role-blind statistics (``pipeline.tells.features``): the genotype
matrix of the released subjects, each protein's lead variant by the analyst's own scan,
the variants' positions (the genotype Zarr store, else the VCF), and the statistics of the
lead variant as an instrument.

One job: each protein's lead variant and what it says.  Every function is self-contained
(imports inside; the helpers it calls are the library's other functions): the exploit
agent emits their source (``features.library_source``).
"""
from __future__ import annotations

from .views import standardise_columns


def genotype_matrix(genotypes, subjects):
    """Standardised dosages (float32, missing calls at the mean) for ``subjects``, and allele frequencies."""
    import numpy as np

    g = genotypes.reindex(subjects)
    calls = g.to_numpy()
    out = np.empty(calls.shape, dtype=np.float32)
    q = np.empty(calls.shape[1], dtype=np.float32)
    for start in range(0, calls.shape[1], 512):  # in blocks of variants, each on its own
        sl = slice(start, start + 512)
        d = np.array(calls[:, sl], dtype=np.float32)
        d[~np.isfinite(d) | (d < 0)] = np.nan
        qb = np.nanmean(d, axis=0) / 2.0
        d = np.where(np.isfinite(d), d, 2.0 * qb)
        sd = d.std(axis=0)
        sd[sd == 0] = 1.0
        out[:, sl] = ((d - d.mean(axis=0)) / sd).astype(np.float32)
        q[sl] = qb
    return out, q, np.asarray(g.columns)


def lead_scan(gz, x, step=512):
    """Per column of ``x`` (standardised): the variant with the largest |r| and that r."""
    import numpy as np

    n = gz.shape[0]
    xf = np.asarray(x, dtype=np.float32)
    best = np.full(xf.shape[1], -1.0)
    lead = np.zeros(xf.shape[1], dtype=np.int64)
    lead_r = np.zeros(xf.shape[1])
    for start in range(0, gz.shape[1], step):
        r = gz[:, start:start + step].T @ xf / n
        idx = np.abs(r).argmax(axis=0)
        val = r[idx, np.arange(r.shape[1])]
        better = np.abs(val) > best
        best[better] = np.abs(val[better])
        lead[better] = start + idx[better]
        lead_r[better] = val[better]
    return lead, lead_r


def variant_positions(release, variant_ids):
    """(contig label, position) per variant in ``variant_ids`` order, from the genotype Zarr store or the VCF."""
    import gzip
    import os

    import numpy as np

    store = os.path.join(release, "genotypes.zarr")
    try:
        import zarr

        root = zarr.open_group(store, mode="r", zarr_format=2)
        ids = [str(v) for v in root["variant_id"][:].tolist()]
        contig_names = [str(v) for v in root["contig_id"][:].tolist()]
        contig = np.array([contig_names[int(i)] for i in root["variant_contig"][:]], dtype=object)
        position = np.asarray(root["variant_position"][:], dtype=np.int64)
    except Exception:  # no store (or no zarr): read the VCF's first columns
        ids, contig, position = [], [], []
        with gzip.open(os.path.join(release, "genotypes.vcf.gz"), "rt") as handle:
            for line in handle:
                if line.startswith("#"):
                    continue
                chrom, pos, vid = line.split("\t", 3)[:3]
                ids.append(vid)
                contig.append(chrom)
                position.append(int(pos))
        contig, position = np.array(contig, dtype=object), np.array(position, dtype=np.int64)
    where = {v: i for i, v in enumerate(ids)}
    index = np.array([where[str(v)] for v in variant_ids])
    return contig[index], position[index]


def instrument_statistics(gz, q, contig, position, x, window_bp=100_000):
    """Lead-variant statistics of every column of ``x`` (standardised proteins).

    Strength (r^2, F, count of genome-wide significant variants), a second
    signal on another chromosome and after conditioning on the lead, the lead's
    allele frequency and local variant density, and the sharing of loci with
    other proteins: identical leads, leads within ``window_bp``, the strongest
    LD with another protein's lead and how many other proteins the lead itself
    moves.  Sharing counts only proteins whose lead is genome-wide significant.
    """
    import numpy as np

    n, p = x.shape
    lead, lead_r = lead_scan(gz, x)
    r2 = lead_r ** 2
    threshold = 5.45 / np.sqrt(n)  # |r| of a genome-wide significant association (p = 5e-8)
    out = {"lead_r2": r2, "lead_F": r2 * (n - 2) / np.clip(1 - r2, 1e-12, None)}
    maf = np.minimum(q, 1 - q)
    out["lead_maf"] = maf[lead]
    count = np.zeros(p)
    other_chrom = np.zeros(p)
    trans_variant = np.zeros(p, dtype=np.int64)
    variant_hits = np.zeros(gz.shape[1])  # proteins each variant moves genome-wide significantly
    xf = np.asarray(x, dtype=np.float32)
    for start in range(0, gz.shape[1], 512):
        r = gz[:, start:start + 512].T @ xf / n
        hit = np.abs(r) > threshold
        count += hit.sum(axis=0)
        variant_hits[start:start + r.shape[0]] = hit.sum(axis=1)
        same = contig[start:start + 512][:, None] == contig[lead][None, :]
        r2o = np.where(same, 0.0, r ** 2)
        best = r2o.argmax(axis=0)
        val = r2o[best, np.arange(p)]
        better = val > other_chrom
        other_chrom[better] = val[better]
        trans_variant[better] = start + best[better]
    out["n_significant_variants"] = count
    out["trans_r2"] = other_chrom
    # the strongest trans signal: a hub many proteins share, or a variant of the protein's own
    trans_significant = other_chrom > threshold ** 2
    hub_size = np.where(trans_significant, variant_hits[trans_variant], 0.0)
    out["trans_hub_size"] = hub_size
    out["trans_private_r2"] = np.where(trans_significant & (hub_size <= 2), other_chrom, 0.0)
    out["trans_shared_r2"] = np.where(trans_significant & (hub_size > 2), other_chrom, 0.0)
    out["lead_is_hub"] = (variant_hits[lead] > 2).astype(np.float64)
    g_lead = gz[:, lead].astype(np.float64)
    beta = (g_lead * x).sum(axis=0) / n
    conditioned = standardise_columns(x - g_lead * beta)
    _, cond_r = lead_scan(gz, conditioned)
    out["conditional_r2"] = cond_r ** 2
    out["locus_density"] = np.array([int(((contig == contig[v]) & (np.abs(position - position[v]) <= window_bp)).sum())
                                     for v in lead])
    significant = np.abs(lead_r) > threshold
    ld = (g_lead.T @ g_lead / n) ** 2
    np.fill_diagonal(ld, 0.0)
    others = np.where(significant[None, :], ld, 0.0)
    same_lead = (lead[:, None] == lead[None, :]) & significant[None, :]
    np.fill_diagonal(same_lead, False)
    near = ((contig[lead][:, None] == contig[lead][None, :])
            & (np.abs(position[lead][:, None] - position[lead][None, :]) <= window_bp) & significant[None, :])
    np.fill_diagonal(near, False)
    out["share_same_lead"] = same_lead.sum(axis=1).astype(np.float64)
    out["share_window"] = near.sum(axis=1).astype(np.float64)
    out["max_ld_other_lead"] = others.max(axis=1)
    out["n_linked_leads"] = (others > 0.05).sum(axis=1).astype(np.float64)
    lead_effects = g_lead.T @ np.asarray(x, dtype=np.float64) / n  # [lead of protein i, protein j]
    hits = np.abs(lead_effects) > threshold
    np.fill_diagonal(hits, False)
    out["lead_moves_proteins"] = hits.sum(axis=1).astype(np.float64)
    # locus isolation: other proteins' (significant) lead variants near one's own
    lc, lp = contig[lead], position[lead].astype(np.float64)
    same_contig = (lc[:, None] == lc[None, :]) & significant[None, :] & (lead[:, None] != lead[None, :])
    np.fill_diagonal(same_contig, False)
    dist = np.where(same_contig, np.abs(lp[:, None] - lp[None, :]), np.inf)
    for label, w in (("250kb", 250_000), ("1mb", 1_000_000), ("3mb", 3_000_000)):
        out[f"leads_within_{label}"] = (dist <= w).sum(axis=1).astype(np.float64)
    out["nearest_lead_kb"] = np.minimum(dist.min(axis=1), 1e9) / 1000.0
    return out, lead, lead_r
