"""Code style that ruff cannot check: vlbench's own modules go by their real names, and they
and the standard library are imported at the top of a module, where the dependency graph (and the layer test)
can see them.

A function-level import of a vlbench module is accepted only when that module is heavy (it pulls a heavy
third-party package in at import time, directly or through the vlbench modules it imports at top level, and the
importing module does not have it already) or when a ``# lazy: <reason>`` comment says why, on the import's line,
the line above it or the ``def`` line of the function (to break an import-time cycle, or to keep a module that
``vlbench --help`` imports light). A function-level import of the standard library needs such a comment too.
Third-party imports (numpy, PIL, torch, ...) may stay in functions: keeping ``vlbench --help`` and the light
commands fast is their reason. Read from the source with ast; nothing is imported."""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from pathlib import Path

from support.package_source import from_module, package_modules, parsed

#: third-party packages that cost a noticeable time (or memory) to import; a vlbench module that imports one of
#: these at module level (directly or through vlbench modules) is heavy and may be imported lazily
HEAVY = frozenset({
    "torch", "torchvision", "transformers", "open_clip", "spacy", "pandas", "matplotlib", "nltk", "nlpaug",
    "sentence_transformers", "sklearn", "scipy", "skimage", "imagecorruptions",
})
_LAZY_NOTE = re.compile(r"#\s*lazy:\s*\S")





MODULES = package_modules()




def _targets(node: ast.Import | ast.ImportFrom, mod: str, path: Path) -> list[tuple[str, str | None]]:
    """(imported module, its alias) for each name of an import statement; the module of a ``from X import y`` is
    ``X.y`` when that is a vlbench module, else ``X``."""
    if isinstance(node, ast.Import):
        return [(a.name, a.asname) for a in node.names]
    base = from_module(node, mod, path)
    return [(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base, a.asname) for a in node.names]


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _split(tree: ast.Module) -> tuple[list, list]:
    """(import statements run when the module is imported, import statements inside functions)."""
    top, lazy = [], []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (lazy if in_function else top).append(child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
            elif isinstance(child, ast.If) and not in_function and _is_type_checking(child):
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), False)
            else:
                visit(child, in_function)

    visit(tree, False)
    return top, lazy


_TREES = {m: parsed(p)[1] for m, p in MODULES.items()}  # the architecture rules' parse: once per session
_SPLIT = {m: _split(t) for m, t in _TREES.items()}


def _parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _import_time_deps(mod: str) -> set[str]:
    """What importing ``mod`` runs: its parent packages and its module-level imports (top-level names only for
    third-party modules)."""
    deps = set(_parents(mod))
    for node in _SPLIT[mod][0]:
        for target, _ in _targets(node, mod, MODULES[mod]):
            if target.startswith("vlbench"):
                deps.add(target if target in MODULES else target.rsplit(".", 1)[0])
                deps.update(_parents(target))
            elif target:
                deps.add(target.split(".")[0])
    return {d for d in deps if d != mod}


@cache
def _closure(mod: str) -> frozenset[str]:
    seen, todo = set(), [mod]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in MODULES:
            todo.extend(_import_time_deps(m))
    return frozenset(seen)


def heavy_packages(mod: str, heavy: frozenset[str] = HEAVY) -> set[str]:
    """The heavy third-party packages importing ``mod`` brings in."""
    return _closure(mod) & heavy


def _short_aliases(mod: str) -> list[str]:
    bad = []
    for node in ast.walk(_TREES[mod]):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target, alias in _targets(node, mod, MODULES[mod]):
            # third-party aliases (np, pd, plt, F for torch.nn.functional, nn) follow their own conventions
            if target.startswith("vlbench") and alias is not None and len(alias.lstrip("_")) <= 2:
                bad.append(f"{mod}:{node.lineno} imports {target} as {alias}")
    return bad


def _explained(mod: str) -> frozenset[int]:
    """Line numbers of the function-level imports that say why they are there: ``# lazy: <reason>`` on the
    import's line, on the line above it, or on the ``def`` line of a function around it (then for all of them)."""
    return _explained_in(MODULES[mod], _TREES[mod], tuple(_SPLIT[mod][1]))


