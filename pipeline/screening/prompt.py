"""The task instructions of a screening episode (this project's own wording of the DO Challenge task)."""
from __future__ import annotations

FORMAT_HINT = ("Your reply held no code. Reply with one fenced Python block (```python ... ```); "
               "the last block of a reply runs.")


def system_prompt(sizes: dict, max_turns: int, timeout: float, clock_s: float | None, isolated: bool) -> str:
    clock = (f"The episode has {clock_s / 3600:g} hours of wall clock in all (your thinking and your programs both count); "
             "when it runs out the episode ends.") if clock_s else "The episode has no overall time limit."
    return f"""You are screening a virtual library of {sizes['conformations']:,} molecular conformations for the ones
with the highest hidden score. The score measures how promising a conformation is as a drug candidate
against a target you are not told about: binding to the target's pocket, penalised for binding to
other proteins and for poor drug-likeness. It depends on each conformation's 3D position and orientation
in the fixed frame the coordinates are given in: rotating or translating a structure changes its score.
Part of the score is not predictable from structure at all.

Goal: find the top {sizes['top_k']:,} conformations by score. You may submit up to {sizes['max_submissions']} sets of at
most {sizes['submission_size']:,} distinct ids; each is answered with how many of the true top {sizes['top_k']:,} it holds;
your result is the best submission's |submission ∩ top-{sizes['top_k']:,}| / {sizes['top_k']:,} × 100 %.
You may learn the true score of at most {sizes['budget']:,} conformations of your choice (repeats are free).

Each turn, reply with Python in one fenced block; the last block of a reply runs in a fresh process
(at most {timeout:g} s) with these names defined:
  RELEASE, WORK                 the library (read-only) and your work folder (kept between turns)
  load_library(columns)         pandas DataFrame of RELEASE/library.parquet (id, smiles, elements, coordinates)
  load_conformations()          (ids, atom_offset, elements, coordinates) as flat numpy arrays
  request_labels(ids)           queue one batch of label requests, answered after your program ends
  labels()                      every label delivered so far (id, score, turn), from WORK/labels.csv
  submit(ids)                   queue one submission, scored after your program ends
  submission_results()          the results of your submissions so far (WORK/submission_results.json)
  status()                      labels left, submissions left, turns and time left (WORK/status.json)
  finish()                      end the episode after this turn
numpy (np), pandas (pd), pyarrow, scipy, scikit-learn, RDKit and LightGBM are installed. Files you write to WORK
persist between turns (a module saved there can be imported). A batch of label requests is answered in
full or refused in full (unknown ids, or more new ids than the budget has left: the refusal says what
remains). A submission with unknown or duplicate ids, or too many ids, is refused and does not count.
RELEASE/README.md describes the files.

You have {max_turns} turns. {clock} The episode ends when you call finish(), when your third
submission has been scored, or at the turn or time limit; the best accepted submission counts (no
submission scores 0). {'Your code runs isolated (no network).' if isolated else 'Your code is NOT isolated on this machine.'}
"""


def opening_message(paths: dict) -> str:
    return (f"The library is at {paths['RELEASE']}; your work folder is {paths['WORK']}. "
            "Start by looking at the library and status().")
