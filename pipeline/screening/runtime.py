"""The prelude of every agent program in a screening episode.

The screening harness copies this file, unchanged, into the sandbox's
read-only prelude folder (in place of the biobank prelude, behind one line
that puts the interpreter's site folders on the path) and runs each turn's
program as ``python -I dtw_runtime.py program.py`` in a fresh process; the
harness's ``dtw_runner.py`` beside it runs the program (as for every kind).
The program runs in a namespace that already holds

* ``RELEASE``, ``WORK``;
* ``np``, ``pd``, ``os``, ``sys``, ``glob``, ``json``;
* ``load_library(columns)``, ``load_conformations()``, ``request_labels(ids)``,
  ``labels()``, ``submit(ids)``, ``submission_results()``, ``status()`` and
  ``finish()``.

Requests are queued here and answered by the harness after the program ends:
labels arrive in ``WORK/labels.csv`` (every label delivered so far: ``id``,
``score``, ``turn``), submission results in ``WORK/submission_results.json``,
the episode's state in ``WORK/status.json``.  It must stay importable with
the standard library, numpy, pandas and pyarrow alone: the project's own
package is never visible inside the sandbox.
"""

import glob
import json
import os
import sys

import numpy as np
import pandas as pd

RELEASE = os.environ.get("DTW_RELEASE", "")
WORK = os.environ.get("DTW_WORK", "")
LIBRARY = os.path.join(RELEASE, "library.parquet")
LABELS = os.path.join(WORK, "labels.csv")
RESULTS = os.path.join(WORK, "submission_results.json")
STATUS = os.path.join(WORK, "status.json")
_CHANNEL = os.environ.get("DTW_CHANNEL", "")


def _channel_file(name: str) -> str:
    if not _CHANNEL:
        raise RuntimeError("not running under the screening harness (DTW_CHANNEL is unset)")
    return os.path.join(_CHANNEL, name)


def _ids(ids) -> list:
    if isinstance(ids, (str, bytes)):
        raise TypeError("pass a list (or array) of conformation ids, not a single string")
    out = [str(x) for x in list(ids)]
    if not out:
        raise ValueError("the list of ids is empty")
    return out


def load_library(columns=("id", "smiles")) -> pd.DataFrame:
    """The library table (``id``, ``smiles``; add ``elements``/``coordinates`` if you need them)."""
    return pd.read_parquet(LIBRARY, columns=list(columns))


def load_conformations():
    """(ids, atom_offset, elements, coordinates) as flat arrays: atoms of conformation i are
    rows atom_offset[i]:atom_offset[i+1] of ``elements`` (str) and ``coordinates`` (float32 [atoms, 3])."""
    import pyarrow.parquet as pq

    table = pq.read_table(LIBRARY, columns=["id", "elements", "coordinates"])
    ids = np.asarray(table.column("id").to_numpy(zero_copy_only=False), dtype=object)
    coords_col = table.column("coordinates").combine_chunks()
    offsets = np.asarray(coords_col.offsets, dtype=np.int64)
    xyz = np.asarray(coords_col.values.values, dtype=np.float32).reshape(-1, 3)
    elements = np.asarray(table.column("elements").combine_chunks().values.to_numpy(zero_copy_only=False), dtype=object)
    return ids, offsets, elements, xyz


def request_labels(ids) -> int:
    """Queue one batch of label requests; returns its size.

    After this turn's program ends the harness answers each queued batch in
    order, in full or not at all (unknown ids, or more new ids than the budget
    has left).  Labels already delivered cost nothing.  Results are in
    WORK/labels.csv when the next program starts.
    """
    batch = _ids(ids)
    with open(_channel_file("label_requests.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"ids": batch}) + "\n")
    return len(batch)


def labels() -> pd.DataFrame:
    """Every label delivered so far (``id``, ``score``, ``turn``); empty before the first delivery."""
    if not os.path.exists(LABELS):
        return pd.DataFrame({"id": pd.Series(dtype=str), "score": pd.Series(dtype=float), "turn": pd.Series(dtype=int)})
    return pd.read_csv(LABELS)


def submit(ids) -> int:
    """Queue one submission (distinct ids, at most the submission size); returns its size.

    Scored after this turn's program ends: the overlap with the true top-K is
    in WORK/submission_results.json next turn.  At most three are accepted;
    the best counts.
    """
    batch = _ids(ids)
    with open(_channel_file("submissions.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"ids": batch}) + "\n")
    return len(batch)


def submission_results() -> list:
    if not os.path.exists(RESULTS):
        return []
    with open(RESULTS, encoding="utf-8") as handle:
        return json.load(handle)


def status() -> dict:
    """Labels remaining, submissions left, turns and clock left, sizes of the game."""
    with open(STATUS, encoding="utf-8") as handle:
        return json.load(handle)


def finish() -> None:
    """End the episode after this turn (the best accepted submission counts)."""
    with open(_channel_file("finish.json"), "w", encoding="utf-8") as handle:
        json.dump({"finish": True}, handle)


def _namespace(program_path: str) -> dict:
    return {
        "__name__": "__main__", "__file__": program_path, "__builtins__": __builtins__,
        "np": np, "pd": pd, "os": os, "sys": sys, "glob": glob, "json": json,
        "RELEASE": RELEASE, "WORK": WORK,
        "load_library": load_library, "load_conformations": load_conformations, "request_labels": request_labels,
        "labels": labels, "submit": submit, "submission_results": submission_results, "status": status,
        "finish": finish,
    }


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dtw_runner import run_program  # the harness's runner.py, copied beside this file

    sys.exit(run_program(sys.argv[1], _namespace(sys.argv[1]), WORK, _CHANNEL, __file__))
