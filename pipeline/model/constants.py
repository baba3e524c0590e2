"""The hidden model's fixed parameters (Supplementary Methods S1; SPEC section 4): the genome
map's chromosome lengths, the population's marginals, L's and L_late's terms, the
molecules' residuals and carries, the hazards.  Data only: the sampler
(``pipeline.model.sampler``) and the participant modalities read them."""
from __future__ import annotations

import numpy as np

# GRCh38 autosome lengths: the variant map spreads over a human-sized genome so that
# physical distances (and hence LD) are on a realistic scale.
CHROM_LENGTHS = np.array([
    248956422, 242193529, 198295559, 190214555, 181538259, 170805979, 159345973,
    145138636, 138394717, 133797422, 135086622, 133275309, 114364328, 107043718,
    101991189, 90338345, 83257441, 80373285, 58617616, 64444167, 46709983, 50818468,
], dtype=np.int64)
CONTIGS = [str(i) for i in range(1, 23)]

# S1.1 population.
AGE_MEAN, AGE_SD, AGE_LO, AGE_HI = 59.147, 9.245, 45.0, 84.0
MALE_P = 0.4804
BMI_CENTRE, BMI_RESID_SD = 28.3006, 5.05
AF_FLOOR, AF_A, AF_B = 0.034381, 0.734507, 1.064551
LD_DECAY_BP = 110_000.0
# Genomic spacing mixture: a fraction of gaps are short (clustered variants in LD),
# the rest spread the remaining variants over the chromosome.
CLUSTER_FRACTION, CLUSTER_GAP_BP = 0.6, 8_000.0
TRANS_EFFECT = np.sqrt(0.01)
PROTEIN_RESIDUAL = 0.8
SMOKING_PREVALENCE = 0.12
# UK Biobank assessment-centre codes (field 54) and ancestry groups (field 21000, top level).
CENTRE_CODES = np.array([11010, 11011, 11012, 11013, 11014, 11016, 11017, 11018, 11020, 11021])
ANCESTRY_CODES = np.array([1, 2, 3, 4, 5, 6])
ANCESTRY_BASE_P = np.array([0.86, 0.02, 0.05, 0.04, 0.01, 0.02])
# L's covariate terms (S1.2).
L_BMI, L_SMOKING, L_DIRECT, L_AGE = 0.15, 0.10, 0.12, 0.08
# Late severity (S1.3): L_late = z[0.75 L + 0.35 sum w_late P].
LATE_CARRY, LATE_DRIVERS = 0.75, 0.35
# A co-regulated pair measures one abundance A with independent assay noise: of the
# ordinary residual's variance (0.8^2) this share is A's, the rest each assay's own.
COREGULATED_SHARED = 0.75
# Molecules between visits: correlation of the shared factors, and of the assay and
# biological residuals (the pathways' visit-2 carries are built from these).
VISIT2_FACTOR_CARRY = 0.85
VISIT2_RESID_CARRY = 0.60
# Cardiac hazard (S1.4 T8 form) and an age-driven non-cardiac Gompertz hazard.
CARDIAC_BASE, CARDIAC_L, CARDIAC_AGE, CARDIAC_SMOKING, CARDIAC_BMI = 0.006, 0.70, 0.45, 0.35, 0.15
# Calibrated once against S1.1's age distribution so that non-cardiac deaths are
# about 4,558 / 54,000 over 12 years (the paper's anchor).
OTHER_BASE, OTHER_AGE_SLOPE, OTHER_AGE_CENTRE = 0.0037, 0.085, 60.0
