"""What the tell scan tests and what it leaves alone: the role kinds, the planted signals exempt
from it (SPEC sections 3 and 4, each with its reason) and the pathway-class matching that keeps
an exemption honest.  ``pipeline.tells.scan`` pools and reports; the exploit agent
(``pipeline.agents.tells``) reads ``EXEMPT`` to know which statistics it may use."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

ROLE_KINDS = ("driver", "a9_driver", "a9_partner", "t4_driver", "t4_partner", "surrogate",
              "T1", "T2", "T3", "T7", "T9")
POOLED = "any_role"
PAIRED = "t4_driver-partner"
#: The T4 pair (the mean of its two members' values) ranked among the world's ordinary
#: co-regulated pairs: what makes the T4 exemptions legitimate is that the pair structure
#: itself does not point at T4, so these cells are never exempt.
T4_PAIR = "t4_pair"
#: Pathway classes (pipeline.pathways): about 30 % of the ordinary proteome follows an
#: ordinary pathway (its K_m, or its K_m_late) and carries what that pathway's feeders
#: carry; the rest feed one.  Where a statistic is exempt as a class property, each role
#: protein is ranked among the ordinary proteins of its own class instead (the ``@class``
#: cells, never exempt): the T2 decoy among the baseline followers (it reads 0.50 L), the
#: A9 partner among the late followers (0.50 L_late), every other role by its own place in
#: the sealed pathway record (a driver never follows; a T1 decoy may).
PLANTED_CLASS = {"T2": "baseline", "a9_partner": "late"}
MATCHED = "@class"
#: Roles that carry one shared component by construction: the T2 decoy and the A9 partner
#: both read L (0.50 L, 0.50 L_late = z[0.75 L + ...]), so each carries every variant that
#: moves L and L's place in the correlation structure; the T4 pair measures one abundance
#: on one variant.  In a world they are one observation of the pooled (``any_role``) cells,
#: not two: their normal scores are averaged (``scan.cluster_scores``).
SHARED_COMPONENT = (("T2", "a9_partner"), ("t4_driver", "t4_partner"))
#: Share of the family-wise false-positive rate spent on each family of tests.
ALPHA_SHARES = {"ranks": 0.8, "t4": 0.1, "surrogate": 0.1}
OUTER = 0.01  # a percentile below 1 % or above 99 % is "in the outer 2 %"


@dataclass(frozen=True)
class Exemption:
    kinds: tuple
    pattern: str  # regular expression on statistic names
    reason: str
    #: Only in worlds planting one of these biases (the observations from other worlds are tested).
    worlds_with: tuple = ()
    #: A pathway-class property: each role is then ranked among its own class instead (``@class`` cells).
    by_class: bool = False

    def covers(self, kind: str, stat: str) -> bool:
        return not self.worlds_with and kind in self.kinds and re.fullmatch(self.pattern, stat) is not None

    def covers_in(self, kind: str, stat: str, biases) -> bool:
        """Whether this conditional exemption drops ``kind``'s observation of ``stat`` in a world with ``biases``."""
        return (bool(self.worlds_with) and kind in self.kinds and any(b in biases for b in self.worlds_with)
                and re.fullmatch(self.pattern, stat) is not None)


#: The planted signals: what a trap is meant to show (SPEC section 3), never a tell.  Only
#: statistics that measure the planted association itself are exempt (T1's association with
#: BMI, T4's shared locus and co-regulation, T9's per-site scale); other consequences of a
#: planted path (a decoy's stability between visits, the imprint of L on the proteins that
#: follow it) are tested, since the generator can make them look ordinary.
#: Role kinds whose proteins move or follow L: in a T3 world, where imaging participation
#: depends on 0.55 L (S1.4), each is associated with the imaging flag through L.
L_LINKED = ("driver", "a9_driver", "a9_partner", "t4_driver", "t4_partner", "T2", "T7")

