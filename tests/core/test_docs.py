"""The documentation: README.md as a front door, the docs/ site's links, its generated parts,
and (where mkdocs is installed: docs/requirements.txt, not the [test] extra) the strict build."""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
BUILD_COMMAND = "pip install -e . && python -m pipeline.build world=standard-01"
TEST_COMMAND = "pip install -e '.[test]' && python -m pytest"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: pytest options that change only what a run reports, never which tests run or how.
REPORTING_OPTIONS = re.compile(r"--durations(=\S+)?|--durations-min(=\S+)?|--junit-?xml(=\S+)?|-r[a-zA-Z]+")

sys.path.insert(0, str(DOCS))
import gen_reference  # noqa: E402  (docs/gen_reference.py: what the mkdocs hook renders)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def outside_fences(text: str) -> str:
    """``text`` without its fenced code blocks (a link inside one is code, not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """Python-Markdown's toc slug of a heading (what mkdocs-material's anchors are)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"[`*]", "", text).strip()
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = page.read_text()
    if page.parent == DOCS or DOCS in page.parents:  # generated sections add headings of their own
        text = gen_reference.MARKER.sub(lambda m: gen_reference.render(m.group(1), *m.group(2).split()), text)
    found: dict[str, int] = {}
    for line in outside_fences(text).splitlines():
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(2))
            n = found.get(base, 0)
            found[base] = n + 1
            found[base if n == 0 else f"{base}_{n}"] = 1
    return set(found)


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(outside_fences(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("/")]


# ----------------------------------------------------------------------------- the front door


def test_readme_is_a_front_door_of_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"


def test_readme_has_the_two_commands_and_ci_runs_the_second():
    readme = README.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert any(block.splitlines()[:2] == [BUILD_COMMAND, TEST_COMMAND] for block in blocks), \
        "README.md: the two commands (install and build a world; install and run the tests) are not one bash block"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    runs = [line.strip() for line in ci if line.strip().startswith("pip install -e '.[test]' && python -m pytest")]
    assert len(runs) == 1, f".ci/run: expected one run of the README's test command, found {runs}"
    extra = runs[0][len(TEST_COMMAND):].strip()
    # CI may only add pytest options that change what it reports (durations, JUnit XML)
    leftover = [tok for tok in shlex.split(extra) if not REPORTING_OPTIONS.fullmatch(tok)]
    assert leftover == [], f".ci/run runs {runs[0]!r}, not the README's {TEST_COMMAND!r} (extra: {leftover})"


def test_readme_links_into_the_site():
    targets = {t.split("#")[0] for t in relative_links(README)}
    for page in ("docs/getting-started.md", "docs/concepts.md", "docs/evaluating.md", "docs/validity.md",
                 "docs/performance.md", "docs/differences.md", "docs/reference/config.md",
                 "docs/results/reference-agents.md", "docs/assets/overview.svg"):
        assert page in targets, f"README.md does not link to {page}"


# ----------------------------------------------------------------------------- links


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{target}: no such file ({dest.relative_to(ROOT) if ROOT in dest.parents else dest})")
            continue
        if ROOT not in dest.parents and dest != ROOT:
            problems.append(f"{target}: outside the repository")
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading with the anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not problems, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.M))
    present = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert present - listed == set(), f"pages not in mkdocs.yml's nav: {sorted(present - listed)}"
    assert listed - present == set(), f"nav entries without a page: {sorted(listed - present)}"


# ----------------------------------------------------------------------------- generated parts


def test_every_marker_renders_from_the_code():
    markers = [(p, m) for p in DOCS.rglob("*.md") for m in gen_reference.MARKER.finditer(p.read_text())]
    names = {m.group(1) for _, m in markers}
    assert {"config", "bundle", "streams", "schemas", "agent-api", "calibration", "readme"} <= names
    for page, m in markers:
        text = gen_reference.render(m.group(1), *m.group(2).split())
        if m.group(1) == "readme":  # the home page: README.md, its docs/ links made relative to docs/
            assert "](getting-started.md)" in text and "](docs/" not in text
            continue
        assert text.strip() and "|---|" in text, f"{page.relative_to(ROOT)}: {m.group(0)} rendered no table"


def test_the_config_reference_has_one_row_per_field_rule():
    from pipeline import config_rules

    rows = gen_reference.rules_rows("biobank")
    assert [r["field"] for r in rows if r["rule"]] == [r["field"] for r in rows], "a field without a rule"
    assert {r["field"] for r in rows} == set(config_rules.FIELD_RULES)
    text = gen_reference.section_config("biobank")
    for name in config_rules.FIELD_RULES:
        assert f"| `{name}` |" in text


def test_the_streams_reference_lists_every_registered_stream():
    from pipeline import streams

    kinds = ("biobank", "screening")
    text = "".join(gen_reference.section_streams(kind) for kind in kinds)
    # the project's kinds' streams: a full run also imports the tests' toy kind (tests/toy_kind.py),
    # whose streams register too and are no part of the reference
    for name in [name for name, stream in streams.REGISTRY.items() if stream.world_kind in kinds]:
        assert f"| `{name}` |" in text


def test_the_calibration_tables_are_the_committed_json():
    import json

    for scale in ("small", "paper"):
        path = f"pipeline/screening/figures/calibration_{scale}.json"
        data = json.loads((ROOT / path).read_text())
        text = gen_reference.section_calibration(path)
        for strategy, per_world in data["rows"].items():
            row = next(line for line in text.splitlines() if line.startswith(f"| `{strategy}` |"))
            assert all(f"{per_world[w]['score']:.1f} %" in row for w in data["worlds"])
            assert f"{data['mean'][strategy]:.1f} %" in row


def test_docs_requirements_are_pinned():
    lines = [ln.strip() for ln in (DOCS / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert {ln.split("==")[0] for ln in lines} >= {"mkdocs", "mkdocs-material"}
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][\w.]*", ln) for ln in lines), lines


# ----------------------------------------------------------------------------- the site


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="mkdocs and mkdocs-material are not installed (pip install -r docs/requirements.txt; "
                           "not in the [test] extra); .ci/run builds the site with --strict")
def test_mkdocs_build_strict_passes(tmp_path):
    # not -q: mkdocs counts the warnings that fail --strict only at its default log level
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert "world.bias_params.T1.bmi_loading" in (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
