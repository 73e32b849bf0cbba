"""Caches that lie: every entry is checked against a checksum of its content and its key, extracted zips
against their manifest, and whatever squats an entry (a directory) is moved aside and recomputed."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest

from relu_core import cache, paths
from relu_core.datasets import load_dataset, load_uploaded_dataset
from relu_core.errors import InputError


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    """A fresh cache directory for the test (entries of other tests do not interfere)."""
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(arrays):
    calls = []

    def compute():
        calls.append(1)
        return arrays

    return compute, calls


def test_cache_roundtrip_and_hit(own_cache):
    compute, calls = _counting({"a": np.arange(5)})
    cache.cached("t", {"k": 1}, compute)
    np.testing.assert_array_equal(cache.cached("t", {"k": 1}, compute)["a"], np.arange(5))
    assert len(calls) == 1


def test_entry_rewritten_with_other_arrays_is_recomputed(own_cache):
    compute, calls = _counting({"a": np.arange(5)})
    cache.cached("t", {"k": 1}, compute)
    path = cache.path_for("t", {"k": 1})
    with np.load(path) as stored:
        checksum = stored["__checksum__"]
    np.savez(path, a=np.arange(5) + 1, __checksum__=checksum)  # other content, the old checksum
    np.testing.assert_array_equal(cache.cached("t", {"k": 1}, compute)["a"], np.arange(5))
    assert len(calls) == 2


def test_entry_copied_from_another_key_is_recomputed(own_cache):
    cache.cached("t", {"k": 1}, lambda: {"a": np.zeros(3)})
    compute, calls = _counting({"a": np.ones(3)})
    shutil.copy(cache.path_for("t", {"k": 1}), cache.path_for("t", {"k": 2}))  # a valid file, the wrong key
    np.testing.assert_array_equal(cache.cached("t", {"k": 2}, compute)["a"], np.ones(3))
    assert calls == [1]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "no-checksum"])
def test_damaged_entry_is_recomputed(own_cache, damage):
    cache.cached("t", {"k": 1}, lambda: {"a": np.arange(50)})
    path = cache.path_for("t", {"k": 1})
    data = path.read_bytes()
    path.write_bytes(
        {
            "truncated": data[: len(data) // 2],
            "garbage": b"garbage",
            "empty": b"",
            "no-checksum": hf.npz(a=np.arange(50)),
        }[damage]
    )
    compute, calls = _counting({"a": np.arange(50)})
    np.testing.assert_array_equal(cache.cached("t", {"k": 1}, compute)["a"], np.arange(50))
    assert calls == [1]


def test_entry_replaced_by_a_directory_is_moved_aside_and_recomputed(own_cache):
    path = cache.path_for("t", {"k": 1})
    path.mkdir()
    (path / "junk").write_text("x")
    compute, calls = _counting({"a": np.arange(3)})
    np.testing.assert_array_equal(cache.cached("t", {"k": 1}, compute)["a"], np.arange(3))
    assert calls == [1] and path.is_file()
    assert [p.name for p in path.parent.glob(f"{path.name}.broken-*")]  # kept for inspection, not deleted
    assert cache.load("t", {"k": 1}) is not None


def test_entry_that_cannot_be_moved_aside_names_what_to_remove(own_cache, monkeypatch):
    path = cache.path_for("t", {"k": 1})
    path.mkdir()

    def refuse(self, target):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "rename", refuse)
    with pytest.raises(InputError) as caught:
        cache.cached("t", {"k": 1}, lambda: {"a": np.arange(3)})
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "remove it" in message


def test_atomic_write_leaves_no_temporary_file_on_failure(own_cache, tmp_path):
    target = tmp_path / "out.bin"

    def fail(stream):
        stream.write(b"half")
        raise OSError("disk full")

    with pytest.raises(InputError, match=r"cannot write .*out\.bin \(disk full\)"):
        cache.atomic_write(target, fail)
    assert not target.exists() and not list(tmp_path.glob(".tmp-*"))
    cache.atomic_write(target, lambda stream: stream.write(b"whole"))
    assert target.read_bytes() == b"whole"


def test_atomic_write_moves_aside_only_the_cache_s_own_entries(own_cache, tmp_path):
    """A folder where a file belongs is a damaged cache entry when the cache writes it, but a path the user
    named (a report's --out) must never be renamed away."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keep.txt").write_text("precious")
    with pytest.raises(InputError, match="is a directory, not a file"):
        cache.atomic_write(folder, lambda stream: stream.write(b"report"))
    assert (folder / "keep.txt").read_text() == "precious" and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    cache.atomic_write(folder, lambda stream: stream.write(b"entry"), move_non_file=True)
    assert folder.read_bytes() == b"entry" and len(list(tmp_path.glob("mine.broken-*"))) == 1


def test_atomic_write_mode_sets_the_permissions_of_the_finished_file(own_cache, tmp_path):
    private = cache.atomic_write(tmp_path / "private.npz", lambda stream: stream.write(b"arrays"))
    assert private.stat().st_mode & 0o777 == 0o600  # the cache's own files: mkstemp's private mode
    shared = cache.atomic_write(tmp_path / "shared.txt", lambda stream: stream.write(b"text"), mode=0o640)
    assert shared.stat().st_mode & 0o777 == 0o640 and shared.read_bytes() == b"text"
    document = cache.write_document(tmp_path / "table.csv", "λ,auroc\n0.5,0.9\n")
    assert document.stat().st_mode & 0o777 == cache.DOCUMENT_MODE == 0o644
    assert document.read_text(encoding="utf-8") == "λ,auroc\n0.5,0.9\n"
    assert not list(tmp_path.glob(".tmp-*"))


# ------------------------------------------------------------------------------------------ image folders


def _folder_cache_files(own_cache: Path) -> list[Path]:
    return sorted((own_cache / "datasets" / "imagefolder").glob("*.npz"))


def test_image_folder_cache_rewritten_with_other_pixels_is_recomputed(own_cache, tmp_path):
    expected = hf.write_folder(tmp_path / "pets")
    load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    (entry,) = _folder_cache_files(own_cache)
    with np.load(entry) as stored:
        arrays = dict(stored)
    arrays["images"] = np.zeros_like(arrays["images"])  # other pixels, same shapes, the old checksum
    np.savez(entry, **arrays)
    np.testing.assert_array_equal(load_dataset(f"imagefolder:{tmp_path / 'pets'}").images, expected)


def test_image_folder_cache_without_checksum_is_recomputed(own_cache, tmp_path):
    expected = hf.write_folder(tmp_path / "pets")
    load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    (entry,) = _folder_cache_files(own_cache)
    np.savez(entry, images=np.zeros_like(expected), labels=np.repeat([0, 1], 3))  # as the old cache wrote it
    np.testing.assert_array_equal(load_dataset(f"imagefolder:{tmp_path / 'pets'}").images, expected)


def test_image_folder_cache_replaced_by_a_directory(own_cache, tmp_path):
    expected = hf.write_folder(tmp_path / "pets")
    load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    (entry,) = _folder_cache_files(own_cache)
    entry.unlink()
    entry.mkdir()
    np.testing.assert_array_equal(load_dataset(f"imagefolder:{tmp_path / 'pets'}").images, expected)
    assert entry.is_file()


# --------------------------------------------------------------------------------------------------- zips


def _zip_target(own_cache: Path, data: bytes) -> Path:
    return own_cache / "datasets" / "zip" / hashlib.sha256(data).hexdigest()


def test_zip_cache_with_an_image_deleted_is_extracted_again(own_cache, tmp_path):
    expected = hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    assert len(load_uploaded_dataset(data, "pets.zip")) == 6
    (_zip_target(own_cache, data) / "b" / "2.png").unlink()
    again = load_uploaded_dataset(data, "pets.zip")
    assert len(again) == 6
    np.testing.assert_array_equal(again.images, expected)


def test_zip_cache_with_an_image_edited_is_extracted_again(own_cache, tmp_path):
    expected = hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    load_uploaded_dataset(data, "pets.zip")
    shutil.copy(tmp_path / "pets" / "a" / "0.png", _zip_target(own_cache, data) / "b" / "0.png")
    np.testing.assert_array_equal(load_uploaded_dataset(data, "pets.zip").images, expected)


def test_zip_cache_with_an_extra_image_is_extracted_again(own_cache, tmp_path):
    hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    load_uploaded_dataset(data, "pets.zip")
    shutil.copy(tmp_path / "pets" / "a" / "0.png", _zip_target(own_cache, data) / "b" / "9.png")
    assert len(load_uploaded_dataset(data, "pets.zip")) == 6


def test_zip_cache_without_manifest_is_extracted_again(own_cache, tmp_path):
    hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    load_uploaded_dataset(data, "pets.zip")
    target = _zip_target(own_cache, data)
    (target / cache.MANIFEST).unlink()
    (target / "a" / "1.png").unlink()
    assert len(load_uploaded_dataset(data, "pets.zip")) == 6 and (target / cache.MANIFEST).is_file()


def test_zip_cache_replaced_by_a_file_is_extracted_again(own_cache, tmp_path):
    hf.write_folder(tmp_path / "pets")
    data = hf.zip_folder(tmp_path / "pets")
    target = _zip_target(own_cache, data)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"not a folder")
    assert len(load_uploaded_dataset(data, "pets.zip")) == 6 and target.is_dir()


