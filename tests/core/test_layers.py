"""The package's layering beyond what the import contracts say.  The stages, the judging
side that loads no generator module, the sealed writer apart from the release writers, the
world model without a renderer and the sandbox's standalone copies are import-linter
contracts (``[tool.importlinter]`` in pyproject.toml, run by tests/core/test_imports.py);
here: every reader of a built world goes through the bundle contract (``pipeline.bundle``
or a kind's), a kind's bundle contract is built on the project's, what importing the judging
side actually loads at run time, and the sandbox's copies importing without the package.
The module lists come from the contracts, so they are declared once."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_CONTRACTS = {c["id"]: c for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
#: A kind's bundle contract (its file names and readers), built on pipeline.bundle.
KIND_BUNDLES = ("pipeline.screening.bundle",)
#: Modules that judge a built world (the scorer, the leak audit and its tell scan, the experiment
#: oracle, the release loader, and the screening kind's), from the judging-not-generator contract.
JUDGING = tuple(m for m in _CONTRACTS["judging-not-generator"]["source_modules"] if m not in KIND_BUNDLES)
#: Every module that reads a built world: the judging side, validation (which also knows
#: the generator's parameters it checks), the agents and the episode harness.
READERS = JUDGING + ("pipeline.validation", "pipeline.agents", "pipeline.harness", "pipeline.genotypes_io")
#: The generator's internals: how a world is made, which a judge must not depend on.
GENERATOR = tuple(_CONTRACTS["judging-not-generator"]["forbidden_modules"])


def _is_under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_files(name: str) -> dict[str, Path]:
    """Module name -> file, for a module or every module of a package."""
    base = REPO / Path(*name.split("."))
    if base.with_suffix(".py").is_file():
        return {name: base.with_suffix(".py")}
    out = {}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    assert out, f"{name}: no such module or package under {REPO}"
    return out


def imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in the file, relative ones resolved.
    ``from X import Y`` gives X and X.Y (Y may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


@pytest.mark.parametrize("side", READERS)
def test_every_reader_goes_through_the_bundle_contract(side):
    imported = {name for module, path in module_files(side).items() for _, name in imports(module, path)}
    assert "pipeline.bundle" in imported or imported & set(KIND_BUNDLES), f"{side} reads a world without pipeline.bundle"


@pytest.mark.parametrize("contract", KIND_BUNDLES)
def test_a_kinds_bundle_contract_is_built_on_the_projects(contract):
    """A kind's contract names its files on top of pipeline.bundle's folders and manifest
    and imports nothing of any generator, so its readers may stand in for pipeline.bundle."""
    found = imports(contract, module_files(contract)[contract])
    names = {name for _, name in found}
    assert "pipeline.bundle" in names, f"{contract} does not build on pipeline.bundle"
    assert not [n for n in names if _is_under(n, GENERATOR)], names


def test_importing_the_judging_side_loads_no_generator_module():
    """What ``import`` actually loads, transitively (the static rule sees direct imports only)."""
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in JUDGING)
            + "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pipeline'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "pipeline.bundle" in loaded
    assert not [m for m in loaded if _is_under(m, GENERATOR)], loaded


def test_the_sandbox_copies_import_without_the_package(tmp_path):
    """What the sandbox copies beside the agent's runtime imports in a folder with no
    ``pipeline`` package on the path, as it must inside the sandbox."""
    from pipeline.harness import sandbox

    lib = tmp_path / "lib"
    lib.mkdir()
    for name, module in ((sandbox.GENOTYPES_NAME, "genotypes_io.py"), (sandbox.BUNDLE_NAME, "bundle.py"),
                         (sandbox.RUNNER_NAME, "harness/runner.py")):
        (lib / name).write_bytes((REPO / "pipeline" / module).read_bytes())
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import dtw_genotypes, dtw_bundle, dtw_runner\n"
            "assert 'pipeline' not in sys.modules\n"
            f"assert dtw_runner.READY_NAME == {sandbox.READY_NAME!r}\n"
            "assert dtw_genotypes.GENOTYPE_STORE == dtw_bundle.GENOTYPE_STORE\n")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(lib)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_rules_see_imports_inside_functions_and_relative_ones(tmp_path):
    """The checker itself: a lazy relative import two levels up is resolved and caught."""
    source = "def f():\n    from ..model.world import World\n    from . import sibling\nimport os\n"
    path = tmp_path / "mod.py"
    path.write_text(source)
    found = [name for _, name in imports("pipeline.score.mod", path)]
    assert "pipeline.model.world" in found and "pipeline.model.world.World" in found
    assert "pipeline.score.sibling" in found and "os" in found
    assert _is_under("pipeline.model.world", GENERATOR) and not _is_under("pipeline.models", GENERATOR)
