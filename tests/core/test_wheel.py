"""A non-editable install works: the wheel carries the configs and schemas (the
repository's root ``conf/`` and ``schemas/``, installed as ``pipeline/conf`` and
``pipeline/schemas``), and from outside the source tree the installed package
composes every world, finds its schemas and runs its entry points as Hydra apps.
An editable install (this test environment's) resolves both from the root folders.

The wheel is built from a copy of the sources (an in-tree build would leave
build/ and egg-info behind) and installed with ``--no-deps`` into a fresh venv
that borrows this environment's dependencies through a .pth file, so the test
needs no network for the dependencies and stays well under a minute.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "pipeline", "kernels", "drugtargetworld", "conf", "schemas")


def build_wheel(dest: Path) -> Path:
    """``pip wheel`` of a clean copy of the sources; returns the wheel's path."""
    src = dest / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest / "dist"), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (dest / "dist").glob("drugtargetworld-*.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path) -> Path:
    """A fresh venv with the wheel installed (no dependencies: those come from
    this environment's site-packages, appended to the venv's path); returns its
    python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # Appended after the venv's own site-packages: the wheel's pipeline comes first.
    # (.pth files inside the borrowed folder, such as an editable install's, are not run.)
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "_borrowed_dependencies.pth").write_text("".join(p + "\n" for p in sorted(borrowed)))
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base)
    python = install_wheel(wheel, base / "venv")
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return wheel, python, elsewhere


def _run(python: Path, args: list, cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, **kw)


def test_wheel_carries_configs_and_schemas(installed):
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    worlds = sorted(p.name for p in (ROOT / "conf" / "world").glob("*.yaml"))
    assert worlds and all(f"pipeline/conf/world/{w}" in names for w in worlds)
    # every file of the root folders, inside the package
    for folder in ("conf", "schemas"):
        files = [p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert files and all(f"pipeline/{p.relative_to(ROOT).as_posix()}" in names for p in files), folder
    for needed in ("pipeline/conf/config.yaml", "pipeline/conf/panel_config.yaml", "pipeline/conf/panel/paper-v1.yaml",
                   "pipeline/conf/scale/paper.yaml", "pipeline/schemas/oracle.schema.json",
                   "pipeline/schemas/truth.schema.json", "pipeline/data/calibration_targets.yaml", "kernels/mri.py"):
        assert needed in names, needed
    tops = {n.split("/")[0] for n in names}
    # drugtargetworld: the import package Inspect names the task after (drugtargetworld/episode)
    assert tops == {"pipeline", "kernels", "drugtargetworld", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    # the development seeds are in one place in the installed package: conf/world/
    seeded = [n for n in names if n.endswith(".yaml") and b"seed: \"0x" in zipfile.ZipFile(wheel).read(n)]
    assert seeded and all(n.startswith("pipeline/conf/world/") for n in seeded)


def test_installed_package_composes_every_world_outside_the_source_tree(installed):
    _, python, elsewhere = installed
    code = """
import importlib, pkgutil, sys
import pipeline, kernels
from pipeline import config, paths
from pipeline.oracle import ORACLE_SCHEMA, EXPERIMENT_SCHEMA, _load_schema
assert paths.PACKAGE_DIR.parent == __import__('pathlib').Path(sys.prefix, 'lib', f'python{sys.version_info[0]}.{sys.version_info[1]}', 'site-packages'), paths.PACKAGE_DIR
worlds = config.group_options('world')
assert 'standard-01' in worlds and len(worlds) >= 20, worlds
seeds = {w: '0x' + 'ab' * 16 for w in worlds}
import json, tempfile, os
fh = tempfile.NamedTemporaryFile('w', suffix='.json', delete=False); json.dump(seeds, fh); fh.close()
for w in worlds:
    assert config.load([f'world={w}', f'seeds={fh.name}']).cfg.world.id == w
os.unlink(fh.name)
_load_schema(ORACLE_SCHEMA); _load_schema(EXPERIMENT_SCHEMA)
for pkg in (pipeline, kernels):
    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
        importlib.import_module(mod.name)
print(paths.DEV_SEEDS_DIR)
"""
    proc = _run(python, ["-c", code], elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "site-packages/pipeline/conf/world" in proc.stdout


def test_an_editable_install_resolves_conf_and_schemas_from_the_root_folders(tmp_path):
    """This environment's install (``pip install -e``): run from outside the tree, the package
    finds its configs in the repository's ``conf/`` and its schemas in ``schemas/``, through
    the import system as through ``pipeline.paths``, and composes a world from them."""
    code = """
import importlib.util, json
from pipeline import config, paths
from pipeline.evaluate.records import SCHEMA_PATH
spec = {n: list(importlib.util.find_spec('pipeline.' + n).submodule_search_locations) for n in ('conf', 'schemas')}
with open('seeds.json', 'w') as fh:
    json.dump({'standard-01': '0x' + 'ab' * 16}, fh)
cfg = config.load(['world=standard-01', 'seeds=seeds.json']).cfg
print(json.dumps({'conf': str(paths.CONF_DIR), 'seeds': str(paths.DEV_SEEDS_DIR), 'schemas': str(paths.SCHEMA_DIR),
                  'record_schema': str(SCHEMA_PATH), 'spec': spec, 'world': cfg.world.id}))
"""
    probe = _run(Path(sys.executable), ["-c", "import pipeline; print(pipeline.__file__)"], tmp_path)
    if probe.returncode != 0 or not Path(probe.stdout.strip()).resolve().is_relative_to(ROOT):
        pytest.skip(f"this environment has no editable install of {ROOT} ({probe.stdout.strip() or probe.stderr[-200:]})")
    proc = _run(Path(sys.executable), ["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(found["conf"]) == ROOT / "conf" and Path(found["seeds"]) == ROOT / "conf" / "world"
    assert Path(found["schemas"]) == ROOT / "schemas"
    assert Path(found["record_schema"]) == ROOT / "schemas" / "evaluation-record.schema.json"
    # the editable install maps the packages pipeline.conf and pipeline.schemas to the root folders
    assert [Path(p).resolve() for p in found["spec"]["conf"]] == [ROOT / "conf"]
    assert [Path(p).resolve() for p in found["spec"]["schemas"]] == [ROOT / "schemas"]
    assert found["world"] == "standard-01"
    assert not (ROOT / "pipeline" / "conf").exists() and not (ROOT / "pipeline" / "schemas").exists()


def test_installed_entry_points_are_hydra_apps(installed, tmp_path):
    _, python, elsewhere = installed
    proc = _run(python, ["-m", "pipeline.build", "--help"], elsewhere)
    assert proc.returncode == 0 and "world: all-biases" in proc.stdout, proc.stderr
    proc = _run(python.parent / "dtw-build", ["--cfg", "job", "world=standard-01"], elsewhere)
    assert proc.returncode == 0 and "id: standard-01" in proc.stdout, proc.stderr
    # --cfg job checks what the panel's build would: its held-out worlds need their seeds
    proc = _run(python.parent / "dtw-panel", ["--cfg", "job"], elsewhere)
    assert proc.returncode == 2 and proc.stderr.startswith("error: world.seed: world 'heldout-"), proc.stderr
    from pipeline.panel import panel_worlds

    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("".join(f"{w}: '0x{(1 << 127) | i:032x}'\n" for i, w in enumerate(panel_worlds("paper-v1")) if w.startswith("heldout")))
    proc = _run(python.parent / "dtw-panel", ["--cfg", "job", f"seeds={seeds}"], elsewhere)
    assert proc.returncode == 0 and "heldout-dcm-01" in proc.stdout, proc.stderr
    proc = _run(python, ["-m", "pipeline.build"], elsewhere)
    assert proc.returncode == 2 and proc.stderr.startswith("error: world: none chosen"), proc.stderr
    assert os.listdir(elsewhere) == []


def test_installed_wheel_registers_the_inspect_task(installed):
    """Installed from the wheel (site-packages, not editable), Inspect's entry point finds the
    task under the name the README gives: drugtargetworld/episode."""
    pytest.importorskip("inspect_ai")
    _, python, elsewhere = installed
    code = """
from inspect_ai._util.registry import registry_info, registry_lookup
task = registry_lookup('task', 'drugtargetworld/episode')
assert task is not None
import drugtargetworld.inspect_task as module
print(registry_info(task).name, module.__file__)
"""
    proc = _run(python, ["-c", code], elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    name, where = proc.stdout.split()
    assert name == "drugtargetworld/episode" and "site-packages/drugtargetworld/" in where, proc.stdout


def test_agent_code_cannot_read_the_installed_seeds(installed, tmp_path):
    """The sandbox binds the installed environment's site-packages; the project's package there
    (pipeline/conf/world holds the development seeds) is masked by an empty folder."""
    from pipeline.harness import isolation_status

    ok, why = isolation_status()
    if not ok:
        pytest.skip(f"bubblewrap cannot isolate here: {why}")
    _, python, elsewhere = installed
    release = tmp_path / "release"
    release.mkdir()
    (release / "note.txt").write_text("a release\n")
    code = r"""
import json, sys
from pathlib import Path
from pipeline import paths
from pipeline.harness.sandbox import Sandbox
seeds = sorted(str(p) for p in paths.DEV_SEEDS_DIR.glob('*.yaml'))
assert seeds, paths.DEV_SEEDS_DIR
program = (
    "import importlib.util, json\n"
    f"seeds = {seeds!r}\n"
    "readable = [p for p in seeds if os.path.exists(p)]\n"
    "spec = importlib.util.find_spec('pipeline')\n"
    "where = list(spec.submodule_search_locations) if spec else []\n"
    "content = sorted(sum((os.listdir(w) for w in where if os.path.isdir(w)), []))\n"
    "import numpy, pandas\n"
    "print('REPORT ' + json.dumps({'readable': readable, 'content': content, 'prefix': sys.prefix}))\n")
box = Sandbox(sys.argv[1], isolation='require')
try:
    run = box.run(program, 120)
finally:
    box.close()
line = [l for l in run.stdout.splitlines() if l.startswith('REPORT ')]
assert line, run.stdout + run.stderr
print(json.dumps({'report': json.loads(line[0][7:]), 'prefix': sys.prefix, 'seeds': len(seeds)}))
"""
    proc = _run(python, ["-c", code, str(release)], elsewhere)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome["seeds"] >= 20
    assert outcome["report"]["prefix"] == outcome["prefix"]  # the wheel's own venv runs the program
    assert outcome["report"]["readable"] == [] and outcome["report"]["content"] == []
