"""The scorer: Supplementary Methods S2, applied to one episode.

``score`` is the pure core (truth, parsed submission, phenotype table, sealed
latent, evaluation mask, baseline, delivered experiments, valid identifiers in;
the score dictionary out).  ``score_episode`` reads a sealed bundle and a work
folder and calls it; ``python -m pipeline.score --sealed DIR --work DIR
[--ledger FILE]`` prints the result as JSON.

Whatever an agent leaves in its work folder is scored by the S2 rules and never
raises: S2.4 scores every exit path from what WORK holds, so a crash here would
turn a malformed submission into an unscored episode.  Every choice the source
leaves open is written next to the code that makes it and is reported in
``details.interpretations`` whenever it affected the episode.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

# ----------------------------------------------------------------------------- constants

POINTS_TARGET = 30.0
POINTS_CONFIDENCE = 25.0
POINTS_MECHANISM = 15.0
POINTS_DIRECTION = 20.0
POINTS_PHENOTYPE = 10.0
SAFETY_PENALTY = -30.0

PAIR_CREDIT_EXPERIMENT = 25.0
PAIR_CREDIT_CLAIMS = 17.5
NULL_WORLD_RESTRAINT = 15.0

NOMINATION_CAP = 25
ABSTENTION_SCORED_CAP = 1000
ABSTENTION_MIN_IDS = 2
ABSTENTION_MAX_IDS = 5

PHENOTYPE_MIN_FINITE = 51
PHENOTYPE_CEILING = 0.85
PHENOTYPE_GAP_EPS = 1e-6

MECHANISM_TO_BIAS = {
    "confounding": "T1",
    "reverse_causation": "T2",
    "selection": "T3",
    "pleiotropy": "T7",
    "measurement_artifact": "T9",
}
BIAS_TO_MECHANISM = {bias: mechanism for mechanism, bias in MECHANISM_TO_BIAS.items()}
DIRECTION_LABELS = ("inhibit", "activate", "unknown")
ALIGNMENT_LABELS = ("aligned", "misaligned", "unknown")
PAIR_KINDS = ("T4", "A9")
EXPERIMENT_KINDS = ("knockdown", "cell_perturbation")

# Only used when the sealed bundle lacks oracle.json's protein list.
FALLBACK_PROTEIN_PATTERN = re.compile(r"^PROT_[0-9]{4,}$")

COMPONENT_KEYS = (
    "target_identification",
    "causal_confidence",
    "bias_identification",
    "intervention_direction",
    "phenotype_construction",
)
# Warnings name offending input; a hostile submission can hold millions of entries.
MAX_EXAMPLES = 10


# ----------------------------------------------------------------------------- small helpers


class _Notes:
    """Warnings about dropped or defaulted input plus the interpretations that fired."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.interpretations: list[str] = []

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def interpret(self, message: str) -> None:
        if message not in self.interpretations:
            self.interpretations.append(message)


def _examples(items: Iterable[Any]) -> list[str]:
    out = []
    for item in items:
        if len(out) >= MAX_EXAMPLES:
            break
        out.append(_short(item))
    return out


def _short(item: Any) -> str:
    if isinstance(item, str):
        text = item
    else:
        try:
            text = repr(item)
        except RecursionError:  # json.loads accepts nesting deeper than repr can walk from here
            text = f"<deeply nested {type(item).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _is_number(value: Any) -> bool:
    # JSON true/false arrive as bool, a subclass of int; they are not numbers here.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_number(value: Any) -> bool:
    if not _is_number(value):
        return False
    if isinstance(value, int):
        return True  # float(10**400) would overflow; every int is finite
    return math.isfinite(value)


def _label(value: Any, allowed: tuple[str, ...]) -> str | None:
    # Case and surrounding whitespace carry no meaning in a label; anything else
    # outside the vocabulary is invalid and the caller applies S2.1's default.
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    return text if text in allowed else None


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


# ----------------------------------------------------------------------------- truth


def _normalise_truth(truth: Any, notes: _Notes) -> dict:
    """The parts of truth.json the scorer uses, with malformed entries skipped and reported."""
    if not isinstance(truth, dict):
        notes.warn("truth is not an object; scored as a world with no drivers, decoys or pairs")
        truth = {}

    drivers: dict[str, str | None] = {}
    raw_drivers = truth.get("drivers")
    for entry in raw_drivers if isinstance(raw_drivers, list) else []:
        protein = entry.get("protein") if isinstance(entry, dict) else None
        if not isinstance(protein, str) or protein in drivers:
            notes.warn(f"truth: driver entry skipped: {_examples([entry])[0]}")
            continue
        direction = entry.get("direction")
        if direction not in ("inhibit", "activate"):
            notes.warn(f"truth: driver {protein} has direction {direction!r}; no submitted direction can match it")
            direction = None
        drivers[protein] = direction

    surrogate = truth.get("surrogate")
    if surrogate is not None and not isinstance(surrogate, str):
        notes.warn(f"truth: surrogate {surrogate!r} is not an identifier; safety check disabled")
        surrogate = None

    decoys: dict[str, str] = {}
    raw_decoys = truth.get("decoys")
    for entry in raw_decoys if isinstance(raw_decoys, list) else []:
        protein = entry.get("protein") if isinstance(entry, dict) else None
        bias = entry.get("bias") if isinstance(entry, dict) else None
        if bias not in BIAS_TO_MECHANISM and isinstance(entry, dict):
            # A decoy whose bias field is unusable is still scoreable by its mechanism name.
            mechanism = entry.get("mechanism")
            bias = MECHANISM_TO_BIAS.get(mechanism) if isinstance(mechanism, str) else None
        if not isinstance(protein, str) or bias is None or protein in decoys:
            notes.warn(f"truth: decoy entry skipped: {_examples([entry])[0]}")
            continue
        decoys[protein] = bias

    pairs: list[dict] = []
    raw_pairs = truth.get("pairs")
    for entry in raw_pairs if isinstance(raw_pairs, list) else []:
        if not isinstance(entry, dict):
            notes.warn(f"truth: pair entry skipped: {_examples([entry])[0]}")
            continue
        causal, partner, kind = entry.get("causal"), entry.get("partner"), entry.get("kind")
        if not (isinstance(causal, str) and isinstance(partner, str)) or causal == partner:
            notes.warn(f"truth: pair entry skipped: {_examples([entry])[0]}")
            continue
        if causal not in drivers:
            # The pair logic credits or removes a driver; without one the pair means nothing.
            notes.warn(f"truth: pair ({causal}, {partner}) skipped: {causal} is not a driver")
            continue
        if kind not in PAIR_KINDS:
            notes.warn(f"truth: pair ({causal}, {partner}) has kind {kind!r}; scored as an ambiguous pair anyway")
        pairs.append({"kind": kind, "causal": causal, "partner": partner})

    world_id = truth.get("world_id")
    return {
        "world_id": world_id if isinstance(world_id, str) else None,
        "drivers": drivers,
        "surrogate": surrogate,
        "decoys": decoys,
        "pairs": pairs,
    }