@cache  # per file and syntax tree: two rules ask for every module (a test's own module is a new tree)
def _explained_in(path: Path, tree: ast.Module, lazy: tuple) -> frozenset[int]:
    lines = parsed(path)[0].splitlines()

    def noted(n: int) -> bool:
        return 1 <= n <= len(lines) and bool(_LAZY_NOTE.search(lines[n - 1]))

    out = {node.lineno for node in lazy if noted(node.lineno) or noted(node.lineno - 1)}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                noted(n) for n in range(fn.lineno, fn.body[0].lineno)):  # the def line(s): all imports inside
            out.update(node.lineno for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom)))
    return frozenset(out)


def _unexplained_lazy_imports(mod: str) -> list[str]:
    explained = _explained(mod)
    bad = []
    for node in _SPLIT[mod][1]:
        if node.lineno in explained:
            continue
        for target, _ in _targets(node, mod, MODULES[mod]):
            if target not in MODULES or target == mod:
                continue
            if not heavy_packages(target) - _closure(mod):
                bad.append(f"{mod}:{node.lineno} imports {target} inside a function (it is cheap: hoist it, "
                           "or say why with '# lazy: <reason>')")
    return bad


def _lazy_stdlib_imports(mod: str) -> list[str]:
    explained = _explained(mod)
    bad = []
    for node in _SPLIT[mod][1]:
        if (isinstance(node, ast.ImportFrom) and node.level) or node.lineno in explained:
            continue
        roots = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if any(r.split(".")[0] in sys.stdlib_module_names for r in roots):
            bad.append(f"{mod}:{node.lineno} imports {', '.join(roots)} (standard library) inside a function")
    return bad


def _failing(check) -> dict[str, list[str]]:
    return {m: found for m in MODULES if (found := check(m))}


def test_heavy_modules_are_found():
    """Through the vlbench modules imported at top level (distributed -> encode -> numpy), not through lazy ones
    (no vlbench module imports torch at import time today, so numpy stands in for a heavy package here)."""
    assert heavy_packages("vlbench.encoding.distributed", frozenset({"numpy"})) == {"numpy"}
    assert not heavy_packages("vlbench.errors", frozenset({"numpy"}))
    assert not heavy_packages("vlbench.models.hf")  # torch, transformers: imported in its functions only


def test_the_checks_catch_a_bad_module(monkeypatch, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from vlbench import stores as st\n\n\ndef f():\n    import json\n    from vlbench import errors\n"
                   "    import os  # lazy: a stated reason\n\n\ndef g():  # lazy: a reason for all of them\n"
                   "    import sys\n    from vlbench import util\n")
    tree = ast.parse(bad.read_text())
    monkeypatch.setitem(MODULES, "vlbench.bad", bad)
    monkeypatch.setitem(_TREES, "vlbench.bad", tree)
    monkeypatch.setitem(_SPLIT, "vlbench.bad", _split(tree))
    assert _short_aliases("vlbench.bad") == ["vlbench.bad:1 imports vlbench.stores as st"]
    assert [x.split(" inside")[0] for x in _unexplained_lazy_imports("vlbench.bad")] == [
        "vlbench.bad:6 imports vlbench.errors"]
    assert [x.split(" (")[0] for x in _lazy_stdlib_imports("vlbench.bad")] == ["vlbench.bad:5 imports json"]


def test_no_short_aliases_of_vlbenchpackage_modules():
    """``from .. import perturbations as P`` hides which module a name comes from (``P`` was three modules)."""
    failing = _failing(_short_aliases)
    assert failing == {}


def test_vlbench_modules_are_imported_at_the_top():
    failing = _failing(_unexplained_lazy_imports)
    assert failing == {}


def test_the_standard_library_is_imported_at_the_top():
    failing = _failing(_lazy_stdlib_imports)
    assert failing == {}
