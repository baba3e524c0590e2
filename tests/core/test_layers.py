"""The package's layering, read from the import statements (every one, those inside
functions included): the generator's stages import only earlier stages (config, the
hidden world model, participant blocks, modalities, tables, writers, the build graph,
the command line; never the judging side); the judging side reads a built world
through the bundle contract (``pipeline.bundle``) and never imports the generator's
internals; the standalone modules import nothing of the package.

A rule is (who, may not import what, why).  To add a layer, append a Rule to RULES;
every rule is checked statically over each module of ``who`` and, for the judging
side, once more at run time (what importing it loads)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Modules that judge a built world: the scorer, the leak audit and its tell scan, the
#: experiment oracle, the release loader.
JUDGING = ("pipeline.score", "pipeline.audit", "pipeline.oracle", "pipeline.release", "pipeline.tells",
           # the screening kind's (pipeline.screening): its scorer, leak audit and label oracle
           "pipeline.screening.score", "pipeline.screening.audit", "pipeline.screening.oracle")
#: Every module that reads a built world: the judging side, validation (which also knows
#: the generator's parameters it checks), the agents and the episode harness.
READERS = JUDGING + ("pipeline.validation", "pipeline.agents", "pipeline.harness", "pipeline.genotypes_io")
#: The generator's internals: how a world is made, which a judge must not depend on.
GENERATOR = ("pipeline.world", "pipeline.modalities", "pipeline.graph", "pipeline.build", "pipeline.writers",
             "pipeline.screening.fragments", "pipeline.screening.catalogue", "pipeline.screening.synthons",
             "pipeline.screening.library", "pipeline.screening.pocket",
             "pipeline.screening.writers", "pipeline.screening.sealed", "pipeline.screening.stages",
             "pipeline.screening.build")
#: Modules agent code may use and the sandbox copies beside its runtime: stdlib and
#: third-party imports, and each other (the copies sit side by side).
STANDALONE = ("pipeline.bundle", "pipeline.genotypes_io")
#: Another kind of world's bundle contract (its file names and readers), built on pipeline.bundle.
KIND_BUNDLES = ("pipeline.screening.bundle",)


#: The generator's stages in data-flow order: a module may import its own stage and
#: earlier ones.  A name maps to the stage of its longest listed prefix; ``pipeline``
#: itself (the version, FORMAT_VERSION) is the base.
STAGES = (
    ("base", ("pipeline", "pipeline.paths", "pipeline.seeds", "pipeline.streams", "pipeline.bundle", "pipeline.ld",
              "pipeline.outputs", "pipeline.genotypes_io", "pipeline.kinds", "pipeline.screening",
              "pipeline.screening.streams", "pipeline.screening.bundle", "pipeline.ledger", "pipeline.commandline")),
    ("config", ("pipeline.config_schema", "pipeline.config_rules", "pipeline.config", "pipeline.preflight",
                "pipeline.screening.config")),
    ("world", ("pipeline.world", "pipeline.pathways", "pipeline.loci", "pipeline.linkage", "pipeline.imaging.site_fields",
               "pipeline.screening.fragments", "pipeline.screening.catalogue", "pipeline.screening.synthons",
               "pipeline.screening.library", "pipeline.screening.pocket")),
    ("blocks", ("pipeline.blocks",)),
    ("modalities", ("pipeline.modalities", "pipeline.imaging", "pipeline.imaging.templates", "pipeline.imaging.render",
                    "pipeline.imaging.measure")),
    ("tables", ("pipeline.tables", "pipeline.data_dictionary")),
    ("writers", ("pipeline.writers", "pipeline.imaging.writer", "pipeline.manifest", "pipeline.buildrecord",
                 "pipeline.screening.writers", "pipeline.screening.sealed")),
    ("graph", ("pipeline.graph", "pipeline.screening.stages")),
    ("build", ("pipeline.build", "pipeline.panel", "pipeline.cli", "pipeline.screening.build")),
    # after the build: what reads, judges or plays a built world
    ("judging", JUDGING + ("pipeline.validate", "pipeline.validation", "pipeline.experiment", "pipeline.harness",
                           "pipeline.agents", "pipeline.episode", "pipeline.chat_check", "pipeline.screening.validate",
                           "pipeline.screening.episode", "pipeline.screening.agents", "pipeline.screening.runtime",
                           "pipeline.screening.prompt", "pipeline.screening.strategy_code",
                           "pipeline.screening.calibrate", "pipeline.evaluate", "pipeline.mcp",
                           # the frameworks build training and panel worlds, then play them (Inspect, verifiers)
                           "pipeline.frameworks", "pipeline.rl")),
)


def stage_of(name: str) -> tuple[int, str] | None:
    """(index, name) of the stage of module (or module attribute) ``name``."""
    best = None
    for i, (stage, prefixes) in enumerate(STAGES):
        for p in prefixes:
            if _is_under(name, (p,)) and (best is None or len(p) > best[2]):
                best = (i, stage, len(p))
    return None if best is None else best[:2]


@dataclass(frozen=True)
class Rule:
    who: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str
    #: Exceptions inside ``forbidden``.
    allowed: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{'+'.join(w.rsplit('.', 1)[-1] for w in self.who)}-not-{'+'.join(f.rsplit('.', 1)[-1] for f in self.forbidden)}"


RULES = [
    Rule(JUDGING, GENERATOR, "the judging side reads worlds through pipeline.bundle, not through the code that made them"),
    Rule(("pipeline.writers.sealed",), ("pipeline.writers.release",), "the sealed writer shares no code path with the "
         "release writers, so nothing sealed can be written into release/"),
    Rule(("pipeline.writers.release",), ("pipeline.writers.sealed",), "the release writers never see the sealed writer"),
    Rule(("pipeline.world",), ("pipeline.imaging.render", "pipeline.imaging.measure", "pipeline.imaging.writer"),
         "the hidden world model imports no renderer"),
    Rule(STANDALONE, ("pipeline",), "copied beside agent code, which has no package to import from", STANDALONE),
]


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


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_no_module_imports_across_a_layer(rule):
    problems = []
    for who in rule.who:
        for module, path in module_files(who).items():
            for line, name in imports(module, path):
                if _is_under(name, rule.forbidden) and not _is_under(name, rule.allowed):
                    problems.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not problems, f"{rule.why}:\n" + "\n".join(problems)


GENERATOR_STAGES = [m for stage, prefixes in STAGES[:-1] for p in prefixes if p != "pipeline"
                    for m in module_files(p)]


#: (importer, imported) -> why a stage may read a later one: each is a stated exception.
LATER_IMPORT_EXCEPTIONS = {
    ("pipeline.pathways", "pipeline.modalities.population"):
        "the world's pathway coefficients are standardised with the population's covariate moments, drawn from "
        "the first participant blocks (the population is a function of the world seed alone)",
}


@pytest.mark.parametrize("module", sorted(set(GENERATOR_STAGES)))
def test_no_stage_imports_a_later_one(module):
    path = module_files(module)[module]
    own = stage_of(module)
    later = [f"{path.relative_to(REPO)}:{line} ({own[1]}) imports {name} ({stage_of(name)[1]})"
             for line, name in imports(module, path)
             if name.startswith("pipeline") and stage_of(name)[0] > own[0]
             and not any(module == a and _is_under(name, (b,)) for a, b in LATER_IMPORT_EXCEPTIONS)]
    assert not later, "a stage imports a later one:\n" + "\n".join(later)


def test_every_module_has_a_stage():
    """A new module must be placed in STAGES (or be judging-side) so that the rule above covers it."""
    unplaced = [m for m in module_files("pipeline") if stage_of(m)[1] == "base" and m not in STAGES[0][1]]
    assert not unplaced, f"modules in no stage: {unplaced}"


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
    source = "def f():\n    from ..world import World\n    from . import sibling\nimport os\n"
    path = tmp_path / "mod.py"
    path.write_text(source)
    found = [name for _, name in imports("pipeline.score.mod", path)]
    assert "pipeline.world" in found and "pipeline.world.World" in found
    assert "pipeline.score.sibling" in found and "os" in found
    assert _is_under("pipeline.world", GENERATOR) and not _is_under("pipeline.worlds", GENERATOR)
