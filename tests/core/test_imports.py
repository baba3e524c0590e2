"""The package's import contracts (``[tool.importlinter]`` in pyproject.toml), run by
import-linter in the default tests: the generator's stages in data-flow order (a layers
contract: a module imports its own stage and earlier ones), the judging side that loads no
generator module, the sealed writer apart from the release writers, the world model without
a renderer, the sandbox's standalone copies.  import-linter reads every import statement,
those inside functions and under ``TYPE_CHECKING`` included, relative ones resolved (checked
below on a package of its own), and follows chains of imports, not only direct ones.

Besides the contracts: every module has a stage (a new module must be placed in the layers
contract, or nothing covers it), and no two modules import each other, directly or through
others (no import circles)."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
ROOTS = tuple(CONFIG["root_packages"])

def _lint_imports(cwd: Path, config: Path | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe) if exe.exists() else "lint-imports", "--no-cache", "--no-logo"] + ([str(config)] if config else [])
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_the_import_contracts_hold():
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*ROOTS, cache_dir=None)


def stage_modules() -> list[tuple[str, list[str]]]:
    """(layer text, its modules) of the stages contract, highest first."""
    stages = next(c for c in CONFIG["contracts"] if c["id"] == "stages")
    out = []
    for layer in stages["layers"]:
        out.append((layer, [m.strip() for m in layer.replace("|", ":").split(":") if m.strip()]))
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def unplaced(modules, layers: list[tuple[str, list[str]]]) -> list[str]:
    """Modules in no layer: neither a layer's module nor inside one, nor a package that
    holds layers (``pipeline``, ``pipeline.screening``: checked on their own below)."""
    placed = [m for _, ms in layers for m in ms]
    return sorted(m for m in modules
                  if not any(_under(m, p) for p in placed) and not any(_under(p, m) for p in placed))


def test_every_module_has_a_stage(graph):
    missing = unplaced(graph.modules, stage_modules())
    assert not missing, f"modules in no stage (place each in the stages contract, pyproject.toml): {missing}"


def test_a_package_that_spans_stages_imports_from_the_base_stage_only(graph):
    """``pipeline`` and ``pipeline.screening`` hold modules of many stages, so a layer cannot
    name them whole: their own ``__init__`` may import only the base stage (and kernels)."""
    layers = stage_modules()
    placed = [m for _, ms in layers for m in ms]
    base = layers[-2][1] + layers[-1][1]
    containers = sorted(m for m in graph.modules if not any(_under(m, p) for p in placed))
    assert "pipeline" in containers and "pipeline.screening" in containers, containers
    problems = [f"{c} imports {i}" for c in containers for i in sorted(graph.find_modules_directly_imported_by(c))
                if not any(_under(i, b) for b in base)]
    assert not problems, problems


def test_a_module_in_no_stage_is_caught():
    layers = [("a : b", ["pkg.a", "pkg.b"]), ("c", ["pkg.sub.c"])]
    assert unplaced(["pkg", "pkg.a", "pkg.a.x", "pkg.sub", "pkg.sub.c", "pkg.new", "pkg.sub.d"], layers) == [
        "pkg.new", "pkg.sub.d"]


def circles(graph: grimp.ImportGraph) -> list[frozenset]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_no_import_circles(graph):
    found = [sorted(c) for c in circles(graph)]
    assert not found, f"import circles (imports inside functions included): {found}"


def _package(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_contracts_see_imports_inside_functions_and_relative_ones(tmp_path):
    """The tool itself: a lazy relative import of a higher layer breaks a layers contract,
    and a lazy import two modules round makes a circle."""
    _package(tmp_path, {
        "toypkg/__init__.py": "",
        "toypkg/low.py": "def f():\n    from . import high\n    return high\n",
        "toypkg/high.py": "import os\n",
        "toypkg/sub/__init__.py": "",
        "toypkg/sub/a.py": "def g():\n    from ..sub import b\n    return b\n",
        "toypkg/sub/b.py": "def h():\n    from . import a\n    return a\n",
        "contracts.ini": "[importlinter]\nroot_package = toypkg\n\n[importlinter:contract:layers]\nname = toy layers\n"
                         "type = layers\nlayers =\n    toypkg.high\n    toypkg.low\n",
    })
    done = _lint_imports(tmp_path, tmp_path / "contracts.ini")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "toypkg.low -> toypkg.high" in done.stdout, done.stdout
    sys.path.insert(0, str(tmp_path))
    try:
        toy = grimp.build_graph("toypkg", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert circles(toy) == [frozenset({"toypkg.sub.a", "toypkg.sub.b"})]
