"""mkdocs hooks (``hooks:`` in mkdocs.yml): the site's generated parts and its links into the repository.

* ``<!-- dtw:NAME ARGS -->`` on a line of its own is replaced by ``gen_reference.render(NAME, *ARGS)``:
  the reference pages and the results tables are read from the code and the committed
  JSON at every build, so nothing generated is committed to go stale.
* ``<!-- dtw:readme -->`` is replaced by the repository's README.md, its links rewritten
  for a page inside docs/ (the README is the site's home page, written once).
* A link or image from a page to a repository file outside docs/ (a committed figure,
  ``../pipeline/agents/analyst/figures/scores_small.png``) works on GitHub as it is; for the
  site the file is copied in under ``_repo/<its path>`` and the link pointed there.
"""
from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_reference  # noqa: E402  (beside this file)

ROOT = gen_reference.ROOT
REPO_PREFIX = "_repo"
MARKER = gen_reference.MARKER
LINK = gen_reference.LINK
_outside_fences = gen_reference.outside_fences
readme_for_docs = gen_reference.section_readme


def repo_target(page_src: str, target: str) -> str | None:
    """The repository path (posix, from the root) a page's relative link points at, when it
    leaves docs/ and names an existing file; else None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
        return None
    path = target.split("#", 1)[0]
    if not path:
        return None
    rel = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_src), path))
    if rel.startswith("docs/") or rel.startswith(".."):
        return None
    return rel if (ROOT / rel).is_file() else None


def _repo_links(src: str, text: str) -> list[str]:
    """Repository paths (outside docs/) that page ``src`` links to, code blocks aside."""
    found = []
    _outside_fences(text, lambda t: found.extend(m.group(2) for m in LINK.finditer(t)) or t)
    return [rel for rel in (repo_target(src, t) for t in found) if rel is not None]


def on_files(files, config):
    # The repository files the pages link to join the site's files here, before any page is
    # rendered (links are checked against this collection, and only its files are copied).
    docs_dir = Path(config["docs_dir"])
    for path in sorted(docs_dir.rglob("*.md")):
        src = path.relative_to(docs_dir).as_posix()
        text = path.read_text()
        if "<!-- dtw:readme -->" in text:
            text += "\n" + readme_for_docs()
        for rel in _repo_links(src, text):
            dest = posixpath.join(REPO_PREFIX, rel)
            if files.get_file_from_path(dest) is None:
                files.append(File.generated(config, dest, abs_src_path=str(ROOT / rel)))
    return files


def on_page_markdown(markdown: str, page, config, files):
    src = page.file.src_uri

    def generated(m):
        name, args = m.group(1), m.group(2).split()
        return gen_reference.render(name, *args)

    markdown = MARKER.sub(generated, markdown)

    def relink(text: str) -> str:
        def one(m):
            rel = repo_target(src, m.group(2))
            if rel is None:
                return m.group(0)
            dest = posixpath.join(REPO_PREFIX, rel)
            anchor = "#" + m.group(2).split("#", 1)[1] if "#" in m.group(2) else ""
            return m.group(1) + posixpath.relpath(dest, posixpath.dirname(src) or ".") + anchor + m.group(3)
        return LINK.sub(one, text)

    return _outside_fences(markdown, relink)
