"""Configuration: every world composes; every field has a rule; bad values (and
every problem with the machine, the output location or the scheduler) fail
before any compute with one line naming the field, the value and what is valid."""
import importlib.util
import os
import socket
import subprocess
import sys

import pytest

from pipeline import config, preflight

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("world", config.group_options("world"))
def test_every_world_config_composes(world, tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(f"{world}: '0x{'ab' * 16}'\n")
    r = config.load([f"world={world}", f"seeds={seeds}"])
    assert r.cfg.world.id == world
    assert r.seed.bit_length() >= 120


@pytest.mark.parametrize("scale", config.group_options("scale"))
def test_every_scale_composes(scale):
    r = config.load(["world=standard-01", f"scale={scale}"])
    assert r.cfg.scale.participants > 0 and r.cfg.scale.name == scale


def test_every_field_has_exactly_one_rule():
    """A field added to a schema without a rule (or a rule for a field that is
    gone) fails here: validation covers every field."""
    assert set(config.schema_leaves(config.RootConfig)) == set(config.FIELD_RULES)
    panel_only = set(config.schema_leaves(config.PanelAppConfig)) - set(config.schema_leaves(config.RootConfig))
    assert panel_only == set(config.PANEL_FIELD_RULES)
    assert all(isinstance(r, config.Rule) for r in config.FIELD_RULES.values())


def test_world_is_required():
    with pytest.raises(config.ConfigError, match=r"^world: none chosen; valid: world=<id> with <id> one of .*standard-01"):
        config.load([])


@pytest.mark.parametrize("overrides,field,valid", [
    (["world=no-such-world"], "world", "valid:"),
    (["scale.participants=-5"], "scale.participants", "[200, "),
    (["scale.proteins=0"], "scale.proteins", "[1, 10,000]"),
    (["scale.imaged=0"], "scale.imaged", "[1, "),
    (["scale.imaged=2000"], "scale.imaged", "(0, 1]"),
    (["scale.proteins=3", "world.n_drivers=5"], "world.n_drivers", "n_drivers <= proteins"),
    (["world.biases=[T1,T12]"], "world.biases", "T1, T2"),
    (["world.visit2_fraction=1.5"], "world.visit2_fraction", "(0, 1]"),
    (["world.visit2_fraction=0"], "world.visit2_fraction", "(0, 1]"),
    (["world.archetype=cardio"], "world.archetype", "dcm"),
    (["world.n_drivers=0"], "world.biases", "n_drivers"),
    (["world.seed=0x1234"], "world.seed", "128"),
    (["cluster.kind=cloud"], "cluster.kind", "local"),
    (["release.imaging=png"], "release.imaging", "npz"),
    (["scale.foo=3"], "scale.foo", "participants"),
    (["world.n_drivers=abc"], "world.n_drivers", "integer in [0, 6]"),
])
def test_bad_values_fail_with_one_line(overrides, field, valid):
    with pytest.raises(config.ConfigError) as info:
        config.load(["world=standard-01", *overrides])
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(field + ":"), msg
    assert "valid:" in msg and valid in msg, msg


def test_memory_limit_reads_as_distributed_does():
    total = 16 * 2**30
    assert config.memory_limit_bytes("auto", total, threads=1, cores=2) == 8 * 2**30
    assert config.memory_limit_bytes("0.25", total) == 4 * 2**30
    assert config.memory_limit_bytes("4GiB", total) == 4 * 2**30
    assert config.memory_limit_bytes("0", total) is None
    for bad in ("lots", "-1", "nan", "4 parsecs"):
        with pytest.raises(config.ConfigError, match="^cluster.memory_limit: "):
            config.memory_limit_bytes(bad, total)


def test_size_estimate_fits_the_measured_runs():
    """The estimate must admit what the bench ran (paper scale with 2 workers,
    biobank without pixels) on the reference machine's 23.5 GiB."""
    ref = int(23.5 * 2**30)
    for scale, extra in (("paper", []), ("biobank", ["release=noimaging"])):
        est = preflight.estimate(config.load(["world=standard-01", f"scale={scale}", *extra]).cfg)
        assert est.client + 2 * est.task < ref, (scale, est)
    paper = preflight.estimate(config.load(["world=standard-01", "scale=paper"]).cfg)
    assert 14e9 < paper.output < 25e9  # 16.5 GB measured, with work partitions on top


# ----------------------------------------------------------------------------- 40+ malformed commands


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def _too_many_participants() -> int:
    return min(2**31 - 1, preflight.machine_memory() // preflight.CLIENT_PER_PARTICIPANT + 1_000_000)


W = "world=standard-01"
# (id, argv (after the world), the field the one line must name); {tmp} is the test's folder
MALFORMED = [
    # the twelve that got through before
    ("participants-1e13", [W, "scale.participants=1e13"], "scale.participants"),
    ("participants-int", [W, "scale.participants=10000000000000"], "scale.participants"),
    ("plus-scale-key", [W, "+scale.colour=5"], "scale.colour"),
    ("plus-world-key", [W, "+world.flavour=x"], "world.flavour"),
    ("out-protocol", [W, "out=bogus://worlds"], "out"),
    ("out-no-package", [W, "out=s3://bucket/worlds"], "out"),
    ("out-empty", [W, "out="], "out"),
    ("scheduler-closed", [W, "cluster=address", "cluster.address=tcp://127.0.0.1:{port}"], "cluster.address"),
    ("compression-typo", [W, "release.parquet_compression=snappyy"], "release.parquet_compression"),
    ("compression-999", [W, "release.parquet_compression_level=999"], "release.parquet_compression_level"),
    ("compression-neg", [W, "release.parquet_compression_level=-999"], "release.parquet_compression_level"),
    ("memory-lots", [W, "cluster.memory_limit=lots"], "cluster.memory_limit"),
    ("threads-0", [W, "cluster.threads_per_worker=0"], "cluster.threads_per_worker"),
    # more of our own
    ("no-world", [], "world"),
    ("unknown-world", ["world=no-such-world"], "world"),
    ("unknown-scale", [W, "scale=huge"], "scale"),
    ("sweep-without-m", ["world=standard-01,standard-02"], "world=standard-01,standard-02"),
    ("plus-top-key", [W, "+foo=1"], "foo"),
    ("unknown-field", [W, "scale.foo=3"], "scale.foo"),
    ("unknown-nested", [W, "world.bias_params.T1.foo=3"], "world.bias_params.T1.foo"),
    ("delete-field", [W, "~world.seed"], "world.seed"),
    ("short-seed", [W, "world.seed=0x1234"], "world.seed"),
    ("drivers-abc", [W, "world.n_drivers=abc"], "world.n_drivers"),
    ("drivers-7", [W, "world.n_drivers=7"], "world.n_drivers"),
    ("bias-unknown", [W, "world.biases=[T1,T12]"], "world.biases"),
    ("bias-twice", [W, "world.biases=[T1,T1]"], "world.biases"),
    ("bias-scalar", [W, "world.biases=T1"], "world.biases"),
    ("archetype", [W, "world.archetype=cardio"], "world.archetype"),
    ("ld-inf", [W, "world.ld_decay_kb=inf"], "world.ld_decay_kb"),
    ("visit2-nan", [W, "world.visit2_fraction=nan"], "world.visit2_fraction"),
    ("visit2-after-followup", [W, "world.visit2_years=20"], "world.visit2_years"),
    ("h2-reversed", [W, "world.cis_h2=[0.5,0.1]"], "world.cis_h2"),
    ("id-escapes", [W, "world.id=../escape"], "world.id"),
    ("t5-terms", [W, "world.bias_params.T5.n_terms=12"], "world.bias_params.T5.n_terms"),
    ("t9-scale-0", [W, "world.bias_params.T9.scale=0"], "world.bias_params.T9.scale"),
    ("missing-base-0", [W, "world.bias_params.messy.protein_missing_base=0"], "world.bias_params.messy.protein_missing_base"),
    ("params-scalar", [W, "world.bias_params.T1=5"], "world.bias_params.T1"),
    ("proteins-20000", [W, "scale.proteins=20000"], "scale.proteins"),
    ("imaged-over", [W, "scale.imaged=2000"], "scale.imaged"),
    ("participants-100", [W, "scale.participants=100"], "scale.participants"),
    ("participants-memory", [W, "scale.participants={too_many}"], "scale.participants"),
    ("variants-10", [W, "scale.variants=10"], "scale.variants"),
    ("task-over-limit", [W, "cluster.memory_limit=1MB"], "cluster.memory_limit"),
    ("workers-0", [W, "cluster.n_workers=0"], "cluster.n_workers"),
    ("workers-100000", [W, "cluster.n_workers=100000"], "cluster.n_workers"),
    ("workers-over-memory", [W, "cluster.n_workers=1000", "cluster.memory_limit=0"], "cluster.n_workers"),
    ("chunk-0", [W, "cluster.chunk_blocks=0"], "cluster.chunk_blocks"),
    ("cluster-kind", [W, "cluster.kind=cloud"], "cluster.kind"),
    ("address-not-url", [W, "cluster=address", "cluster.address=somewhere"], "cluster.address"),
    ("memory-with-address", [W, "cluster=address", "cluster.address=tcp://127.0.0.1:{port}", "out=memory://w"], "out"),
    ("dashboard", [W, "cluster.dashboard_address=nonsense"], "cluster.dashboard_address"),
    ("imaging-png", [W, "release.imaging=png"], "release.imaging"),
    ("angiograms", [W, "release.angiograms=5"], "release.angiograms"),
    ("paper-compat-maybe", [W, "paper_compat=maybe"], "paper_compat"),
    ("out-is-file", [W, "out={tmp}/a-file"], "out"),
    ("out-under-file", [W, "out={tmp}/a-file/worlds"], "out"),
    ("heldout-no-seeds", ["world=heldout-dcm-01"], "world.seed"),
    ("seeds-missing", ["world=heldout-dcm-01", "seeds={tmp}/no-such-seeds.yaml"], "seeds"),
    ("seeds-protocol", ["world=heldout-dcm-01", "seeds=bogus://seeds.yaml"], "seeds"),
    ("seeds-no-entry", ["world=heldout-dcm-01", "seeds={tmp}/a-file"], "seeds"),
    ("hydra-run-dir", [W, "hydra.run.dir={tmp}/runs"], "hydra.run.dir"),
    ("hydra-logging", [W, "hydra/job_logging=default"], "hydra/job_logging"),
    ("plus-hydra", [W, "+hydra.output_subdir=.hydra"], "+hydra.output_subdir"),
    ("force-add-key", [W, "++world.flavour=x"], "world.flavour"),
    ("config-dir-flag", [W, "--config-dir={tmp}"], "--config-dir"),
    ("unknown-flag", [W, "--bogus"], "arguments: unrecognized arguments: --bogus"),
    ("source-date-epoch", [W], "SOURCE_DATE_EPOCH"),
    # issue 25: what a new user tried
    ("out-ftp-refused", [W, "out=ftp://127.0.0.1:{port}/worlds"], "out: 'ftp://127.0.0.1:"),
    ("out-read-only", [W, "out=zip://worlds.zip"], "out: 'zip://worlds.zip' is on a read-only filesystem"),
    ("out-memory", [W, "out=memory://worlds"], "out: 'memory://worlds' is an in-memory filesystem"),
    ("out-twice", [W, "out={tmp}/w1", "out={tmp}/w2"], "out: given twice"),
    ("world-twice", [W, "world=null-01"], "world: given twice"),
    ("field-twice", [W, "scale.imaged=100", "scale.imaged=200"], "scale.imaged: given twice"),
    ("added-and-set", [W, "+world.seed=0x1", "world.seed=0x2"], "world.seed: given twice"),
    ("sweep-twice", ["-m", "world=standard-01,null-01", "world=standard-02", "out={tmp}/out"], "world: given twice"),
]


@pytest.mark.parametrize("case,argv,field", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_command_is_one_line_before_compute(case, argv, field, tmp_path, monkeypatch, capsys):
    """Each fails with exit status 2 and one line on stderr naming the field,
    before any compute (the build, the world sampler and the cluster are never
    reached) and with nothing written to the output or the working folder."""
    import pipeline.build as build_mod
    import pipeline.graph.executor as executor_mod
    import pipeline.graph.run as run_mod

    if case == "out-no-package" and importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed here")
    (tmp_path / "a-file").write_text("not a folder\n")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    if case == "source-date-epoch":
        monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    else:
        monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)

    def computed(*a, **k):
        raise AssertionError("compute started for a malformed command")

    monkeypatch.setattr(build_mod, "build", computed)
    monkeypatch.setattr(run_mod, "sample_world", computed)
    monkeypatch.setattr(executor_mod, "make_executor", computed)
    out = tmp_path / "out"
    values = {"tmp": tmp_path, "port": _closed_port(), "too_many": _too_many_participants()}
    argv = [a.format(**values) for a in argv]
    if not any(a.startswith("out=") for a in argv):
        argv.insert(0, f"out={out}")
    # "Before any compute" is what the three patched entry points above prove; a
    # wall-clock bound would only measure the machine's load.
    status = build_mod.main(argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert status == 2, (status, captured.err)
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"error: {field}"), lines[0]
    assert "valid: " in lines[0], lines[0]
    assert captured.out == ""
    assert not out.exists() and list(work.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "cwd"]


def test_not_writable_out(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("running as root: permissions do not stop root from writing (the check uses os.access)")
    from pipeline.build import main

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main([W, f"out={locked}/worlds"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("error: out: ") and "not writable" in err[0]
    finally:
        locked.chmod(0o700)


def test_cli_reports_bad_config_before_compute(tmp_path):
    out = tmp_path / "w"
    proc = subprocess.run([sys.executable, "-m", "pipeline.build", "world=standard-01", "scale.participants=-1", f"out={out}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "scale.participants" in lines[0]
    assert not out.exists(), "nothing may be written for an invalid config"
    assert os.listdir(tmp_path) == []


def test_unreachable_scheduler_is_one_line(tmp_path):
    """The real command: a scheduler address where nothing listens is one line
    (the check itself is timed in-process above: under 10 s)."""
    proc = subprocess.run([sys.executable, "-m", "pipeline.build", "world=standard-01", "cluster=address",
                           f"cluster.address=tcp://127.0.0.1:{_closed_port()}", f"out={tmp_path}/w"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "error: cluster.address: no scheduler" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_heldout_world_needs_a_seed_file(tmp_path):
    import yaml

    base = yaml.safe_load((config.CONF_DIR / "world" / "standard-01.yaml").read_text())
    base["id"] = "standard-01"
    assert base.get("seed")
    with pytest.raises(config.ConfigError, match="world.seed"):
        config.load(["world=standard-01", "world.seed=null"])
    seeds = tmp_path / "s.yaml"
    seeds.write_text("standard-01: '0x" + "cd" * 16 + "'\n")
    r = config.load(["world=standard-01", "world.seed=null", f"seeds={seeds}"])
    assert r.seed == int("cd" * 16, 16)


@pytest.mark.parametrize("argv,field", [
    (["world=standard-01"], "world"),
    (["panel.worlds=[standard-01,nope]"], "panel.worlds"),
    (["panel.worlds=[null-01,null-01]"], "panel.worlds"),
    (["panel=paper-v2"], "panel"),
    (["jobs=0"], "jobs"),
    (["panel=paper-v1"], "world.seed"),  # held-out worlds without seeds=
    (["+panel.colour=red"], "panel.colour"),
])
def test_panel_command_is_one_line_before_compute(argv, field, tmp_path, monkeypatch, capsys):
    import pipeline.panel as panel_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(panel_mod, "execute", lambda *a, **k: pytest.fail("compute started"))
    assert panel_mod.main([*argv, f"out={tmp_path}/out"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}") and "valid: " in err[0], err
    assert os.listdir(tmp_path) == []


def test_resolved_config_is_typed_and_the_panel_group_is_in_the_config_store():
    """Point 8 of issue 16: after validation the config is the schema's dataclasses
    (OmegaConf.to_object), and a panel file is typed by the PanelConfig schema."""
    from omegaconf import OmegaConf

    typed = config.load(["world=hard-01", "scale=tiny"]).typed
    assert isinstance(typed, config.RootConfig) and isinstance(typed.world, config.WorldConfig)
    assert isinstance(typed.world.bias_params, config.BiasParams) and isinstance(typed.scale, config.ScaleConfig)
    assert typed.world.id == "hard-01" and typed.scale.name == "tiny"
    panel = config.compose(["panel=paper-v1"], config_name="panel_config")
    assert OmegaConf.get_type(panel.panel) is config.PanelConfig
    with pytest.raises(config.ConfigError, match="panel.flavour: no such field"):
        config.validate_panel(config.compose(["panel=paper-v1", "+panel.flavour=x"], config_name="panel_config"))
