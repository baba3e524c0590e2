"""Findings on what the release states rather than measures: seed material anywhere
(metadata, text and data), role and truth words, role identifiers singled out, and the
order of every identifier.

Seed material is searched in both metadata and data (compressed payloads are searched
in decoded form; image pixel payloads are data values and are not decoded).  Role
words, role identifiers and hidden numbers are searched in metadata and text only,
where they would be a statement rather than a value.

Rules that a naive search would get wrong, made precise here:

* ``T1`` is also the MRI quantity: "native T1", "T1 map"/"T1 mapping"/"T1
  relaxation" are not the bias code.  ``weight`` is allowed as "body weight".
* "selection" (or "selected") is the T3 role word.  It is allowed only in a
  sentence that is about imaging participation (mentions imaging, MRI or
  imaged) and names none of disease, severity, latent, outcome or a protein:
  imaging participation by age, body size, ancestry and centre is a property of
  every world and of real imaging sub-studies.  The current data dictionary
  says "participation is not random" and never needs the exception.  Beyond
  words, ``data_dictionary.md`` must be exactly the text that
  ``pipeline.data_dictionary.render_markdown`` renders from public quantities
  (number of variants, protein missing rate, the messy flag), so it cannot
  depend on biases or roles.
* Role identifiers appear legitimately in metadata that enumerates every
  protein (the proteomics schema).  A role identifier is flagged when it occurs
  a different number of times than ordinary identifiers in the same stream.
  Parquet column statistics (min/max) are data, not statements, and are not
  counted.
"""
from __future__ import annotations

import gzip
import os
import re
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from .. import bundle
from .findings import Finding, limit
from .needles import Needles
from .release_files import MOLECULE_ID, Release, column_batches, read_text, strings, vcf_chunks, vcf_header
from .secrets import Secrets

_ROLE_WORDS = re.compile(
    r"(?<![a-z])(drivers?|decoys?|surrogates?|latent|truth|causal|causation|reverse[_ ]causation|pleiotrop[a-z]*"
    r"|confound[a-z]*|selection|selected|measurement[_ ]artifacts?|weights?|seeds?|seeded|bias|biases|planted"
    r"|oracle|eval[_ ]mask|roles?)(?![a-z])",
    re.IGNORECASE,
)
_BIAS_CODE = re.compile(r"(?<![A-Za-z0-9])(T[1-9]|A9)(?![A-Za-z0-9])")
_MRI_T1 = re.compile(r"native\s+T1|T1[\s-]*(map|maps|mapping|relaxation)\b|t1map", re.IGNORECASE)
_BODY_WEIGHT = re.compile(r"body\s+weight", re.IGNORECASE)
_IMAGING_CONTEXT = re.compile(r"imaging|\bMRI\b|imaged", re.IGNORECASE)
_L_CONTEXT = re.compile(r"disease|severity|latent|outcome|PROT_|protein", re.IGNORECASE)


