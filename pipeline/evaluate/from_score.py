"""An episode's record from its ``score.json`` (``pipeline.evaluate.records``): the score's
fields under the record's names, the experiments counted from the episode's ledger, the
turns (no code, timeouts, failed runs, truncated replies, parse failures) and the model
usage from its transcript, the folder the score was computed from, and for a biobank
episode the S11 C fixed-label re-score (``pipeline.evaluate.fixed_labels``).

One job: score.json (and the files it names) in, one checked record out.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from .checks import _is_number, validate_record
from .fields import COMPONENTS, EXIT_DETAIL_MAX_CHARS, KINDS, RECORD_FORMAT, USAGE_FIELDS, PathLike, RecordError
from .fixed_labels import fixed_labels_score


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _read_json_file(path: PathLike, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{what}={path}: unreadable ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{what}={path}: a JSON {type(data).__name__}, not an object")
    return data


def _resolve(option: Any, recorded: Any, what: str) -> Optional[Path]:
    """The file an "auto" option means (the path recorded in score.json, when it exists)."""
    if option is None:
        return None
    if isinstance(option, str) and option == "auto":
        if isinstance(recorded, str) and Path(recorded).is_file():
            return Path(recorded)
        return None
    path = Path(option)
    if not path.is_file():
        raise RecordError(f"{what}={option}: no such file")
    return path


def _ledger_counts(path: Path) -> dict:
    from ..oracle import LedgerError, read_ledger

    try:
        rows = read_ledger(path)
    except (OSError, LedgerError) as error:
        raise RecordError(f"ledger={path}: unreadable ({type(error).__name__}: {error})") from None
    delivered = [r for r in rows if r.get("status") == "delivered"]
    refused = [r for r in rows if r.get("status") == "refused"]
    return {
        "experiments_requested": len(delivered) + len(refused),
        "experiments_delivered": len(delivered),
        "experiments_delivered_knockdown": sum(1 for r in delivered if r.get("kind") == "knockdown"),
        "experiments_delivered_cell_perturbation": sum(1 for r in delivered if r.get("kind") == "cell_perturbation"),
        "experiments_refused": len(refused),
        "spend": float(sum(float(r.get("cost") or 0.0) for r in delivered)),
    }


def _check_transcript_format(transcript: Mapping, where: str) -> None:
    """A transcript's ``format`` must be the one the harness writes (``TRANSCRIPT_FORMAT``)."""
    from ..formats import check_format
    from ..harness.core import TRANSCRIPT_FORMAT

    check_format(transcript.get("format"), TRANSCRIPT_FORMAT, where, error=RecordError)


def _transcript_counts(transcript: Mapping, kind: str) -> dict:
    turns = transcript.get("turns")
    if not isinstance(turns, list):
        raise RecordError("transcript: no list of turns; valid: the episode's transcript.json")
    counts = {"no_code_turns": 0, "turn_timeouts": 0, "failed_runs": 0, "truncated_replies": 0}
    if kind == "biobank":
        counts["parse_failures"] = 0
    usage: dict = {}
    for turn in turns:
        if not isinstance(turn, Mapping):
            continue
        source = turn.get("code_source")
        counts["no_code_turns"] += source == "none"
        counts["truncated_replies"] += source == "open_fence"
        counts["turn_timeouts"] += turn.get("status") == "timeout"
        counts["failed_runs"] += turn.get("status") == "failed"
        status = turn.get("submission")
        if kind == "biobank" and isinstance(status, str) and not status.startswith(("parsed", "absent")):
            counts["parse_failures"] += 1
        if isinstance(turn.get("usage"), Mapping):
            for key in USAGE_FIELDS:
                value = turn["usage"].get(key)
                if _is_number(value) and math.isfinite(value):
                    usage[key] = usage.get(key, 0) + value
    counts["_usage"] = usage or None
    return counts


def _usage(score: Mapping, from_transcript: Optional[dict]) -> dict:
    usage = score.get("usage") if isinstance(score.get("usage"), Mapping) else from_transcript
    out = {}
    for key in USAGE_FIELDS:
        value = usage.get(key) if usage else None
        out[key] = value if _is_number(value) else None
    if usage and out["total_tokens"] is None and out["prompt_tokens"] is not None \
            and out["completion_tokens"] is not None:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


def scored_work_dir(score_json: Mapping) -> Optional[Path]:
    """The folder a biobank episode's score was computed from, read from its score.json.

    ``episode.scored_from`` is ``"work"`` (``<episode_dir>/work``) or starts with ``"scored/"``
    (``<episode_dir>/scored``: the harness scored a copy because WORK's submission.json was not
    the one its exit rule picks); ``None`` for a runner crash (nothing was scored).
    """
    episode = score_json.get("episode") if isinstance(score_json, Mapping) else None
    if not isinstance(episode, Mapping) or not isinstance(episode.get("episode_dir"), str):
        return None
    source = episode.get("scored_from")
    if source == "work":
        return Path(episode["episode_dir"]) / "work"
    if isinstance(source, str) and source.startswith("scored/"):
        return Path(episode["episode_dir"]) / "scored"
    return None