def _valid_protein_set(valid_proteins: Any, truth: dict, notes: _Notes) -> tuple[set[str] | None, str]:
    """The world's identifiers, or None meaning 'match the identifier pattern'."""
    truth_proteins = set(truth["drivers"]) | set(truth["decoys"])
    truth_proteins |= {p["partner"] for p in truth["pairs"]}
    if truth["surrogate"]:
        truth_proteins.add(truth["surrogate"])
    proteins: set[str] = set()
    if isinstance(valid_proteins, (set, frozenset, list, tuple)):
        proteins = {p for p in valid_proteins if isinstance(p, str)}
    if not proteins:
        notes.warn(
            "no list of the world's proteins (oracle.json 'proteins'); identifiers are checked against "
            "the pattern PROT_<digits> instead"
        )
        return None, "pattern"
    missing = truth_proteins - proteins
    if missing:
        notes.warn(f"sealed bundle: truth names proteins absent from the world's list: {_examples(sorted(missing))}")
        proteins |= missing
    return proteins, "oracle"


def _is_valid(protein: Any, valid: set[str] | None, truth_proteins: set[str]) -> bool:
    if not isinstance(protein, str):
        return False
    if valid is None:
        return protein in truth_proteins or bool(FALLBACK_PROTEIN_PATTERN.match(protein))
    return protein in valid


# ----------------------------------------------------------------------------- claim intake (S2.1)


def _intake_nominations(raw: Any, is_valid, notes: _Notes) -> tuple[list[str], dict]:
    """Rank-ordered unique valid nominations (the first NOMINATION_CAP are the processed ones)."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        notes.warn(f"nominated is {type(raw).__name__}, not a list; treated as empty")
        raw = []
    ranked: list[tuple[Any, int, str]] = []
    unranked: list[str] = []
    invalid: list[Any] = []
    for index, entry in enumerate(raw):
        rank = None
        if isinstance(entry, dict):
            protein = entry.get("protein")
            rank = entry.get("rank")
        else:
            protein = entry
        if not is_valid(protein):
            invalid.append(entry)
            continue
        if _finite_number(rank):
            ranked.append((rank, index, protein))
        else:
            unranked.append(protein)
    # Finite ranks first (ties keep submission order), then the rest in submission order.
    ranked.sort(key=lambda item: (item[0], item[1]))
    ordered = [protein for _, _, protein in ranked] + unranked

    unique: list[str] = []
    seen: set[str] = set()
    duplicates = 0
    for protein in ordered:
        if protein in seen:
            duplicates += 1
            continue
        seen.add(protein)
        unique.append(protein)

    if invalid:
        notes.warn(f"nominated: {len(invalid)} invalid identifier(s) dropped, e.g. {_examples(invalid)}")
    if duplicates:
        notes.warn(f"nominated: {duplicates} repeated protein(s) dropped (first occurrence in rank order kept)")
    if len(unique) > NOMINATION_CAP:
        notes.warn(
            f"nominated: {len(unique)} unique valid nominations; only the first {NOMINATION_CAP} are processed, "
            "all of them count in the precision denominator and the safety check"
        )
    stats = {
        "submitted_entries": len(raw),
        "invalid_dropped": len(invalid),
        "duplicates_dropped": duplicates,
        "ranked_entries": len(ranked),
        "unique_valid": len(unique),
        "processed": unique[:NOMINATION_CAP],
        "past_cap": unique[NOMINATION_CAP:][:MAX_EXAMPLES],
        "past_cap_count": max(0, len(unique) - NOMINATION_CAP),
    }
    return unique, stats


def _intake_labels(raw: Any, field: str, allowed: tuple[str, ...], notes: _Notes) -> dict[str, str]:
    """Valid labels by protein; anything missing or invalid reads as 'unknown' at lookup."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        notes.warn(f"{field} is {type(raw).__name__}, not an object; every label defaults to 'unknown'")
        return {}
    labels: dict[str, str] = {}
    invalid = 0
    invalid_examples: list[str] = []
    for protein, value in raw.items():
        label = _label(value, allowed)
        if label is None:
            invalid += 1
            if len(invalid_examples) < MAX_EXAMPLES:
                invalid_examples.append(f"{_short(protein)}={_short(value)}")
            continue
        labels[protein] = label
    if invalid:
        notes.warn(f"{field}: {invalid} invalid label(s) default to 'unknown', e.g. {invalid_examples}")
    return labels


