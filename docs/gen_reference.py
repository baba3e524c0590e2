"""The documentation's generated parts, read from the code when the site is built.

``docs/hooks.py`` (the mkdocs hook) replaces each marker ``<!-- dtw:NAME ARGS -->`` in
a page with ``SECTIONS[NAME](*ARGS)``, so the reference pages and the results tables
never go stale: nothing generated is committed.  From the shell the same text is
printed by ``python docs/gen_reference.py NAME [ARGS...]`` (e.g. ``config screening``).

Sections: ``config <kind>`` (every config field, its type, default and rule),
``bundle`` and ``bundle-screening`` (the release and sealed files of each kind),
``release-tables`` (the release's Parquet columns), ``streams <kind>`` (the named
random streams), ``schemas`` (every JSON Schema of ``schemas/``),
``agent-api`` (agent API v1 from its docstrings), ``tools <kind>`` (an episode's tools)
``calibration <json>`` (a screening calibration table from its committed JSON) and
``readme`` (README.md with its links rewritten for docs/index.md, the site's home page).
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: A generated section's marker, on a line of its own: ``<!-- dtw:NAME ARG ... -->``.
MARKER = re.compile(r"^<!-- dtw:([\w-]+)((?: [^ >]+)*) -->$", re.M)
#: A Markdown link or image: (the text part with its opening parenthesis, the target, ")").
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^(```|~~~)")


# ----------------------------------------------------------------------------- text helpers

def md(text) -> str:
    """``text`` safe in a Markdown table cell: emphasis, brackets, HTML and pipes escaped."""
    text = "" if text is None else str(text)
    text = text.replace("\\", "\\\\")
    for ch in "*_[]`":
        text = text.replace(ch, "\\" + ch)
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;").replace("\n", " ")


def code(text) -> str:
    """``text`` as an inline code span inside a table cell."""
    text = str(text).replace("|", "&#124;")
    tick = "``" if "`" in text else "`"
    return f"{tick}{text}{tick}"


def rst_to_md(text: str) -> str:
    """A docstring's reST-isms as Markdown: ``x`` and :role:`x` become `x`."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text or "")
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def yaml_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    return str(value)


def source_comments(obj) -> dict[str, str]:
    """name -> the comment that documents it in ``obj``'s source (a class or module):
    ``#:`` lines just above an assignment, or a ``#`` comment after it on its line."""
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    trailing = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            trailing[tok.start[0]] = tok.string.lstrip("#:").strip()
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if not names:
                continue
            above, i = [], node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                above.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            # a trailing comment on the assignment's last line
            text = " ".join(above) or trailing.get(node.end_lineno, "") or trailing.get(node.lineno, "")
            if text:
                for name in names:
                    out.setdefault(name, text)
    return out


def type_name(t) -> str:
    if isinstance(t, type):
        return t.__name__
    return str(t).replace("typing.", "")


# ----------------------------------------------------------------------------- config fields

def _field_rows(cls, prefix: str, world_cls) -> list[dict]:
    hints = typing.get_type_hints(cls)
    comments = source_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        t = world_cls if (prefix == "" and f.name == "world") else hints[f.name]
        name = prefix + f.name
        if dataclasses.is_dataclass(t):
            rows += _field_rows(t, name + ".", world_cls)
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        rows.append({"field": name, "type": type_name(t), "default": default, "doc": comments.get(f.name, "")})
    return rows


def derived_rules_table(kind: str) -> list[dict]:
    """The rows ``pipeline.config_rules.rules_table(kind)`` gives, derived from
    ``FIELD_RULES`` and the schema dataclasses (for a tree that has no rules_table yet)."""
    import importlib

    from pipeline import config_rules

    importlib.import_module("pipeline.config")  # the schemas and their rules, as a build loads them
    from pipeline.config_schema import PanelAppConfig, RootConfig, WorldConfig

    if kind == "panel":
        rules = {**config_rules.FIELD_RULES, **config_rules.PANEL_FIELD_RULES}
        rows = [r for r in _field_rows(PanelAppConfig, "", WorldConfig)
                if not r["field"].startswith("world.") and r["field"] in rules]
    else:
        if kind == "biobank":
            world_cls, rules = WorldConfig, config_rules.FIELD_RULES
        else:
            from pipeline.config_schema import register_configs

            register_configs()  # each registered kind adds its schema and its world rules
            world_cls, _ = config_rules.WORLD_SCHEMAS[kind]
            rules = config_rules.kind_rules(kind)
        rows = _field_rows(RootConfig, "", world_cls)
    for row in rows:
        rule = rules.get(row["field"])
        row["rule"] = rule.valid() if rule is not None else ""
    return rows


