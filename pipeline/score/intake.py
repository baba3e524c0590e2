"""Claim intake (S2.1): the submission's fields read into what the rules score.

Every field tolerates any JSON value: what cannot be read is dropped or defaulted and
said in a warning, never raised, because S2.4 scores every exit path."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .notes import Notes, examples, finite_number, is_number, read_label, short
from .rules import (ABSTENTION_MAX_IDS, ABSTENTION_MIN_IDS, ABSTENTION_SCORED_CAP, ALIGNMENT_LABELS,
                    DIRECTION_LABELS, MAX_EXAMPLES, MECHANISM_TO_BIAS, NOMINATION_CAP)


@dataclass
class Claims:
    """One submission as the rules see it."""

    status: str  #: how the submission was taken (parsed, absent, not an object)
    nominations: list[str]  #: unique valid nominations in rank order
    nomination_stats: dict
    directions: dict[str, str]
    alignments: dict[str, str]
    rejections: list[tuple[str, str]]  #: (protein, mechanism or "" when blanked)
    abstentions: list[frozenset[str]]  #: every retained abstention set, in submission order
    abstention_stats: dict
    confidence: float | None

    @property
    def processed(self) -> list[str]:
        """The nominations the rules process (the first NOMINATION_CAP)."""
        return self.nominations[:NOMINATION_CAP]

    @property
    def scored_abstentions(self) -> list[frozenset[str]]:
        return self.abstentions[:ABSTENTION_SCORED_CAP]


def read_claims(submission: Any, is_valid: Callable[[Any], bool], notes: Notes) -> Claims:
    """The claims of a parsed submission.json (None when absent or unparseable)."""
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

    nominations, nomination_stats = _nominations(claims.get("nominated"), is_valid, notes)
    directions = _labels(claims.get("directions"), "directions", DIRECTION_LABELS, notes)
    alignments = _labels(claims.get("outcome_alignment"), "outcome_alignment", ALIGNMENT_LABELS, notes)
    rejections = _rejections(claims.get("rejected"), is_valid, notes)
    abstentions, abstention_stats = _abstentions(claims.get("abstentions"), is_valid, notes)
    confidence = _confidence(claims.get("confidence"), notes)
    return Claims(submission_status, nominations, nomination_stats, directions, alignments, rejections, abstentions,
                  abstention_stats, confidence)


def _nominations(raw: Any, is_valid, notes: Notes) -> tuple[list[str], dict]:
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
        if finite_number(rank):
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
        notes.warn(f"nominated: {len(invalid)} invalid identifier(s) dropped, e.g. {examples(invalid)}")
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


def _labels(raw: Any, field: str, allowed: tuple[str, ...], notes: Notes) -> dict[str, str]:
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
        label = read_label(value, allowed)
        if label is None:
            invalid += 1
            if len(invalid_examples) < MAX_EXAMPLES:
                invalid_examples.append(f"{short(protein)}={short(value)}")
            continue
        labels[protein] = label
    if invalid:
        notes.warn(f"{field}: {invalid} invalid label(s) default to 'unknown', e.g. {invalid_examples}")
    return labels


def _rejections(raw: Any, is_valid, notes: Notes) -> list[tuple[str, str]]:
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
        mechanism = read_label(entry.get("mechanism"), tuple(MECHANISM_TO_BIAS))
        if mechanism is None:
            blanked += 1
            if len(blanked_examples) < MAX_EXAMPLES:
                blanked_examples.append(f"{protein}={short(entry.get('mechanism'))}")
            mechanism = ""
        rejections.append((protein, mechanism))
    if invalid_entries:
        notes.warn(
            f"rejected: {len(invalid_entries)} entr(ies) without a valid molecule identifier dropped, "
            f"e.g. {examples(invalid_entries)}"
        )
    if duplicates:
        notes.warn(f"rejected: {duplicates} repeated protein(s) dropped (first entry kept)")
    if blanked:
        notes.warn(
            f"rejected: {blanked} invalid mechanism(s) blanked (still counted as rejections), e.g. {blanked_examples}"
        )
    return rejections


def _abstentions(raw: Any, is_valid, notes: Notes) -> tuple[list[frozenset[str]], dict]:
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


def _confidence(raw: Any, notes: Notes) -> float | None:
    if raw is None:
        return None
    if not is_number(raw):
        notes.warn(f"confidence {examples([raw])[0]} is not a number; ignored")
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
        notes.warn(f"confidence {short(raw)} clipped to {clipped}")
    return clipped