def record_from_score(
    score_json: Union[Mapping, PathLike],
    *,
    world: str,
    kind: str,
    archetype: Optional[str],
    agent: str,
    budget: Optional[float],
    trial: int,
    fixed_labels_total: Optional[float] = None,
    sealed_dir: Optional[PathLike] = None,
    mode: Optional[str] = None,
    transcript: Union[Mapping, PathLike, None] = "auto",
    ledger: Optional[PathLike] = "auto",
    agent_config_digest: Optional[str] = None,
    manifest_digest: Optional[str] = None,
    harness_version: Optional[str] = None,
) -> dict:
    """Build the record of one episode from its ``score.json``.

    Parameters
    ----------
    score_json
        The episode's score dictionary (what ``Episode.run`` returns and writes to
        ``<episode>/score.json``), or the path of that file.  A bare scorer output
        (``python -m pipeline.score``, no ``episode`` summary) is accepted: the process
        fields are then null.
    world, kind, archetype, agent, budget, trial
        The episode's cell, as the runner knows it.  ``world`` must match the world id the
        score names (when it names one); ``kind`` must match the score's kind; ``budget`` is
        required for a biobank episode (and must match ``episode.budget``) and must be None
        for a screening one.
    fixed_labels_total
        Table S11 C for this episode, if the caller computed it.  When None and ``sealed_dir``
        is given it is computed here with :func:`fixed_labels_total` on the folder the score
        came from (:func:`scored_work_dir`), the episode's ledger and its ``paper_compat``; a
        runner crash gets 0
        (S2.4: zero on every component).  Otherwise it stays null.
    sealed_dir
        The world's sealed bundle, only needed to compute ``fixed_labels_total``.
    mode
        Screening mode; default ``episode.mode`` of the score.
    transcript
        The transcript (dict or path), ``"auto"`` (default: the path in ``episode.transcript``,
        else ``<episode.episode_dir>/transcript.json``, when that file exists) or None.  Gives the no-code turns, timeouts, failed runs,
        truncated replies, parse failures and, when the score has no ``usage``, the usage
        summed over turns.  Without a transcript those fields are null.
    ledger
        The episode's ledger path, ``"auto"`` (default: ``episode.ledger`` when it exists) or
        None.  Gives the experiments requested, delivered (by kind) and refused; without it
        they are null (``spend`` still comes from ``episode.spent``).
    agent_config_digest, manifest_digest, harness_version
        Provenance set by the runner (kept as given).

    Returns
    -------
    dict
        A record valid under :func:`validate_record` (see :data:`FIELDS`).

    Raises
    ------
    RecordError
        Unreadable inputs, a cell argument of the wrong type, or a score that contradicts
        the arguments (another world, kind or budget).
    """
    if not isinstance(score_json, Mapping):
        score_json = _read_json_file(score_json, "score_json")
    score = score_json
    if kind not in KINDS:
        raise RecordError(f"kind={kind!r}: invalid; valid: {' or '.join(map(repr, KINDS))}")
    score_kind = "screening" if score.get("kind") == "screening" or score.get("format") == "screening-score/1" \
        else "biobank"
    if score_kind != kind:
        raise RecordError(f"kind={kind!r} but the score is a {score_kind} score")
    for name, value in (("world", world), ("agent", agent)):
        if not isinstance(value, str) or not value:
            raise RecordError(f"{name}={value!r}: invalid; valid: a non-empty string")
    if archetype is not None and not isinstance(archetype, str):
        raise RecordError(f"archetype={archetype!r}: invalid; valid: a string or None")
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise RecordError(f"trial={trial!r}: invalid; valid: an integer >= 0")
    episode = score.get("episode") if isinstance(score.get("episode"), Mapping) else {}
    details = score.get("details") if isinstance(score.get("details"), Mapping) else {}
    named = score.get("world_id") if kind == "screening" else details.get("world_id")
    named = named or episode.get("world_id")
    if isinstance(named, str) and named and named != world:
        raise RecordError(f"world={world!r} but the score is of world {named!r}")

    record: dict = {"record_format": RECORD_FORMAT, "world": world, "kind": kind, "archetype": archetype,
                    "agent": agent, "agent_config_digest": agent_config_digest, "manifest_digest": manifest_digest,
                    "harness_version": harness_version, "trial": trial}
    if kind == "biobank":
        if isinstance(budget, bool) or not _is_number(budget) or not math.isfinite(budget) or budget < 0:
            raise RecordError(f"budget={budget!r}: invalid for a biobank episode; valid: dollars >= 0 "
                              "(0, 450000, 2000000)")
        if _is_number(episode.get("budget")) and float(episode["budget"]) != float(budget):
            raise RecordError(f"budget={budget!r} but the episode was played at budget {episode['budget']!r}")
        record["budget"] = float(budget)
    else:
        if budget is not None:
            raise RecordError(f"budget={budget!r}: invalid for a screening episode; valid: None")
        record["mode"] = mode if mode is not None else episode.get("mode")

    record.update(episode_id=episode.get("episode_id"), episode_dir=episode.get("episode_dir"),
                  exit_reason=_exit_reason(episode.get("exit_reason")),
                  exit_detail=_cut(episode.get("exit_detail")),
                  turns_used=episode.get("turns_used"), max_turns=episode.get("max_turns"),
                  isolated=score.get("isolated") if isinstance(score.get("isolated"), bool) else None,
                  isolation=score.get("isolation") if isinstance(score.get("isolation"), str) else None,
                  wall_s=episode.get("wall_s"))

    transcript_path = None
    if isinstance(transcript, Mapping):
        if "format" in transcript:  # a transcript in hand is checked when it says its format
            _check_transcript_format(transcript, "transcript")
        counts = _transcript_counts(transcript, kind)
    else:
        recorded = episode.get("transcript")
        if recorded is None and isinstance(episode.get("episode_dir"), str):
            recorded = str(Path(episode["episode_dir"]) / "transcript.json")  # the screening summary names no file
        transcript_path = _resolve(transcript, recorded, "transcript")
        counts = None
        if transcript_path:
            data = _read_json_file(transcript_path, "transcript")
            _check_transcript_format(data, f"transcript={transcript_path}")
            counts = _transcript_counts(data, kind)
    for key in ("no_code_turns", "turn_timeouts", "failed_runs", "truncated_replies") + (
            ("parse_failures",) if kind == "biobank" else ()):
        record[key] = counts[key] if counts else None
    record.update(_usage(score, counts["_usage"] if counts else None))

    if kind == "screening":
        subs = score.get("submissions") if isinstance(score.get("submissions"), list) else []
        refused = score.get("refused") if isinstance(score.get("refused"), list) else []
        labels = episode.get("labels_used", details.get("labels_used"))
        record.update(score=score.get("score"), total=score.get("total", score.get("score")),
                      submissions=len(subs), submissions_refused=len(refused),
                      best_submission=score.get("best_submission"), labels_used=labels if labels is not None else 0,
                      label_budget=episode.get("budget"), top_k=score.get("top_k"))
        return validate_record(record)

    for key in (*COMPONENTS, "safety_penalty", "total", "total_unclipped"):
        if key not in score:
            raise RecordError(f"score_json: missing {key!r}; valid: a biobank episode's score.json "
                              "(schemas/score.schema.json)")
        record[key] = score[key]
    target = details.get("target_identification") or {}
    nominations = details.get("nominations") or {}
    processed = nominations.get("processed")
    phenotype = details.get("phenotype_construction") or {}
    record.update(
        target_precision=target.get("precision"), target_recall=target.get("recall"),
        nominations=nominations.get("unique_valid"),
        nominations_processed=len(processed) if isinstance(processed, list) else None,
        nominations_past_cap=nominations.get("past_cap_count"),
        rejections=_get(details, "rejections", "count"), abstentions=_get(details, "abstentions", "retained"),
        submission_status=_get(details, "submission", "status"),
        phenotype_status=phenotype.get("status"), phenotype_r=phenotype.get("r"),
        paper_compat=episode.get("paper_compat") if isinstance(episode.get("paper_compat"), bool) else None,
    )
    ledger_path = _resolve(ledger, episode.get("ledger"), "ledger")
    experiments = _ledger_counts(ledger_path) if ledger_path else dict.fromkeys(
        ("experiments_requested", "experiments_delivered", "experiments_delivered_knockdown",
         "experiments_delivered_cell_perturbation", "experiments_refused", "spend"))
    if _is_number(episode.get("spent")):
        experiments["spend"] = float(episode["spent"])
    record.update(experiments)

    if fixed_labels_total is None and sealed_dir is not None:
        if record["exit_reason"] == "runner_crash":
            fixed_labels_total = 0.0
        else:
            work = scored_work_dir(score)
            if work is None or not work.is_dir():
                raise RecordError(f"score_json: no scored work folder recorded ({episode.get('scored_from')!r} under "
                                  f"{episode.get('episode_dir')!r}); pass fixed_labels_total or a score.json with "
                                  "its episode summary")
            fixed_labels_total = float(fixed_labels_score(sealed_dir, work, ledger_path,
                                                          paper_compat=bool(record["paper_compat"]))["total"])
    record["fixed_labels_total"] = fixed_labels_total
    return validate_record(record)


def _exit_reason(value: Any) -> Optional[str]:
    # The screening harness writes "policy_error: reset: <error>"; the reason is the first word.
    if not isinstance(value, str):
        return None
    return value.split(":", 1)[0].strip() or None


def _cut(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    return value if len(value) <= EXIT_DETAIL_MAX_CHARS else value[:EXIT_DETAIL_MAX_CHARS] + " [cut]"
