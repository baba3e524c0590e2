"""The parts of the sealed truth the scorer uses, read tolerantly (a malformed entry is
skipped and reported), and which identifiers count as the world's proteins."""
from __future__ import annotations

from typing import Any

from .notes import Notes, examples
from .rules import BIAS_TO_MECHANISM, FALLBACK_PROTEIN_PATTERN, MECHANISM_TO_BIAS, PAIR_KINDS


def normalise_truth(truth: Any, notes: Notes) -> dict:
    """The parts of truth.json the scorer uses, with malformed entries skipped and reported."""
    if not isinstance(truth, dict):
        notes.warn("truth is not an object; scored as a world with no drivers, decoys or pairs")
        truth = {}

    drivers: dict[str, str | None] = {}
    raw_drivers = truth.get("drivers")
    for entry in raw_drivers if isinstance(raw_drivers, list) else []:
        protein = entry.get("protein") if isinstance(entry, dict) else None
        if not isinstance(protein, str) or protein in drivers:
            notes.warn(f"truth: driver entry skipped: {examples([entry])[0]}")
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
            notes.warn(f"truth: decoy entry skipped: {examples([entry])[0]}")
            continue
        decoys[protein] = bias

    pairs: list[dict] = []
    raw_pairs = truth.get("pairs")
    for entry in raw_pairs if isinstance(raw_pairs, list) else []:
        if not isinstance(entry, dict):
            notes.warn(f"truth: pair entry skipped: {examples([entry])[0]}")
            continue
        causal, partner, kind = entry.get("causal"), entry.get("partner"), entry.get("kind")
        if not (isinstance(causal, str) and isinstance(partner, str)) or causal == partner:
            notes.warn(f"truth: pair entry skipped: {examples([entry])[0]}")
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


def valid_protein_set(valid_proteins: Any, truth: dict, notes: Notes) -> tuple[set[str] | None, str]:
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
        notes.warn(f"sealed bundle: truth names proteins absent from the world's list: {examples(sorted(missing))}")
        proteins |= missing
    return proteins, "oracle"


def is_valid(protein: Any, valid: set[str] | None, truth_proteins: set[str]) -> bool:
    if not isinstance(protein, str):
        return False
    if valid is None:
        return protein in truth_proteins or bool(FALLBACK_PROTEIN_PATTERN.match(protein))
    return protein in valid