def rules_rows(kind: str) -> list[dict]:
    """``pipeline.config_rules.rules_table(kind)`` where the tree has it, else the same rows derived."""
    from pipeline import config_rules

    rows = None
    if hasattr(config_rules, "rules_table"):
        try:
            rows = [dict(r) for r in config_rules.rules_table(kind)]
        except (KeyError, ValueError):
            rows = None  # a kind rules_table does not know (the panel app): derive it
    if rows is None:
        return derived_rules_table(kind)
    docs = {r["field"]: r.get("doc", "") for r in derived_rules_table(kind)}
    for row in rows:
        row.setdefault("doc", docs.get(row["field"], ""))
    return rows


def _default_cell(row) -> str:
    value = row["default"]
    if value == "???":  # omegaconf.MISSING: the field has no default
        return "required"
    if value is None and "Optional" not in str(row["type"]):
        return ""
    return code(yaml_value(value))


def section_config(kind: str = "biobank", prefix: str = "") -> str:
    """Every field of a ``kind`` config (``prefix``: only the fields under it, e.g. ``world``)."""
    rows = [r for r in rules_rows(kind) if not prefix or r["field"].startswith(prefix + ".")]
    groups: dict[str, list] = {}
    for row in rows:
        head = row["field"].split(".")[0] if "." in row["field"] else "(top level)"
        if row["field"].startswith("world.bias_params."):
            head = "world.bias_params"
        groups.setdefault(head, []).append(row)
    out = [f"{len(rows)} fields.", ""]
    for head, items in groups.items():
        out.append(f"### `{head}`" if head != "(top level)" else "### Top-level fields")
        out.append("")
        out.append(table(["field", "type", "default", "rule (valid values)", "what it is"],
                         [[code(r["field"]), md(r["type"]), _default_cell(r), md(r["rule"]),
                           md(rst_to_md(r.get("doc", "")))]
                          for r in items]))
        out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------------- bundle contract

def section_bundle() -> str:
    from pipeline import bundle

    docs = source_comments(bundle)
    out = [f"Format version written: `{bundle.FORMAT_VERSION}`; versions read: "
           + ", ".join(f"`{v}`" for v in bundle.FORMAT_VERSIONS) + ".", ""]
    out += ["### Manifests", "",
            table(["folder", "top-level keys"], [[code(k + "/" + bundle.MANIFEST), ", ".join(code(x) for x in keys)]
                                                for k, keys in bundle.MANIFEST_KEYS.items()]),
            "", "Each entry of `files`: " + ", ".join(code(k) for k in bundle.MANIFEST_FILE_KEYS) + ".", ""]
    release = [[code(bundle.table_file(t)), "a Parquet table (columns below), compressed "
                f"{bundle.PARQUET_COMPRESSION} level {bundle.PARQUET_COMPRESSION_LEVEL}"] for t in bundle.TABLES]
    release += [[code(bundle.DATA_DICTIONARY_TSV), "the data dictionary, one row per released column"],
                [code(bundle.DATA_DICTIONARY_MD), "the same, table by table"],
                [code(bundle.GENOTYPES_VCF), "phased genotypes, BGZF"],
                [code(bundle.GENOTYPES_INDEX), "its tabix index"],
                [code(bundle.GENOTYPE_STORE + "/"), "the genotypes as VCF Zarr"]]
    release += [[code(f"{folder}/<subject>{bundle.IMAGE_SUFFIX}") + " or " + code(folder + bundle.ZARR_SUFFIX),
                 md(f"MRI of instance {inst}; " + docs.get("IMAGING", ""))] for inst, folder in bundle.IMAGING.items()]
    release.append([code(bundle.MANIFEST), "every file with its size and SHA-256, written last"])
    out += ["### `release/`", "", table(["file", "holds"], release), "",
            "Image geometry beside the pixels: " + ", ".join(code(k) for k in bundle.IMAGE_GEOMETRY_KEYS) + ".", ""]
    sealed = [[code(name), md(what), "yes" if name in bundle.SEALED_REQUIRED else "with imaging"]
              for name, what in bundle.SEALED_FILES.items()]
    sealed.append([code(bundle.SEALED_REPORTS + "/"), md(docs.get("SEALED_REPORTS", "")), "after validation"])
    out += ["### `sealed/`", "", table(["file", "holds", "written by every build"], sealed), ""]
    return "\n".join(out)


