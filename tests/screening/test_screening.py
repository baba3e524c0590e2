"""Screening worlds (kind: screening): build, determinism, oracle and scorer rules,
chemistry and geometry, pose sensitivity, the leak audit, kernels against twins,
and one reference episode per strategy, all at tiny scale (10,000 conformations)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline import config
from pipeline.build import build
from pipeline.screening.config import SHARD_ROWS

# The behaviour tests' world keeps a small hidden share, so that a learner's edge over random
# labelling is many standard errors wide even with only 100 top-K molecules.
TINY = ["world=screening-01", "scale=tiny", "cluster=sync", "world.score.hidden_share=0.1"]


def _load(overrides, out):
    return config.load([*overrides, f"out={out}"])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("screening")
    resolved = _load(TINY, out)
    summary = build(resolved, progress=False)
    assert summary["conformations"] == 10_000
    return out / "screening-01"


def _manifest_hashes(world_dir: Path) -> dict:
    out = {}
    for bundle in ("release", "sealed"):
        doc = json.loads((world_dir / bundle / "MANIFEST.json").read_text())
        out.update({f"{bundle}/{f['path']}": f["sha256"] for f in doc["files"]})
        out[f"{bundle}/MANIFEST.json"] = json.dumps(doc, sort_keys=True)
    return out


# ----------------------------------------------------------------------------- config


def test_compose_and_sizes():
    r = config.load(["world=screening-02", "scale=small"])
    assert r.kind == "screening" and r.n == 100_000
    assert r.sizes == {"conformations": 100_000, "budget": 10_000, "top_k": 100, "submission_size": 300, "max_submissions": 3}
    paper = config.load(["world=screening-03", "scale=paper"]).sizes
    assert (paper["budget"], paper["top_k"], paper["submission_size"]) == (100_000, 1000, 3000)


def test_the_build_commands_machine_checks_take_a_screening_world(tmp_path):
    """``python -m pipeline.build`` runs pipeline.preflight before any compute: the screening kind's
    own size model (pipeline.kinds: estimate) is used, not the biobank world's."""
    from pipeline import preflight

    est = preflight.check(config.load(["world=screening-01", "scale=paper", f"out={tmp_path}"]))
    assert est.output == 1_000_000 * 1578


def test_each_screening_stream_is_registered_and_used():
    """Registered with pipeline.streams under the screening kind, and drawn by its constant."""
    from pipeline import streams
    from pipeline.screening import streams as sstreams

    mine = {s.name for s in streams.REGISTRY.values() if s.world_kind == "screening"}
    constants = {k for k, v in vars(sstreams).items() if isinstance(v, str) and v in streams.REGISTRY}
    assert mine == {getattr(sstreams, k) for k in constants} and len(mine) == 7
    source = "".join(p.read_text() for p in (Path(sstreams.__file__).parent).glob("*.py") if p.name != "streams.py")
    assert [k for k in constants if k not in source] == []


def test_every_screening_field_has_a_rule():
    from pipeline.screening.config import FIELD_RULES, ScreeningWorldConfig

    assert set(config.schema_leaves(config.RootConfig, world=ScreeningWorldConfig)) == set(FIELD_RULES)
    assert all(isinstance(r, config.Rule) for r in FIELD_RULES.values())


@pytest.mark.parametrize("override, message", [
    ("scale=biobank", "scale: 'biobank' has no screening size; valid: tiny, small, paper"),
    ("world.conformations=10", "world.conformations: 10 is invalid; valid: integer in [1000, 5,000,000] or null"),
    ("world.score.hidden_share=1.0", "world.score.hidden_share: 1.0 is invalid; valid: number in [0, 1)"),
    ("world.pocket.semi_axes=[1,2]", "world.pocket.semi_axes: [1.0, 2.0] is invalid; valid: three lengths in [2, 30]"),
    ("world.docking.starts=0", "world.docking.starts: 0 is invalid; valid: integer in [1, 10,000]"),
    ("world.submission_fraction=0.001", "world.submission_fraction: 300 ids per submission with top-K 1000"),
    ("world.archetype=dcm", "world.archetype: no such field; valid: id, kind, seed, conformations"),
    ("+world.extra=1", "world.extra: no such field; valid: id, kind, seed, conformations"),
    ("world.docking.nope=1", "world.docking.nope: no such field; valid: starts, steps, spread"),
])
def test_bad_screening_config_names_the_field(override, message):
    overrides = ["world=screening-01", override] + (["world.top_fraction=0.1"] if "submission" in override else [])
    with pytest.raises(config.ConfigError) as err:
        config.load(overrides)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_biobank_worlds_still_typed():
    with pytest.raises(config.ConfigError, match="world.n_drivers"):
        config.load(["world=standard-01", "world.n_drivers=abc"])


