"""The prelude of every agent program (Supplement S3.2, with this project's fixes).

The harness copies this file, unchanged, into a read-only folder of the
sandbox beside ``dtw_genotypes.py`` (a copy of ``pipeline/genotypes_io.py``),
``dtw_bundle.py`` (a copy of ``pipeline/bundle.py``, whose file names the
genotype reader uses) and ``dtw_runner.py`` (``runner.py`` of this package,
which runs the program in the namespace below, shared with every other kind's
prelude) and runs each turn's program as::

    python -I dtw_runtime.py program.py

in a fresh process.  The program is executed in a namespace that already holds

* ``RELEASE``, ``IMAGING``, ``WORK``, ``OUT_CSV`` (= WORK/phenotype.csv);
* ``np``, ``pd``, ``os``, ``sys``, ``glob``, ``gzip``, ``json``, ``subprocess``;
* ``load_genotypes()``, ``request_experiment(kind, protein)`` and ``submit()``.

It must stay importable with nothing but the standard library, numpy, pandas
and the genotype reader: the project's own package is never visible inside the
sandbox (its config folder holds development seeds).

The harness and this file talk through a small writable channel folder
(``DTW_CHANNEL``): ``requests.jsonl`` (one queued experiment a line) and
``submit.json`` (the submission as it stood when ``submit()`` was called).
Nothing in the channel is trusted: the harness re-validates every line.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import site
import subprocess
import sys

# The harness's site folders (a user site, for one) which ``python -I`` would skip.
for _site_dir in os.environ.get("DTW_SITE_DIRS", "").split(os.pathsep):
    if _site_dir and _site_dir not in sys.path:
        site.addsitedir(_site_dir)

import numpy as np  # noqa: E402  (after the site folders)
import pandas as pd  # noqa: E402

# Read with defaults so that importing this file outside a sandbox (a module
# crawler, a test) does not fail; the functions refuse to act without a channel.
RELEASE = os.environ.get("DTW_RELEASE", "")
IMAGING = os.environ.get("DTW_IMAGING", "")
WORK = os.environ.get("DTW_WORK", "")
OUT_CSV = os.path.join(WORK, "phenotype.csv")
SUBMISSION = os.path.join(WORK, "submission.json")
EXPERIMENTS = os.path.join(WORK, "experiments")
EXPERIMENT_KINDS = ("cell_perturbation", "knockdown")

_CHANNEL = os.environ.get("DTW_CHANNEL", "")
_genotype_cache: dict = {}


def _channel_file(name: str) -> str:
    if not _CHANNEL:
        raise RuntimeError("not running under the episode harness (DTW_CHANNEL is unset)")
    return os.path.join(_CHANNEL, name)


def load_genotypes() -> pd.DataFrame:
    """ALT-allele dosages (int8: 0, 1, 2; -1 for a missing call), subjects x variants.

    Indexed by ``subject_id`` like the wide tables; columns are variant ids.
    Loaded once per program and cached; returns the same frame on later calls.
    """
    if "frame" not in _genotype_cache:
        from dtw_genotypes import load_genotypes as _load

        _genotype_cache["frame"] = _load(RELEASE)
    return _genotype_cache["frame"]


def request_experiment(kind: str, protein: str) -> str:
    """Queue one experiment; returns the path its result will have next turn.

    Nothing is charged or checked here: after this turn's program ends the
    harness charges each queued request against the budget in order, or
    refuses it (unknown kind or protein, a repeat, not enough budget), and the
    next observation says which.  Results appear at
    WORK/experiments/<protein>.<kind>.json when the next program starts.
    """
    kind_text, protein_text = str(kind), str(protein)
    with open(_channel_file("requests.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"kind": kind_text, "protein": protein_text}) + "\n")
    return os.path.join(EXPERIMENTS, f"{protein_text}.{kind_text}.json")


def submit(submission: dict | None = None) -> None:
    """Make WORK/submission.json final; the episode ends after this turn.

    With an argument, the dictionary is first written to WORK/submission.json.
    The file must hold a JSON object, otherwise this raises and the episode
    continues.  Experiments queued in this turn are still delivered and charged.
    """
    submit_path = _channel_file("submit.json")
    if submission is not None:
        with open(SUBMISSION, "w", encoding="utf-8") as handle:
            json.dump(submission, handle, indent=2)
    try:
        with open(SUBMISSION, "rb") as handle:
            parsed = json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError("submit(): write WORK/submission.json first (or pass the submission to submit())") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"submit(): WORK/submission.json is not valid JSON ({error}); nothing was submitted") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"submit(): WORK/submission.json holds a {type(parsed).__name__}, not a JSON object; nothing was submitted")
    with open(submit_path, "w", encoding="utf-8") as handle:
        json.dump(parsed, handle)
    print("[harness] submission recorded; the episode ends after this turn.")


def _namespace(program_path: str) -> dict:
    return {
        "__name__": "__main__",
        "__file__": program_path,
        "__builtins__": __builtins__,
        "np": np, "pd": pd, "os": os, "sys": sys, "glob": glob, "gzip": gzip, "json": json,
        "subprocess": subprocess,
        "RELEASE": RELEASE, "IMAGING": IMAGING, "WORK": WORK, "OUT_CSV": OUT_CSV,
        "load_genotypes": load_genotypes, "request_experiment": request_experiment, "submit": submit,
    }


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dtw_runner import run_program  # the harness's runner.py, copied beside this file

    sys.exit(run_program(sys.argv[1], _namespace(sys.argv[1]), WORK, _CHANNEL, __file__))
