"""Where the package's own files live.

The configs and schemas are the repository's root folders ``conf/`` and ``schemas/``
(the design card's layout), installed as the package data ``pipeline/conf`` and
``pipeline/schemas``: an installed wheel holds them inside the package, an editable
install maps the packages ``pipeline.conf`` and ``pipeline.schemas`` to the root folders
(setup.py), and a checkout used without an install (the repository on ``sys.path``)
finds them beside the package.  :func:`resource_dir` resolves each the same way in all
three, through the import system (as ``importlib.resources`` does).

The development worlds' seeds are in ``CONF_DIR / "world"`` (one YAML per
world, field ``seed``) and nowhere else in the package: that folder is what an
agent's sandbox must never see.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder of the package data ``pipeline.<name>`` (``conf`` or ``schemas``): inside the
    package of a wheel, the repository's root folder of an editable install or a checkout."""
    try:
        spec = importlib.util.find_spec(f"{__package__ or 'pipeline'}.{name}")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location).resolve()
    inside = PACKAGE_DIR / name
    return inside if inside.is_dir() else PACKAGE_DIR.parent / name  # the repository on sys.path, not installed


CONF_DIR = resource_dir("conf")  #: Hydra config groups (world/, scale/, cluster/, release/, panel/)
DEV_SEEDS_DIR = CONF_DIR / "world"  #: the only place development seeds are kept
SCHEMA_DIR = resource_dir("schemas")  #: JSON Schemas of truth, submission, score, experiment, oracle
DATA_DIR = PACKAGE_DIR / "data"  #: calibration targets and MESA anchors