# ----------------------------------------------------------------------------- build


def test_tiny_build_release_and_sealed(world):
    release, sealed = world / "release", world / "sealed"
    assert sorted(p.name for p in release.iterdir()) == ["MANIFEST.json", "README.md", "library.parquet", "sdf"]
    assert sorted(p.name for p in (release / "sdf").iterdir()) == ["library_0000.sdf.gz", "library_0001.sdf.gz"]
    lib = pq.read_table(release / "library.parquet")
    assert lib.column_names == ["id", "smiles", "elements", "coordinates"] and lib.num_rows == 10_000
    assert len(set(lib.column("smiles").to_pylist())) == 10_000  # distinct molecules by construction
    assert {"scores.parquet", "topk.json", "pockets.json", "oracle.json", "world.yaml", "MANIFEST.json"} <= {p.name for p in sealed.iterdir()}
    top = json.loads((sealed / "topk.json").read_text())
    assert len(top["ids"]) == 100
    from pipeline.manifest import verify
    from pipeline.outputs import Output

    out = Output(str(world.parent), "screening-01")
    assert verify(out, out.release) == [] and verify(out, out.sealed) == []


def test_resume_reuses_finished_shards(tmp_path):
    from pipeline.screening import build as sbuild, stages

    over = ["world=screening-03", "world.conformations=6000", "cluster=sync"]
    fresh = _load(over, tmp_path / "fresh")
    build(fresh, progress=False)
    resolved = _load(over, tmp_path / "resumed")
    calls = []
    crashed = []
    real = stages.shard_task

    def crash_after_first(ctx, shard, *args):
        result = real(ctx, shard, *args)
        calls.append((shard, result["reused"]))
        if not crashed:  # the client dies once, after the first shard finished
            crashed.append(shard)
            raise RuntimeError("killed")
        return result

    def crash_then_rebuild(res, between=lambda: None):
        """Build ``res`` until the client dies after the first shard, run ``between``, build again."""
        crashed.clear()
        sbuild.shard_task = crash_after_first
        try:
            with pytest.raises(RuntimeError):
                build(res, progress=False)
            between()
            calls.clear()
            build(res, progress=False)
        finally:
            sbuild.shard_task = real

    crash_then_rebuild(resolved)
    assert calls == [(0, True), (1, False)]
    assert _manifest_hashes(tmp_path / "fresh" / "screening-03") == _manifest_hashes(tmp_path / "resumed" / "screening-03")

    # a shard finished by code that wrote another shard format (its .done record says so, or says
    # nothing) is rebuilt, not reused: its part or SDF shard may not be what this code writes
    stale = _load(over, tmp_path / "stale")

    def drop_format():
        done = tmp_path / "stale" / "screening-03" / ".build" / "shard-00000.done"
        record = json.loads(done.read_text())
        assert record.pop("format") == stages.SHARD_FORMAT
        done.write_text(json.dumps(record))

    crash_then_rebuild(stale, drop_format)
    assert calls == [(0, False), (1, False)]
    assert _manifest_hashes(tmp_path / "fresh" / "screening-03") == _manifest_hashes(tmp_path / "stale" / "screening-03")


# ----------------------------------------------------------------------------- chemistry and geometry


def test_products_are_the_rdkit_reaction_products():
    """A spliced product equals what the reaction rules give on the building blocks themselves."""
    from rdkit import Chem

    from pipeline.screening import fragments, library

    table = fragments.load_table()
    plan = library.plan(0xABCDEF0123456789ABCDEF0123456789, 400, table)
    sp = library.splice(table, plan.synthon)
    checked = 0
    for m in range(len(plan.route)):
        route = fragments.ROUTES[plan.route[m]]
        blocks = [Chem.MolFromSmiles(table.blocks[s]) for s in plan.synthon[m] if s >= 0]
        rules = [fragments.RULES[fragments.RULE_INDEX[r]] for r in route.rules]
        if len(blocks) == 2:
            product = fragments._react(rules[0], blocks[0], blocks[1])
        else:
            inner = fragments._react(rules[1], blocks[1], blocks[2])
            product = fragments._react(rules[0], blocks[0], inner)
        assert product is not None
        want = Chem.MolToSmiles(product, isomericSmiles=False)
        assert Chem.MolToSmiles(Chem.MolFromSmiles(sp.smiles[m]), isomericSmiles=False) == want, (route.name, sp.smiles[m])
        checked += 1
    assert checked == 400


