"""A finding of the audit: one named check, whether it passed, a one-line detail and
the problems it found."""
from __future__ import annotations

from dataclasses import dataclass, field

#: Family-wise false-alarm rate of the statistical checks (missingness, targetability).
ALPHA = 1e-3


@dataclass
class Finding:
    name: str
    passed: bool
    detail: str
    problems: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "problems": self.problems}



def limit(items: list, n: int = 20) -> list:
    return items[:n] + ([f"... and {len(items) - n} more"] if len(items) > n else [])
