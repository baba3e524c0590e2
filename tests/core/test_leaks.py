"""The test-only leaks behind one seam (``pipeline.leaks``): the generator calls named hook
points, a no-op unless a world's config names a leak, and has no branch of its own on them;
each leak's implementations (``pipeline.leak_hooks``) sit at points the generator calls.
That each leak is still caught is the leak tests' (tests/biobank/test_tells.py, test_validity.py,
test_instruments.py)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import leaks
from pipeline.config_schema import TEST_LEAKS

REPO = Path(__file__).resolve().parents[2]
#: Generator modules: how a world is made (the seam's implementations excepted).
GENERATOR = ("model", "pathways.py", "loci.py", "linkage.py", "blocks.py", "modalities", "tables.py",
             "data_dictionary.py", "writers", "graph", "imaging", "build.py", "panel.py", "screening")


def _files() -> list[Path]:
    out = []
    for name in GENERATOR:
        path = REPO / "pipeline" / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_every_leak_has_implementations_at_known_points():
    registry = leaks.implementations()
    assert set(registry) == set(TEST_LEAKS), set(TEST_LEAKS) ^ set(registry)
    for leak, points in registry.items():
        assert points and set(points) <= set(leaks.POINTS), (leak, points)


def test_every_hook_point_is_called_by_the_generator():
    """Each point of ``POINTS`` is named in a ``leaks.hook`` call of a generator module, and
    every such call names a point of ``POINTS``."""
    called = set()
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "hook"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "leaks"):
                point = node.args[1]
                assert isinstance(point, ast.Constant) and point.value in leaks.POINTS, (path, ast.dump(point))
                called.add(point.value)
    assert called == set(leaks.POINTS), set(leaks.POINTS) - called


def test_the_generator_has_no_test_only_branch():
    """No generator module names a leak or asks whether a world is leaky: only the sampler
    reads ``world.test_leaks`` (into ``World.leaks``), and the sealed record lists them."""
    problems = []
    for path in _files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in TEST_LEAKS:
                problems.append(f"{path.relative_to(REPO)}:{node.lineno} names the leak {node.value!r}")
            if isinstance(node, ast.Attribute) and node.attr in ("leaky", "visit2_recomputed"):
                problems.append(f"{path.relative_to(REPO)}:{node.lineno} reads .{node.attr}")
            if isinstance(node, ast.Attribute) and node.attr == "test_leaks" and path.name != "sampler.py":
                problems.append(f"{path.relative_to(REPO)}:{node.lineno} reads .test_leaks")
            if (isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                    and any(isinstance(c, ast.Attribute) and c.attr in ("leaks", "leakset") for c in node.comparators)):
                problems.append(f"{path.relative_to(REPO)}:{node.lineno} asks whether a world has a leak")
    assert not problems, "\n".join(problems)


def test_without_leaks_a_hook_is_its_default():
    def default(x):
        return x + 1

    assert leaks.hook(frozenset(), "t8_loadings", default) is default
    # a leak without an implementation at this point leaves the default too
    assert leaks.hook(frozenset({"weak_ld"}), "t8_loadings", default) is default


def test_leaks_at_one_point_wrap_in_their_order():
    """``transcripts`` and ``communality`` both replace a bias equation: the later one
    (communality, the supplement's equation alone) wraps the earlier and decides."""
    from pipeline import leak_hooks
    from pipeline.modalities import cohort

    fn = leaks.hook(frozenset({"communality", "transcripts"}), "special_raw", cohort._special_raw)
    assert fn.func is leak_hooks._supplement_equation
    inner = fn.args[0]
    assert inner.func is leak_hooks._t1_separate_equation and inner.args[0] is cohort._special_raw


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown leak"):
        leaks.register("oops", "t8_loadings")
    with pytest.raises(ValueError, match="unknown hook point"):
        leaks.register("t8_signs", "oops")
    with pytest.raises(ValueError, match="unknown hook point"):
        leaks.hook(frozenset(), "oops", print)


def test_a_world_without_leaks_loads_no_implementation():
    code = ("import json, sys\nfrom pipeline import config\nfrom pipeline.model.sampler import sample_world\n"
            "w = sample_world(config.load(['world=standard-01', 'scale=tiny']))\n"
            "from pipeline.modalities import phenotypes\nphenotypes.t8_loadings(w, w.archetype)\n"
            "print(json.dumps([m for m in sys.modules if m.startswith('pipeline.leak')]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == ["pipeline.leaks"], done.stdout
