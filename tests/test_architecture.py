"""The package's shape (issue #13): no import cycles, no module over ~400 lines and no function over ~60
lines unless the module says why, one results schema constant. Read from the source with ast (nothing is
imported), so the checks see lazy imports inside functions too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "vlbench"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: a module may hold a longer function or be longer when it says why, in a line
#: ``# size: <name or "module">: <the reason>``
_SIZE_NOTE = re.compile(r"^# size: ([\w.]+): \S", re.M)


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(mod: str, path: Path, known: dict) -> set[str]:
    """The vlbench modules that ``mod`` imports anywhere in its code (lazy imports included)."""
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        deps.update(n for n in names if n in known)
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
    known = _modules()
    deps = _imports("vlbench.benchmark.builtin_datasets", known["vlbench.benchmark.builtin_datasets"], known)
    assert {"vlbench.benchmark.download", "vlbench.benchmark.dataset_specs", "vlbench.benchmark.datasets",
            "vlbench.registry", "vlbench._io"} <= deps


def test_no_import_cycles():
    known = _modules()
    graph = {m: _imports(m, p, known) for m, p in known.items()}
    assert _cycles(graph) == []
    # the cycle issue #13 named: datasets.py <-> download.py
    assert "vlbench.benchmark.datasets" not in graph["vlbench.benchmark.download"]


def _too_long() -> list[str]:
    bad = []
    for mod, path in _modules().items():
        src = path.read_text()
        noted = set(_SIZE_NOTE.findall(src))
        if src.count("\n") > MAX_MODULE_LINES and "module" not in noted:
            bad.append(f"{mod}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src)):
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