def _intake_rejections(raw: Any, is_valid, notes: _Notes) -> list[tuple[str, str]]:
    """(protein, mechanism) per rejected protein, first entry wins; a bad mechanism is blanked."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        notes.warn(f"rejected is {type(raw).__name__}, not a list; treated as empty")
        return []
    rejections: list[tuple[str, str]] = []
    seen: set[str] = set()
    invalid_entries: list[Any] = []
    blanked = 0
    blanked_examples: list[str] = []
    duplicates = 0
    for entry in raw:
        protein = entry.get("molecule") if isinstance(entry, dict) else None
        if not is_valid(protein):
            # S2.1 keeps a bad *mechanism* in the denominator; a bad *identifier* names no
            # protein at all, so like an invalid nomination it is dropped.
            invalid_entries.append(entry)
            continue
        if protein in seen:
            duplicates += 1
            continue
        seen.add(protein)
        mechanism = _label(entry.get("mechanism"), tuple(MECHANISM_TO_BIAS))
        if mechanism is None:
            blanked += 1
            if len(blanked_examples) < MAX_EXAMPLES:
                blanked_examples.append(f"{protein}={_short(entry.get('mechanism'))}")
            mechanism = ""
        rejections.append((protein, mechanism))
    if invalid_entries:
        notes.warn(
            f"rejected: {len(invalid_entries)} entr(ies) without a valid molecule identifier dropped, "
            f"e.g. {_examples(invalid_entries)}"
        )
    if duplicates:
        notes.warn(f"rejected: {duplicates} repeated protein(s) dropped (first entry kept)")
    if blanked:
        notes.warn(
            f"rejected: {blanked} invalid mechanism(s) blanked (still counted as rejections), e.g. {blanked_examples}"
        )
    return rejections


def _intake_abstentions(raw: Any, is_valid, notes: _Notes) -> tuple[list[frozenset[str]], dict]:
    """Unique retained abstention sets (2-5 valid identifiers) in submission order."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        notes.warn(f"abstentions is {type(raw).__name__}, not a list; treated as empty")
        raw = []
    retained: list[frozenset[str]] = []
    seen: set[frozenset[str]] = set()
    counts = {"submitted_entries": len(raw), "malformed": 0, "no_valid_id": 0, "one_valid_id": 0,
              "over_five_valid_ids": 0, "duplicate_sets": 0}
    for entry in raw:
        molecules = entry.get("molecules") if isinstance(entry, dict) else None
        if not isinstance(molecules, list):
            counts["malformed"] += 1
            continue
        ids = frozenset(m for m in molecules if is_valid(m))
        if not ids:
            counts["no_valid_id"] += 1
        elif len(ids) < ABSTENTION_MIN_IDS:
            counts["one_valid_id"] += 1
        elif len(ids) > ABSTENTION_MAX_IDS:
            counts["over_five_valid_ids"] += 1
        elif ids in seen:
            counts["duplicate_sets"] += 1
        else:
            seen.add(ids)
            retained.append(ids)
    dropped = {k: v for k, v in counts.items() if k != "submitted_entries" and v}
    if dropped:
        notes.warn(f"abstentions: entries ignored (neither scored nor counted): {dropped}")
    if len(retained) > ABSTENTION_SCORED_CAP:
        notes.warn(
            f"abstentions: {len(retained)} retained entries; only the first {ABSTENTION_SCORED_CAP} are scored, "
            "all count in the abstention-precision denominator"
        )
    counts["retained"] = len(retained)
    counts["scored"] = min(len(retained), ABSTENTION_SCORED_CAP)
    return retained, counts


def _intake_confidence(raw: Any, notes: _Notes) -> float | None:
    if raw is None:
        return None
    if not _is_number(raw):
        notes.warn(f"confidence {_examples([raw])[0]} is not a number; ignored")
        return None
    if isinstance(raw, int):
        value = float(min(max(raw, -1), 2))  # an int beyond the float range still clips cleanly
    else:
        value = raw
    if math.isnan(value):
        notes.warn("confidence is NaN; ignored")
        return None
    clipped = min(max(value, 0.0), 1.0)
    if clipped != value:
        notes.warn(f"confidence {_short(raw)} clipped to {clipped}")
    return clipped


# ----------------------------------------------------------------------------- phenotype (S2.5)