def _splice_one_by_one(table, synthon):
    """The obvious twin of ``library.splice``: each molecule's written order built by inserting
    the child's atoms at its parent's insertion point, innermost first."""
    from pipeline.screening.library import _join, _texts

    texts, ao, bo = _texts(table.digest, table), table.atom_offset, table.bond_offset
    smiles, assembly_index, src, bonds, atom_offset, bond_offset = [], [], [], [], [0], [0]
    for row in synthon:
        slots = [int(s) for s in row if s >= 0]
        starts = np.cumsum([0] + [int(ao[s + 1] - ao[s]) for s in slots])
        order = list(range(starts[-2], starts[-1]))
        text = texts[len(slots) - 1][slots[-1]]
        for k in range(len(slots) - 2, -1, -1):
            own, ins = list(range(starts[k], starts[k + 1])), int(table.insert_at[slots[k]])
            order = own[:ins] + order + own[ins:]
            text = _join(texts[k][slots[k]], text)
        smiles.append(text)
        written_of = {a: i for i, a in enumerate(order)}
        for k, s in enumerate(slots):
            for i, j, o in table.bonds[bo[s]:bo[s + 1]]:
                bonds.append([written_of[starts[k] + i], written_of[starts[k] + j], o])
            if k > 0:
                bonds.append([written_of[starts[k - 1] + table.down_attach[slots[k - 1]]],
                              written_of[starts[k] + table.up_attach[s]], 1])
        synthon_atom = [a for s in slots for a in range(ao[s], ao[s + 1])]
        assembly_index += [atom_offset[-1] + a for a in order]
        src += [synthon_atom[a] for a in order]
        atom_offset.append(atom_offset[-1] + len(order))
        bond_offset.append(len(bonds))
    return smiles, assembly_index, src, bonds, atom_offset, bond_offset


def test_splice_matches_the_one_by_one_twin():
    """The whole-array splice (closed-form written positions) against the per-molecule insertion."""
    from pipeline.screening import fragments, library

    table = fragments.load_table()
    plan = library.plan(2**127 + 17, 2000, table)
    assert {int((row >= 0).sum()) for row in plan.synthon} == {2, 3}
    sp = library.splice(table, plan.synthon)
    smiles, assembly_index, src, bonds, atom_offset, bond_offset = _splice_one_by_one(table, plan.synthon)
    assert sp.smiles == smiles
    assert sp.assembly_index.tolist() == assembly_index and sp.atom_offset.tolist() == atom_offset
    assert sp.bonds.tolist() == bonds and sp.bond_offset.tolist() == bond_offset
    for field in ("z", "charge", "bits", "logp", "weight", "donor", "acceptor"):
        np.testing.assert_array_equal(getattr(sp, field), getattr(table, field)[src], err_msg=field)
    assert sp.bonds.dtype == np.int64 and sp.assembly_index.dtype == np.int64


def test_committed_fragment_table_reembeds():
    from pipeline.screening import fragments

    table = fragments.load_table()
    for s in (0, 700, table.n - 1):
        spec = fragments.prepare_synthon(table.roles[s], table.blocks[s], table.variants[s])
        rec = fragments.synthon_record(spec, s)
        lo, hi = table.atom_offset[s], table.atom_offset[s + 1]
        assert list(rec["z"]) == list(table.z[lo:hi]) and rec["text"] == table.texts[s]
        c0 = table.conf_atom_offset[table.conf_offset[s]]
        np.testing.assert_allclose(rec["coords"][0], table.coords[c0:c0 + (hi - lo)], atol=1e-4)


def test_geometry_and_chemistry_on_a_sample(world):
    from pipeline.screening import validate

    lib = pq.read_table(world / "release" / "library.parquet", columns=["id", "smiles"])
    smiles = dict(zip(lib.column("id").to_pylist(), lib.column("smiles").to_pylist()))
    geo = validate.geometry(world / "release" / "sdf" / "library_0001.sdf.gz", smiles, limit=150)
    assert geo["read"] == geo["sanitised"] == geo["same_as_smiles"] == 150
    assert geo["bond_dev_max"] <= validate.BOND_TOLERANCE
    assert geo["angle_dev_p99"] <= validate.ANGLE_TOLERANCE_99
    assert geo["clashing_molecules"] == 0
    if geo["openbabel_read"] is not None:
        assert geo["openbabel_read"] == SHARD_ROWS
    chem = validate.chemistry(list(smiles.values())[:500])
    assert chem["unparsed"] == 0 and chem["lipinski_fraction"] >= 0.8


