"""The folders of an episode (``pipeline.harness.core``): the world folder checked and its
kind opened, the world's id read from its sealed half, the default episode folder's name,
and an episode folder made empty (an old episode replaced only with ``overwrite`` and only
when it is one).

One job: where an episode reads and writes, checked before anything runs.

Episode folder
--------------
By default ``./episodes/<agent>-<budget or mode>-<UTC time>-<random>/`` (never named after
the world: the world's id is not the agent's to know)::

    work/             WORK (while the episode runs, a link to the sandbox's neutral staging)
    ledger.jsonl      the oracle's record (the scorer reads it; never mounted)
    transcript.json   every turn: reply (bounded), code, tool calls, observation, usage, timings
    score.json        the score and the episode summary, written on every exit path
    submissions/      the biobank kind's submission versions (capped)
"""
from __future__ import annotations

import os
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from .. import bundle, kinds
from . import safeio
from .kind import EpisodeError, KindEpisode

EPISODE_MARKER = ".drugtargetworld-episode"
EPISODES_ROOT = "episodes"


def world_paths(world_dir: os.PathLike | str) -> tuple[Path, Path, Path]:
    world = Path(world_dir).resolve()
    release, sealed = world / bundle.RELEASE, world / bundle.SEALED
    if not world.is_dir():
        raise EpisodeError(f"world_dir={world_dir}: not a folder")
    for path, what in ((release, "release"), (sealed, "sealed")):
        if not path.is_dir():
            raise EpisodeError(f"world_dir={world_dir}: no {what}/ folder; pass a built world's folder (it holds release/ and sealed/)")
    if not (release / bundle.MANIFEST).is_file():
        raise EpisodeError(f"world_dir={world_dir}: release/ has no {bundle.MANIFEST}: the build did not finish")
    return world, release, sealed


def world_id_of(world: Path, sealed: Path) -> str:
    for name in (bundle.TRUTH, "oracle.json"):
        try:
            value = bundle.read_sealed(sealed, name).get("world_id")
        except (OSError, ValueError, AttributeError, bundle.BundleError):
            continue
        if isinstance(value, str) and value:
            return value
    return world.name


def default_episode_dir(agent_name: str, label: Any, root: os.PathLike | str | None = None) -> Path:
    """``<root>/<agent>-<label>-<UTC time>-<random>``; ``root`` defaults to ./episodes.

    ``label`` is the budget (a biobank world) or the mode (a screening world).  The
    name says nothing of the world: its id stays in the episode's own records.
    """
    root = Path(root) if root is not None else Path.cwd() / EPISODES_ROOT
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(agent_name))[:40] or "agent"
    tag = str(int(label)) if isinstance(label, (int, float)) and not isinstance(label, bool) else re.sub(
        r"[^A-Za-z0-9_.-]", "_", str(label))[:20]
    return (root / f"{safe}-{tag}-{stamp}-{secrets.token_hex(3)}").resolve()


def _contains(folder: Path, path: Path) -> bool:
    folder, path = Path(folder).resolve(), Path(path).resolve()
    return path == folder or path.is_relative_to(folder)


def prepare_episode_dir(out: Path, world: Path, overwrite: bool) -> None:
    """Make ``out`` an empty episode folder (replacing an old episode with ``overwrite``)."""
    out = out.resolve()
    for forbidden in (world / bundle.RELEASE, world / bundle.SEALED):
        if _contains(forbidden, out):
            raise EpisodeError(f"out={out}: inside the world's {forbidden.name}/ folder; choose a folder outside it")
    if _contains(out, world):
        raise EpisodeError(f"out={out}: contains the world folder {world}; choose a folder beside it")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise EpisodeError(f"out={out}: not a folder; choose a folder for the episode")
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise EpisodeError(f"out={out}: already holds an episode; pass overwrite=true to replace it")
        if not (out / EPISODE_MARKER).is_file():
            raise EpisodeError(f"out={out}: not empty and not an episode folder; refusing to delete it")
        # Moved aside in one step, then removed without following links or recursing: an old
        # episode's WORK may hold anything its agent planted, and a failed removal leaves the
        # old episode whole under the aside name rather than half-deleted.
        aside = out.with_name(f".{out.name}.replaced-{secrets.token_hex(4)}")
        os.rename(out, aside)
        try:
            safeio.remove_tree(aside)
        except OSError as error:
            print(f"pipeline.harness: warning: the replaced episode could not be removed ({error}); it is at {aside}",
                  file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    (out / EPISODE_MARKER).write_text("drugtargetworld episode folder; safe to delete\n")


def open_kind(world_dir: os.PathLike | str) -> tuple[Any, KindEpisode]:
    """(the world's kind, its KindEpisode for this world) — the world folder checked first."""
    world, release, sealed = world_paths(world_dir)
    kind = kinds.for_world(world)
    factory = getattr(kind, "episode", None)
    if factory is None:
        raise EpisodeError(f"world_dir={world_dir}: the {kind.name} kind has no episode harness")
    return kind, factory(world, release, sealed, world_id_of(world, sealed))
