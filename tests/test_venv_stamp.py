"""``.ci/ensure_venv.sh``, sourced by run_app.sh and run_tests.sh: pip runs only when .venv was not built from the
very requirements files asked for (their SHA-256 in ``.venv/.requirements-stamp``). Driven with a stand-in
``.venv/bin/python`` that records its calls instead of installing anything."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".ci" / "ensure_venv.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None, reason="no bash")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text('#!/usr/bin/env bash\necho "$@" >> "$(dirname "$0")/../../pip.log"\n[ -z "${FAIL:-}" ]\n')
    python.chmod(0o755)
    (tmp_path / "requirements.txt").write_text("numpy==2.0.0\n")
    (tmp_path / "requirements-dev.txt").write_text("pytest==8.0.0\n")
    return tmp_path


def _ensure(tree: Path, *files: str, **env: str) -> subprocess.CompletedProcess:
    """``ensure_venv files`` in ``tree`` under ``set -euo pipefail``, as the scripts run it."""
    command = f"set -euo pipefail; source {SCRIPT}; ensure_venv {' '.join(files)}; echo finished"
    return subprocess.run(
        ["bash", "-c", command], cwd=tree, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env}
    )


def _installs(tree: Path) -> list[str]:
    log = tree / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_second_start_skips_pip(tree: Path) -> None:
    assert _ensure(tree, "requirements.txt").stdout.strip() == "finished"
    assert _installs(tree) == ["-m pip install -q --disable-pip-version-check -r requirements.txt"]
    assert _ensure(tree, "requirements.txt").stdout.strip() == "finished"
    assert len(_installs(tree)) == 1  # the same file: no pip
    # run_tests.sh asks for one more file: installed once, then the app's start and the tests' both skip pip
    _ensure(tree, "requirements.txt", "requirements-dev.txt")
    _ensure(tree, "requirements.txt", "requirements-dev.txt")
    _ensure(tree, "requirements.txt")
    assert len(_installs(tree)) == 2
    assert _installs(tree)[1].endswith("-r requirements.txt -r requirements-dev.txt")


def test_a_changed_file_installs_again_and_voids_the_others(tree: Path) -> None:
    _ensure(tree, "requirements.txt", "requirements-dev.txt")
    (tree / "requirements.txt").write_text("numpy==2.1.0\n")
    _ensure(tree, "requirements.txt")
    assert len(_installs(tree)) == 2
    _ensure(tree, "requirements.txt")
    assert len(_installs(tree)) == 2
    # the dev file was installed beside the old requirements: the tests' next start installs both again
    _ensure(tree, "requirements.txt", "requirements-dev.txt")
    assert len(_installs(tree)) == 3


def test_a_failed_install_leaves_no_stamp_and_fails_the_script(tree: Path) -> None:
    failed = _ensure(tree, "requirements.txt", FAIL="1")
    assert failed.returncode != 0 and "finished" not in failed.stdout
    assert not (tree / ".venv" / ".requirements-stamp").exists()
    _ensure(tree, "requirements.txt")
    assert len(_installs(tree)) == 2  # tried again


def test_reinstall_forced(tree: Path) -> None:
    _ensure(tree, "requirements.txt")
    _ensure(tree, "requirements.txt", RELU_STUDIO_REINSTALL="1")
    assert len(_installs(tree)) == 2
