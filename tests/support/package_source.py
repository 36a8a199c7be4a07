"""vlbench's modules read as source (nothing imported): the module names and files, and what an import statement
names. Shared by the architecture rules (tests/unit/kernel/test_architecture.py) and the code-style rules
(tests/unit/test_code_style.py)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from support.data import ROOT

PKG = ROOT / "vlbench"


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the vlbench package (a package is its __init__.py);
    files in a folder without __init__.py (a study's scripts) are scripts, not modules."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        if not (p.parent / "__init__.py").is_file():
            continue
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def from_module(node: ast.ImportFrom, mod: str, path: Path) -> str:
    """The absolute module a ``from ... import`` statement of ``mod`` (in file ``path``) names."""
    if not node.level:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def parsed(path: Path) -> tuple[str, ast.Module]:
    """(the source, its syntax tree) of a file, parsed once per version of the file: the rules walk every module
    many times, and re-parsing 200 modules for each rule cost a third of a second per test. Keyed on the file's
    modification time and size, so a file a test writes or changes is read again. Walk the tree; never edit it."""
    st = path.stat()
    return _parse(path, st.st_mtime_ns, st.st_size)


@cache
def _parse(path: Path, mtime_ns: int, size: int) -> tuple[str, ast.Module]:
    src = path.read_text()
    return src, ast.parse(src, filename=str(path))
