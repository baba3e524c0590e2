"""Agents from anywhere (agents issue, point 2): an agent package outside the repository, installed
into a folder of its own, plays isolated episodes on every kind by ``module:factory`` and by its
entry point; a hostile agent package learns nothing of the world; bad factories are one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.harness import isolation_status

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "dtw-example-agent"
ISOLATED, REASON = isolation_status()
pytestmark = pytest.mark.skipif(not ISOLATED, reason=f"external agents always run isolated; here: {REASON}")


@pytest.fixture(scope="module")
def example_site(tmp_path_factory):
    """The example agent package installed (pip, as a user would) into a folder of its own."""
    import shutil

    target = tmp_path_factory.mktemp("agent-site")
    source = tmp_path_factory.mktemp("agent-source") / EXAMPLE.name
    # pip builds in the source tree (build/, *.egg-info): a copy keeps the repository clean
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (target / "dtw_example_agent").is_dir()
    return target


def episode(world, out, *args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
    return subprocess.run([sys.executable, "-m", "pipeline.episode", f"world_dir={world}", f"out={out}", *args],
                          capture_output=True, text=True, timeout=900, env=env, cwd=out.parent)


@pytest.mark.parametrize("how", ["dtw_example_agent:make", "example"])
def test_an_installed_agent_package_plays_every_kind(kind_world, example_site, tmp_path, how):
    kind, world = kind_world
    extra = ["budget=450000", "agent.top=2"] if kind == "biobank" else ["mode=unrestricted", "agent.seed=3"]
    done = episode(world, tmp_path / "ep", f"agent={how}", *extra, pythonpath=[example_site])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["isolated"] is True and result["episode"]["exit_reason"] in ("submitted", "finished")
    transcript = json.loads((tmp_path / "ep" / "transcript.json").read_text())
    assert "sandbox of its own" in transcript["policy_isolation"]
    assert all(t.get("status") == "ran" for t in transcript["turns"])


HOSTILE = '''
import gc, json, os
from pipeline.agents.base import Agent, fenced

class Spy(Agent):
    def __init__(self, sealed, world_id):
        # given reversed, so that the options themselves (on the policy's command line) do not hold it
        self.sealed, self.world_id = sealed, world_id[::-1]
    def act(self, observation):
        found = {}
        try:
            found["truth"] = open(os.path.join(self.sealed, "truth.json")).read()[:50]
        except OSError as error:
            found["truth_error"] = type(error).__name__
        try:
            import pipeline.harness
            found["harness"] = "importable"
        except ImportError:
            found["harness"] = "absent"
        hits = []
        for obj in gc.get_objects():
            if isinstance(obj, str) and self.world_id in obj:
                hits.append(obj[:80])
        for name in ("mountinfo", "environ", "cmdline"):
            text = open(f"/proc/self/{name}", "rb").read().decode("utf-8", "replace")
            if self.world_id in text:
                hits.append(name)
        found["hits"] = [h for h in hits if "world_id" not in h and "[::-1]" not in h]
        found["release_visible"] = os.path.exists("/release") or os.path.exists("/dtw/release")
        return fenced("print('REPORT ' + " + repr(json.dumps(found)) + ")\\n" + FINISH)

def make(sealed, world_id):
    return Spy(sealed, world_id)
'''


def test_a_hostile_agent_package_learns_nothing_of_the_world(kind_world, tmp_path):
    kind, world = kind_world
    pkg = tmp_path / "spy_site"
    pkg.mkdir()
    finish = ("submit({'nominated': [], 'directions': {}, 'outcome_alignment': {}, 'rejected': [], "
              "'abstentions': []})" if kind == "biobank" else "finish()")
    (pkg / "spy_agent.py").write_text(f"FINISH = {finish!r}\n" + HOSTILE)
    world_id = Path(world).name
    extra = ["budget=0"] if kind == "biobank" else ["mode=unrestricted"]
    done = episode(world, tmp_path / "ep", "agent=spy_agent:make", f"agent.sealed={Path(world) / 'sealed'}",
                   f"agent.world_id={world_id[::-1]}", *extra, pythonpath=[pkg])
    assert done.returncode == 0, done.stderr[-3000:]
    transcript = json.loads((tmp_path / "ep" / "transcript.json").read_text())
    line = [l for l in transcript["turns"][0]["observation"].splitlines() if l.startswith("REPORT ")]
    report = json.loads(line[0][len("REPORT "):])
    assert "truth" not in report and report["truth_error"] in ("FileNotFoundError", "PermissionError")
    assert report["harness"] == "absent" and report["hits"] == [] and report["release_visible"] is False


@pytest.mark.parametrize("body, option, message", [
    ("", "", "cannot import no_such_module_xyz"),
    ("def make():\n    raise RuntimeError('boom')\n", "", "the factory raised RuntimeError: boom"),
    ("def make():\n    return 42\n", "", "not an agent"),
    ("def make(top=1):\n    return None\n", "agent.colour=red", "unknown option(s) agent.colour"),
])
def test_a_bad_factory_is_a_one_line_error_before_the_first_turn(tiny_world_noimaging, tmp_path, body, option,
                                                                  message):
    pkg = tmp_path / "site"
    pkg.mkdir()
    name = "no_such_module_xyz" if not body else "bad_agent"
    if body:
        (pkg / "bad_agent.py").write_text(body)
    done = episode(tiny_world_noimaging, tmp_path / "ep", f"agent={name}:make", "budget=0",
                   *([option] if option else []), pythonpath=[pkg])
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "ep").exists()


def test_an_external_agent_cannot_be_run_unisolated(tiny_world_noimaging, example_site, tmp_path):
    done = episode(tiny_world_noimaging, tmp_path / "ep", "agent=example", "budget=0", "isolation=off",
                   pythonpath=[example_site])
    assert done.returncode == 2 and "always runs with isolation=require" in done.stderr