def _phenotype_column(phenotype: pd.DataFrame, notes: _Notes) -> tuple[pd.Series | None, str]:
    """(values indexed by subject ID, status); None when the table cannot be aligned."""
    table = phenotype
    if "subject_id" not in table.columns and table.index.name == "subject_id":
        table = table.reset_index()
    columns = list(table.columns)
    if "subject_id" in columns:
        id_position = columns.index("subject_id")
    elif columns:
        # A pandas to_csv with the index kept writes the IDs first under an empty or
        # 'Unnamed: 0' header; reading the first column as IDs scores that file too.
        id_position = 0
        notes.warn(f"phenotype: no 'subject_id' column; first column {str(columns[0])!r} read as subject IDs")
    else:
        return None, "no columns"
    if table.columns.duplicated().any():
        notes.warn("phenotype: repeated column names; columns taken by position")
    data_positions = [i for i in range(len(columns)) if i != id_position]
    if not data_positions:
        return None, "no data column besides the subject IDs"
    if len(data_positions) > 1:
        notes.warn(
            f"phenotype: {len(data_positions)} data columns; the first ({str(columns[data_positions[0]])!r}) is scored"
        )
    ids = table.iloc[:, id_position]
    values = table.iloc[:, data_positions[0]]

    ids = pd.Series([_subject_id(v) for v in ids.tolist()], dtype=object)
    missing_id = ids.isna().to_numpy()
    if missing_id.any():
        notes.warn(f"phenotype: {int(missing_id.sum())} row(s) without a subject ID ignored")
    ids = ids[~missing_id]
    if ids.duplicated().any():
        duplicated = ids[ids.duplicated()].unique().tolist()
        return None, f"duplicate subject IDs ({len(duplicated)}, e.g. {_examples(duplicated)}); zero credit"

    numeric = _to_float(values)[~missing_id]
    non_numeric = int(np.isnan(numeric).sum())
    if non_numeric:
        notes.warn(f"phenotype: {non_numeric} value(s) missing or not numeric")
    return pd.Series(numeric, index=pd.Index(ids.tolist(), dtype=object)), "ok"


def _subject_id(value: Any) -> str | None:
    try:
        if pd.isna(value) is True:  # None, NaN, pd.NA, NaT; list-likes return arrays and fall through
            return None
    except (TypeError, ValueError):
        pass
    text = _short(value).strip() if not isinstance(value, str) else value.strip()
    return text or None