def check_seed_material(rel: Release, needles: Needles) -> Finding:
    hits: list = []
    n_streams = 0
    for label, data in rel.metadata_streams():
        needles.scan(label, data, True, hits)
        n_streams += 1
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        needles.scan(f"{r} [footer]", info.footer, True, hits)
        for batch in column_batches(rel.abs(r), info.columns):
            for name in batch.column_names:
                col = batch.column(name)
                if name in info.string_columns:
                    text = "\n".join(v for v in col.to_pylist() if v is not None).encode()
                    needles.scan(f"{r} [values of {name}]", text, False, hits)
                else:
                    arr = col.drop_null().to_numpy(zero_copy_only=False)
                    if arr.dtype.kind in "iufMm":
                        needles.scan_words(f"{r} [values of {name}]", arr, hits)
                n_streams += 1
    for r in rel.of_kind("vcf"):
        needles.scan_stream(f"{r} [decompressed]", vcf_chunks(rel.abs(r)), hits)
        n_streams += 1
    for r in rel.of_kind("index"):
        needles.scan(f"{r} [decompressed]", gzip.open(rel.abs(r), "rb").read(), True, hits)
        n_streams += 1
    for root in sorted(rel.roots):
        import zarr

        group = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
        for name, arr in group.members(max_depth=None):
            if not hasattr(arr, "dtype"):
                continue
            kind = np.dtype(arr.dtype).kind if not str(arr.dtype).startswith("StringDType") else "U"
            if kind in "OUS":
                values = [str(v) for v in np.asarray(arr[...]).ravel().tolist()]
                needles.scan(f"{root}/{name} [values]", "\n".join(values).encode(), False, hits)
            elif np.dtype(arr.dtype).itemsize == 8:
                needles.scan_words(f"{root}/{name} [values]", np.asarray(arr[...]), hits)
            n_streams += 1
    for r in rel.of_kind("other"):
        needles.scan(r, read_text(rel.abs(r)), True, hits)
    ok = not hits
    detail = (f"{n_streams} streams searched for the seed, seed_int, oracle_key ({len(needles.hex)} hex, "
              f"{len(needles.dec)} decimal, {len(needles.binary)} binary windows)")
    return Finding("seed_material", ok, detail if ok else f"{len(hits)} hit(s); " + detail, limit(hits))