def test_parquet_atoms_follow_the_smiles(world):
    from rdkit import Chem

    lib = pq.read_table(world / "release" / "library.parquet").slice(0, 200).to_pylist()
    for row in lib:
        mol = Chem.MolFromSmiles(row["smiles"])
        assert [a.GetSymbol() for a in mol.GetAtoms()] == row["elements"]
        assert len(row["coordinates"]) == mol.GetNumAtoms()


# ----------------------------------------------------------------------------- the score


def test_pose_sensitivity_and_report(world):
    from pipeline.screening import validate

    scores = pq.read_table(world / "sealed" / "scores.parquet").to_pandas()
    rows = np.sort(np.random.default_rng(1).choice(len(scores), 600, replace=False))
    pose = validate.pose_sensitivity(world, rows, scores)
    assert pose["recomputed_vs_sealed"] > 0.999  # the report recomputes the sealed score from the release
    assert pose["spearman_structural"] < validate.POSE_SPEARMAN_MAX
    assert pose["spearman_score"] < 0.95  # the whole score moves too, beyond its hidden part
    assert pose["mean_target_moved"] < pose["mean_target_released"]  # docked poses fit the pocket better
    figures = validate.score_figures(scores, 100, 0.1)
    assert abs(figures["hidden_share_realised"] - 0.1) < 0.03
    assert figures["enrichment_top1pct"]["target"] > 5


def test_leak_audit_passes(world):
    from pipeline.screening.audit import audit

    report = audit(world)
    assert report["ok"], [c for c in report["checks"] if not c["ok"]]


# ----------------------------------------------------------------------------- oracle and scorer


def test_oracle_rules_and_ledger(world, tmp_path):
    from pipeline.screening.oracle import LabelOracle
    from pipeline.screening.score import score_episode

    ledger = tmp_path / "ledger.jsonl"
    o = LabelOracle(world / "sealed", ledger)
    ids = [f"C{i:06d}" for i in range(10_000)]
    top = json.loads((world / "sealed" / "topk.json").read_text())["ids"]
    assert o.request_labels(["C999999"], 1)["status"] == "refused"
    assert o.request_labels(ids[:10] + ["nope"], 1)["reason"].startswith("1 unknown id(s): nope")
    got = o.request_labels(ids[:600] + ids[:5], 1)
    assert got["status"] == "ok" and got["charged"] == 600 and got["remaining"] == 400
    again = o.request_labels(ids[:600], 2)  # repeats are free
    assert again["charged"] == 0 and again["repeats"] == 600 and len(again["labels"]) == 600
    past = o.request_labels(ids[600:1100], 2)
    assert past["status"] == "refused" and "400 of the 1,000-label budget remain" in past["reason"]
    assert o.remaining == 400
    assert o.submit(ids[:301], 3)["reason"].startswith("301 ids submitted; at most 300")
    assert "duplicate" in o.submit(ids[:5] + ids[:1], 3)["reason"]
    assert "unknown" in o.submit(["C12"], 3)["reason"]
    first = o.submit(top[:50] + ids[:10], 3)
    assert first["status"] == "ok" and first["overlap"] >= 50
    assert o.submit(top, 4)["score"] == 100.0
    assert o.submit(ids[:300], 4)["status"] == "ok"
    fourth = o.submit(top, 5)
    assert fourth["status"] == "refused" and "all 3 submissions are used" in fourth["reason"]
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [r["status"] for r in rows if r.get("action") == "submit"] == ["refused"] * 3 + ["ok"] * 3 + ["refused"]
    result = score_episode(world / "sealed", tmp_path, str(ledger))
    assert result["score"] == 100.0 and result["best_submission"] == 2 and result["details"]["labels_used"] == 600
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "screening-score.schema.json").read_text())
    jsonschema.validate(result, schema)


def test_scorer_true_top_k_and_random_sets():
    from pipeline.screening.score import score_submissions

    n, k, size = 1_000_000, 1000, 3000
    rng = np.random.default_rng(7)
    top = [f"C{i:06d}" for i in rng.choice(n, k, replace=False)]
    assert score_submissions([top], top, n, size, 3)["score"] == 100.0
    scores = [score_submissions([[f"C{i:06d}" for i in rng.choice(n, size, replace=False)]], top, n, size, 3)["score"]
              for _ in range(40)]
    # each overlap is hypergeometric with mean 3 (0.3 %) and SD ~1.73 (0.173 %): the mean of 40 within 4 SE
    assert abs(np.mean(scores) - 0.3) < 4 * 0.173 / np.sqrt(40)
    fourth = score_submissions([top[:10], top[:20], top[:30], top], top, n, size, 3)
    assert fourth["score"] == 3.0 and fourth["refused"][0]["reason"].startswith("past the 3-submission limit")


# ----------------------------------------------------------------------------- kernels against twins


