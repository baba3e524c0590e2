"""Every random stream's name is a registered constant, used by name: no draw in
``pipeline/`` spells a stream name as a literal (an AST walk of every call that takes
one), and the registered names are unique.  The names key the draws (they are hashed
into each stream's seed), so a literal could drift from its registration unseen; a
constant cannot."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from pipeline import streams

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipeline"
#: module alias -> the draw functions called through it, each taking the stream name as its second argument.
DRAWS = {"seeds": ("stream", "seed_sequence", "block_key"), "blocks": ("normal", "uniform", "exponential", "per_block")}
#: The same functions called by their bare name (inside pipeline.seeds and pipeline.blocks).
BARE = {name for names in DRAWS.values() for name in names}
#: The modules that register streams (their register() calls spell the names, once).
REGISTERING = sorted(p for p in PIPELINE.rglob("streams.py"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _registered(value) -> bool:
    return isinstance(value, str) and value in streams.REGISTRY


def _imported_constants(tree: ast.Module, module: str) -> dict:
    """Names bound by ``from <...>streams import X`` in a module -> the value each is bound to."""
    out = {}
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "streams":
            base = importlib.import_module(("." * node.level + node.module) if node.level else node.module,
                                           package if node.level else None)
            for alias in node.names:
                out[alias.asname or alias.name] = getattr(base, alias.name, None)
    return out


class DrawSites(ast.NodeVisitor):
    """Each call that takes a stream name, with the problem of its name argument (None: fine)."""

    def __init__(self, imported: dict):
        self.imported, self.params, self.sites = imported, [set()], []

    def visit_FunctionDef(self, node):
        a = node.args
        self.params.append({x.arg for x in a.posonlyargs + a.args + a.kwonlyargs})
        self.generic_visit(node)
        self.params.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node):
        f = node.func
        draw = (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in DRAWS.get(f.value.id, ())) \
            or (isinstance(f, ast.Name) and f.id in BARE)
        if draw and len(node.args) > 1:
            self.sites.append((node.lineno, ast.unparse(node.args[1]), self.problem(node.args[1])))
        self.generic_visit(node)

    def problem(self, arg) -> str | None:
        """Why ``arg`` is not a registered constant (or a template of one filled in, or the
        enclosing function's parameter passing a name through)."""
        if isinstance(arg, ast.Constant) or isinstance(arg, ast.JoinedStr) or isinstance(arg, ast.BinOp):
            return "a stream name spelled as a literal; valid: its constant in pipeline/streams.py"
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "streams":
            return None if _registered(getattr(streams, arg.attr, None)) else f"streams.{arg.attr} is not a registered name"
        if isinstance(arg, ast.Name):
            if arg.id in self.imported:
                return None if _registered(self.imported[arg.id]) else f"{arg.id} is not a registered name"
            return None if arg.id in self.params[-1] else f"{arg.id} is neither a registered constant nor a parameter"
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format":
            return self.problem(arg.func.value)
        if isinstance(arg, ast.IfExp):
            return self.problem(arg.body) or self.problem(arg.orelse)
        return f"{type(arg).__name__}: not a registered constant"


def _sites():
    out = []
    for path in sorted(PIPELINE.rglob("*.py")):
        if path in REGISTERING:
            continue
        tree = ast.parse(path.read_text(), str(path))
        visitor = DrawSites(_imported_constants(tree, _module_name(path)))
        visitor.visit(tree)
        out += [(path.relative_to(REPO), *site) for site in visitor.sites]
    return out


def test_every_draw_names_its_stream_by_a_registered_constant():
    sites = _sites()
    assert len(sites) > 40, "the walk found too few draws to be looking at the right calls"
    problems = [f"{path}:{line}: {text}: {why}" for path, line, text, why in sites if why]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source", [
    "seeds.stream(seed, 'world/genome')",
    "seeds.block_key(seed, f'mri/visit{v}', b)",
    "blocks.normal(world, 'population' + suffix)",
    "seeds.stream(seed, streams.NOT_A_STREAM)",
    "seeds.stream(seed, streams.GENOME if x else 'world/roles')",
    "seeds.seed_sequence(seed, local_name)",
])
def test_the_walk_catches_a_literal_or_unregistered_name(source):
    visitor = DrawSites({})
    visitor.visit(ast.parse(f"def f(seed, world, b, x, v, suffix):\n    {source}\n"))
    assert [why for *_, why in visitor.sites if why], source


def test_the_walk_accepts_constants_templates_and_pass_through():
    visitor = DrawSites({"POCKET": streams.REGISTRY["screening/pocket/{pocket}"].name})
    visitor.visit(ast.parse("def f(seed, world, name, b):\n"
                            "    seeds.stream(seed, streams.GENOME)\n"
                            "    blocks.normal(world, streams.MORPHOLOGY.format(trait='edv'))\n"
                            "    seeds.stream(seed, POCKET.format(pocket='target'))\n"
                            "    seeds.stream(seed, name, b)\n"))
    assert len(visitor.sites) == 4 and not [why for *_, why in visitor.sites if why]


def _registrations() -> list[tuple[str, str, str]]:
    """(module file, constant, name) of every register() call in the registering modules."""
    out = []
    for path in REGISTERING:
        for node in ast.parse(path.read_text(), str(path)).body:
            call = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) == "register"):
                continue
            assert isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name), \
                f"{path.name}:{node.lineno}: a registration not bound to a constant"
            assert isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str), \
                f"{path.name}:{node.lineno}: a registered name must be written out, once, here"
            out.append((str(path.relative_to(REPO)), node.targets[0].id, call.args[0].value))
    return out


def test_registered_names_and_constants_are_unique():
    regs = _registrations()
    names = [name for *_, name in regs]
    assert len(regs) >= 60 and "screening/route" in names and "world/genome" in names
    assert len(set(names)) == len(names), sorted({n for n in names if names.count(n) > 1})
    for module in {m for m, *_ in regs}:
        constants = [c for m, c, _ in regs if m == module]
        assert len(set(constants)) == len(constants), f"{module}: a constant bound twice"
        assert all(c.isupper() for c in constants), f"{module}: constants are upper case"
    # each registered project stream is one of these registrations (a test kind registers its own elsewhere)
    project = {s.name for s in streams.REGISTRY.values() if s.world_kind in ("biobank", "screening")}
    assert project == set(names)


def test_a_second_registration_of_a_name_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        streams.register("world/genome", "again")
