"""Twins of ``kernels.vcf_encode``: one record, one sample at a time, with str."""
import numpy as np


def _allele(a: int) -> str:
    if a == -1:
        return "."
    if 0 <= a <= 9:
        return str(a)
    raise ValueError("allele index outside -1..9 cannot be written as one VCF character")


def format_vcf_records(prefix_bytes, prefix_offsets, haplotypes):
    lines = []
    for i in range(haplotypes.shape[0]):
        prefix = bytes(prefix_bytes[prefix_offsets[i]:prefix_offsets[i + 1]]).decode("ascii")
        calls = ["|".join(_allele(int(a)) for a in haplotypes[i, j]) for j in range(haplotypes.shape[1])]
        lines.append("\t".join([prefix] + calls) + "\n")
    encoded = [line.encode("ascii") for line in lines]
    ends = np.cumsum([len(line) for line in encoded]).astype(np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def vcf_record_ends(prefix_offsets, n_samples, ploidy):
    prefix_lengths = np.diff(np.asarray(prefix_offsets, dtype=np.int64))
    return np.cumsum(prefix_lengths + n_samples * 2 * ploidy + 1).astype(np.int64)


def allele_counts(calls, n_samples):
    """AC and AN per record from int8[k, v, S, p] sample-blocked calls, sample by sample."""
    k, v, block, ploidy = calls.shape
    ac = np.zeros(v, dtype=np.int32)
    an = np.zeros(v, dtype=np.int32)
    for r in range(v):
        for j in range(n_samples):
            for a in calls[j // block, r, j % block]:
                ac[r] += int(a) == 1
                an[r] += int(a) >= 0
    return ac, an
