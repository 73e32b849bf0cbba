"""Shared fixtures: real data from ../shared/data and an isolated cache directory per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# One spelling of the path for the code under test and the assertions (../shared may be a symlink).
SHARED_DATA = Path(os.environ.get("RELU_STUDIO_DATA") or REPO.parent / "shared" / "data").resolve()
os.environ["RELU_STUDIO_DATA"] = str(SHARED_DATA)
# The app's default run is Fashion-MNIST (a 40 s training) where it is found; tests use digits (a second) unless
# a test asks for the real default (tests/test_runs.py, marked slow).
os.environ.setdefault("RELU_STUDIO_DEFAULT", "digits")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session writes its caches to a fresh temporary directory, never to data_cache/."""
    path = tmp_path_factory.mktemp("relu_cache")
    os.environ["RELU_STUDIO_CACHE"] = str(path)
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that read ../shared/data carry the ``real_data`` marker (``-m "not real_data"`` skips them)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_data)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets and weights in ../shared/data (skips the test where they are absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA
