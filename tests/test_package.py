"""The library as a package: its public API (every name documented, every example run as a doctest), a cheap
``import relu_core``, dependencies declared in pyproject.toml and satisfied by the pins, the wheel installed into a
fresh venv (the quickstart and one CLI command run from it), and the quickstart notebook executed by nbmake."""

from __future__ import annotations

import ast
import base64
import doctest
import importlib.metadata
import json
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import relu_core
from relu_core import protocol

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
PUBLIC = [name for name in relu_core.__all__ if name != "__version__"]
#: Imported by relu_core but deliberately not declared: an optional path that says what to install.
UNDECLARED = {"timm": "other Hub models (models.load_hub_model); without it one line says `pip install timm`"}


# ------------------------------------------------------------------------------------------------ the API


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_has_a_numpydoc_example_that_runs(name):
    obj = getattr(relu_core, name)
    doc = obj.__doc__ or ""
    assert "Examples\n" in doc and "--------" in doc, f"{name} has no numpydoc Examples section"
    tests = doctest.DocTestFinder(recurse=False).find(obj, f"relu_core.{name}", globs={})
    assert sum(len(test.examples) for test in tests) > 0, f"{name}'s docstring holds no doctest"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, f"{name}'s example fails (output above)"


def test_all_lists_each_public_name_once_and_dir_shows_them():
    assert len(set(relu_core.__all__)) == len(relu_core.__all__)
    assert {"RelU", "Doctor", "MSP", "ODIN", "fpr_at_tpr", "auroc", "aurc", "evaluate", "paired_bootstrap"} <= set(
        PUBLIC
    )
    assert set(PUBLIC) <= set(dir(relu_core))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        relu_core.nope


