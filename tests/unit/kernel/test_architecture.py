"""The package's shape: layers in a stated order, no import cycles, no private name imported
across subpackages, no folder too large, no module over ~400 lines and no function over ~60 lines unless the
module says why, one results schema constant. Read from the source with ast (nothing is imported), so the
checks see lazy imports inside functions too."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from support.data import ROOT
from support.package_source import PKG, from_module, package_modules, parsed

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: a module may hold a longer function or be longer when it says why, in a line
#: ``# size: <name or "module">: <the reason>``
_SIZE_NOTE = re.compile(r"^# size: ([\w.]+): \S", re.M)




#: the first-level parts of vlbench, lowest layer first; a part may import its own layer's parts and lower
#: layers only (never a higher one, lazily or not). docs/architecture.md explains each.
LAYERS = (
    ("errors", "util", "registry", "runfolder", "results", "config", "lang", "langdata", "langsetup", "sentence",
     "conditions", "stores", "plugins", "execution"),  # foundation
    ("models", "datasets", "metrics"),  # what is evaluated, on what, and how it is scored
    ("encoding", "perturbations"),  # embeddings and their cache; caption perturbations and their validity
    ("imageperturb", "shortcuts", "granularity", "trackers"),  # image-side conditions; caption statistics; trackers
    ("pipeline", "testing"),  # a run: options, plan -> encode -> score -> record; plug-in conformance checks
    ("runread",),  # a finished run read back: per-query values, retrieved lists, flips, its dataset, hash checks
    ("tasks", "leaderboards", "compare", "explain", "rescore", "analyze", "published", "export", "training"),  # on runs
    ("sweep", "cli", "__main__", "benchmark"),  # studies as grids of runs; the command line; old import paths
    ("studies",),  # published protocols on top of the library; they plug in through the registries only
)
#: parts of one layer that must not import each other (independent columns)
#: the applications read runs through vlbench.runread and set text through vlbench.util (typeset, markdown), never
#: through each other
APPLICATIONS = ("analyze", "compare", "explain", "leaderboards")
INDEPENDENT = [("models", "datasets", "metrics"), ("encoding", "perturbations"), ("pipeline", "testing"),
               APPLICATIONS]
MAX_FOLDER_MODULES = 15
MAX_FOLDER_LINES = 3000


def _part(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer_of() -> dict[str, int]:
    return {part: i for i, layer in enumerate(LAYERS) for part in layer}




def _import_names(path: Path, mod: str) -> tuple[tuple[str, str], ...]:
    """(module, name) of every ``from X import name`` and (module, "") of every ``import X`` in vlbench code."""
    return _names_in(parsed(path)[1], mod, path)


@cache  # per syntax tree (a changed file is parsed again, a new tree): the rules ask for every module's imports
def _names_in(tree: ast.Module, mod: str, path: Path) -> tuple[tuple[str, str], ...]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [(from_module(node, mod, path), a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
    return tuple((m, n) for m, n in out if m == "vlbench" or m.startswith("vlbench."))


def _imports(mod: str, path: Path, known: dict) -> set[str]:
    """The vlbench modules that ``mod`` imports anywhere in its code (lazy imports included)."""
    deps = set()
    for m, name in _import_names(path, mod):
        deps.update(n for n in ([m] if not name else [m, f"{m}.{name}"]) if n in known)
    # importing a submodule runs its parent packages first; those edges are not cycles of the code
    return {d for d in deps if d != mod and not mod.startswith(d + ".")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_are_resolved():
    known = package_modules()
    deps = _imports("vlbench.datasets.builtin", known["vlbench.datasets.builtin"], known)
    assert {"vlbench.datasets.download", "vlbench.datasets.specs", "vlbench.datasets.core",
            "vlbench.registry", "vlbench.util.io"} <= deps


def test_no_import_cycles():
    known = package_modules()
    graph = {m: _imports(m, p, known) for m, p in known.items()}
    assert _cycles(graph) == []
    # a cycle there once: datasets.py <-> download.py
    assert "vlbench.datasets.core" not in graph["vlbench.datasets.download"]


def _too_long() -> list[str]:
    bad = []
    for mod, path in package_modules().items():
        src, tree = parsed(path)
        noted = set(_SIZE_NOTE.findall(src))
        if src.count("\n") > MAX_MODULE_LINES and "module" not in noted:
            bad.append(f"{mod}: {src.count(chr(10))} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and node.name not in noted:
                    bad.append(f"{mod}.{node.name}: {n} lines")
    return bad


def test_module_and_function_sizes():
    assert _too_long() == []


def test_one_results_schema_constant():
    """The schema version lives in vlbench/results.py only; nothing else defines one."""
    pattern = re.compile(r"^(SCHEMA_VERSION|CURRENT_SCHEMA)\s*=\s*\d", re.M)
    holders = [str(p.relative_to(ROOT)) for p in PKG.rglob("*.py") if pattern.search(p.read_text())]
    assert holders == ["vlbench/results.py"]


def _layer_violations() -> list[str]:
    known, layer = package_modules(), _layer_of()
    bad = []
    for mod, path in known.items():
        src = _part(mod)
        if not src:  # vlbench/__init__.py: the lazy public API (strings only)
            continue
        if src not in layer:
            bad.append(f"{mod}: its part {src!r} is in no layer of LAYERS")
            continue
        for dep in _imports(mod, path, known):
            dst = _part(dep)
            if dst == src or not dst:
                continue
            if layer.get(dst, 99) > layer[src]:
                bad.append(f"{mod} imports {dep} (layer {layer.get(dst)} above {layer[src]})")
            elif any(src in g and dst in g for g in INDEPENDENT):
                bad.append(f"{mod} imports {dep} (independent parts of one layer)")
    return bad


def test_layer_order():
    assert _layer_violations() == []


def test_layer_check_catches_an_upward_import(tmp_path, monkeypatch):
    """The check itself: a metrics module importing the pipeline is reported."""
    fake = PKG / "metrics" / "_layer_probe_tmp.py"
    fake.write_text("def f():\n    from ..pipeline import runner\n")
    try:
        assert any("_layer_probe_tmp imports vlbench.pipeline" in v for v in _layer_violations())
    finally:
        fake.unlink()


def _application_imports() -> list[str]:
    known = package_modules()
    return [f"{mod} imports {dep}" for mod, path in known.items() if _part(mod) in APPLICATIONS
            for dep in _imports(mod, path, known) if _part(dep) in APPLICATIONS and _part(dep) != _part(mod)]


def test_the_applications_never_import_each_other():
    """analyze, compare, explain and leaderboards stand side by side: reading a finished run lives in
    vlbench/runread.py, LaTeX escaping, the palette, plain() and slug() in vlbench/util/typeset.py, the paired
    statistics in vlbench/metrics/paired.py; none of the four imports another (lazily or not)."""
    assert _application_imports() == []


def test_the_application_check_catches_a_lazy_import():
    fake = PKG / "analyze" / "_apps_probe_tmp.py"
    fake.write_text("def f():\n    from ..leaderboards.paper import latex\n")
    try:
        assert any("_apps_probe_tmp imports vlbench.leaderboards" in v for v in _application_imports())
        assert any("_apps_probe_tmp imports vlbench.leaderboards" in v for v in _layer_violations())
    finally:
        fake.unlink()


def test_no_cycle_between_first_level_parts():
    known = package_modules()
    graph: dict[str, set[str]] = {}
    for mod, path in known.items():
        src = _part(mod) or "vlbench"
        graph.setdefault(src, set())
        for dep in _imports(mod, path, known):
            dst = _part(dep)
            if dst and dst != src:
                graph[src].add(dst)
                graph.setdefault(dst, set())
    graph["vlbench"] = set()  # the root's lazy exports are strings, not imports
    assert _cycles(graph) == []


def test_no_private_name_crosses_a_subpackage():
    bad = []
    for mod, path in package_modules().items():
        for dep_mod, name in _import_names(path, mod):
            if _part(dep_mod) == _part(mod):
                continue
            segs = dep_mod.split(".")[1:] + ([name] if name else [])
            if any(s.startswith("_") and not s.startswith("__") for s in segs):
                bad.append(f"{mod}: {dep_mod}" + (f".{name}" if name else ""))
    assert bad == []


def test_folder_sizes():
    bad = []
    for folder in [PKG, *sorted(p for p in PKG.iterdir() if (p / "__init__.py").is_file())]:
        mods = sorted(folder.glob("*.py"))
        lines = sum(p.read_text().count("\n") for p in mods)
        if len(mods) > MAX_FOLDER_MODULES or lines > MAX_FOLDER_LINES:
            bad.append(f"{folder.relative_to(ROOT)}: {len(mods)} modules, {lines} lines")
    assert bad == []


def test_the_library_never_imports_a_study():
    """Everything outside vlbench/studies/ is the library: no module of it imports a study (lazily or not);
    studies reach it through the registries (entry point group vlbench.studies)."""
    known = package_modules()
    bad = [f"{mod} imports {dep}" for mod, path in known.items() if _part(mod) != "studies"
           for dep in _imports(mod, path, known) if _part(dep) == "studies"]
    assert bad == []


#: what names one publication; the library outside vlbench/studies/ must not
_STUDY_WORDS = re.compile(r"hendriksen|thesis|chapter", re.I)


def test_no_study_is_named_outside_its_folder():
    bad = []
    for path in sorted(PKG.rglob("*")):
        rel = path.relative_to(PKG)
        if not path.is_file() or rel.parts[0] == "studies" or path.suffix in (".pyc",):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _STUDY_WORDS.search(line):
                bad.append(f"vlbench/{rel}:{n}: {line.strip()[:80]}")
    assert bad == []


def test_studies_are_registered_through_entry_points_only():
    """The one place that names a built-in study is pyproject.toml's entry point group."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points."vlbench.studies"]' in text
    for study in sorted(p.name for p in (PKG / "studies").iterdir() if (p / "__init__.py").is_file()):
        assert f'{study} = "vlbench.studies.{study}.registration:register"' in text
    # and the installed entry point is what registered the study's parts (not an import from the library)
    from vlbench import registry

    assert registry.protocols.entry("hendriksen2024").source == "study:hendriksen2024"
    assert registry.perturbation_variants.entry("hendriksen2024").source == "study:hendriksen2024"
    assert registry.study_errors == {}


def test_run_folder_file_names_have_one_owner():
    """A run folder's file names are written as literals in vlbench/runfolder.py only; every
    other module names them through its constants (so a renamed or added file is one edit)."""
    import vlbench.runfolder as RF

    names = [RF.RESULTS, RF.TABLE, RF.PER_QUERY, RF.PER_ITEM, RF.VALIDITY_AUDIT, RF.FLIPS, RF.RETRIEVED,
             RF.EMBEDDING_KEYS, RF.EXPLAIN_PAGE]
    literal = re.compile("[\"'](" + "|".join(re.escape(n) for n in names) + ")[\"']")
    bad = [f"{mod}: {m.group(0)}" for mod, path in package_modules().items() if mod != "vlbench.runfolder"
           for m in literal.finditer(path.read_text())]
    assert not bad, "name these files through vlbench.runfolder's constants:\n" + "\n".join(bad)
    assert set(RF.RUN_FILES) >= set(names) - {RF.EXPLAIN_PAGE} and RF.RUN_FILES[-1] == RF.RESULTS
