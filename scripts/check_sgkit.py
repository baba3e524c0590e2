"""Check that sgkit reads a release's genotype store and computes what our dosages say.

    python scripts/check_sgkit.py <genotypes.zarr> <dosages.npz>

Runs in an environment of its own with sgkit (which needs zarr < 3 and so cannot
share this project's environment); it imports nothing from this project.
``dosages.npz`` is what ``load_genotypes()`` returns, saved from the project's
environment::

    python -c "import numpy as np; from pipeline.genotypes_io import load_genotypes; \\
        d = load_genotypes('<release>'); np.savez('dosages.npz', dosage=d.to_numpy(), \\
        samples=d.index.to_numpy(str), variants=d.columns.to_numpy(str))"

Checks: ``sgkit.load_dataset`` gives int8 calls (not floats: a fill value on
``call_genotype`` used to make xarray decode it as float32 with NaN), sample
and variant ids in release order, ``variant_stats`` allele counts and totals
equal to the dosages and to the store's INFO arrays, and ``sample_stats``
heterozygous / homozygous-ALT counts and call rates equal to the dosages'.
Prints one line per check and how many passed; exits 1 on any failure.
"""
from __future__ import annotations

import sys

import numpy as np


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    store, dosage_file = argv
    import sgkit

    with np.load(dosage_file) as z:
        dosage = z["dosage"].astype(np.int64)  # subjects x variants, -1 where a call has a missing allele
        samples, variants = z["samples"].tolist(), z["variants"].tolist()
    ds = sgkit.load_dataset(store)
    called = dosage >= 0
    alt = np.where(called, dosage, 0)

    results: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append((name, bool(ok), detail))

    gt = ds["call_genotype"]
    check("call_genotype is int8 [variants, samples, ploidy]",
          gt.dtype == np.int8 and gt.dims == ("variants", "samples", "ploidy"), f"{gt.dtype} {gt.dims}")
    check("sample_id in release order", ds["sample_id"].values.astype(str).tolist() == samples)
    check("variant_id in release order", ds["variant_id"].values.astype(str).tolist() == variants)
    calls = gt.values
    check("calls sum to the dosages", np.array_equal(np.where((calls < 0).any(axis=2), -1, calls.sum(axis=2)).T,
                                                     dosage))

    try:
        vs = sgkit.variant_stats(ds)
        counts = vs["variant_allele_count"].values
    except Exception as exc:  # noqa: BLE001 (the failure is the finding: report it and stop)
        check("sgkit.variant_stats runs", False, f"{type(exc).__name__}: {exc}")
        return _finish(results, sgkit, store, ds)
    # A dosage is -1 when either allele is missing, so it fixes the allele counts
    # only of variants called in every sample (all of them in a built world).
    full = called.all(axis=0)
    check("variant_stats: ALT allele counts equal the dosages' sums (variants called in every sample)",
          full.any() and np.array_equal(counts[full, 1], alt[:, full].sum(axis=0)), f"{full.sum()} such variants")
    check("variant_stats: REF allele counts equal 2 x samples - ALT (same variants)",
          full.any() and np.array_equal(counts[full, 0], 2 * len(samples) - alt[:, full].sum(axis=0)))
    check("variant_stats: allele totals equal the store's variant_AN",
          np.array_equal(vs["variant_allele_total"].values, ds["variant_AN"].values))
    check("variant_stats: ALT counts equal the store's variant_AC",
          np.array_equal(counts[:, 1], ds["variant_AC"].values[:, 0]))
    freq = vs["variant_allele_frequency"].values[:, 1]
    af = ds["variant_AF"].values[:, 0].astype(np.float64)
    # variant_AF holds the VCF's 6-significant-digit text: within half a unit of its last digit;
    # missing (NaN) exactly where no allele was called.
    check("variant_stats: ALT frequency equals variant_AF to 6 significant digits",
          np.array_equal(np.isnan(freq), np.isnan(af)) and np.allclose(freq, af, rtol=5e-6, atol=0, equal_nan=True),
          f"max |difference| {np.nanmax(np.abs(freq - af)):.2g}")
    check("variant_stats: heterozygous counts equal the dosages'",
          np.array_equal(vs["variant_n_het"].values, (dosage == 1).sum(axis=0)))

    try:
        ss = sgkit.sample_stats(ds)
    except Exception as exc:  # noqa: BLE001
        check("sgkit.sample_stats runs", False, f"{type(exc).__name__}: {exc}")
        return _finish(results, sgkit, store, ds)
    check("sample_stats: heterozygous counts equal the dosages'",
          np.array_equal(ss["sample_n_het"].values, (dosage == 1).sum(axis=1)))
    check("sample_stats: homozygous ALT counts equal the dosages'",
          np.array_equal(ss["sample_n_hom_alt"].values, (dosage == 2).sum(axis=1)))
    check("sample_stats: call rates equal the dosages'",
          np.allclose(ss["sample_call_rate"].values, called.mean(axis=1), rtol=0, atol=1e-12))

    return _finish(results, sgkit, store, ds)


def _finish(results: list, sgkit, store: str, ds) -> int:
    for name, ok, detail in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail and not ok else ""))
    failed = sum(not ok for _, ok, _ in results)
    print(f"sgkit {sgkit.__version__} on {store}: {ds.sizes['variants']} variants x {ds.sizes['samples']} samples")
    # Not pytest's "N passed, N failed" form: CI reads that line from the test run.
    print(f"{len(results) - failed} of {len(results)} sgkit checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
