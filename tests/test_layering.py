"""The library's layering: the engine turns images into logits and knows nothing of runs, data sets or training.

An AST scan reads every ``import`` of ``relu_core`` (module level and inside functions, so a lazy import counts
too) and follows them transitively; a fresh interpreter checks what importing the engine actually loads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import relu_core

ROOT = Path(relu_core.__file__).parent


def _module_file(name: str) -> Path | None:
    """The source file of ``relu_core.<...>`` (a module or a package's ``__init__``), None when there is none."""
    parts = name.split(".")[1:]
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _with_parents(name: str) -> set[str]:
    """``relu_core.a.b`` imports the packages ``relu_core.a`` (its ``__init__``) first."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts) + 1)}


def direct_imports(name: str) -> set[str]:
    """The ``relu_core`` modules that module ``name`` imports anywhere in its source."""
    path = _module_file(name)
    assert path is not None, name
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module]
            # ``from relu_core import engine`` / ``from relu_core.models import registry`` name submodules
            targets += [
                f"{node.module}.{alias.name}"
                for alias in node.names
                if _module_file(f"{node.module}.{alias.name}") is not None
            ]
        else:
            continue
        for target in targets:
            if target.startswith("relu_core.") and _module_file(target) is not None:
                found |= _with_parents(target)
    # a module inside a package does not re-import the packages it lives in (they are already loading)
    return {module for module in found if not (name == module or name.startswith(module + "."))}


def reachable(name: str) -> set[str]:
    """Every ``relu_core`` module that importing ``name`` can load, directly or through others."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for module in direct_imports(todo.pop()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


FORBIDDEN_FOR_ENGINE = {"relu_core.runs", "relu_core.datasets", "relu_core.training"}


def test_the_engine_imports_no_runs_datasets_or_training() -> None:
    reached = reachable("relu_core.engine")
    assert not reached & FORBIDDEN_FOR_ENGINE, sorted(reached & FORBIDDEN_FOR_ENGINE)
    assert not any(module.startswith("relu_core.datasets.") for module in reached), sorted(reached)


@pytest.mark.parametrize(
    "name",
    [
        "relu_core.engine",
        "relu_core.runs",
        "relu_core.preprocessing",
        "relu_core.training",
        "relu_core.models",
        "relu_core.progress",
        "relu_core.validation",
    ],
)
def test_no_import_cycle_through(name: str) -> None:
    assert name not in reachable(name), f"{name} imports itself through {sorted(reachable(name))}"


def test_the_scan_sees_lazy_imports() -> None:
    """The scan can fail: runs imports the engine, and ``cli`` imports ``runs`` only inside functions."""
    assert "relu_core.engine" in reachable("relu_core.runs")
    assert "relu_core.runs" in direct_imports("relu_core.cli")
    assert "relu_core.runs" in reachable("relu_core.preprocessing")


@pytest.mark.slow
def test_importing_the_engine_loads_no_runs_datasets_or_training() -> None:
    code = "import sys, relu_core.engine; print(sorted(m for m in sys.modules if m.startswith('relu_core')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT.parent
    ).stdout
    loaded = set(ast.literal_eval(out.strip()))
    assert "relu_core.engine" in loaded
    assert not {
        m
        for m in loaded
        if m.split(".")[:2] in (["relu_core", "runs"], ["relu_core", "datasets"], ["relu_core", "training"])
    }, sorted(loaded)
