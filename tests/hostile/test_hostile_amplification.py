"""Amplification: small compressed files that declare huge arrays (an .npz's labels or x, a zip's "image")
are refused from their declared sizes, before anything is inflated. Each case runs in a subprocess that
reports how much its peak memory grew while the file was refused: it must stay far below what the file
inflates to (the files are built here, a few hundred kilobytes each, written in 1 MiB steps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest

from relu_core import limits, runs

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
ZEROS = bytes(MIB)


def _npy_stream(archive: zipfile.ZipFile, name: str, array: np.ndarray | tuple[tuple[int, ...], str]) -> int:
    """Write member ``name``.npy: a real array, or (shape, dtype) of zeros written in 1 MiB steps (never held in
    memory whole). Returns the bytes it inflates to."""
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        if isinstance(array, np.ndarray):
            np.lib.format.write_array(member, array)
            return array.nbytes
        shape, dtype = array
        np.lib.format.write_array_header_1_0(
            member, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
        )
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        for start in range(0, size, MIB):
            member.write(ZEROS[: min(MIB, size - start)])
        return size


def _deflated_npz(path: Path, **arrays) -> int:
    """A compressed npz of ``arrays`` (see :func:`_npy_stream`); returns the bytes its members inflate to."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        return sum(_npy_stream(archive, name, array) for name, array in arrays.items())


# What the child process runs: the library's own entry for each file, and the peak of the memory Python and
# numpy allocated meanwhile (tracemalloc: numpy reports its arrays to it), one file after the other.
_CHILD = """
import json, sys, tracemalloc
from pathlib import Path
from relu_core import datasets, runs
from relu_core.errors import InputError
results = {}
tracemalloc.start()
for kind, path in json.loads(sys.argv[1]):
    data = Path(path).read_bytes()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        (runs.load_logits_upload if kind == "logits" else datasets.load_uploaded_dataset)(data, Path(path).name)
        message = None
    except InputError as error:
        message = str(error)
    results[path] = {"message": message, "peak": tracemalloc.get_traced_memory()[1] - base}
    del data
print(json.dumps(results))
"""


def _refused_in_child(files: list[tuple[str, Path]], cache: Path) -> dict[str, dict]:
    """For each (kind, path) of ``files``, loaded in turn by one fresh process: its InputError's message (or
    None) and the peak of the bytes allocated while it was read."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RELU_STUDIO_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps([(kind, str(path)) for kind, path in files])],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


CASES = {
    # labels inflate to 56 MiB (within the budget's floor) and disagree with the logits' 40 rows: the
    # declared shapes refuse them (the labels inflated to 1.6 GB; the budget refuses those too)
    "logits-labels-bomb": (
        "logits",
        "upload.npz",
        {"logits": hf.LOGITS, "labels": ((7 * MIB,), "<i8")},
        "labels and logits disagree on the number of samples",
    ),
    # 1,000,000 x 30 logits of zeros with matching labels, within every shape limit: 128 MB from ~130 KB
    "logits-consistent-bomb": (
        "logits",
        "upload.npz",
        {"logits": ((1_000_000, 30), "<f4"), "labels": ((1_000_000,), "<i8")},
        "would inflate",
    ),
    # x inflates to 160 MiB of zeros, y agrees: refused by the budget
    "dataset-x-bomb": (
        "dataset",
        "pixels.npz",
        {"x": ((160 * 1024, 32, 32), "|u1"), "y": ((160 * 1024,), "<i8")},
        "would inflate",
    ),
    # y inflates to 56 MiB (within the floor) and disagrees with x's 4 images
    "dataset-y-bomb": (
        "dataset",
        "pixels.npz",
        {"x": np.zeros((4, 8, 8), np.uint8), "y": ((7 * MIB,), "<i8")},
        "y has 7340032 labels but x has 4 images",
    ),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Where the files are built; ``cache/`` in it is the child's cache."""
    return tmp_path_factory.mktemp("amplification")


@pytest.fixture(scope="module")
def refused(folder: Path) -> dict[str, tuple[int, int, dict]]:
    """Every case of :data:`CASES` and the zip of :func:`_zip_with_a_zero_image`, built and loaded once: by name,
    (the file's size, the bytes it inflates to, what the child reported)."""
    built = {}
    for case, (kind, name, arrays, _) in CASES.items():
        path = folder / case / name
        path.parent.mkdir()
        built[case] = (kind, path, _deflated_npz(path, **arrays))
    zipped = folder / "zip" / "pets.zip"
    zipped.parent.mkdir()
    built["zip"] = ("dataset", zipped, _zip_with_a_zero_image(zipped, 160 * MIB))
    results = _refused_in_child([(kind, path) for kind, path, _ in built.values()], folder / "cache")
    return {case: (path.stat().st_size, inflated, results[str(path)]) for case, (_, path, inflated) in built.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_small_npz_that_inflates_is_refused_before_inflating(case, refused):
    size, inflated, result = refused[case]
    assert size < inflated // 100  # a bomb: the file is a tiny fraction of what it declares
    message, peak = result["message"], result["peak"]
    assert message is not None and CASES[case][3] in message and "\n" not in message
    assert peak < inflated // 8, f"{peak:,} bytes allocated for {inflated:,} inflated"


def test_the_budget_scales_with_the_file_and_has_a_floor_and_a_cap():
    assert limits.inflation_budget(0) == limits.SMALL_INFLATION_BYTES
    assert limits.inflation_budget(10 * MIB) == limits.MAX_COMPRESSION_RATIO * 10 * MIB
    assert limits.inflation_budget(1 << 40) == limits.MAX_INFLATED_BYTES
    assert limits.inflation_budget(10 * MIB, cap=MIB) == MIB


@pytest.mark.parametrize("fill", ["random", "zeros"])
def test_files_within_the_budget_are_read(fill, tmp_path):
    """Real logits compress about 2x; a small file of zeros inflates 1000x but stays under the budget's floor."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200_000, 2)) if fill == "random" else np.zeros((200_000, 2))
    path = tmp_path / "real.npz"
    np.savez_compressed(path, logits=logits.astype(np.float32), labels=np.zeros(200_000, np.int64))
    with zipfile.ZipFile(path) as archive:
        ratio = sum(info.file_size for info in archive.infolist()) / path.stat().st_size
    assert (ratio < 3) if fill == "random" else (ratio > limits.MAX_COMPRESSION_RATIO)
    assert runs.load_logits_upload(path.read_bytes(), "real.npz").logits.shape == (200_000, 2)


def _zip_with_a_zero_image(path: Path, image_bytes: int) -> int:
    """A zip of two class folders: ``a/big.png`` of ``image_bytes`` zeros (no image at all) and a real image."""
    hf.write_folder(path.parent / "real", n_per_class=1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("a/big.png", "w", force_zip64=True) as member:
            for start in range(0, image_bytes, MIB):
                member.write(ZEROS[: min(MIB, image_bytes - start)])
        archive.write(path.parent / "real" / "b" / "0.png", "b/0.png")
    return image_bytes


def test_a_zip_whose_image_inflates_is_refused_before_extraction_and_leaves_nothing(refused, folder):
    size, inflated, result = refused["zip"]
    assert size < inflated // 100
    assert result["message"] is not None and "would inflate" in result["message"]
    assert "relu_core.limits" in result["message"] and result["peak"] < inflated // 8
    cache = folder / "cache"
    left = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert left == [], f"refused work left {left}"