def test_importing_relu_core_is_cheap_and_names_load_on_first_use():
    probe = (
        "import sys, json; import relu_core; before = sorted(m for m in ('torch', 'plotly', 'pandas', 'scipy') "
        "if m in sys.modules); from relu_core import RelU; "
        "json.dump({'before': before, 'torch': 'torch' in sys.modules, 'module': RelU.__module__}, sys.stdout)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    loaded = json.loads(out.stdout)
    assert loaded == {"before": [], "torch": True, "module": "relu_core.detectors"}


# --------------------------------------------------------------------------------------- dependencies


def _pins(*files: str) -> dict[str, str]:
    pins = {}
    for name in files:
        for line in (REPO / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if "==" in line:
                package, version = line.split("==")
                pins[canonicalize_name(package)] = version.strip()
    return pins


def _third_party_imports() -> set[str]:
    """Top-level modules that relu_core imports anywhere (module level or inside functions), stdlib excluded."""
    found = set()
    for path in (REPO / "relu_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("relu_core", "__future__")}


def test_dependencies_are_declared_as_ranges_that_the_pins_satisfy():
    runtime = [Requirement(text) for text in PYPROJECT["dependencies"]]
    extras = [Requirement(text) for texts in PYPROJECT["optional-dependencies"].values() for text in texts]
    pins = _pins("requirements.txt", "requirements-dev.txt")
    for requirement in runtime:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is a dependency of relu_core but requirements.txt does not pin it"
        assert requirement.specifier.contains(pins[name]), f"the pin {name}=={pins[name]} is outside {requirement}"
    for requirement in extras:  # an extra's package is pinned where the app or CI installs it
        name = canonicalize_name(requirement.name)
        if name in pins:
            assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement}"
    declared = {canonicalize_name(r.name) for r in runtime + extras}
    assert "streamlit" not in declared, "streamlit is the app's dependency, not the library's"
    distributions = importlib.metadata.packages_distributions()
    for module in sorted(_third_party_imports() - set(UNDECLARED)):
        providers = {canonicalize_name(d) for d in distributions.get(module, [module])}
        assert providers & declared, f"relu_core imports {module} ({', '.join(providers)}), undeclared in pyproject"


# ------------------------------------------------------------------------------- the wheel, installed


def _notebook_code() -> str:
    """The quickstart's code cells as one script (figures are built, not shown: a script displays nothing)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the checkout (the build writes build/ and *.egg-info beside the sources)."""
    source = tmp_path / "source"
    ignored = shutil.ignore_patterns(".git", ".venv", "data_cache", "__pycache__", "test-artifacts", "build", "dist")
    shutil.copytree(REPO, source, ignore=ignored, symlinks=True)
    out = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("relu_core-*.whl")
    return wheel


def _check_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    outside = [n for n in names if not n.startswith(("relu_core/", "relu_core-"))]
    assert outside == [], f"the wheel holds more than relu_core: {outside[:10]}"
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "relu_core").rglob("*.py")}
    assert sources - set(names) == set(), "the wheel misses modules of relu_core"
    tables = {p.relative_to(REPO).as_posix() for p in (REPO / "relu_core" / "reference" / "paper").glob("*.csv")}
    assert len(tables) == 6 and tables - set(names) == set(), "the wheel misses the paper's tables"
    requires = {line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires")}
    for text in PYPROJECT["dependencies"]:
        assert str(Requirement(text)) in requires, f"the wheel's metadata does not declare {text}"
    assert "Provides-Extra: onnx" in metadata and not any("streamlit" in r for r in requires)


def _fresh_venv(tmp_path: Path) -> Path:
    """A new venv with pip whose own site-packages comes first; the project venv's site-packages follows through
    a .pth file, for the dependencies only (torch cannot be installed offline)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    project = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "zz_project_dependencies.pth").write_text("\n".join(project) + "\n")
    return python


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_quickstart_and_the_cli(tmp_path, shared_data):
    wheel = _build_wheel(tmp_path)
    _check_wheel_contents(wheel)
    python = _fresh_venv(tmp_path)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True, timeout=300
    )
    work = tmp_path / "work"  # neither the checkout nor anything importable from it
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RELU_STUDIO_CACHE")}
    env.update(RELU_STUDIO_DATA=str(shared_data), XDG_CACHE_HOME=str(tmp_path / "user-cache"))

    def run(*args: str) -> str:
        out = subprocess.run([str(python), *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        return out.stdout

    site = run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    where = run("-c", "import relu_core; print(relu_core.__file__)").strip()
    assert Path(where) == Path(site) / "relu_core" / "__init__.py"

    (work / "quickstart.py").write_text(_notebook_code())
    printed = run("quickstart.py")
    assert "Rel-U" in printed and "Doctor" in printed and "CI" in printed, printed
    # an installed package caches in the user's cache directory, never in site-packages
    assert any((tmp_path / "user-cache" / "relu-studio").rglob("*"))
    assert not (Path(site) / "data_cache").exists()
    # the paper's tables are read from the installed package
    read = "from relu_core.studies import paper_table as p; print(sum(len(p.rows(k)) for k in p.TABLES))"
    assert run("-c", read).strip() == "193"

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 600)
    logits = (rng.normal(size=(600, 4)) + 1.5 * np.eye(4)[labels]).astype(np.float32)
    np.savez(work / "run.npz", logits=logits, labels=labels)
    installed = json.loads(run("-m", "relu_core", "evaluate", "--logits", "run.npz", "--json", "--seeds", "2"))
    here = protocol.evaluate(logits, labels, seeds=2, temperature=None).to_dict()  # the CLI: each its own T
    # keyed by method, plus the paper's Table 1 rows of the data set ("run": none, said in one line)
    assert installed.pop("paper_reference")["note"].startswith("No paper reference for run")
    assert set(installed) == set(here)
    for method, row in here.items():
        for metric in ("fpr95", "auroc", "aurc"):
            assert installed[method][metric] == pytest.approx(row[metric], abs=1e-9), (method, metric)


# ---------------------------------------------------------------------------------------- the notebook


def test_the_stored_quickstart_shows_each_figure_as_an_image_too():
    """Issue 34: where the notebook is only read (GitHub draws no plotly), its figures showed nothing. Each stored
    plotly output holds a PNG of itself (examples/store_quickstart_outputs.py), and no megabytes of plotly.js."""
    cells = [cell for cell in json.loads(NOTEBOOK.read_text())["cells"] if cell["cell_type"] == "code"]
    outputs = [out for cell in cells for out in cell.get("outputs", [])]
    figures = [out["data"] for out in outputs if "application/vnd.plotly.v1+json" in out.get("data", {})]
    assert len(figures) >= 2, "the stored notebook has no figure outputs: run examples/store_quickstart_outputs.py"
    for data in figures:
        png = base64.b64decode(data["image/png"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", png[16:24])  # IHDR
        assert width >= 800 and height >= 800 * 0.6, (width, height)
        assert "text/html" not in data
    assert any("Rel-U" in "".join(out.get("text", "")) for out in outputs)  # the printed results are stored too
    assert NOTEBOOK.stat().st_size < 1_000_000


@pytest.mark.slow
def test_the_quickstart_notebook_runs_and_draws_its_figures(shared_data, monkeypatch):
    from nbmake.nb_run import NotebookRun

    # the kernel imports this checkout's relu_core (a user's has it installed: docs/how-to/library.md)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = NotebookRun(NOTEBOOK, default_timeout=600).execute()
    assert result.error is None, result.error.summary if result.error else ""
    outputs = [out for cell in result.nb.cells if cell.cell_type == "code" for out in cell.outputs]
    text = "".join(out.get("text", "") for out in outputs)
    assert "Rel-U" in text and "CI" in text
    figures = [out for out in outputs if "application/vnd.plotly.v1+json" in out.get("data", {})]
    titles = {json.dumps(fig["data"]["application/vnd.plotly.v1+json"]["layout"]["title"]) for fig in figures}
    assert len(figures) >= 2 and any("D*" in t for t in titles) and any("Risk-coverage" in t for t in titles)
