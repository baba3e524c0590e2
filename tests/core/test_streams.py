"""The registry of named random streams (pipeline/streams.py): one registration per
name, no two streams able to produce one name, every stream used, and no draw under
a name the registry does not list."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from pipeline import seeds, streams

REPO = Path(__file__).resolve().parents[2]
SEED = int("0x" + "ab" * 16, 16)
#: The calls that take a stream name: (function, index of the name argument).
#: The biobank kind's streams (another kind, such as the tests' toy kind, registers its own).
BIOBANK = [s for s in streams.REGISTRY.values() if s.world_kind == "biobank"]
DRAWS = {"stream": 1, "seed_sequence": 1, "block_key": 1, "normal": 1, "uniform": 1, "exponential": 1, "per_block": 1}


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted((REPO / "pipeline").rglob("*.py"))
            if p.name != "streams.py"}


def _example(stream: streams.Stream) -> str:
    """A concrete name the stream stands for (each field its first choice, or a made-up segment)."""
    return re.sub(r"\{(\w+)\}", lambda m: (stream.choices.get(m.group(1)) or ("zz9",))[0], stream.name)


def test_each_name_is_registered_once():
    source = (REPO / "pipeline" / "streams.py").read_text()
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "register"]
    assert len(calls) == len(BIOBANK), "a register() call did not add its stream"
    with pytest.raises(ValueError, match="registered twice"):
        streams.register("world/genome", "again")
    assert all(s.doc.strip() for s in streams.REGISTRY.values())


@pytest.mark.parametrize("stream", streams.REGISTRY.values(), ids=lambda s: s.name)
def test_no_two_streams_can_produce_one_name(stream):
    """Two streams under one name would draw the same numbers."""
    name = _example(stream)
    matches = [s.name for s in streams.REGISTRY.values() if s.name == name or ("{" in s.name and s.pattern.fullmatch(name))]
    assert matches == [stream.name], f"{name!r} is produced by {matches}"


def test_each_stream_is_used():
    """By its constant (``streams.X``; no draw spells a name as a literal:
    tests/core/test_stream_names.py)."""
    constants = {v: k for k, v in vars(streams).items() if isinstance(v, str) and v in streams.REGISTRY}
    attributes = set()
    for tree in _sources().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "streams":
                attributes.add(node.attr)
    unused = [s.name for s in BIOBANK if constants.get(s.name) not in attributes]
    assert not unused, f"registered but never drawn: {unused}"


def test_every_literal_name_at_a_draw_is_registered():
    """Static: each draw whose name is a literal (or an f-string, fields as any segment)."""
    problems = []
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func not in DRAWS or len(node.args) <= DRAWS[func]:
                continue
            arg = node.args[DRAWS[func]]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = arg.value
            elif isinstance(arg, ast.JoinedStr):
                name = "".join(v.value if isinstance(v, ast.Constant) else "zz9" for v in arg.values)
            else:
                continue
            try:
                streams.check(name)
            except streams.UnregisteredStream:
                problems.append(f"{path.relative_to(REPO)}:{node.lineno} draws from unregistered {name!r}")
    assert not problems, "\n".join(problems)


def test_an_unregistered_name_is_refused_and_a_registered_one_unchanged():
    with pytest.raises(streams.UnregisteredStream, match="'world/nope' is not registered"):
        seeds.stream(SEED, "world/nope")
    with pytest.raises(streams.UnregisteredStream):
        seeds.block_key(SEED, "oracle/shadow", 3)
    with pytest.raises(streams.UnregisteredStream):
        seeds.stream(SEED, streams.MRI.format(visit=3))
    # The registry is a check only: the numbers are those of the name's hash, as before.
    expected = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        entropy=seeds._words(SEED), spawn_key=(seeds._name_id("morphology/edv"), 4)))).standard_normal(3)
    assert np.array_equal(seeds.stream(SEED, streams.MORPHOLOGY.format(trait="edv"), 4).standard_normal(3), expected)