def test_pocket_dock_and_repose_kernels_match_twins():
    from kernels.reference import screening as twin
    from kernels.screening import dock, pocket_scores, repose
    from pipeline.screening.config import PocketConfig
    from pipeline.screening.pocket import kernel_args, sample_pocket

    rng = np.random.default_rng(3)
    offsets = np.array([0, 7, 15, 26])
    xyz = rng.normal(0, 3, (26, 3))
    bits = rng.integers(0, 64, 26).astype(np.uint8)
    pocket = kernel_args(sample_pocket(2**127 + 5, "target", PocketConfig()))
    out = np.empty(3)
    pocket_scores(xyz, offsets, bits, *pocket, out)
    np.testing.assert_allclose(out, twin.pocket_scores(xyz, offsets, bits, *pocket), rtol=1e-12, atol=1e-12)
    rows = np.array([5, 77, 1001], dtype=np.int64)
    posed, best = np.empty_like(xyz), np.empty(3)
    dock(np.uint64(99), rows, xyz, offsets, bits, 6, 5, 1.0, 20.0, 0.5, *pocket, posed, best)
    t_posed, t_best = twin.dock(99, rows, xyz, offsets, bits, 6, 5, 1.0, 20.0, 0.5, *pocket)
    np.testing.assert_allclose(posed, t_posed, atol=1e-9)
    np.testing.assert_allclose(best, t_best, atol=1e-9)
    moved = np.empty_like(xyz)
    repose(np.uint64(7), rows, xyz, offsets, 2.0, moved)
    np.testing.assert_allclose(moved, twin.repose(7, rows, xyz, offsets, 2.0), atol=1e-12)
    # a rigid motion keeps every internal distance
    np.testing.assert_allclose(np.linalg.norm(moved[0] - moved[5]), np.linalg.norm(xyz[0] - xyz[5]))


def test_excluded_volume_grid_gives_the_all_pairs_sum_bit_for_bit():
    """The grid finds every overlapping (sphere, atom) pair and adds them in the all-pairs
    order (sphere, then atom): the same float as the plain double loop, for poses inside,
    across and outside the wall, atoms on cell boundaries and non-finite atoms included."""
    import math

    from kernels.screening_grid import excluded_grid, excluded_overlap, max_cell
    from pipeline.screening.config import PocketConfig
    from pipeline.screening.pocket import kernel_args, sample_pocket

    def all_pairs(xyz, excl, radius):
        overlap = 0.0
        for e in range(len(excl)):
            r = float(radius[e])
            for a in range(len(xyz)):
                dx, dy, dz = (float(xyz[a, k]) - float(excl[e, k]) for k in range(3))
                d2 = dx * dx + dy * dy + dz * dz
                if d2 < r * r:
                    g = r - math.sqrt(d2)
                    overlap += g * g
        return overlap

    rng = np.random.default_rng(11)
    pocket = kernel_args(sample_pocket(2**127 + 9, "target", PocketConfig()))
    excl, radius = pocket[4], pocket[5]
    grid = excluded_grid(excl, radius)
    n_atoms = 30
    hits = np.empty(n_atoms * max_cell(grid[3]), dtype=np.int64), np.empty(n_atoms * max_cell(grid[3]))
    touched = 0
    for trial in range(400):
        xyz = rng.normal(0, (1.0, 4.0, 8.0, 14.0)[trial % 4], (n_atoms, 3))
        if trial % 5 == 0:  # atoms exactly on cell boundaries and exactly at sphere centres
            xyz[:3] = grid[0] + np.round((xyz[:3] - grid[0]) / grid[1] ** -1) * grid[1] ** -1
            xyz[3] = excl[trial % len(excl)]
        if trial % 7 == 0:
            xyz[4] = np.nan
        got = excluded_overlap(xyz, 0, n_atoms, excl, radius, *grid, *hits)
        want = all_pairs(xyz, excl, radius)
        assert np.float64(got).tobytes() == np.float64(want).tobytes(), (trial, got, want)
        touched += want > 0
    assert touched > 100
    # an empty pocket wall overlaps nothing
    empty = excluded_grid(np.zeros((0, 3)), np.zeros(0))
    assert excluded_overlap(xyz, 0, n_atoms, np.zeros((0, 3)), np.zeros(0), *empty, *hits) == 0.0