def _sentence_at(text: str, pos: int) -> str:
    start = max(text.rfind(".", 0, pos), text.rfind("\n\n", 0, pos), text.rfind("\n#", 0, pos)) + 1
    ends = [i for i in (text.find(". ", pos), text.find(".\n", pos), text.find("\n\n", pos)) if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def role_word_problems(label: str, text: str) -> list:
    """Role and truth words in one metadata/text stream, with the documented exceptions."""
    out = []
    mri = [m.span() for m in _MRI_T1.finditer(text)]
    body = [m.span() for m in _BODY_WEIGHT.finditer(text)]
    for m in _ROLE_WORDS.finditer(text):
        word = m.group(1).lower()
        if word.startswith("weight") and any(s <= m.start() < e for s, e in body):
            continue
        if word in ("selection", "selected"):
            sentence = _sentence_at(text, m.start())
            if _IMAGING_CONTEXT.search(sentence) and not _L_CONTEXT.search(sentence):
                continue
        out.append(f"{label}: role/truth word {m.group(0)!r} near {text[max(0, m.start() - 30):m.end() + 30]!r}")
    for m in _BIAS_CODE.finditer(text):
        if m.group(1) == "T1" and any(s <= m.start() < e for s, e in mri):
            continue
        out.append(f"{label}: bias code {m.group(1)!r} near {text[max(0, m.start() - 30):m.end() + 30]!r}")
    return out


class _PublicWorld:
    """The public quantities a data dictionary may be rendered from; any other
    attribute the renderer asks for is a dependence on the hidden world."""

    def __init__(self, n_variants: int, protein_missing: float, messy: bool):
        self.n_variants = n_variants
        self.params = {"protein_missing": protein_missing}
        self.messy = messy

    def __getattr__(self, name):
        raise AttributeError(f"the data dictionary reads world.{name}, which is not a public quantity")


def check_role_words(rel: Release, secrets: Secrets) -> Finding:
    problems = []
    n = 0
    for label, data in rel.metadata_streams():
        problems += role_word_problems(label, data.decode("utf-8", "replace"))
        n += 1
    dd = rel.abs(bundle.DATA_DICTIONARY_MD)
    note = ""
    if os.path.exists(dd):
        from ..data_dictionary import render_markdown

        w = secrets.config.get("world") or {}
        scale = secrets.config.get("scale") or {}
        try:
            expected = render_markdown(_PublicWorld(int(scale.get("variants", 0)), float(w.get("protein_missing", 0.0)),
                                                    bool(w.get("messy", False))))
            if expected != read_text(dd).decode("utf-8", "replace"):
                problems.append("data_dictionary.md differs from the text rendered from public quantities only "
                                "(n_variants, protein_missing, messy): it depends on something hidden")
            else:
                note = "; data_dictionary.md is a function of n_variants, protein_missing and messy only"
        except AttributeError as exc:
            problems.append(f"data_dictionary.md: {exc}")
    return Finding("role_words", not problems, f"{n} metadata/text streams{note}", limit(problems))


def _count_ids(text: str, prefix: str) -> dict:
    counts: dict = {}
    for m in re.finditer(r"(?<![A-Za-z0-9])%s_(\d+)(?![0-9])" % prefix, text):
        key = f"{prefix}_{m.group(1)}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def check_role_identifiers(rel: Release, secrets: Secrets) -> Finding:
    """A role identifier may occur in metadata only as often as every ordinary one
    (e.g. once per protein in a schema), never singled out."""
    problems = []
    role_ids = secrets.role_ids
    numbers = {pid: MOLECULE_ID.match(pid).group(2) for pid in secrets.proteins if MOLECULE_ID.match(pid)}
    universe = {"PROT": list(secrets.proteins), "TRANS": [f"TRANS_{n}" for n in numbers.values()]}
    for label, data in rel.metadata_streams():
        text = data.decode("utf-8", "replace")
        for prefix, ids in universe.items():
            counts = _count_ids(text, prefix)
            if not counts or not ids:
                continue
            values, freq = np.unique([counts.get(i, 0) for i in ids], return_counts=True)
            modal = int(values[np.argmax(freq)])
            for rid, role in role_ids.items():
                if rid.startswith(prefix + "_") and counts.get(rid, 0) != modal:
                    problems.append(f"{label}: {rid} ({role}) occurs {counts.get(rid, 0)} time(s), "
                                    f"ordinary {prefix} identifiers {modal}")
        if secrets.role_variants:
            counts = {}
            for m in re.finditer(r"(?<![A-Za-z0-9])rs\d+(?![0-9])", text):
                counts[m.group(0)] = counts.get(m.group(0), 0) + 1
            if counts:
                ordinary = [counts.get(v, 0) for v in secrets.ordinary_variants] or [0]
                values, freq = np.unique(ordinary, return_counts=True)
                modal = int(values[np.argmax(freq)])
                for v, role in secrets.role_variants.items():
                    if counts.get(v, 0) != modal:
                        problems.append(f"{label}: {v} ({role}) occurs {counts.get(v, 0)} time(s), ordinary variants {modal}")
        for textform, what in secrets.hidden_numbers.items():
            if re.search(r"(?<![0-9])%s(?![0-9])" % re.escape(textform), text):
                problems.append(f"{label}: hidden number {textform} ({what})")
    detail = (f"{len(role_ids)} role identifiers (proteins and paired transcripts), {len(secrets.role_variants)} role "
              f"variants and {len(secrets.hidden_numbers)} hidden numbers looked for in metadata/text")
    return Finding("role_identifiers", not problems, detail, limit(problems))


def _sequential(ids: list, prefix: str) -> Optional[str]:
    """None when ``ids`` are prefix_0, prefix_1, ... in order with one zero-padded width."""
    if not ids:
        return None
    widths, numbers = set(), []
    for i in ids:
        m = re.fullmatch(r"%s_(\d+)" % prefix, str(i))
        if not m:
            return f"identifier {i!r} is not {prefix}_<number>"
        widths.add(len(m.group(1)))
        numbers.append(int(m.group(1)))
    if len(widths) != 1:
        return f"{prefix} identifiers have several widths {sorted(widths)}"
    if numbers != list(range(len(numbers))):
        bad = next(k for k, v in enumerate(numbers) if v != k)
        return f"{prefix} identifiers are not sequential in order: position {bad} holds {ids[bad]}"
    return None


def check_identifier_order(rel: Release) -> Finding:
    problems = []
    cohort = rel.cohort()
    checked = []
    if cohort is None:
        problems.append("covariates.parquet is missing: no cohort order to check against")
        cohort = []
    else:
        err = _sequential(cohort, "SUBJ")
        if err:
            problems.append(f"covariates.parquet: {err}")
    pos = pd.Index(cohort)
    protein_ids = None
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        molecule_cols = [c for c in info.value_columns if MOLECULE_ID.match(c)]
        if molecule_cols:
            prefixes = {MOLECULE_ID.match(c).group(1) for c in molecule_cols}
            if len(prefixes) != 1 or len(molecule_cols) != len(info.value_columns):
                problems.append(f"{r}: mixes identifier kinds or other columns among molecule columns")
            else:
                prefix = prefixes.pop()
                err = _sequential(molecule_cols, prefix)
                if err:
                    problems.append(f"{r}: column order: {err}")
                if prefix == "PROT":
                    protein_ids = protein_ids or molecule_cols
                    if molecule_cols != protein_ids:
                        problems.append(f"{r}: protein columns differ from the other proteomics table's")
                checked.append(f"{r} columns")
        if info.index_columns == ["protein"]:
            ids = pq.read_table(info.path, columns=["protein"]).column("protein").to_pylist()
            err = _sequential(ids, "PROT")
            if err:
                problems.append(f"{r}: protein index: {err}")
            checked.append(f"{r} rows")
        if "subject_id" in info.columns:
            ids = pq.read_table(info.path, columns=["subject_id"]).column("subject_id").to_pylist()
            where = pos.get_indexer(ids)
            if (where < 0).any():
                problems.append(f"{r}: subject {ids[int(np.flatnonzero(where < 0)[0])]!r} is not in the cohort")
            elif "subject_id" in info.index_columns:
                if np.any(np.diff(where) <= 0):
                    problems.append(f"{r}: subject_id index is not in cohort order")
            elif np.any(np.diff(where) < 0):
                problems.append(f"{r}: rows are not grouped in cohort order of subject_id")
            for c in info.index_columns:
                if c.startswith("__index_level_"):
                    idx = pq.read_table(info.path, columns=[c]).column(c).to_numpy()
                    if not np.array_equal(idx, np.arange(len(idx))):
                        problems.append(f"{r}: stored row index {c} is not 0..n-1 (it would keep a former row order)")
            checked.append(f"{r} rows")
    for r in rel.of_kind("parquet"):
        info = rel.parquet(r)
        tx = [c for c in info.value_columns if c.startswith("TRANS_")]
        if tx and protein_ids and [c.split("_", 1)[1] for c in tx] != [p.split("_", 1)[1] for p in protein_ids]:
            problems.append(f"{r}: transcripts are not paired one-to-one, in order, with the proteins")
    for r in rel.of_kind("vcf"):
        header = vcf_header(rel.abs(r)).decode("utf-8", "replace").splitlines()
        samples = header[-1].split("\t")[9:] if header else []
        if samples != list(cohort):
            problems.append(f"{r}: sample columns differ from the cohort order")
        checked.append(f"{r} samples")
    for root in sorted(rel.roots):
        import zarr

        g = zarr.open_group(rel.abs(root), mode="r", zarr_format=2)
        names = {n for n, _ in g.members()}
        if "sample_id" in names:
            if strings(g["sample_id"]) != list(cohort):
                problems.append(f"{root}/sample_id differs from the cohort order")
            checked.append(f"{root} samples")
        if "variant_id" in names:
            vids = strings(g["variant_id"])
            nums = [int(v[2:]) if re.fullmatch(r"rs\d+", v) else -1 for v in vids]
            if min(nums, default=0) < 0 or np.any(np.diff(nums) <= 0):
                problems.append(f"{root}/variant_id: identifiers are not increasing rs numbers along the genome")
            checked.append(f"{root} variants")
        if "subject_id" in names:
            sids = strings(g["subject_id"])
            where = pos.get_indexer(sids)
            if (where < 0).any() or np.any(np.diff(where) <= 0):
                problems.append(f"{root}/subject_id is not an ordered subset of the cohort")
            checked.append(f"{root} subjects")
    return Finding("identifier_order", not problems, f"checked: {', '.join(checked)}", limit(problems))
