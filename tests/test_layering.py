"""The library's layering: no import cycle anywhere in ``relu_core``; the engine turns images into logits and
knows nothing of runs, data sets or training; the command line's modules share ``cli.shared`` and import no
other command module.

An AST scan reads every import of ``relu_core`` (module level and inside functions, so a lazy import counts
too; relative and absolute; ``from relu_core import x`` meaning module ``x`` when ``x`` is one; under
``TYPE_CHECKING`` too) and follows them transitively; a fresh interpreter checks what importing the engine
actually loads.
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


def all_modules() -> list[str]:
    """Every module of ``relu_core`` by its import name; a package (a folder with ``__init__.py``) by its own."""
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [name for name in names if name != "relu_core"]


def _targets(node: ast.AST, name: str, is_package: bool) -> list[str]:
    """The modules an import statement (or a literal ``importlib.import_module``) in module ``name`` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative: from the module's package (a package's own for its __init__), up level - 1
            package = name if is_package else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{node.module}" if node.module else package
        else:
            base = node.module or ""
        # ``from relu_core import engine`` / ``from relu_core.models import registry`` name submodules
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    if (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
    ):
        return [node.args[0].value]
    return []


def direct_imports(name: str, source: str | None = None) -> dict[str, int]:
    """The ``relu_core`` modules that module ``name`` imports anywhere in its source (by default its file),
    each with the line of its first import."""
    path = _module_file(name)
    if source is None:
        assert path is not None, name
        source = path.read_text(encoding="utf-8")
    is_package = path is not None and path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source, str(path or name))):
        for target in _targets(node, name, is_package):
            if target.startswith("relu_core.") and _module_file(target) is not None:
                for module in sorted(_with_parents(target)):
                    found[module] = min(found.get(module, node.lineno), node.lineno)
    # a module inside a package does not re-import the packages it lives in (they are already loading)
    return {module: line for module, line in found.items() if not (name == module or name.startswith(module + "."))}


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


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of ``graph`` (module -> the modules it imports) as ``[a, b, ..., a]``, or None when it has none."""
    done: set[str] = set()  # modules whose imports are all explored and lead to no cycle
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]  # depth-first, the modules being explored; each with its imports left to follow
        left = [iter(sorted(graph[start]))]
        while left:
            module = next(left[-1], None)
            if module is None:
                done.add(path.pop())
                left.pop()
            elif module in path:
                return path[path.index(module) :] + [module]
            elif module not in done and module in graph:
                path.append(module)
                left.append(iter(sorted(graph[module])))
    return None


def _describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    """``a (line 12) -> b (line 40) -> a``: each module with the line of its import of the next one."""
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


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
    """The scan can fail: runs imports the engine, and ``cli.shared`` imports ``runs`` only inside functions."""
    assert "relu_core.engine" in reachable("relu_core.runs")
    assert "relu_core.runs" in direct_imports("relu_core.cli.shared")
    assert "relu_core.runs" in reachable("relu_core.preprocessing")


def test_the_scan_resolves_every_kind_of_import() -> None:
    """Relative imports from a module and from a package's ``__init__``, submodules named by ``from x import``,
    imports inside functions and under ``TYPE_CHECKING``; never a package the module itself lives in."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import base\n"
        "from relu_core.cli import shared\n"
        "from relu_core import validation\n"
        "if TYPE_CHECKING:\n"
        "    from relu_core.runs import Run\n"
        "def f():\n"
        "    from .. import engine\n"
        "    import relu_core.models.registry\n"
        "    from ..datasets.formats import read_idx\n"
        "    return importlib.import_module('relu_core.metrics')\n"
    )
    assert set(direct_imports("relu_core.studies.ablation", source)) == {
        "relu_core.studies.base",
        "relu_core.cli",
        "relu_core.cli.shared",
        "relu_core.validation",
        "relu_core.runs",
        "relu_core.engine",
        "relu_core.models",
        "relu_core.models.registry",
        "relu_core.datasets",
        "relu_core.datasets.formats",
        "relu_core.metrics",
    }
    # in a package's __init__, "." is the package itself
    assert set(direct_imports("relu_core.datasets", "from .base import ImageSet\nfrom ..npz import headers\n")) == {
        "relu_core.datasets.base",
        "relu_core.npz",
    }
    assert "relu_core.datasets" in all_modules() and "relu_core.datasets.base" in all_modules()


def test_the_cycle_search_finds_a_cycle_and_only_one_that_is_there() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"a": 5}}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert _describe(["a", "b", "c", "a"], graph) == "a (line 1) -> b (line 2) -> c (line 3) -> a"
    assert find_cycle({"a": {"b": 1, "c": 1}, "b": {"c": 2}, "c": {}, "d": {"a": 1, "c": 1}}) is None
    assert find_cycle({"a": {"a": 1}}) == ["a", "a"]


def test_relu_core_has_no_import_cycle() -> None:
    """No module of the library can reach itself through its imports, counting those inside functions."""
    graph = {name: direct_imports(name) for name in all_modules()}
    assert len(graph) > 40  # the whole library is scanned, packages included
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + _describe(cycle, graph)


CLI_COMMANDS = {
    "relu_core.cli.evaluate",
    "relu_core.cli.logits",
    "relu_core.cli.report",
    "relu_core.cli.baselines",
    "relu_core.cli.study",
    "relu_core.cli.train",
    "relu_core.cli.export",
}


@pytest.mark.parametrize("name", sorted(CLI_COMMANDS))
def test_a_command_module_shares_cli_shared_and_imports_no_other_command(name: str) -> None:
    assert "relu_core.cli.shared" in direct_imports(name)
    reached = reachable(name)
    assert not reached & (CLI_COMMANDS | {"relu_core.cli"}) - {name}, sorted(reached & CLI_COMMANDS)


def test_cli_only_dispatches() -> None:
    """``cli`` builds the top-level parser from the command modules and turns failures into exit codes."""
    assert set(direct_imports("relu_core.cli")) == CLI_COMMANDS | {
        "relu_core.cli.shared",  # the progress bar it hands to every command
        "relu_core.errors",
    }


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