def test_assembly_keeps_synthon_geometry():
    """Each synthon's atoms move rigidly, and the new bond has the probe product's length."""
    from pipeline.screening import fragments, library, stages
    from pipeline.screening.config import DockingConfig, PocketConfig
    from pipeline.screening.pocket import sample_pocket

    table = fragments.load_table()
    plan = library.plan(2**127 + 11, 300, table)
    d = DockingConfig()
    sp, posed, min_d = stages.poses(2**127 + 11, 0, plan.synthon, plan.route, table, sample_pocket(2**127, "target", PocketConfig()),
                                    {"starts": d.starts, "steps": d.steps, "spread": d.spread, "step_angle": d.step_angle,
                                     "step_shift": d.step_shift})
    for m in range(0, 300, 7):
        lo = sp.atom_offset[m]
        b = sp.bonds[sp.bond_offset[m]:sp.bond_offset[m + 1]]
        lengths = np.linalg.norm(posed[lo + b[:, 0]] - posed[lo + b[:, 1]], axis=1)
        assert lengths.min() > 1.0 and lengths.max() < 1.95
    assert np.mean(min_d >= 2.5) > 0.99


# ----------------------------------------------------------------------------- episodes


#: The learners' loop checked quickly by default (three rounds, 100 trees: 6 turns instead of 13);
#: their specification's ten rounds of 400 trees run under ``-m slow``.
QUICK = {"rounds": 3, "trees": 100}
#: The default run's four episodes in two lanes (pose_al alone; the others one after another),
#: started in background threads as soon as this module starts and played while its other tests
#: run: every turn of an episode is its own sandboxed process, so the lanes use the cores that
#: the module's mostly single-threaded tests leave idle.  Each episode is the same as run alone
#: (it only reads the shared world); each strategy's test waits for its own.
LANES = ((("pose_al", QUICK),), (("invariant_al", QUICK), ("random", {}), ("labels_only", {})))


