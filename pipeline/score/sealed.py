"""What the scorer reads of the sealed bundle, through the bundle contract: the truth
(without it nothing can be scored), the latent severity, the evaluation mask, the
frozen baseline b and the world's protein list.  Everything but the truth may be
missing or damaged: the component that needs it then scores zero or falls back, and
the episode's notes say why."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import bundle
from .notes import is_number


class SealedBundleError(RuntimeError):
    """The sealed bundle cannot be read; the episode cannot be scored at all."""


def load_truth(sealed: Path) -> dict:
    """truth.json, after the sealed manifest's format version when there is a manifest."""
    try:
        bundle.check_sealed(sealed, require_manifest=False)
    except bundle.BundleError as error:
        raise SealedBundleError(str(error)) from None
    path = bundle.sealed_path(sealed, bundle.TRUTH)
    try:
        truth = bundle.read_sealed(sealed, bundle.TRUTH)
    except bundle.MissingFile as error:
        raise SealedBundleError(str(error)) from None
    except (OSError, ValueError, RecursionError) as error:
        raise SealedBundleError(f"{path}: {type(error).__name__}: {error}") from None
    if not isinstance(truth, dict):
        raise SealedBundleError(f"{path}: not a JSON object")
    return truth


def load_latent(sealed: Path, io: dict) -> pd.Series | None:
    try:
        table = bundle.read_sealed(sealed, bundle.LATENT)
        if "subject_id" in table.columns:
            table = table.set_index("subject_id")
        return table["latent"]
    except Exception as error:  # pyarrow and pandas raise many types for a damaged file
        io.setdefault("warnings", []).append(f"sealed {bundle.LATENT} unreadable ({_name(error)})")
        return None


def load_eval_mask(sealed: Path, io: dict) -> np.ndarray | None:
    try:
        return bundle.read_sealed(sealed, bundle.EVAL_MASK)
    except Exception as error:  # np.load raises OSError, ValueError, EOFError...
        io.setdefault("warnings", []).append(f"sealed {bundle.EVAL_MASK} unreadable ({_name(error)})")
        return None


def load_imaged(sealed: Path, latent: pd.Series | None, io: dict) -> np.ndarray | None:
    """The world's imaged participants, aligned with ``latent``: the rows of the baseline
    pipeline's measurements (``imaging_features.parquet``), the set b is computed on.  None
    for a world built without images (no such file)."""
    if latent is None:
        return None
    try:
        import pyarrow.parquet as pq

        path = bundle.sealed_path(sealed, bundle.IMAGING_FEATURES)
        if not Path(path).is_file():
            io["imaged_source"] = "no imaging_features.parquet (a world without images): the whole eval mask is scored"
            return None
        index = pq.read_table(path, columns=[]).to_pandas().index
        if "subject_id" not in (index.name or ""):
            table = pq.read_table(path).to_pandas()
            index = table.index if table.index.name == "subject_id" else pd.Index(table.get("subject_id", []))
    except Exception as error:  # pyarrow raises many types for a damaged file
        io.setdefault("warnings", []).append(f"sealed {bundle.IMAGING_FEATURES} unreadable ({_name(error)}); "
                                             "the whole eval mask is scored")
        return None
    io["imaged_source"] = f"{bundle.IMAGING_FEATURES} ({len(index)} imaged participants)"
    ids = set(str(v) for v in index.tolist())
    return np.fromiter((str(v) in ids for v in latent.index.tolist()), dtype=bool, count=len(latent))


def load_baseline(sealed: Path, io: dict) -> float | None:
    try:
        value = bundle.read_sealed(sealed, bundle.PHENOTYPE_BASELINE).get("built_in_correlation")
    except FileNotFoundError:
        io["baseline_file"] = "absent: fallback branch"
        return None
    except (OSError, ValueError, AttributeError, RecursionError) as error:
        io["baseline_file"] = f"unreadable ({type(error).__name__}): fallback branch"
        return None
    io["baseline_file"] = "read"
    return value if is_number(value) else None


def load_valid_proteins(sealed: Path, io: dict) -> set[str] | None:
    try:
        proteins = bundle.read_sealed(sealed, bundle.ORACLE).get("proteins")
    except (OSError, ValueError, AttributeError, RecursionError) as error:
        io.setdefault("warnings", []).append(f"sealed {bundle.ORACLE} unreadable ({_name(error)})")
        return None
    return set(p for p in proteins if isinstance(p, str)) if isinstance(proteins, list) else None


def _name(error: BaseException) -> str:
    # A missing file reads as the FileNotFoundError it is, whatever the contract's subclass.
    return "FileNotFoundError" if isinstance(error, bundle.MissingFile) else type(error).__name__
