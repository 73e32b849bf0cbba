"""The report and the view's data ZIP name no absolute server path: files relative to the data root or the
cache (``paths.shown_path``), a logits file by its name and content hash."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

import numpy as np

from relu_core import explore, paths, report, runs

REPO = Path(__file__).resolve().parent.parent


def _server_paths() -> list[str]:
    """The absolute places a report must not name: the data root, the cache, the temporary folder (where this
    test session's cache and files live), the home folder and the checkout."""
    places = [os.environ[paths.DATA_ENV], paths.cache_dir(), tempfile.gettempdir(), Path.home(), REPO]
    return sorted({str(Path(p).resolve()) for p in places} | {str(p) for p in places}, key=len, reverse=True)


def test_shown_path_is_relative_to_the_data_root_or_the_cache(tmp_path):
    data_root = Path(os.environ[paths.DATA_ENV])
    assert paths.shown_path(data_root / "cifar10" / "test_jpeg_q75") == "$RELU_STUDIO_DATA/cifar10/test_jpeg_q75"
    assert paths.shown_path(paths.cache_dir("datasets") / "mnist") == "$RELU_STUDIO_CACHE/datasets/mnist"
    assert paths.shown_path(tmp_path / "elsewhere" / "run.npz") == "run.npz"  # outside both: its name
    assert paths.shown_path(Path.home() / "private" / "set") == "set"
    assert paths.shown_path("scikit-learn (bundled with the package)") == "scikit-learn (bundled with the package)"


def _texts(run, logits_file: Path | None = None) -> dict[str, str]:
    """The report's HTML and every file of the view's ZIP, as text."""
    setting = explore.Setting()
    view = explore.view(run, setting)
    texts = {"report.html": explore.report_html(run, view, setting, logits_file=logits_file)}
    with zipfile.ZipFile(BytesIO(explore.view_zip(run, view, setting))) as archive:
        texts.update({name: archive.read(name).decode("latin-1") for name in archive.namelist()})
    return texts


def test_report_and_zip_name_no_absolute_path(shared_data, tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 400)
    logits = (rng.normal(size=(400, 10)) + 3 * np.eye(10)[labels]).astype(np.float32)
    logits_file = tmp_path / "private" / "run.npz"
    logits_file.parent.mkdir()
    np.savez(logits_file, logits=logits, labels=labels)
    uploaded = runs.load_logits_upload(logits_file.read_bytes(), logits_file.name)
    # a run of a registered set read from the data root: its provenance says where, relative to the root
    run = dataclasses.replace(uploaded, recipe=(("dataset_spec", "fashion-mnist"),))
    texts = _texts(run, logits_file)
    forbidden = _server_paths()
    for name, text in texts.items():
        found = [place for place in forbidden if place in text]
        assert not found, (name, found)
    page = texts["report.html"]
    assert "read from $RELU_STUDIO_DATA/fashion-mnist" in page
    assert "<td>run.npz</td>" in page and hashlib.sha256(logits_file.read_bytes()).hexdigest() in page
    assert "$RELU_STUDIO_DATA/fashion-mnist" in texts["settings.json"]


def test_provenance_of_a_logits_file_names_it_without_its_folder(tmp_path):
    file = tmp_path / "run.npz"
    file.write_bytes(b"not read as logits here")
    run = runs.load_logits_upload(*_small_npz())
    info = report.provenance(run, logits_file=file)
    assert info["logits file"] == "run.npz"
    assert info["logits file SHA-256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert not any(str(tmp_path) in value for value in info.values())


def _small_npz() -> tuple[bytes, str]:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 60)
    buffer = BytesIO()
    np.savez(buffer, logits=rng.normal(size=(60, 3)) + 2 * np.eye(3)[labels], labels=labels)
    return buffer.getvalue(), "small.npz"
