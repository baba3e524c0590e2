"""Where the package's own files live.  Configs and schemas are package data
(inside ``pipeline/``), so a source checkout, an editable install and an
installed wheel all resolve them the same way.

The development worlds' seeds are in ``CONF_DIR / "world"`` (one YAML per
world, field ``seed``) and nowhere else in the package: that folder is what an
agent's sandbox must never see.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CONF_DIR = PACKAGE_DIR / "conf"  #: Hydra config groups (world/, scale/, cluster/, release/, panel/)
DEV_SEEDS_DIR = CONF_DIR / "world"  #: the only place development seeds are kept
SCHEMA_DIR = PACKAGE_DIR / "schemas"  #: JSON Schemas of truth, submission, score, experiment, oracle
DATA_DIR = PACKAGE_DIR / "data"  #: calibration targets and MESA anchors