def section_bundle_screening() -> str:
    from pipeline import bundle
    from pipeline.screening import bundle as sb

    mod_doc = inspect.getdoc(sb) or ""
    block = mod_doc.split("\n\n")[1] if "\n\n" in mod_doc else ""
    out = [f"Release format `{sb.RELEASE_FORMAT}`, sealed format `{sb.SEALED_FORMAT}`.", "",
           "```text", block.strip("\n"), "```", "",
           table(["folder", "files"], [
               [code("release/"), ", ".join(code(x) for x in (sb.LIBRARY, f"{sb.SDF_DIR}/{sb.SDF_GLOB}", sb.README,
                                                               bundle.MANIFEST))],
               [code("sealed/"), ", ".join(code(x) for x in sb.SEALED_FILES + (bundle.MANIFEST,))]]),
           "", "Release manifest keys: " + ", ".join(code(k) for k in sorted(sb.RELEASE_MANIFEST_KEYS)) + "."]
    return "\n".join(out)


def section_release_tables() -> str:
    from pipeline import bundle

    schema = json.loads(bundle.TABLE_SCHEMA.read_text())
    defs = schema.get("$defs", {})
    out = [rst_to_md(schema.get("description", "")), ""]

    def index_of(node):
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        return ", ".join(f"{code(n)} ({t})" for n, t in node.get("const", [])) or "none"

    for name, node in schema["properties"].items():
        cols = node["properties"]["columns"]
        rows = []
        for c in cols.get("prefixItems", []):
            if "const" in c:
                rows.append([code(c["const"][0]), code(c["const"][1])])
            else:  # a column whose type varies: [{"const": name}, {"enum": types}] and why
                name, types = c["prefixItems"]
                rows.append([code(name["const"]), " or ".join(code(t) for t in types["enum"])
                             + (f" ({md(c['description'])})" if c.get("description") else "")])
        family = cols.get("items")
        if isinstance(family, dict) and "prefixItems" in family:
            pattern, typ = family["prefixItems"]
            rows.append([code(pattern.get("pattern", "")) + " (one per molecule)", code(typ.get("const", ""))])
        out += [f"### `{name}`", "", md(node.get("description", "")), "", f"Index: {index_of(node['properties']['index'])}.",
                "", table(["column", "Arrow type"], rows), ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- streams

def section_streams(kind: str = "biobank") -> str:
    import importlib

    from pipeline import streams

    importlib.import_module("pipeline.screening.streams")  # registers the screening kind's streams

    rows = []
    for s in streams.REGISTRY.values():
        if s.world_kind != kind:
            continue
        choices = "; ".join(f"{k}: " + ", ".join(v) for k, v in s.choices.items())
        rows.append([code(s.name), s.level, s.key, md(choices), md(rst_to_md(s.doc))])
    return f"{len(rows)} streams.\n\n" + table(["name", "level", "keyed by", "choices", "draws"], rows)


# ----------------------------------------------------------------------------- JSON Schemas

def _schema_type(node: dict) -> str:
    if "const" in node:
        return "const " + json.dumps(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    t = node.get("type", "$ref " + node["$ref"] if "$ref" in node else "")
    return " or ".join(t) if isinstance(t, list) else str(t)


def _constraints(node: dict) -> str:
    parts = []
    for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minItems", "maxItems", "minLength",
                "maxLength", "pattern", "format", "minProperties", "maxProperties"):
        if key in node:
            parts.append(f"{key} {node[key]}")
    return ", ".join(parts)


def _walk(node: dict, path: str, required: bool, rows: list) -> None:
    if path:
        rows.append([code(path), md(_schema_type(node)), "yes" if required else "", md(_constraints(node)),
                     md(node.get("description", ""))])
    req = set(node.get("required", []))
    for name, child in (node.get("properties") or {}).items():
        if isinstance(child, dict):
            _walk(child, f"{path}.{name}" if path else name, name in req, rows)
    items = node.get("items")
    if isinstance(items, dict) and (items.get("properties") or items.get("items")):
        _walk(items, f"{path}[]", False, rows)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        _walk(extra, f"{path}.<key>", False, rows)


def section_schemas() -> str:
    folder = ROOT / "schemas"  # the repository's root schemas/ (installed as pipeline/schemas)
    out = []
    for path in sorted(folder.glob("*.json")):
        schema = json.loads(path.read_text())
        out += [f"### `{path.name}`", "", f"**{md(schema.get('title', path.stem))}**", "",
                md(schema.get("description", "")), ""]
        if path.name == "release_tables.schema.json":
            out += ["Its tables are listed on [Bundle files](bundle.md#release-tables).", ""]
            continue
        header = ["key", "type", "required", "constraints", "description"]
        rows: list = []
        _walk(schema, "", True, rows)
        if rows:
            out += [table(header, rows), ""]
        for word in ("oneOf", "anyOf"):
            for i, alt in enumerate(schema.get(word) or [], 1):
                alt_rows: list = []
                _walk(alt, "", True, alt_rows)
                out += [f"{'One' if word == 'oneOf' else 'At least one'} of the forms, {i}: "
                        f"**{md(alt.get('title', ''))}**. {md(alt.get('description', ''))}", ""]
                if alt_rows:
                    out += [table(header, alt_rows), ""]
        for name, sub in (schema.get("$defs") or {}).items():
            sub_rows: list = []
            _walk(sub, "", True, sub_rows)
            out += [f"Definition `{name}`: {md(_schema_type(sub))}. {md(sub.get('description', ''))}", ""]
            if sub_rows:
                out += [table(["key", "type", "required", "constraints", "description"], sub_rows), ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- agent API

def _dataclass_fields(cls) -> str:
    hints = typing.get_type_hints(cls)
    comments = source_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = code(repr(f.default))
        elif f.default_factory is not dataclasses.MISSING:
            default = code(repr(f.default_factory()))
        else:
            default = "required"
        rows.append([code(f.name), md(type_name(hints[f.name])), default, md(rst_to_md(comments.get(f.name, "")))])
    return table(["field", "type", "default", "meaning"], rows)


def _doc(obj) -> str:
    return rst_to_md(inspect.getdoc(obj) or "")


def section_agent_api() -> str:
    from pipeline import harness
    from pipeline.agents import base, tools

    consts = source_comments(tools)
    out = [f"API version `{tools.API_VERSION}` (`pipeline.agents.tools.API_VERSION`).", "",
           table(["constant", "value", "meaning"],
                 [[code(f"pipeline.agents.tools.{n}"), code(repr(getattr(tools, n))), md(consts.get(n, ""))]
                  for n in ("API_VERSION", "MAX_CALLS_PER_TURN", "MAX_ARGUMENT_CHARS", "USAGE_KEYS")]), ""]
    for module, names in ((base, ("Agent", "EpisodeInfo", "Observation", "ScriptedAgent", "fenced", "AgentSpec")),
                          (tools, ("Reply", "ToolCall", "ToolSpec"))):
        for name in names:
            obj = getattr(module, name)
            kind = "class" if inspect.isclass(obj) else "function"
            out += [f"### `{module.__name__}.{name}`", "", f"*{kind}*", ""]
            if kind == "function":
                out += [f"```python\n{name}{inspect.signature(obj)}\n```", ""]
            out += [_doc(obj) or "(no docstring)", ""]
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
                out += [_dataclass_fields(obj), ""]
            if inspect.isclass(obj):
                for meth, fn in vars(obj).items():
                    if callable(fn) and not meth.startswith("_") and inspect.getdoc(fn):
                        out += [f"- `{meth}{inspect.signature(fn)}`: {_doc(fn)}"]
                out.append("")
    run = harness.run_episode
    out += ["### `pipeline.harness.run_episode`", "", "*function*", "",
            f"```python\nrun_episode{inspect.signature(run)}\n```", "", _doc(run), ""]
    return "\n".join(out)


def section_tools(kind: str = "biobank") -> str:
    from pipeline.agents.tools import RUN_PYTHON

    if kind == "biobank":
        from pipeline.harness.biobank import TOOLS
    else:
        from pipeline.screening.episode import TOOLS
    rows = []
    for spec in (RUN_PYTHON, *TOOLS):
        props = spec.parameters.get("properties", {})
        req = set(spec.parameters.get("required", []))
        args = "; ".join(f"{code(n)}{'' if n in req else ' (optional)'}: {md(_schema_type(p))}"
                         + (f" ({md(p['description'])})" if p.get("description") else "") for n, p in props.items())
        flags = ", ".join(x for x, on in (("one turn", spec.runs_program), ("ends the episode", spec.ends_episode)) if on)
        rows.append([code(spec.name), args or "none", flags, md(spec.description)])
    return table(["tool", "arguments", "", "description"], rows)


# ----------------------------------------------------------------------------- results

def section_calibration(json_path: str) -> str:
    """A screening calibration table (scores in %, mean, SE, band) from its committed JSON."""
    data = json.loads((ROOT / json_path).read_text())
    worlds = data["worlds"]
    bands = {b["strategy"]: b for b in data.get("bands") or []}
    header = ["strategy", *worlds, "mean", "SE"] + (["band", ""] if bands else [])
    rows = []
    for strategy, per_world in data["rows"].items():
        row = [code(strategy)] + [f"{per_world[w]['score']:.1f} %" for w in worlds]
        row += [f"{data['mean'][strategy]:.1f} %", f"{data['se'][strategy]:.1f}"]
        if bands:
            b = bands.get(strategy)
            row += [f"{b['band'][0]:g}–{b['band'][1]:g} %", "met" if b["ok"] else "**not met**"] if b else ["", ""]
        rows.append(row)
    return (table(header, rows) + f"\n\nRendered from `{json_path}` ({data['panel']}, {data['scale']} scale) "
            "when the site is built.")


def outside_fences(markdown: str, fn) -> str:
    """Apply ``fn`` to the text outside fenced code blocks."""
    out, chunk, fenced = [], [], False
    for line in markdown.split("\n"):
        if FENCE.match(line.lstrip()):
            if not fenced:
                out.append(fn("\n".join(chunk)) if chunk else None)
                chunk = [line]
                fenced = True
                continue
            chunk.append(line)
            out.append("\n".join(chunk))
            chunk, fenced = [], False
            continue
        chunk.append(line)
    if chunk:
        out.append("\n".join(chunk) if fenced else fn("\n".join(chunk)))
    return "\n".join(x for x in out if x is not None)


def section_readme() -> str:
    """README.md as the home page docs/index.md: ``docs/x`` links become ``x``; links to other
    repository files become ``../x`` (which the repo-file rule then serves)."""
    def fix(text: str) -> str:
        def one(m):
            target = m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
                return m.group(0)
            new = target[len("docs/"):] if target.startswith("docs/") else "../" + target
            return m.group(1) + new + m.group(3)
        return LINK.sub(one, text)
    return outside_fences((ROOT / "README.md").read_text(), fix)


SECTIONS = {
    "readme": section_readme,
    "config": section_config,
    "bundle": section_bundle,
    "bundle-screening": section_bundle_screening,
    "release-tables": section_release_tables,
    "streams": section_streams,
    "schemas": section_schemas,
    "agent-api": section_agent_api,
    "tools": section_tools,
    "calibration": section_calibration,
}


def render(name: str, *args: str) -> str:
    if name not in SECTIONS:
        raise KeyError(f"unknown generated section {name!r}; valid: {', '.join(SECTIONS)}")
    return SECTIONS[name](*args)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    print(render(sys.argv[1], *sys.argv[2:]))
