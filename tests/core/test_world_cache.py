"""The tests' world cache (tests/worlds.py): its key is the resolved config's digest, a
world is built once per key however many ask (threads and processes, as pytest-xdist's
workers would), an interrupted build is not reused, and a changed world is reported.
No world is built here: the build is replaced by one that writes a marker folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import worlds
from pipeline import config

TESTS = Path(__file__).resolve().parents[1]


def _key(*overrides: str) -> str:
    return worlds.config_key(config.load(["world=all-biases", "scale=tiny", *worlds.SYNC, *overrides]))


def test_the_key_is_the_config_not_where_it_is_written_nor_how_it_is_spelled():
    base = _key("release=noimaging")
    assert base == _key("release=noimaging", "out=/elsewhere")
    assert base == _key("release=noimaging", "world.n_drivers=" + str(config.load(["world=all-biases"]).cfg.world.n_drivers))
    for changed in ("release=zarr", "cluster.chunk_blocks=1", "world.seed=0x" + "77" * 16, "world.roles_salt=x",
                    "scale=small"):
        assert _key("release=noimaging", changed) != base, changed


def test_a_held_out_worlds_key_is_its_seed_not_the_seed_files_path(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("heldout-hcm-02: '0xf3a1c2d4e5b60718293a4b5c6d7e8f90'\n")
    b.write_text("heldout-hcm-02: '0xf3a1c2d4e5b60718293a4b5c6d7e8f90'\n")
    key = lambda seeds: worlds.config_key(config.load(["world=heldout-hcm-02", "scale=tiny", f"seeds={seeds}"]))  # noqa: E731
    assert key(a) == key(b)
    b.write_text("heldout-hcm-02: '0xf3a1c2d4e5b60718293a4b5c6d7e8f91'\n")
    assert key(a) != key(b)


class _FakeBuild:
    """What ``pipeline.build.build`` leaves that the cache reads: ``<out>/<world id>/``."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, resolved, progress=False):
        with self.lock:
            self.calls.append(resolved.cfg.out)
        world = Path(resolved.cfg.out) / resolved.cfg.world.id
        (world / "release").mkdir(parents=True)
        (world / "release" / "table.txt").write_text("built")


def test_one_build_per_config_however_many_ask(tmp_path, monkeypatch):
    fake = _FakeBuild()
    monkeypatch.setattr(worlds, "build", fake)
    cache = worlds.WorldCache(tmp_path / "worlds")
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("all-biases", extra=("release=noimaging",))))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 1 and len(set(got)) == 1 and got[0].endswith(os.sep + "all-biases")
    other = cache.get("all-biases", extra=("release=noimaging", "cluster.chunk_blocks=1"))
    assert len(fake.calls) == 2 and other != got[0]
    # a second session's cache over the same folder (another xdist worker) reuses what is complete
    assert worlds.WorldCache(tmp_path / "worlds").get("all-biases", extra=("release=noimaging",)) == got[0]
    assert len(fake.calls) == 2


def test_an_interrupted_build_is_built_again(tmp_path, monkeypatch):
    def interrupted(resolved, progress=False):
        (Path(resolved.cfg.out) / resolved.cfg.world.id / "release").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(worlds, "build", interrupted)
    cache = worlds.WorldCache(tmp_path / "worlds")
    with pytest.raises(KeyboardInterrupt):
        cache.get("null-01")
    fake = _FakeBuild()
    monkeypatch.setattr(worlds, "build", fake)
    world = cache.get("null-01")
    assert len(fake.calls) == 1 and (Path(world) / "release" / "table.txt").read_text() == "built"


def test_a_world_changed_in_place_is_reported_and_a_copy_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(worlds, "build", _FakeBuild())
    cache = worlds.WorldCache(tmp_path / "worlds")
    world = cache.get("null-01")
    copy = cache.copy(world, tmp_path / "mine")
    (Path(copy) / "release" / "table.txt").write_text("changed")
    (Path(copy) / "release" / "new.txt").write_text("new")
    assert cache.changed() == []
    (Path(world) / "release" / "table.txt").write_text("changed!")
    assert cache.changed() == [world]


def test_processes_share_the_cache_folder(tmp_path):
    """Two processes (as two xdist workers) asking at once: one builds, the other waits and reuses."""
    code = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "import worlds\n"
        "def fake(resolved, progress=False):\n"
        "    time.sleep(1)\n"
        "    w = Path(resolved.cfg.out) / resolved.cfg.world.id\n"
        "    w.mkdir(parents=True)\n"
        "    with open(sys.argv[2], 'a') as fh: fh.write('built\\n')\n"
        "worlds.build = fake\n"
        "print(worlds.WorldCache(Path(sys.argv[1])).get('null-01'))\n"
    )
    log = tmp_path / "builds.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "worlds"), str(log)], stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] and log.read_text() == "built\n"
    assert json.loads((Path(outs[0]).parent / ".complete").read_text())["world"] == "null-01"
