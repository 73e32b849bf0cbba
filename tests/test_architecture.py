"""The layering rule of ARCHITECTURE.md, checked on the source: the library ``relu_core`` never imports
Streamlit, the dashboard's glue (``studio`` or any other Python package beside ``relu_core``), the
pages (``app.py``, ``app_pages/``), the tests or the benchmarks. Every import statement counts, at any depth
(inside functions too), and so do ``importlib.import_module("...")`` / ``__import__("...")`` with a literal."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIBRARY = REPO / "relu_core"


def _forbidden_top_levels() -> set[str]:
    """Streamlit, and every top-level module of this repository that is not the library itself."""
    names = {"streamlit", "app_pages", "tests", "bench"}
    names |= {path.stem for path in REPO.glob("*.py")}  # app, ...
    names |= {path.parent.name for path in REPO.glob("*/__init__.py")}  # a glue package beside relu_core
    return names - {"relu_core"}


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``source``; relative imports stay inside the library."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _violations(source: str, forbidden: set[str]) -> list[tuple[int, str]]:
    return [(line, module) for line, module in _imported_modules(source) if module.split(".")[0] in forbidden]


def test_the_rule_sees_every_kind_of_import() -> None:
    forbidden = _forbidden_top_levels()
    assert {"streamlit", "studio", "app", "app_pages"} <= forbidden and "relu_core" not in forbidden
    source = (
        "import numpy as np\n"
        "from relu_core import metrics\n"
        "from . import stats\n"
        "import streamlit as st\n"
        "def f():\n"
        "    from studio import sidebar\n"
        "    import importlib\n"
        "    return importlib.import_module('app_pages.x'), __import__('app')\n"
    )
    assert _violations(source, forbidden) == [(4, "streamlit"), (6, "studio"), (8, "app_pages.x"), (8, "app")]


def test_relu_core_never_imports_streamlit_nor_the_dashboard() -> None:
    forbidden = _forbidden_top_levels()
    files = sorted(LIBRARY.rglob("*.py"))
    assert len(files) > 20  # the whole library is scanned
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in files
        for line, module in _violations(path.read_text(encoding="utf-8"), forbidden)
    ]
    assert not violations, violations