@pytest.fixture(scope="module", autouse=True)
def lane_episodes(request, tmp_path_factory):
    """{strategy: Future of its episode's result}, for the lane strategies whose tests are selected
    (none selected: no world is built and nothing starts).  Joined when the module ends."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from pipeline.screening.agents import create_agent
    from pipeline.screening.episode import run_episode

    wanted = {item.callspec.params["strategy"] for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec") and item.callspec.params.get("in_lane")}
    if not wanted:
        yield {}
        return
    futures = {strategy: Future() for lane in LANES for strategy, _ in lane if strategy in wanted}
    try:
        world = request.getfixturevalue("world")
    except Exception as error:  # the tests that need the world report its failure; the others still run
        for future in futures.values():
            future.set_exception(error)
        yield futures
        return
    out = tmp_path_factory.mktemp("episodes")

    def play(lane):
        for strategy, options in lane:
            if strategy in futures:
                try:
                    futures[strategy].set_result(run_episode(world, create_agent(strategy, **options),
                                                             out=out / strategy, mode="unrestricted"))
                except Exception as error:  # raised again by that strategy's test
                    futures[strategy].set_exception(error)

    pool = ThreadPoolExecutor(len(LANES))
    for lane in LANES:
        pool.submit(play, lane)
    yield futures
    pool.shutdown(wait=True)


@pytest.mark.parametrize("strategy, options, in_lane", [
    ("random", {}, True), ("labels_only", {}, True), ("invariant_al", QUICK, True), ("pose_al", QUICK, True),
    pytest.param("invariant_al", {}, False, marks=pytest.mark.slow), pytest.param("pose_al", {}, False, marks=pytest.mark.slow),
])
def test_reference_episode(world, lane_episodes, tmp_path, strategy, options, in_lane):
    from pipeline.screening.agents import create_agent
    from pipeline.screening.episode import run_episode

    if in_lane:
        assert {s: o for lane in LANES for s, o in lane}[strategy] == options
        r = lane_episodes[strategy].result()
    else:
        r = run_episode(world, create_agent(strategy, **options), out=tmp_path / strategy, mode="unrestricted")
    assert r["episode"]["turns_used"] == {"random": 1, "labels_only": 2}.get(strategy, options.get("rounds", 10) + 3)
    used = {"random": 1, "labels_only": 1}.get(strategy, 3)
    assert len(r["submissions"]) == used, r["episode"]
    assert r["episode"]["exit_reason"] in ("finished", "submissions_used")
    assert r["episode"]["labels_used"] == (0 if strategy == "random" else 1000)
    # top-K 100 of 10,000: random expects 3 % (SD 1.7), labels only 10 % (SD 3)
    if strategy == "random":
        assert r["score"] <= 3 + 4 * 1.7
    elif strategy == "labels_only":
        assert 10 - 4 * 3 <= r["score"] <= 10 + 4 * 3
    else:  # a learner labels more of the top-K than random labelling would (its first submission)
        assert r["submissions"][0]["overlap"] >= 10 + 2 * 3
    assert json.loads((Path(r["episode"]["episode_dir"]) / "score.json").read_text())["score"] == r["score"]


def test_agent_cannot_read_the_sealed_bundle(world, tmp_path):
    from pipeline.agents.base import ScriptedAgent
    from pipeline.harness.core import Session, play

    target = world / "sealed" / "topk.json"

    class Peek(ScriptedAgent):
        def programs(self, info):
            return [f"print(open({str(target)!r}).read()[:40])\nfinish()\n"]

    session = Session(world, out=tmp_path / "peek", mode="unrestricted", isolation="auto")
    if not session.sandbox.isolated:
        session.finish()
        pytest.skip(f"not isolated here: {session.sandbox.reason}")
    play(session, Peek())
    transcript = json.loads((tmp_path / "peek" / "transcript.json").read_text())
    assert "top_k" not in transcript["turns"][0]["observation"]
    assert "No such file" in transcript["turns"][0]["observation"]


def test_score_and_episode_entry_points(world, tmp_path):
    from pipeline import episode as episode_cli, score as score_cli

    assert episode_cli.main([f"world_dir={world}", "agent=random", f"out={tmp_path / 'ep'}", "mode=unrestricted"]) == 0
    assert score_cli.main(["--sealed", str(world / "sealed"), "--work", str(tmp_path / "ep" / "work"),
                           "--ledger", str(tmp_path / "ep" / "ledger.jsonl")]) == 0
    with gzip.open(world / "release" / "sdf" / "library_0000.sdf.gz", "rt") as handle:
        assert handle.readline().strip() == "C000000"


def test_sdf_kernel_matches_twin():
    import gzip as gz
    import zlib

    from kernels.reference.sdf import format_sdf
    from pipeline.screening import fragments, library
    from pipeline.screening.writers import ELEMENTS, SDF_PROGRAM_LINE, sdf_bytes

    table = fragments.load_table()
    # 400 molecules: about 900 kB of text, so the deflate stream has several Huffman blocks
    plan = library.plan(2**127 + 3, 400, table)
    sp = library.splice(table, plan.synthon)
    rng = np.random.default_rng(0)
    xyz = np.round(rng.normal(0, 8, (int(sp.atom_offset[-1]), 3)), 4)
    xyz[0] = [-0.0, 0.0, -1234.5678]  # signed zero and a wide value format like Python's
    xyz[1] = [123456.25, -99999.9999, 9.9999]  # wider than the field
    charge = sp.charge.copy()
    charge[[3, 4, 9]] = [1, -1, 2]  # charge lines, including two on one molecule
    ids = [f"C{i:06d}" for i in range(400)]
    want = format_sdf(ids, SDF_PROGRAM_LINE, sp.z, charge, sp.atom_offset, xyz, sp.bond_offset, sp.bonds, ELEMENTS)
    blob = sdf_bytes(ids, sp.z, charge, sp.atom_offset, xyz, sp.bond_offset, sp.bonds)
    assert len(want) > 2 * 262144
    assert gz.decompress(blob).decode() == want
    # one plain gzip member, zero timestamp; zlib's own inflater agrees, and the stream is compressed
    assert blob[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    assert zlib.decompress(blob, 31).decode() == want
    assert len(blob) < len(want) / 3
    # no molecules: an empty but valid member
    empty = sdf_bytes([], sp.z[:0], charge[:0], np.zeros(1, dtype=np.int64), xyz[:0], np.zeros(1, dtype=np.int64),
                      sp.bonds[:0])
    assert gz.decompress(empty) == b""


def test_library_concatenation_is_pyarrows_file_byte_for_byte():
    """``concat_parquet`` (the parts' bytes and a merged footer) writes exactly the file that
    ``pq.ParquetWriter`` writes from the parts' tables, one row group each (17 parts: the
    footer's row-group list takes Thrift's long list header), and pyarrow reads it back."""
    import io

    from pipeline.screening import fragments, library
    from pipeline.screening.writers import concat_parquet, parquet_bytes, release_table

    table = fragments.load_table()
    plan = library.plan(2**127 + 4, 17 * 23, table)
    rng = np.random.default_rng(2)
    parts, tables = [], []
    for k in range(17):
        lo, hi = k * 23, k * 23 + 23 - (k % 3)  # parts of different sizes
        sp = library.splice(table, plan.synthon[lo:hi])
        xyz = np.round(rng.normal(0, 6, (int(sp.atom_offset[-1]), 3)), 4)
        t = release_table([f"C{i:06d}" for i in range(lo, hi)], sp.smiles, sp.z, sp.atom_offset, xyz)
        parts.append(parquet_bytes(t))
        tables.append(t)
    want = io.BytesIO()
    writer = None
    for data in parts:
        part = pq.read_table(io.BytesIO(data))
        if writer is None:
            writer = pq.ParquetWriter(want, part.schema, compression="zstd", compression_level=3)
        writer.write_table(part, row_group_size=max(1, part.num_rows))
    writer.close()
    got = bytearray()
    concat_parquet(iter(parts), got.extend)
    assert bytes(got) == want.getvalue()
    back = pq.read_table(io.BytesIO(bytes(got)))
    assert back.num_rows == sum(t.num_rows for t in tables)
    assert back.column("id").to_pylist() == [i for t in tables for i in t.column("id").to_pylist()]
    assert pq.ParquetFile(io.BytesIO(bytes(got))).metadata.num_row_groups == 17


def test_panel_resolves_screening_worlds():
    from pipeline import panel

    worlds = panel.resolve_panel("screening-v1", ["scale=tiny"])
    assert [(w.kind, w.cfg.world.id, w.n) for w in worlds] == [
        ("screening", f"screening-0{i}", 10_000) for i in (1, 2, 3)]
    assert len({w.seed for w in worlds}) == 3


def test_time_limited_mode_stops_at_the_clock(world, tmp_path):
    from pipeline.harness import run_episode
    from pipeline.screening.agents import create_agent
    from pipeline.screening.episode import MODES

    assert MODES["limited"]["turns"] * MODES["limited"]["timeout"] == 10 * 3600  # the turns fit the source's 10 hours
    result = run_episode(world, create_agent("labels_only"), out=tmp_path / "clock", mode="limited", clock_hours=1e-9)
    assert result["episode"]["exit_reason"] == "time_limit" and result["score"] == 0.0
    assert json.loads((tmp_path / "clock" / "transcript.json").read_text())["clock_s"] == pytest.approx(3.6e-6)


def test_calibration_resumes_only_finished_episodes_of_the_current_build(tmp_path):
    import os

    from pipeline.screening import calibrate

    manifest = tmp_path / "MANIFEST.json"
    manifest.write_text("{}")
    ep = tmp_path / "ep"
    ep.mkdir()
    result = {"score": 40.0, "submissions": [], "isolated": True,
              "episode": {"world_id": "screening-01", "agent": "pose_al", "exit_reason": "submissions_used", "wall_s": 9.0}}
    (ep / "score.json").write_text(json.dumps(result))
    os.utime(manifest, (1_000, 1_000))
    assert calibrate._finished(ep, "screening-01", "pose_al", manifest)["score"] == 40.0
    assert calibrate._finished(ep, "screening-02", "pose_al", manifest) is None  # another world
    assert calibrate._finished(ep, "screening-01", "random", manifest) is None  # another strategy
    os.utime(manifest)  # the world was rebuilt after the episode
    os.utime(ep / "score.json", (1_000, 1_000))
    assert calibrate._finished(ep, "screening-01", "pose_al", manifest) is None
    os.utime(ep / "score.json")
    result["episode"]["exit_reason"] = "runner_crash"
    (ep / "score.json").write_text(json.dumps(result))
    assert calibrate._finished(ep, "screening-01", "pose_al", manifest) is None
    (ep / "score.json").write_text("{not json")
    assert calibrate._finished(ep, "screening-01", "pose_al", manifest) is None
    assert calibrate.main(["jobs=0"]) == 2 and calibrate.main(["reuse=maybe"]) == 2 and calibrate.main(["speed=1"]) == 2


def test_calibration_table_bands_and_figure(tmp_path):
    from pipeline.screening import calibrate

    worlds = ["screening-01", "screening-02", "screening-03"]
    scores = {"random": [0.2, 0.4, 0.3], "labels_only": [9.0, 11.0, 10.0], "invariant_al": [30.0, 35.0, 40.0],
              "pose_al": [40.0, 46.0, 43.0]}
    rows = {n: {w: {"score": v} for w, v in zip(worlds, vals)} for n, vals in scores.items()}
    means = {n: float(np.mean(v)) for n, v in scores.items()}
    checks = {c["strategy"]: c for c in calibrate.band_checks(means)}
    assert all(checks[n]["ok"] for n in ("random", "labels_only", "invariant_al"))
    assert not checks["pose_al"]["ok"] and checks["pose_al"]["band"] == [45.0, 80.0]  # 43 < 35 + 10
    table = {"panel": "screening-v1", "scale": "paper", "worlds": worlds, "rows": rows, "mean": means,
             "se": {n: float(np.std(v, ddof=1) / np.sqrt(3)) for n, v in scores.items()}, "bands": list(checks.values())}
    calibrate.figure(table, tmp_path / "calibration.png")
    assert (tmp_path / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
