"""What refused work leaves behind: nothing. A zip refused after extraction leaves no folder, an extraction
stopped half way leaves no staging folder, and the entries the cache moves aside (kept for inspection) are
pruned to a bounded count and age."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import hostile_files as hf
import pytest

from relu_core import cache, paths
from relu_core.datasets import DatasetError, load_uploaded_dataset
from relu_core.errors import Cancelled


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _zip_folder_contents(own_cache: Path) -> list[str]:
    folder = own_cache / "datasets" / "zip"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_zip_refused_after_extraction_leaves_nothing(own_cache, tmp_path):
    """An "image" that is no image passes every size check, is extracted, then refused: the extracted folder
    goes with the refusal (a 900 MiB one stayed in the cache before)."""
    hf.write_folder(tmp_path / "pets", n_per_class=1)
    (tmp_path / "pets" / "a" / "1.png").write_bytes(bytes(4096))
    data = hf.zip_folder(tmp_path / "pets")
    with pytest.raises(DatasetError):
        load_uploaded_dataset(data, "pets.zip")
    assert _zip_folder_contents(own_cache) == []
    with pytest.raises(DatasetError):  # refused again the same way, and still nothing left
        load_uploaded_dataset(data, "pets.zip")
    assert _zip_folder_contents(own_cache) == []


def test_an_extraction_stopped_half_way_leaves_nothing(own_cache, tmp_path, monkeypatch):
    hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")

    def cancelled(folder):
        raise Cancelled("stopped by the user")

    monkeypatch.setattr(cache, "write_manifest", cancelled)
    with pytest.raises(Cancelled):
        load_uploaded_dataset(data, "pets.zip")
    assert _zip_folder_contents(own_cache) == []


def test_damaged_extractions_moved_aside_are_bounded(own_cache, tmp_path):
    hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    target = own_cache / "datasets" / "zip" / hashlib.sha256(data).hexdigest()
    for _ in range(cache.MOVED_ASIDE_KEPT + 3):
        assert len(load_uploaded_dataset(data, "pets.zip")) == 6
        (target / "a" / "0.png").unlink()  # damaged: the next load moves it aside and extracts again
    assert len(load_uploaded_dataset(data, "pets.zip")) == 6
    moved = [name for name in _zip_folder_contents(own_cache) if ".broken-" in name]
    assert 1 <= len(moved) <= cache.MOVED_ASIDE_KEPT


def test_moved_aside_entries_older_than_the_bound_are_removed(own_cache):
    folder = paths.cache_dir("t")
    old = folder / "entry.npz.broken-0ld0ld00"
    old.mkdir()
    (old / "junk").write_bytes(b"x")
    stale = time.time() - cache.MOVED_ASIDE_MAX_AGE_S - 60
    os.utime(old, (stale, stale))
    squatter = cache.path_for("t", {"k": 1})
    squatter.mkdir()  # a directory where an entry belongs: moved aside, which prunes the folder
    assert cache.load("t", {"k": 1}) is None
    assert not old.exists()
    assert len(list(folder.glob("*.broken-*"))) == 1  # the one just moved aside, kept for inspection
