"""Worlds for the tests: build helpers, and the session's cache of built worlds.

``WorldCache`` builds a world for a config once per test session and hands every
later request for the same config the same folder.  The key is the digest of the
resolved config (everything but ``out`` and the seed file's path, with the resolved
seed), so two spellings of one config share a world and any override that changes
the config, a chunking included, gets a world of its own.  The cache lives beside
the session's base temporary folder, shared by pytest-xdist's workers (the first
worker to ask builds, under a file lock, the others wait and reuse), and goes with
it when the run passes.

Cached worlds are read-only: a test that changes files works on a copy
(``WorldCache.copy``); at the end of the session the cache checks that no file of a
world it handed out was added, removed or rewritten, and fails the run if one was.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterable, Sequence

from omegaconf import OmegaConf

from pipeline import config
from pipeline.build import build

#: The scheduler every cached build uses (it changes no byte of a world).
SYNC = ("cluster=sync", "cluster.progress=false")


def build_world(out_dir, world="all-biases", scale="tiny", extra=(), executor=None):
    overrides = [f"world={world}", f"scale={scale}", f"out={out_dir}", *SYNC, *extra]
    resolved = config.load(overrides)
    build(resolved, executor=executor, progress=False)
    return os.path.join(str(out_dir), resolved.cfg.world.id)


def build_worlds(specs, executor, jobs: int = 4) -> list:
    """Builds ``(out_dir, world, scale, extra)`` specs concurrently on one cluster, as a
    panel does (``jobs`` client threads; configs composed first, in this thread);
    returns the world folders in order."""
    from concurrent.futures import ThreadPoolExecutor

    resolved = [config.load([f"world={world}", f"scale={scale}", f"out={out}", "cluster=local", "cluster.progress=false",
                             *extra]) for out, world, scale, extra in specs]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda r: build(r, executor=executor, progress=False, live=False), resolved))
    return [os.path.join(str(out), r.cfg.world.id) for (out, *_), r in zip(specs, resolved)]


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def digest_tree(world_dir) -> dict:
    """SHA-256 of every release and sealed file, manifests included."""
    out = {}
    for bundle in ("release", "sealed"):
        for root, _, files in os.walk(os.path.join(str(world_dir), bundle)):
            for f in files:
                path = os.path.join(root, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, str(world_dir))] = hashlib.sha256(fh.read()).hexdigest()
    return out


def config_key(resolved) -> str:
    """The digest of a resolved config: all of it but where it is written (``out``) and
    the seed file's path, plus the seed it resolved to."""
    plain = OmegaConf.to_container(resolved.cfg, resolve=True)
    doc = {"config": {k: v for k, v in plain.items() if k not in ("out", "seeds")}, "seed": hex(resolved.seed)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _snapshot(world_dir: str) -> dict:
    """(size, mtime) of every file under a world folder: what a test that writes into it changes."""
    out = {}
    for root, _, files in os.walk(world_dir):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            out[os.path.relpath(os.path.join(root, f), world_dir)] = (st.st_size, st.st_mtime_ns)
    return out


class WorldCache:
    """Worlds built once per session, keyed by ``config_key``, under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._handed: dict[str, dict] = {}  # world folder -> its files when first handed out

    def get(self, world: str = "all-biases", scale: str = "tiny", extra: Iterable[str] = ()) -> str:
        """The folder of ``world`` at ``scale`` with the ``extra`` overrides, built on the
        synchronous scheduler the first time any test of the session asks for it."""
        return self.build([f"world={world}", f"scale={scale}", *SYNC, *extra])

    def build(self, overrides: Sequence[str]) -> str:
        """The folder of the world the ``overrides`` compose (any kind: the overrides
        are taken as they are), built once per session."""
        key = config_key(config.load(list(overrides)))
        folder = self.root / key[:16]
        done = folder / ".complete"
        with open(self.root / f"{key[:16]}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another xdist worker may be building it
            try:
                if not done.exists():
                    shutil.rmtree(folder, ignore_errors=True)  # a build interrupted in an earlier attempt
                    resolved = config.load([*overrides, f"out={folder}"])
                    build(resolved, progress=False)
                    done.write_text(json.dumps({"overrides": list(overrides), "world": resolved.cfg.world.id}))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        world_dir = str(folder / json.loads(done.read_text())["world"])
        self._handed.setdefault(world_dir, _snapshot(world_dir))
        return world_dir

    @staticmethod
    def copy(world_dir: str, dest) -> str:
        """A copy of a cached world under ``dest`` (same folder name), for a test that changes files."""
        target = os.path.join(str(dest), os.path.basename(str(world_dir)))
        shutil.copytree(str(world_dir), target, symlinks=True)
        return target

    def changed(self) -> list[str]:
        """The worlds handed out whose files differ from when they were first handed out."""
        return [w for w, snap in self._handed.items() if _snapshot(w) != snap]


def cache_root(tmp_path_factory) -> Path:
    """Where the session's worlds live: beside the base temporary folder that pytest-xdist's
    workers share (``<basetemp>/gwN`` each), or in it for a run without workers."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "worlds"