def test_manifest_lists_sizes_and_checksums(tmp_path):
    folder = tmp_path / "f"
    (folder / "x").mkdir(parents=True)
    (folder / "x" / "1.bin").write_bytes(b"abc")
    cache.write_manifest(folder)
    assert cache.manifest_matches(folder)
    os.truncate(folder / "x" / "1.bin", 1)
    assert not cache.manifest_matches(folder)


def test_concurrent_requests_for_one_key_compute_once(own_cache):
    import threading
    import time

    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return {"a": np.arange(3)}

    workers = [threading.Thread(target=cache.cached, args=("t", {"k": "shared"}, slow)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert calls == [1] and not cache._KEY_LOCKS


def test_entry_with_a_crafted_header_is_recomputed_without_allocating(own_cache, monkeypatch):
    path = cache.path_for("t", {"k": 1})
    path.write_bytes(hf.allocation_bomb("a", (10**8, 10**5)))
    real_load = np.load

    def guarded(*args, **kwargs):
        if str(args[0]) == str(path):
            raise AssertionError("np.load must not read the crafted entry")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", guarded)
    compute, calls = _counting({"a": np.arange(3)})
    np.testing.assert_array_equal(cache.cached("t", {"k": 1}, compute)["a"], np.arange(3))
    assert calls == [1]
