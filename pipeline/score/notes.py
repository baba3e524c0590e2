"""Small helpers every part of the scorer shares: the notes an episode's scoring
collects (warnings about dropped or defaulted input, interpretations that fired) and
tolerant tests of agent-written values."""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from .rules import MAX_EXAMPLES


class Notes:
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


def examples(items: Iterable[Any]) -> list[str]:
    out = []
    for item in items:
        if len(out) >= MAX_EXAMPLES:
            break
        out.append(short(item))
    return out


def short(item: Any) -> str:
    if isinstance(item, str):
        text = item
    else:
        try:
            text = repr(item)
        except RecursionError:  # json.loads accepts nesting deeper than repr can walk from here
            text = f"<deeply nested {type(item).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def is_number(value: Any) -> bool:
    # JSON true/false arrive as bool, a subclass of int; they are not numbers here.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
    if not is_number(value):
        return False
    if isinstance(value, int):
        return True  # float(10**400) would overflow; every int is finite
    return math.isfinite(value)


def read_label(value: Any, allowed: tuple[str, ...]) -> str | None:
    # Case and surrounding whitespace carry no meaning in a label; anything else
    # outside the vocabulary is invalid and the caller applies S2.1's default.
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    return text if text in allowed else None


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def json_safe(value: Any) -> Any:
    """Plain JSON types only: numpy scalars unwrapped, non-finite floats as null."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(json_safe(v) for v in value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def rank_of(protein: str, nominations: list[str]) -> int | None:
    try:
        return nominations.index(protein) + 1
    except ValueError:
        return None
