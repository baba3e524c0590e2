"""scripts/bench.py runs at tiny scale and emits its stable table and JSON (no timing assertions)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_tiny_emits_table_and_json(tmp_path):
    js = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "scripts/bench.py", "--scale", "tiny", "--release", "noimaging", "--json", str(js)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for stage in ("sample", "population", "genotypes", "genotype Zarr", "VCF", "molecules", "disease and clinical tables",
                  "MRI render", "MRI write", "baseline phenotype", "sealed", "manifest", "total (build wall)"):
        assert stage in out, stage
    assert "peak RSS" in out and "build / floor" in out
    doc = json.loads(js.read_text())
    assert doc["scale"] == "tiny" and doc["bytes_written"] > 0 and doc["floor_s"] > 0
    assert [r["stage"] for r in doc["stages"]][:3] == ["sample", "population", "genotypes"]
    # Peak RSS per client stage (stages shorter than the 0.1 s sampling interval may be absent).
    peaks = doc["peak_rss_by_client_stage"]
    assert peaks and set(peaks) <= set(doc["client_stages"])
    assert all(0 < p["client_rss_bytes"] <= p["peak_rss_bytes"] <= doc["peak_rss_bytes"] for p in peaks.values())
    assert "peak RSS by client stage" in out


def test_task_graph_replay_list_scheduler():
    """pipeline.graph.taskrecord: a recorded graph replayed on W workers (no timing)."""
    from pipeline.graph.taskrecord import critical_path, replay

    # client 1 s, four 2-s tasks, a gather of all, client 1 s
    graph = {"tasks": [{"name": "t", "duration": 2.0, "cpu": 2.0}] * 4,
             "steps": [("client", 1.0)] + [("submit", i) for i in range(4)] + [("gather", [0, 1, 2, 3], 0.0), ("client", 1.0)]}
    assert replay(graph, 1)["wall"] == 10.0
    assert replay(graph, 2)["wall"] == 6.0
    assert replay(graph, 4)["wall"] == replay(graph, 128)["wall"] == 4.0
    # two cores shared by two workers and a computing client: as dedicated once the client waits
    assert abs(replay(graph, 2, cores=2)["wall"] - 6.0) < 1e-9
    cp = critical_path(graph)
    assert cp["length"] == 4.0 and cp["largest_task"] == {"name": "t", "seconds": 2.0}
