"""Configuration: every world composes; bad values fail before any compute with
one line naming the field, the value and what is valid."""
import subprocess
import sys

import pytest

from pipeline import config


@pytest.mark.parametrize("world", config.group_options("world"))
def test_every_world_config_composes(world, tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(f"{world}: '0x{'ab' * 16}'\n")
    r = config.load([f"world={world}", f"seeds={seeds}"])
    assert r.cfg.world.id == world
    assert r.seed.bit_length() >= 120


@pytest.mark.parametrize("scale", config.group_options("scale"))
def test_every_scale_composes(scale):
    r = config.load([f"scale={scale}"])
    assert r.cfg.scale.participants > 0 and r.cfg.scale.name == scale


@pytest.mark.parametrize("overrides,field,valid", [
    (["world=no-such-world"], "world", "valid:"),
    (["scale.participants=-5"], "scale.participants", "positive integer"),
    (["scale.proteins=0"], "scale.proteins", "positive integer"),
    (["scale.imaged=0"], "scale.imaged", "positive integer"),
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
    (["scale.foo=3"], "scale.foo", ""),
    (["world.n_drivers=abc"], "world.n_drivers", ""),
])
def test_bad_values_fail_with_one_line(overrides, field, valid):
    with pytest.raises(config.ConfigError) as info:
        config.load(overrides)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(field), msg
    assert valid in msg


def test_cli_reports_bad_config_before_compute(tmp_path):
    out = tmp_path / "w"
    proc = subprocess.run([sys.executable, "-m", "pipeline.build", "world=standard-01", "scale.participants=-1", f"out={out}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "scale.participants" in lines[0]
    assert not out.exists(), "nothing may be written for an invalid config"


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
