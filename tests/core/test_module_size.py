"""Modules with one job: no module of the package is longer than 600 lines (issue 31).

A module that grows past the limit is split along its jobs (each new module's docstring
names its job), its names kept importable from where they were imported before.
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "kernels", "drugtargetworld")
MAX_LINES = 600


def module_lengths() -> dict:
    """Lines of every Python module under the packages (path relative to the repository)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            with open(path, "rb") as handle:
                out[str(path.relative_to(REPO))] = sum(1 for _ in handle)
    return out


def test_the_packages_have_modules_to_measure():
    lengths = module_lengths()
    for package in PACKAGES:
        assert any(name.startswith(package + "/") for name in lengths), f"no module found under {package}/"
    assert "pipeline/harness/core.py" in lengths and "kernels/mri.py" in lengths


def test_no_module_is_longer_than_600_lines():
    long = {name: n for name, n in module_lengths().items() if n > MAX_LINES}
    assert not long, (f"modules over {MAX_LINES} lines (split each along its jobs): "
                      + ", ".join(f"{name} ({n})" for name, n in sorted(long.items(), key=lambda kv: -kv[1])))
