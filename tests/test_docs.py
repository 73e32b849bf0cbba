"""The manual (MkDocs, ``docs/``) and the README as its front door.

The CLI and API reference pages are generated at build time by the hooks in ``docs/hooks/``; these tests check
that every command of the argparse parsers and every public name of ``relu_core.__all__`` reaches them, that the
navigation and the pages' links point at files that exist, that the README stays a short front door without issue
numbers or session dates, and that the screenshots are small and used. The slow test builds the whole site with
``mkdocs build --strict`` (broken links, missing pages and docstring warnings fail), as ``run_tests.sh`` does in CI.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import relu_core
from relu_core.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"
MKDOCS_YML = REPO / "mkdocs.yml"
PUBLIC = [name for name in relu_core.__all__ if name != "__version__"]
README_MAX_LINES = 160
SCREENSHOT_MAX_BYTES = 300 * 1024
#: The screenshots the README shows, taken by tests/test_screenshots.py of the real app at 1280 x 720.
SCREENSHOTS = ("start.png", "explore.png")


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_files(node) -> list[str]:
    """Every page path named in mkdocs.yml's ``nav`` (nested lists of ``{title: path}``)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [path for item in node for path in _nav_files(item)]
    if isinstance(node, dict):
        return [path for value in node.values() for path in _nav_files(value)]
    return []


def _config() -> dict:
    # mkdocs.yml is plain YAML (no !!python tags), so the safe loader reads it
    return yaml.safe_load(MKDOCS_YML.read_text())


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


# ------------------------------------------------------------------------------------------ the reference
def test_every_cli_command_is_in_the_generated_reference_with_its_help():
    cli = _hook("cli_reference")
    page = (DOCS / "reference" / "cli.md").read_text()
    assert cli.MARKER in page, "the CLI reference page lost the marker the hook replaces"
    assert "docs/hooks/cli_reference.py" in _config()["hooks"]
    rendered = cli.render()
    paths = cli.commands(build_parser())
    names = {path[0] for path, _ in paths}
    # the walk sees what the parser accepts: every top-level command and every study
    assert {
        "evaluate",
        "demo",
        "logits",
        "models",
        "datasets",
        "report",
        "baselines",
        "study",
        "train",
        "export",
    } <= names
    assert {path[1] for path, _ in paths if path[0] == "study" and len(path) == 2} >= {
        "ablation",
        "tuning-split",
        "mismatch",
        "calibration",
    }
    for path, parser in paths:
        heading = f"`{' '.join(path)}`"
        assert re.search(rf"^#+ {re.escape(heading)}$", rendered, re.M), f"{heading} has no section"
        for action in parser._actions:
            for option in action.option_strings:
                assert option in rendered, f"{' '.join(path)} {option} is missing from the CLI reference"


def test_every_public_name_is_in_the_generated_api_reference():
    api = _hook("api_reference")
    page = (DOCS / "reference" / "api.md").read_text()
    assert api.MARKER in page, "the API reference page lost the marker the hook replaces"
    assert "docs/hooks/api_reference.py" in _config()["hooks"]
    rendered = api.render()
    missing = [name for name in PUBLIC if f"::: relu_core.{relu_core._EXPORTS[name]}.{name}\n" not in rendered]
    assert missing == []
    assert "__version__" in rendered


def test_the_library_page_names_every_public_name():
    """The how-to's paragraph of public names lists each name of ``__all__`` (it once left ``Detector`` out)."""
    page = (DOCS / "how-to" / "library.md").read_text()
    start = page.index("The public names are `rc.__all__`")
    paragraph = page[start : page.index("\n\n", start)]
    assert [name for name in PUBLIC if f"`{name}`" not in paragraph] == []


# ------------------------------------------------------------------------------ navigation and links
def test_the_navigation_names_every_page_and_only_pages_that_exist():
    nav = _nav_files(_config()["nav"])
    assert len(nav) == len(set(nav)), "a page is in the navigation twice"
    assert [path for path in nav if not (DOCS / path).is_file()] == []
    pages = {p.relative_to(DOCS).as_posix() for p in _pages()}
    assert sorted(pages - set(nav)) == [], "pages missing from the navigation"


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in _LINK.findall(text)]


@pytest.mark.parametrize("source", [README, *_pages()], ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_point_at_files_that_exist(source):
    broken = []
    for target in _links(source.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (source.parent / path).exists():
            broken.append(target)
    assert broken == []


_MANUAL = re.compile(r'manual_(?:help\(|page=)"([^"]+)"')


@pytest.mark.parametrize("source", sorted((REPO / "app_pages").glob("*.py")), ids=lambda p: p.name)
def test_every_app_page_names_its_manual_page(source):
    """Each page's heading has a "?" naming the manual page that explains it, and that page exists."""
    named = _MANUAL.findall(source.read_text())
    assert len(named) == 1, f"{source.name} names {named or 'no'} manual page"
    assert (DOCS / named[0]).is_file(), named[0]


def test_the_architecture_page_includes_architecture_md():
    """ARCHITECTURE.md stays at the top level and the manual shows the same text (a snippet, not a copy)."""
    page = (DOCS / "explanation" / "architecture.md").read_text()
    assert '--8<-- "ARCHITECTURE.md"' in page
    assert (REPO / "ARCHITECTURE.md").read_text().startswith("# Architecture")


# ------------------------------------------------------------------------------------ the front door
def test_the_readme_is_a_short_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README has {len(lines)} lines; the manual in docs/ holds the rest"
    for command in ("./run_app.sh", "./run_tests.sh", "mkdocs serve"):
        assert command in text
    for shot in SCREENSHOTS:
        assert f"docs/img/{shot}" in text


@pytest.mark.parametrize("source", [README, *_pages()], ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_issue_numbers_in_the_users_text(source):
    """Issue numbers are the project's bookkeeping, not the user's: "issue 35", "(#27)" say nothing to a reader."""
    text = source.read_text()
    assert re.findall(r"(?i)\bissues? #?\d+|\(#\d+\)|\bPR #?\d+", text) == []


def test_no_session_dates_in_the_readme():
    """Dates of measurement sessions belong beside their tables in docs/results/, not on the front door."""
    assert re.findall(r"\b20\d\d-\d\d-\d\d\b", README.read_text()) == []


# ------------------------------------------------------------------------------------------ screenshots
def test_every_screenshot_is_small_and_shown():
    images = sorted((DOCS / "img").glob("*.png"))
    assert {p.name for p in images} >= set(SCREENSHOTS)
    texts = README.read_text() + "".join(p.read_text() for p in _pages())
    for image in images:
        assert image.stat().st_size < SCREENSHOT_MAX_BYTES, f"{image.name}: {image.stat().st_size} bytes"
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"img/{image.name}" in texts, f"{image.name} is not shown on any page"


# ------------------------------------------------------------------------------------------ the build
@pytest.mark.slow
def test_the_manual_builds_with_strict_checks(tmp_path):
    """``mkdocs build --strict`` (what CI runs): broken links, missing pages, docstring warnings fail."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install -r requirements-docs.txt; run_tests.sh does)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)], cwd=REPO, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cli_page = (site / "reference" / "cli.html").read_text()
    for path, _parser in _hook("cli_reference").commands(build_parser()):
        assert f"python -m relu_core {' '.join(path)}" in cli_page, path
    api_page = (site / "reference" / "api.html").read_text()
    assert [name for name in PUBLIC if f'id="relu_core.{relu_core._EXPORTS[name]}.{name}"' not in api_page] == []
    assert (site / "img" / "start.png").is_file()