def _to_float(values: pd.Series) -> np.ndarray:
    try:
        numeric = pd.to_numeric(values, errors="coerce")
        return np.asarray(numeric, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = np.full(len(values), np.nan)
        for i, value in enumerate(values.tolist()):
            try:
                out[i] = float(value) if not isinstance(value, bool) else np.nan
            except (TypeError, ValueError, OverflowError):
                pass
        return out


def _abs_correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    # Rescale before centring so values near the float limit cannot overflow to inf.
    x = x / np.max(np.abs(x))
    y = y / np.max(np.abs(y))
    x = x - x.mean()
    y = y - y.mean()
    denominator = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    if not denominator or not math.isfinite(denominator):
        return None
    r = abs(float(np.dot(x, y)) / denominator)
    return min(r, 1.0) if math.isfinite(r) else None


def _baseline(baseline_b: Any) -> float | None:
    if not _finite_number(baseline_b):
        return None
    try:
        return float(baseline_b)
    except OverflowError:
        return None


def _score_phenotype(phenotype: Any, latent: Any, eval_mask: Any, baseline_b: Any, notes: _Notes) -> tuple[float, dict]:
    b = _baseline(baseline_b)
    detail: dict[str, Any] = {"r": None, "n": 0, "b": b, "branch": None, "status": None}

    def zero(status: str) -> tuple[float, dict]:
        detail["status"] = status
        detail["branch"] = "invalid"
        return 0.0, detail

    if phenotype is None:
        return zero("no phenotype file (absent or unreadable); zero credit")
    if not isinstance(phenotype, pd.DataFrame):
        return zero("phenotype is not a table; zero credit")
    if not isinstance(latent, pd.Series) or len(latent) == 0:
        notes.warn("sealed bundle: latent severity unavailable; phenotype cannot be scored")
        return zero("sealed latent unavailable; zero credit")
    try:
        mask = np.asarray(eval_mask).astype(bool).ravel()
    except (TypeError, ValueError):
        mask = None
    if mask is None or mask.shape[0] != len(latent):
        notes.warn("sealed bundle: eval_mask missing or not aligned with latent.parquet; phenotype cannot be scored")
        return zero("sealed eval_mask unusable; zero credit")

    values, status = _phenotype_column(phenotype, notes)
    if values is None:
        return zero(status)

    latent_ids = pd.Index([str(v) for v in latent.index.tolist()], dtype=object)
    latent_values = np.asarray(pd.to_numeric(latent, errors="coerce"), dtype=np.float64)
    submitted = np.asarray(values.reindex(latent_ids), dtype=np.float64)
    keep = mask & np.isfinite(submitted) & np.isfinite(latent_values)
    n = int(keep.sum())
    detail["n"] = n
    detail["eval_mask_size"] = int(mask.sum())
    if n < PHENOTYPE_MIN_FINITE:
        return zero(f"{n} finite value(s) on the evaluation mask; at least {PHENOTYPE_MIN_FINITE} required")
    x, y = submitted[keep], latent_values[keep]
    if np.all(x == x[0]):
        return zero("submitted phenotype has zero variance on the evaluation mask")
    with np.errstate(all="ignore"):
        r = _abs_correlation(x, y)
    if r is None:
        return zero("correlation undefined (latent has zero variance on the mask)")
    detail["r"] = r
    detail["status"] = "scored"

    if b is None:
        detail["branch"] = "fallback: 10*min(r/0.85, 1) (no finite built_in_correlation)"
        return POINTS_PHENOTYPE * min(r / PHENOTYPE_CEILING, 1.0), detail
    gap = PHENOTYPE_CEILING - b
    if gap <= PHENOTYPE_GAP_EPS:
        detail["branch"] = "gap: 0.85 - b <= 1e-6, 10 points iff r > b"
        return (POINTS_PHENOTYPE if r > b else 0.0), detail
    detail["branch"] = "baseline: 10*clip((r - b)/(0.85 - b), 0, 1)"
    return POINTS_PHENOTYPE * min(max((r - b) / gap, 0.0), 1.0), detail


# ----------------------------------------------------------------------------- the core


def score(
    truth: dict,
    submission: Any,
    phenotype: pd.DataFrame | None,
    latent: pd.Series | None,
    eval_mask: np.ndarray | None,
    baseline_b: float | None,
    experiments: list[dict] | None,
    valid_proteins: set[str] | None,
) -> dict:
    """Score one episode by Supplementary Methods S2.  Pure; never raises on agent input.

    ``submission`` is the parsed submission.json (None when absent or unparseable),
    ``phenotype`` the phenotype table as read, ``latent`` baseline L indexed by
    subject_id, ``eval_mask`` aligned to ``latent``'s order, ``experiments`` the
    delivered experiments as ``{"kind", "protein"}``.
    """
    notes = _Notes()
    world = _normalise_truth(truth, notes)
    drivers: dict[str, str | None] = world["drivers"]
    decoys: dict[str, str] = world["decoys"]
    pairs: list[dict] = world["pairs"]
    surrogate = world["surrogate"]
    null_world = not drivers
    pair_free = not pairs

    valid, valid_source = _valid_protein_set(valid_proteins, world, notes)
    truth_proteins = set(drivers) | set(decoys) | {p["partner"] for p in pairs} | ({surrogate} if surrogate else set())

    def is_valid(protein: Any) -> bool:
        return _is_valid(protein, valid, truth_proteins)

    # ---- intake
    if submission is None:
        submission_status = "absent or unparseable: scored as an empty submission"
        claims: dict = {}
    elif isinstance(submission, dict):
        submission_status = "parsed"
        claims = submission
    else:
        submission_status = f"not an object ({type(submission).__name__}): scored as an empty submission"
        notes.warn(f"submission is a {type(submission).__name__}, not an object; scored as empty")
        claims = {}

    nominations, nomination_stats = _intake_nominations(claims.get("nominated"), is_valid, notes)
    processed = nominations[:NOMINATION_CAP]
    processed_set = set(processed)
    nominated_set = set(nominations)
    directions = _intake_labels(claims.get("directions"), "directions", DIRECTION_LABELS, notes)
    alignments = _intake_labels(claims.get("outcome_alignment"), "outcome_alignment", ALIGNMENT_LABELS, notes)
    rejections = _intake_rejections(claims.get("rejected"), is_valid, notes)
    retained_abstentions, abstention_stats = _intake_abstentions(claims.get("abstentions"), is_valid, notes)
    scored_abstentions = retained_abstentions[:ABSTENTION_SCORED_CAP]
    confidence = _intake_confidence(claims.get("confidence"), notes)

    delivered: set[str] = set()
    for item in experiments if isinstance(experiments, list) else []:
        if isinstance(item, dict) and item.get("kind") in EXPERIMENT_KINDS and isinstance(item.get("protein"), str):
            delivered.add(item["protein"])

    # ---- abstention precision (S2.2)
    # An entry counts only for the proteins the agent did not also nominate (any rank):
    # naming a member as a target contradicts declaring it indistinguishable.
    abstention_effective = [entry - nominated_set for entry in scored_abstentions]
    pair_sets = [frozenset((p["causal"], p["partner"])) for p in pairs]
    correct_abstentions = sum(
        1 for entry in abstention_effective if any(pair <= entry for pair in pair_sets)
    )
    abstention_precision = _ratio(correct_abstentions, len(retained_abstentions))

    # ---- pair logic (S2.2)
    # "Named" means claimed anywhere in the submission: a nomination at any rank, a
    # rejection or a scored abstention entry.  Only then has the agent left the
    # causal member "named nowhere", which is what licenses the swap.
    named = set(nominated_set) | {protein for protein, _ in rejections}
    for entry in scored_abstentions:
        named |= entry
    effective_truth = set(drivers)
    abstained_members: set[str] = set()
    abstained_causal: set[str] = set()
    swapped_causal: set[str] = set()
    pair_details = []
    pair_credits = []
    for pair, members in zip(pairs, pair_sets):
        causal, partner = pair["causal"], pair["partner"]
        via_entry = any(members <= entry for entry in abstention_effective)
        via_nominations = causal in processed_set and partner in processed_set
        record = {"kind": pair["kind"], "causal": causal, "partner": partner,
                  "experiment_on_causal": causal in delivered,
                  "causal_nominated_rank": _rank_of(causal, nominations),
                  "partner_nominated_rank": _rank_of(partner, nominations)}
        if via_entry or via_nominations:
            abstained_members |= members
            abstained_causal.add(causal)
            effective_truth -= members
            precision_factor = 1.0 if abstention_precision is None else abstention_precision
            if abstention_precision is None:
                notes.interpret(
                    "causal_confidence: a pair abstained only by nominating both members, with no retained "
                    "abstention entry, takes abstention precision as 1 (0/0 would otherwise void S2.2's "
                    "nomination route to abstaining)"
                )
            credit = PAIR_CREDIT_CLAIMS * precision_factor
            record["route"] = "claims (abstained: " + " and ".join(
                label for label, on in (("abstention entry", via_entry), ("both members in the first 25", via_nominations)) if on
            ) + ")"
            record["abstention_precision_applied"] = precision_factor
        elif partner in processed_set and causal not in named:
            effective_truth.discard(causal)
            effective_truth.add(partner)
            swapped_causal.add(causal)
            credit = 0.0
            record["route"] = "swap (partner credited for the locus in target identification; unsupported choice, 0)"
        elif causal in processed_set and causal in delivered:
            credit = PAIR_CREDIT_EXPERIMENT
            record["route"] = "experiment (causal member nominated in the first 25 and tested)"
        elif causal in processed_set:
            credit = 0.0
            record["route"] = "none (causal member nominated without an experiment on it: unsupported choice)"
        else:
            credit = 0.0
            if partner in processed_set:
                why = "partner nominated while the causal member is named elsewhere: no swap, unsupported choice"
            elif causal in nominated_set or partner in nominated_set:
                why = "pair member nominated only past rank 25, which triggers no route"
            else:
                why = "pair not addressed"
            record["route"] = f"none ({why})"
        record["credit"] = credit
        pair_credits.append(credit)
        pair_details.append(record)

    # ---- bias identification (rejections)
    correct_rejections = [
        protein for protein, mechanism in rejections
        if protein in decoys and mechanism and MECHANISM_TO_BIAS[mechanism] == decoys[protein]
    ]
    n_rejections = len(rejections)
    correct_set = set(correct_rejections)
    mechanism_detail: dict[str, Any] = {
        "scored_decoys": len(decoys), "rejections": n_rejections, "correct": len(correct_rejections),
        "correct_proteins": _examples(correct_rejections),
        "wrong": _examples(f"{p}:{m or '<blank>'}" for p, m in rejections if p not in correct_set),
    }
    if decoys:
        recall = len(correct_rejections) / len(decoys)
        precision = _ratio(len(correct_rejections), n_rejections) or 0.0
        s_mechanism = POINTS_MECHANISM * recall * precision
        mechanism_detail.update(recall=recall, precision=precision if n_rejections else None,
                                rule="15 * recall * precision")
    elif null_world:
        s_mechanism = 0.0
        mechanism_detail.update(recall=None, precision=None, rule="no scored decoy in the null world: 0")
        notes.interpret(
            "bias_identification: null world with no scored decoy scores 0; S2.3's restraint credit for an "
            "empty claim set is already the 15 points of target identification"
        )
    else:
        s_mechanism = POINTS_MECHANISM if n_rejections == 0 else 0.0
        mechanism_detail.update(recall=None, precision=None,
                                rule="no scored decoy: 15 if nothing rejected, else 0 (every rejection is wrong)")
        notes.interpret(
            "bias_identification: non-null world with no scored decoy (recall undefined in S2): vacuous recall 1, "
            "so 15 when nothing is rejected and 0 otherwise (every rejection is then a false rejection); "
            "keeps 100 attainable in every non-null world"
        )

    # ---- target identification
    target_detail: dict[str, Any] = {"effective_truth": sorted(effective_truth)}
    precision_pool = nominated_set - abstained_members
    if null_world:
        outside = sorted(precision_pool)
        if outside:
            s_target = 0.0
            rule = "null world: nomination outside an abstained pair -> 0"
        elif n_rejections == 0:
            s_target = NULL_WORLD_RESTRAINT
            rule = "null world: no nomination and no rejection -> 15"
        else:
            s_target = POINTS_TARGET * len(correct_rejections) / n_rejections
            rule = "null world: no nomination, rejections -> 30 * correct / rejections"
        target_detail.update(rule=rule, nominations_outside_abstained_pairs=_examples(outside),
                             correct_rejections=len(correct_rejections), rejections=n_rejections,
                             recall=None, precision=None)
    else:
        true_positives = processed_set & effective_truth
        if effective_truth:
            recall = len(true_positives) / len(effective_truth)
        else:
            recall = 1.0
            notes.interpret(
                "target_identification: every driver sits in an abstained pair, so the effective truth is empty; "
                "recall is taken as 1 (vacuous) and precision decides the score"
            )
        if precision_pool:
            precision = len(true_positives) / len(precision_pool)
        else:
            precision = 1.0 if not effective_truth else 0.0
        s_target = POINTS_TARGET * recall * precision
        target_detail.update(
            rule="30 * recall * precision",
            true_positives=sorted(true_positives), recall=recall, precision=precision,
            precision_denominator=len(precision_pool),
            false_positives=_examples(sorted(precision_pool - true_positives)),
            missed=sorted(effective_truth - processed_set),
        )

    # ---- causal confidence
    if null_world:
        s_confidence = 0.0
        confidence_rule = "null world: 0"
    elif pair_free:
        s_confidence = POINTS_CONFIDENCE * s_target / POINTS_TARGET
        confidence_rule = "pair-free world: 25 * S_target / 30"
    else:
        s_confidence = sum(pair_credits) / len(pair_credits)
        confidence_rule = "mean over planted pairs of c_k (25 experiment route, 17.5 * abstention precision claims route, else 0)"

    # ---- intervention direction
    direction_detail: dict[str, Any] = {}
    if null_world:
        s_direction = 0.0
        direction_detail["rule"] = "null world: 0"
    else:
        per_driver = {}
        for protein, truth_direction in drivers.items():
            if protein in abstained_causal:
                continue
            if protein not in processed_set:
                # The swap replaces the driver in recall and precision only; S2 scores the
                # direction of the driver itself, which was not nominated.
                why = ("not nominated (its partner stood in via the swap, which S2 applies to recall and "
                       "precision only)") if protein in swapped_causal else "not nominated in the first 25"
                per_driver[protein] = {"credit": 0.0, "submitted": None, "why": why}
                continue
            submitted = directions.get(protein, "unknown")
            if submitted == "unknown":
                credit = 0.5
            else:
                credit = 1.0 if submitted == truth_direction else 0.0
            per_driver[protein] = {"credit": credit, "submitted": submitted}
        if per_driver:
            s_direction = POINTS_DIRECTION * sum(d["credit"] for d in per_driver.values()) / len(per_driver)
            direction_detail["rule"] = "20 * mean(d_j) over drivers outside abstained pairs"
        else:
            s_direction = POINTS_DIRECTION
            direction_detail["rule"] = "every driver is the causal member of an abstained pair: 20 (vacuous mean)"
            notes.interpret(
                "intervention_direction: every driver was excluded as the causal member of an abstained pair; "
                "the empty mean is taken as full credit, as the empty recall is in target identification"
            )
        direction_detail["drivers"] = per_driver
        direction_detail["excluded_abstained_causal"] = sorted(abstained_causal)

    # ---- safety
    surrogate_label = alignments.get(surrogate, "unknown") if surrogate else None
    # S2.1: every unique valid nomination, past rank 25 too, enters the safety check.
    surrogate_nominated = bool(surrogate) and surrogate in nominated_set
    penalty = SAFETY_PENALTY if surrogate_nominated and surrogate_label == "aligned" else 0.0

    # ---- phenotype
    s_phenotype, phenotype_detail = _score_phenotype(phenotype, latent, eval_mask, baseline_b, notes)

    components = {
        "target_identification": s_target,
        "causal_confidence": s_confidence,
        "bias_identification": s_mechanism,
        "intervention_direction": s_direction,
        "phenotype_construction": s_phenotype,
    }
    unclipped = sum(components.values()) + penalty
    details = {
        "world_id": world["world_id"],
        "null_world": null_world,
        "pair_free": pair_free,
        "submission": {"status": submission_status, "confidence": confidence,
                       "confidence_note": "recorded only: no component uses the stated confidence"},
        "valid_proteins_source": valid_source,
        "nominations": nomination_stats,
        "rejections": {"count": n_rejections, "blanked_mechanisms": sum(1 for _, m in rejections if not m)},
        "abstentions": {**abstention_stats, "correct": correct_abstentions, "precision": abstention_precision},
        "experiments_delivered": sorted(delivered),
        "effective_truth": sorted(effective_truth),
        "pairs": pair_details,
        "target_identification": target_detail,
        "causal_confidence": {"rule": confidence_rule, "pair_credits": pair_credits},
        "bias_identification": mechanism_detail,
        "intervention_direction": direction_detail,
        "phenotype_construction": phenotype_detail,
        "safety": {"surrogate": surrogate, "nominated": surrogate_nominated,
                   "alignment": surrogate_label, "penalty": penalty},
        "warnings": notes.warnings,
        "interpretations": notes.interpretations,
    }
    result = {**components, "safety_penalty": penalty,
              "total": min(max(unclipped, 0.0), 100.0), "total_unclipped": unclipped, "details": details}
    return _json_safe(result)


def _rank_of(protein: str, nominations: list[str]) -> int | None:
    try:
        return nominations.index(protein) + 1
    except ValueError:
        return None


def _json_safe(value: Any) -> Any:
    """Plain JSON types only: numpy scalars unwrapped, non-finite floats as null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_json_safe(v) for v in value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ----------------------------------------------------------------------------- files


class SealedBundleError(RuntimeError):
    """The sealed bundle cannot be read; the episode cannot be scored at all."""


def _inside(path: Path, root: Path) -> bool:
    # S2.5: the phenotype must reside in the approved submission directory; a symlink
    # out of WORK is not a file the agent wrote there.
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def _read_json(path: Path) -> Any:
    with open(path, "rb") as handle:
        return json.loads(handle.read().decode("utf-8"))


def _load_submission(work: Path, io: dict) -> Any:
    path = work / "submission.json"
    if not path.exists():
        io["submission_file"] = "absent"
        return None
    if not _inside(path, work) or not path.is_file():
        io["submission_file"] = "not a regular file inside the work folder; ignored"
        return None
    try:
        parsed = _read_json(path)
    except (OSError, ValueError, RecursionError, UnicodeDecodeError) as error:
        io["submission_file"] = f"unparseable ({type(error).__name__}); scored as empty"
        return None
    io["submission_file"] = "parsed"
    return parsed


def _load_phenotype(work: Path, io: dict) -> pd.DataFrame | None:
    path = work / "phenotype.csv"
    if not path.exists():
        io["phenotype_file"] = "absent"
        return None
    if not _inside(path, work) or not path.is_file():
        io["phenotype_file"] = "not a regular file inside the work folder; zero credit"
        return None
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding_errors="replace")
    except Exception as error:  # pandas raises a wide family (ParserError, EmptyDataError, MemoryError...)
        io["phenotype_file"] = f"unreadable as CSV ({type(error).__name__}); zero credit"
        return None
    io["phenotype_file"] = "read"
    return table


def _load_experiments(work: Path, ledger: Path | None, io: dict) -> list[dict]:
    if ledger is not None:
        # The ledger is the harness's own record; when it is named but unreadable the
        # agent-writable experiments folder is not trusted in its place.
        io["experiments_source"] = f"ledger ({ledger})"
        delivered = []
        try:
            lines = ledger.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as error:
            io["experiments_source"] = f"ledger ({ledger}) unreadable ({type(error).__name__}); no deliveries counted"
            return []
        bad = 0
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                bad += 1
                continue
            if not isinstance(record, dict):
                bad += 1
                continue
            if record.get("status") == "delivered":
                delivered.append({"kind": record.get("kind"), "protein": record.get("protein")})
        if bad:
            io.setdefault("warnings", []).append(f"ledger: {bad} malformed line(s) skipped")
        return delivered

    io["experiments_source"] = (
        "work folder <work>/experiments/*.json with status 'ok' (no ledger given: agent-writable, not authoritative)"
    )
    folder = work / "experiments"
    delivered = []
    try:
        paths = sorted(folder.glob("*.json")) if folder.is_dir() and _inside(folder, work) else []
    except OSError:
        paths = []
    for path in paths:
        if not _inside(path, work) or not path.is_file():
            continue
        try:
            payload = _read_json(path)
        except (OSError, ValueError, RecursionError, UnicodeDecodeError):
            continue
        if not isinstance(payload, dict) or payload.get("status") != "ok":
            continue
        # The harness names files <protein>.<kind>.json; the payload's own fields win.
        stem_parts = path.name[: -len(".json")].rsplit(".", 1)
        protein = payload.get("protein", stem_parts[0])
        kind = payload.get("action", stem_parts[1] if len(stem_parts) == 2 else None)
        delivered.append({"kind": kind, "protein": protein})
    return delivered


def _load_latent(sealed: Path, io: dict) -> pd.Series | None:
    try:
        table = pd.read_parquet(sealed / "latent.parquet")
        if "subject_id" in table.columns:
            table = table.set_index("subject_id")
        return table["latent"]
    except Exception as error:  # pyarrow and pandas raise many types for a damaged file
        io.setdefault("warnings", []).append(f"sealed latent.parquet unreadable ({type(error).__name__})")
        return None


def _load_eval_mask(sealed: Path, io: dict) -> np.ndarray | None:
    try:
        return np.load(sealed / "eval_mask.npy", allow_pickle=False)
    except Exception as error:  # np.load raises OSError, ValueError, EOFError...
        io.setdefault("warnings", []).append(f"sealed eval_mask.npy unreadable ({type(error).__name__})")
        return None


def _load_baseline(sealed: Path, io: dict) -> float | None:
    path = sealed / "phenotype_baseline.json"
    try:
        value = _read_json(path).get("built_in_correlation")
    except FileNotFoundError:
        io["baseline_file"] = "absent: fallback branch"
        return None
    except (OSError, ValueError, AttributeError, RecursionError) as error:
        io["baseline_file"] = f"unreadable ({type(error).__name__}): fallback branch"
        return None
    io["baseline_file"] = "read"
    return value if _is_number(value) else None


def _load_valid_proteins(sealed: Path, io: dict) -> set[str] | None:
    try:
        proteins = _read_json(sealed / "oracle.json").get("proteins")
    except (OSError, ValueError, AttributeError, RecursionError) as error:
        io.setdefault("warnings", []).append(f"sealed oracle.json unreadable ({type(error).__name__})")
        return None
    return set(p for p in proteins if isinstance(p, str)) if isinstance(proteins, list) else None


def score_episode(sealed_dir: str | Path, work_dir: str | Path, ledger_path: str | Path | None = None) -> dict:
    """Read a sealed bundle and a work folder and score the episode.

    Raises SealedBundleError only when truth.json itself is unusable: without the
    truth no score means anything.  Everything the agent wrote is tolerated.
    """
    sealed, work = Path(sealed_dir), Path(work_dir)
    try:
        truth = _read_json(sealed / "truth.json")
    except (OSError, ValueError, RecursionError) as error:
        raise SealedBundleError(f"{sealed / 'truth.json'}: {type(error).__name__}: {error}") from None
    if not isinstance(truth, dict):
        raise SealedBundleError(f"{sealed / 'truth.json'}: not a JSON object")

    io: dict[str, Any] = {}
    submission = _load_submission(work, io)
    phenotype = _load_phenotype(work, io)
    experiments = _load_experiments(work, Path(ledger_path) if ledger_path is not None else None, io)
    latent = _load_latent(sealed, io)
    eval_mask = _load_eval_mask(sealed, io)
    baseline_b = _load_baseline(sealed, io)
    valid_proteins = _load_valid_proteins(sealed, io)

    result = score(truth, submission, phenotype, latent, eval_mask, baseline_b, experiments, valid_proteins)
    details = result["details"]
    details["experiments_source"] = io.pop("experiments_source")
    details["submission"]["file"] = io.pop("submission_file")
    details["phenotype_construction"]["file"] = io.pop("phenotype_file")
    details["phenotype_construction"]["baseline_file"] = io.pop("baseline_file")
    details["warnings"] = io.pop("warnings", []) + details["warnings"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.score", description=__doc__.splitlines()[0])
    parser.add_argument("--sealed", required=True, help="the world's sealed/ directory")
    parser.add_argument("--work", required=True, help="the episode's work folder")
    parser.add_argument("--ledger", default=None, help="the harness's experiment ledger (JSON Lines)")
    args = parser.parse_args(argv)
    from .screening.sealed import is_screening_sealed  # [world-kind seam: screening]

    if is_screening_sealed(args.sealed):
        from .screening.score import score_episode as score_screening

        print(json.dumps(score_screening(args.sealed, args.work, args.ledger), indent=2, allow_nan=False))
        return 0
    try:
        result = score_episode(args.sealed, args.work, args.ledger)
    except SealedBundleError as error:
        print(f"pipeline.score: cannot score: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