EXEMPT = (
    Exemption(("t4_driver", "t4_partner"),
              r"instrument\.(share_same_lead|share_window|max_ld_other_lead|n_linked_leads|lead_moves_proteins"
              r"|leads_within_.*|nearest_lead_kb)",
              "T4's planted shared locus: the partner carries the driver's cis variant (so each has the other's lead at "
              "its own locus)"),
    Exemption(("t4_driver", "t4_partner"),
              r"communality\.(max_abs_r|multiple_r2|n_r_above_0\.1|mean_r2|pc3|pc24)|transcript\.best_other_abs_r"
              r"|partial\..*|pcs\..*|visit2\.change_(partner_r|max_abs_r)",
              "T4's planted co-regulation: both proteins measure one abundance (SPEC T4 row), so each is the other's "
              "closest protein (largest correlation and partial correlation, the change between visits shared), the twin "
              "raises its share of the proteome's correlation (mean r2, whose twin-free mean_r2_rest is tested, and the "
              "top three components' share) and the "
              "pair takes a principal component of its own (after the 12 factors, so in the top 24); ordinary "
              "co-regulated pairs do the same, and the t4_pair cells test that the T4 pair ranks among them as one of them"),
    Exemption(ROLE_KINDS, r"instrument\.n_significant_variants",
              "a pathway class property: a follower carries its process's genetics (the T2 decoy, 0.50 L, and the A9 "
              "partner, 0.50 L_late, every variant that moves L; each ordinary follower, about 30 % of the proteome, its "
              "pathway's feeders' variants), so at paper scale followers have more genome-wide significant variants than "
              "the proteins that feed (in paper-scale standard-01 an ordinary late follower's mean normal score among all "
              "ordinary proteins is +1.09, a baseline follower's +0.95, a feeder's -0.41: drivers rank low as feeders do); "
              "the @class cells rank every role among the ordinary proteins of its own pathway class", by_class=True),
    Exemption(("T3",), r"imaging\.flag_z",
              "T3's planted selection: imaging participation contains + 0.55 x the T3 protein (S1.4), so the decoy is "
              "associated with the released imaged flag beyond the covariates; masking it would change the mechanism"),
    Exemption(L_LINKED, r"imaging\.flag_z",
              "T3's planted selection on L: in a T3 world participation contains + 0.55 L (S1.4), so every protein that "
              "moves or follows L (drivers, the T2 decoy, the A9 pair, the T4 pair, the T7 decoy through its variant) is "
              "associated with the imaging flag; their observations from the other worlds are tested",
              worlds_with=("T3",)),
    Exemption(("T1",), r"visit2\.change_bmi_r",
              "T1's planted confounding path: the decoy is an ordinary protein plus 0.55 z(BMI) at either visit, so its "
              "change between visits follows the change in BMI"),
    Exemption(("T9",), r"shape\..*_raw|covariates\.centre_(mean|spread)_F_raw|transcript\.r_raw|communality\.raw_pc12"
                       r"|visit2\.(r|mean_change|sd_ratio)_raw",
              "T9's planted site scale and shape: one centre reports 2.2 P + 1.1 (raw values only; the site-normalised "
              "twins are tested)"),
    Exemption(("T1",), r"covariates\.(bmi|bmi_squared|r2|distance|centre_mean_F_raw|ancestry_mean_F)"
                       r"|transcript\.covariate_(bmi|r2)|communality\.raw_pc12",
              "T1's planted confounding path: the decoy is 0.55 z(BMI) + ... (SPEC section 4), so its BMI terms (and "
              "the BMI composition of centres and ancestry groups in its group means) are the trap itself; the "
              "BMI-free covariate distance is tested"),
    Exemption(("T1",), r"visit2\.(r|r_raw|sd_ratio|sd_ratio_raw)",
              "T1's planted confounding path again: the decoy is an ordinary protein plus 0.55 z(BMI) (SPEC section 4), "
              "and BMI changes little in five years, so its visit-to-visit correlation and spread on values not "
              "adjusted for BMI carry the path; the covariate-adjusted twin (visit2.r_adjusted) is tested"),
)
#: Statistics that are identifiers or labels, not numbers to rank.
NOT_RANKED = ("instrument.lead_variant",)


def exemption(kind: str, stat: str) -> Optional[Exemption]:
    return next((e for e in EXEMPT if e.covers(kind, stat)), None)


def class_exempt(kind: str, stat: str) -> bool:
    """Whether ``kind``'s ranking on ``stat`` is exempt as a pathway-class property (``@class`` cells instead)."""
    e = exemption(kind, stat)
    return e is not None and e.by_class


def usable_statistics(names: Iterable[str]) -> list:
    """The statistics no exemption covers for any role kind (in any world): what an exploit agent may use."""
    return [s for s in names if s not in NOT_RANKED
            and not any(k in e.kinds and re.fullmatch(e.pattern, s) for e in EXEMPT for k in ROLE_KINDS)]
