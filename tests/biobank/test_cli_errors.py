"""What a new user ran into on a first try (issue 25, "as a new user would"), each as
the command runs it: the first build's silent kernel compilation, the output
locations that gave a traceback or a world that vanished, repeated overrides that
silently took the last, ``--cfg job`` checking nothing, and a validation report
beside ``sealed/`` naming the drivers.

Every error is one line on stderr, ``error: <field>: ...; valid: ...``, with exit
status 2 and nothing written (tests/core/test_config.py's list of malformed commands
runs the same cases in process).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import bundle, config, preflight

ROOT = Path(__file__).resolve().parents[2]
W = "world=standard-01"
#: a world small enough to build twice in seconds (the multirun test's sizes)
SMALL = ["scale.participants=400", "scale.imaged=80", "scale.proteins=60", "scale.variants=128", "release=noimaging"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def _command(module: str, args: list, cwd: Path, env: dict | None = None, timeout: int = 300):
    full = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full)


def _one_line_error(proc, starts: str) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: {starts}"), lines[0]
    assert "; valid: " in lines[0], lines[0]
    assert proc.stdout == ""
    return lines[0]


# ----------------------------------------------------------------------------- 1. the first build's compilation


def test_kernels_cached_tells_a_cold_cache_from_a_warm_one(tmp_path):
    """A kernel with no compiled version on disk is cold; once called (compiled and saved)
    it is cached, for this process and the next; the build's own kernels are cold in an
    empty cache folder."""
    (tmp_path / "toykernel.py").write_text("from kernels.numba_util import njit\n\n\n@njit\ndef twice(x):\n"
                                           "    return 2 * x\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from pipeline.graph.warmup import kernels_cached\n"
            "import toykernel\n"
            "before = kernels_cached([('toykernel', 'twice')])\n"
            "toykernel.twice(21)\n"
            "print(before, kernels_cached([('toykernel', 'twice')]))\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    first = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           timeout=300, env=env)
    assert first.returncode == 0 and first.stdout.split() == ["False", "True"], first.stderr[-2000:]
    again = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           timeout=300, env=env)
    assert again.returncode == 0 and again.stdout.split() == ["True", "True"], again.stderr[-2000:]
    empty = tmp_path / "empty-numba-cache"
    empty.mkdir()
    # each of the build's kernels, one by one: cold here (False), and never "cannot tell" (None,
    # which a name that is not a cached numba kernel would give)
    code = ("from omegaconf import OmegaConf\n"
            "from pipeline.graph.warmup import build_kernels, kernels_cached\n"
            "names = build_kernels(OmegaConf.create({'vcf': True, 'genotype_zarr': True, 'imaging': 'npz'}))\n"
            "print(len(names), *[kernels_cached([n]) for n in names], kernels_cached(names))\n")
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**env, "NUMBA_CACHE_DIR": str(empty)})
    assert cold.returncode == 0, cold.stderr[-2000:]
    n, *states = cold.stdout.split()
    assert int(n) == 9 and states == ["False"] * (int(n) + 1), cold.stdout  # 9 with the measurement kernel (kernels.measure)
    assert [p for p in empty.rglob("*") if p.is_file()] == [], "asking must not compile"


def test_first_build_says_it_compiles_the_kernels_and_a_rebuild_withdraws_old_reports(tmp_path, monkeypatch, capsys):
    """With a cold cache the build says, before the first stage's tasks, that it compiles the
    kernels; with a warm one it says nothing.  (Here the cache's answer is set, since the
    session's own cache is warm or cold depending on what ran before.)  A rebuild also
    removes the validation reports of the world it replaces."""
    from pipeline.build import build
    from pipeline.graph import run as run_mod
    from pipeline.graph import warmup

    resolved = config.load([W, *SMALL, f"out={tmp_path}", "cluster=sync"])
    asked = []

    def cold(names):
        asked.append(names)
        return False

    monkeypatch.setattr(run_mod, "_COMPILE_NOTED", [])
    monkeypatch.setattr(warmup, "kernels_cached", cold)
    build(resolved, progress=True, live=False)
    err = capsys.readouterr().err.splitlines()
    note = "[standard-01] compiling the numba kernels as the stages first use them (first build on this machine: up to about 90 s"
    (at,) = [i for i, line in enumerate(err) if line.startswith(note)]
    assert err[at - 1] == "[standard-01] population+genotypes ...", err
    assert err[at + 1].startswith("[standard-01] population+genotypes done"), err
    assert "mostly in vcf;" in err[at] and "cached afterwards" in err[at], err[at]
    assert asked == [warmup.build_kernels(resolved.cfg.release)]

    reports = tmp_path / "standard-01" / "sealed" / bundle.SEALED_REPORTS
    reports.mkdir()
    (reports / "validation.json").write_text("{}\n")
    monkeypatch.setattr(run_mod, "_COMPILE_NOTED", [])
    monkeypatch.setattr(warmup, "kernels_cached", lambda names: True)
    build(resolved, progress=True, live=False)
    err = capsys.readouterr().err
    assert "numba" not in err, err
    assert not reports.exists(), "a rebuild keeps the validation report of the world it replaced"
    assert bundle.verify(tmp_path / "standard-01" / bundle.SEALED, bundle.SEALED) == []


def test_compile_note_hedges_when_the_cache_cannot_be_read(monkeypatch):
    from omegaconf import OmegaConf

    from pipeline.graph import run as run_mod
    from pipeline.graph import warmup
    from pipeline.graph.executor import SyncExecutor

    release = OmegaConf.create({"vcf": True, "genotype_zarr": True, "imaging": "npz"})
    monkeypatch.setattr(run_mod, "_COMPILE_NOTED", [])
    monkeypatch.setattr(warmup, "kernels_cached", lambda names: None)
    note = run_mod.compile_note(SyncExecutor(), release)
    assert note and "first build" in note and "90 s" in note
    assert run_mod.compile_note(SyncExecutor(), release) is None, "said once per process"
    monkeypatch.setattr(run_mod, "_COMPILE_NOTED", [])
    monkeypatch.setattr(warmup, "kernels_cached", lambda names: False)
    assert run_mod.compile_note(SyncExecutor(), release) == warmup.compile_note(release)
    assert "mostly in vcf and imaging" in warmup.compile_note(release)


def test_every_worker_of_a_cluster_answers_for_its_own_cache(local_cluster):
    """On a Dask cluster the question goes to the workers (an address cluster's may be other
    machines, with caches of their own): one definite answer per worker."""
    from omegaconf import OmegaConf

    from pipeline.graph import warmup

    names = warmup.build_kernels(OmegaConf.create({"vcf": True, "genotype_zarr": True, "imaging": "npz"}))
    states = local_cluster.on_workers(warmup.kernels_cached, names)
    assert len(states) == 2 and all(state in (True, False) for state in states), states


# ----------------------------------------------------------------------------- 2. ftp:// and SOURCE_DATE_EPOCH


def test_unreachable_ftp_out_is_one_line(tmp_path):
    port = _closed_port()
    proc = _command("pipeline.build", [W, f"out=ftp://127.0.0.1:{port}/worlds"], tmp_path)
    line = _one_line_error(proc, f"out: 'ftp://127.0.0.1:{port}/worlds' cannot be reached (ConnectionRefusedError")
    assert "valid: a local folder, or an fsspec URL whose server answers" in line
    assert os.listdir(tmp_path) == []


def test_malformed_source_date_epoch_is_one_line_for_both_commands(tmp_path):
    """numpy's f2py parses SOURCE_DATE_EPOCH when scipy loads it: the commands must check it
    before the generator's imports (it used to be a traceback at ``import pipeline.graph``)."""
    out = tmp_path / "out"
    proc = _command("pipeline.build", [W, f"out={out}"], tmp_path, env={"SOURCE_DATE_EPOCH": "abc"})
    line = _one_line_error(proc, "SOURCE_DATE_EPOCH: 'abc' is not a time")
    assert line.endswith("valid: a non-negative integer of seconds since 1970-01-01 UTC")
    proc = _command("pipeline.panel", ["panel.worlds=[standard-01,null-01]", f"out={out}"], tmp_path,
                    env={"SOURCE_DATE_EPOCH": "abc"})
    _one_line_error(proc, "SOURCE_DATE_EPOCH: 'abc' is not a time")
    assert os.listdir(tmp_path) == []


def test_the_build_command_imports_no_generator_before_its_checks():
    code = ("import sys\nimport pipeline.build, pipeline.panel\n"
            "print(sorted(m for m in ('scipy', 'numba', 'pipeline.graph', 'pipeline.model.sampler', 'pipeline.model.world') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-2000:]


# ----------------------------------------------------------------------------- 3. memory:// on the command line


def test_memory_out_is_refused_on_the_command_line_only(tmp_path):
    proc = _command("pipeline.build", [W, "out=memory://worlds"], tmp_path)
    line = _one_line_error(proc, "out: 'memory://worlds' is an in-memory filesystem, which does not outlive this process")
    assert "memory:// is for the Python API" in line
    proc = _command("pipeline.panel", ["panel.worlds=[standard-01,null-01]", "out=memory://worlds"], tmp_path)
    _one_line_error(proc, "out: 'memory://worlds' is an in-memory filesystem")
    assert os.listdir(tmp_path) == []
    # the Python API keeps it (tests/biobank/test_panel.py builds a world there and reads it back)
    resolved = config.load([W, "out=memory://worlds", "cluster=sync"])
    preflight.check(resolved)
    with pytest.raises(config.ConfigError, match="^out: 'memory://worlds' is an in-memory filesystem"):
        preflight.check_command(resolved)


# ----------------------------------------------------------------------------- 4. a key given twice


@pytest.mark.parametrize("module,args,key", [
    ("pipeline.build", [W, "out=a", "out=b"], "out"),
    ("pipeline.build", [W, "world=null-01", "out=a"], "world"),
    ("pipeline.build", [W, "cluster=sync", "cluster=local", "out=a"], "cluster"),
    ("pipeline.build", [W, "world.n_drivers=2", "++world.n_drivers=3", "out=a"], "world.n_drivers"),
    ("pipeline.panel", ["panel=paper-v1", "jobs=2", "jobs=3", "out=a"], "jobs"),
])
def test_a_key_given_twice_is_one_line(module, args, key, tmp_path):
    proc = _command(module, args, tmp_path)
    line = _one_line_error(proc, f"{key}: given twice")
    assert line.endswith(f"valid: {key} once"), line
    assert os.listdir(tmp_path) == []


def test_the_python_api_keeps_hydras_last_wins():
    """Scripts append to a list of overrides (``[*spec, "scale=tiny"]``): compose keeps Hydra's rule."""
    assert config.load([W, "scale=tiny", "scale=small"]).cfg.scale.name == "small"


# ----------------------------------------------------------------------------- 5. --cfg job checks what a build checks


@pytest.mark.parametrize("args,starts", [
    ([W, "scale.imaged=9000"], "scale.imaged: 9000 participants imaged of 1200 is a fraction of 7.5"),
    ([W, "scale.participants=100"], "scale.participants: 100 is invalid"),
    (["world=heldout-dcm-01"], "world.seed: world 'heldout-dcm-01' carries no seed"),
    ([W, "out=memory://w"], "out: 'memory://w' is an in-memory filesystem"),
    ([W, "out=zip://w.zip"], "out: 'zip://w.zip' is on a read-only filesystem"),
    ([W, "out=a", "out=b"], "out: given twice"),
    ([], "world: none chosen"),
])
def test_cfg_job_fails_as_the_build_would(args, starts, tmp_path, monkeypatch, capsys):
    import pipeline.build as build_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.setattr(build_mod, "build", lambda *a, **k: pytest.fail("compute started"))
    errors = []
    for argv in (["--cfg", "job", *args], [*args, "--cfg", "all"], args):
        assert build_mod.main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.splitlines()) == 1, captured
        errors.append(captured.err)
    assert errors[0] == errors[1] == errors[2], errors
    assert errors[0].startswith(f"error: {starts}"), errors[0]
    assert os.listdir(tmp_path) == []


def test_cfg_job_checks_source_date_epoch_and_the_panel(tmp_path, monkeypatch, capsys):
    import pipeline.build as build_mod
    import pipeline.panel as panel_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert build_mod.main(["--cfg", "job", W]) == 2
    assert capsys.readouterr().err.startswith("error: SOURCE_DATE_EPOCH: 'yesterday' is not a time")
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert panel_mod.main(["--cfg", "job", "panel.worlds=[standard-01,nope]"]) == 2
    assert capsys.readouterr().err.startswith("error: panel.worlds: unknown world 'nope'")
    assert panel_mod.main(["--cfg", "job", "jobs=0"]) == 2
    assert capsys.readouterr().err.startswith("error: jobs: 0 is invalid")
    assert os.listdir(tmp_path) == []


def test_cfg_job_skips_the_checks_that_ask_the_machine(tmp_path, monkeypatch, capsys):
    """Memory, disk, the output folder and a remote out= answering are the machine's: --cfg job
    prints the config of a valid job even where its build would not fit or reach."""
    import pipeline.build as build_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    too_many = min(2**31 - 1, preflight.machine_memory() // preflight.CLIENT_PER_PARTICIPANT + 1_000_000)
    ftp = f"out=ftp://127.0.0.1:{_closed_port()}/worlds"
    for extra in ([f"scale.participants={too_many}", f"scale.imaged={too_many // 5}"], [ftp]):
        assert build_mod.main([W, *extra, "--cfg", "job"]) == 0, capsys.readouterr().err
        captured = capsys.readouterr()
        assert "id: standard-01" in captured.out and captured.err == "", captured
        monkeypatch.setattr(build_mod, "build", lambda *a, **k: pytest.fail("compute started"))
        assert build_mod.main([W, *extra]) == 2  # the build itself refuses
        capsys.readouterr()
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- 6. the validation report stays sealed


def test_validation_report_goes_inside_sealed_and_everything_still_verifies(tiny_world_noimaging, tmp_path, capsys):
    from pipeline import release
    from pipeline.audit import audit
    from pipeline.manifest import verify
    from pipeline.outputs import Output
    from pipeline.validate import main as validate_main

    world = tmp_path / "worlds" / "all-biases"
    shutil.copytree(tiny_world_noimaging, world)
    validate_main([str(world), "--only", "calibration"])
    captured = capsys.readouterr()
    reports = world / bundle.SEALED / "validation"
    assert sorted(p.name for p in reports.iterdir()) == ["validation.html", "validation.json"]
    assert sorted(os.listdir(world)) == ["build-record.json", "release", "sealed"], "nothing beside sealed/"
    assert f"report: {reports / 'validation.html'}" in captured.out and "WARNING" not in captured.err
    doc = json.loads((reports / "validation.json").read_text())
    assert doc["world_id"] == "all-biases" and doc["checks"]
    # the sealed manifest, the release's, the release loader and the leak audit are unchanged by it
    assert bundle.verify(world / bundle.SEALED, bundle.SEALED) == []
    assert bundle.verify(world / bundle.RELEASE) == []
    out = Output(str(tmp_path / "worlds"), "all-biases")
    assert verify(out, out.sealed) == [] and verify(out, out.release) == []
    release.open(str(world))
    report = audit(str(world))
    assert report["passed"], [(f["name"], f["detail"]) for f in report["findings"] if not f["passed"]]
    # the folder is outside the manifest by name only: anything else unlisted in sealed/ is still found
    (world / bundle.SEALED / "stray.json").write_text("{}\n")
    assert bundle.verify(world / bundle.SEALED, bundle.SEALED) == ["stray.json: present but not in the manifest"]
    # and release/ has no such folder
    (world / bundle.RELEASE / "validation").mkdir()
    (world / bundle.RELEASE / "validation" / "x.json").write_text("{}\n")
    assert bundle.verify(world / bundle.RELEASE) == ["validation/x.json: present but not in the manifest"]


def test_validation_report_elsewhere_says_loudly_what_it_holds(tiny_world_noimaging, tmp_path, capsys):
    from pipeline.validate import main as validate_main

    elsewhere = tmp_path / "reports"
    validate_main([str(tiny_world_noimaging), "--only", "calibration", "--out", str(elsewhere)])
    err = capsys.readouterr().err
    assert (elsewhere / "validation.json").exists()
    assert not os.path.exists(os.path.join(tiny_world_noimaging, bundle.SEALED, "validation")), "the session's world changed"
    (warning,) = [line for line in err.splitlines() if line.startswith("WARNING: ")]
    assert str(elsewhere) in warning and "names the world's drivers" in warning


def test_screening_validation_report_goes_inside_sealed(tmp_path, monkeypatch, capsys):
    """The screening kind's report (the hidden score's figures) takes the same place."""
    from pipeline.screening import validate as screening_validate

    world = tmp_path / "screening-01"
    (world / bundle.SEALED).mkdir(parents=True)
    report = {"world_id": "screening-01", "ok": True, "checks": [{"check": "c", "ok": True, "value": 1}],
              "score": {"threshold": 1.0, "top_k": 10, "hidden_share_realised": 0.7, "enrichment_top1pct": {"target": 3.0}}}
    monkeypatch.setattr(screening_validate, "validate", lambda world_dir: report)
    assert screening_validate.main([str(world)]) == 0
    assert json.loads((world / bundle.SEALED / "validation" / "validation.json").read_text()) == report
    assert sorted(os.listdir(world)) == [bundle.SEALED]
    assert str(world / bundle.SEALED / "validation" / "validation.json") in capsys.readouterr().out


# ----------------------------------------------------------------------------- 7. the README's prerequisites


def test_readme_installs_the_debian_packages_as_root_not_with_sudo():
    text = (ROOT / "README.md").read_text()
    assert "sudo apt-get install" not in text
    assert "apt-get install -y bcftools tabix bubblewrap plink2" in text
    start = text.index("Prerequisites:")
    assert "as root" in text[start:text.index("```bash", start)]
