"""scripts/validity_panel.py end to end at tiny scale: the serial run and ``--analysis-jobs 2``
write the same reports, a rerun resumes from the kept analyses without building, and the
worlds are removed once analysed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / "validity_panel.py"), "--scale", "tiny", "--out", str(out),
           "--only", "standard-01,null-01", "--replicates", "0", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def _report(path: Path):
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ("seconds", "dir")}
        if isinstance(o, list):
            return [strip(x) for x in o]
        return o
    return strip(json.loads(path.read_text()))


@pytest.mark.slow
def test_parallel_analyses_write_the_serial_reports_and_a_rerun_resumes(tmp_path):
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    a = _run(serial)
    assert a.returncode == 0, a.stdout[-3000:] + a.stderr[-3000:]
    b = _run(parallel, "--analysis-jobs", "2")
    assert b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]
    for name in ("tells.json", "instruments.json"):
        assert _report(serial / name) == _report(parallel / name), name
    assert not (parallel / "standard-01").exists() and not (parallel / "null-01").exists()  # removed once analysed
    again = _run(parallel)
    assert again.returncode == 0 and "built in" not in again.stdout
    assert again.stdout.count("analyses kept from an earlier run") == 2
    bad = _run(tmp_path / "bad", "--analysis-jobs", "0")
    assert bad.returncode == 2 and "--analysis-jobs: 0; valid: at least 1" in bad.stderr
