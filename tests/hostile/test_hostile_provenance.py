"""Hostile input, round five, on caches and provenance: a cached logits entry rewritten with its checksum
recomputed (as int64, its rows reversed, another key's record) is dropped and computed again; a forged model entry
(wrong shapes, missing arrays) is one warning line, moved aside and trained again; an image folder's cache keys on
its files' content (a replaced image of the same size and mtime is decoded again); a TorchScript model's weights
hash survives ``copy.deepcopy``; a training split of one class is refused."""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest
import torch

from relu_core import cache, cli, models, paths, training
from relu_core.datasets import userdata
from relu_core.errors import InputError


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _logits_command(argv_model: list[str], out: Path, capsys) -> tuple[int, str, np.ndarray | None]:
    argv = ["logits", *argv_model, "--dataset", "digits", "--device", "cpu", "--out", str(out)]
    status = cli.main(argv)
    err = capsys.readouterr().err
    if status != 0:
        return status, err, None
    with np.load(out) as written:
        return status, err, written["logits"]


def _rewrite(entry: Path, change) -> None:
    """Rewrite ``entry`` with ``change(arrays)`` and a checksum that matches again (a forger's cache write)."""
    with np.load(entry) as stored:
        arrays = {name: stored[name] for name in stored.files if name != "__checksum__"}
    arrays = change(arrays)
    checksum = cache._checksum(arrays, entry.stem)  # the file's name is its key's digest
    np.savez(entry, **arrays, __checksum__=np.array(checksum))


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: a cached entry")]


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda a: {**a, "logits": a["logits"].astype(np.int64)}, "int64"),
        (lambda a: {**a, "logits": a["logits"][::-1].copy()}, "do not match"),
        (lambda a: {"logits": a["logits"][::-1].copy()}, "do not match"),  # the record dropped too
        (lambda a: {**a, "__key__": np.array('{"kind": "logits", "other": 1}')}, "written for another key"),
    ],
    ids=["int64", "rows-reversed", "rows-reversed-no-record", "another-key"],
)
def test_a_forged_logits_entry_is_dropped_and_computed_again(change, reason, own_cache, tmp_path, capsys):
    weights = ["--model", "cnn8", "--weights", str(hf.state_dict_file(tmp_path / "cnn8.pt"))]
    status, _, first = _logits_command(weights, tmp_path / "first.npz", capsys)
    assert status == 0
    (entry,) = paths.cache_dir("logits").glob("*.npz")
    _rewrite(entry, change)
    status, err, again = _logits_command(weights, tmp_path / "again.npz", capsys)
    assert status == 0, err
    np.testing.assert_allclose(again, first, rtol=1e-5, atol=1e-5)
    (warning,) = _warnings(err)
    assert reason in warning


def test_what_the_cache_check_covers_is_said():
    assert "not against someone" in cache.__doc__ and "write access" in cache.__doc__


@pytest.fixture(scope="module")
def trained_cache(tmp_path_factory) -> tuple[Path, tuple[int, ...]]:
    """A cache in which ``logits --model cnn8 --dataset digits`` ran once (its model and logits entries), and the
    shape of the logits it wrote: each forged-entry case starts from a copy instead of training the CNN again."""
    folder = tmp_path_factory.mktemp("trained_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(paths.CACHE_ENV, str(folder / "cache"))
        out = folder / "first.npz"
        argv = ["logits", "--model", "cnn8", "--dataset", "digits", "--device", "cpu", "--out", str(out)]
        assert cli.main(argv) == 0
    with np.load(out) as written:
        return folder / "cache", written["logits"].shape


@pytest.mark.slow  # trains the digits CNN again (once more for the module's first copy)
@pytest.mark.parametrize(
    "change",
    [
        lambda a: {**a, next(iter(a)): np.zeros((3, 3), np.float32)},  # a wrong shape
        lambda a: dict(list(a.items())[1:]),  # an array missing
        lambda a: {**a, "extra.weight": np.zeros(2, np.float32)},  # an array too many
    ],
    ids=["wrong-shape", "missing", "extra"],
)
def test_a_forged_model_entry_is_one_line_moved_aside_and_trained_again(
    change, trained_cache, own_cache, tmp_path, capsys
):
    import shutil

    trained, first_shape = trained_cache
    shutil.copytree(trained, own_cache)  # as after a first ``logits --model cnn8`` run in this cache
    (entry,) = paths.cache_dir("models").glob("*.npz")
    _rewrite(entry, change)
    status, err, again = _logits_command(["--model", "cnn8"], tmp_path / "again.npz", capsys)
    assert status == 0, err
    assert "Traceback" not in err and "Error(s) in loading" not in err
    (warning,) = _warnings(err)
    assert "cnn8" in warning
    assert again.shape == first_shape
    assert entry.is_file()  # trained again and stored
    assert [p for p in paths.cache_dir("models").iterdir() if p.name != entry.name and "broken" in p.name]


def test_a_replaced_image_of_the_same_size_and_mtime_is_decoded_again(own_cache, tmp_path):
    from PIL import Image

    root = tmp_path / "folder"
    hf.write_folder(root)
    target = sorted((root / "a").iterdir())[0]
    with Image.open(target) as image:
        pixels = np.asarray(image).copy()
    Image.fromarray(pixels).save(target, compress_level=0)  # uncompressed: any image of its size has its bytes
    before = userdata.read_image_folder(root)[0]
    stat = target.stat()
    Image.fromarray(255 - pixels).save(target, compress_level=0)  # another image, the same size in bytes
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    assert target.stat().st_size == stat.st_size and target.stat().st_mtime_ns == stat.st_mtime_ns
    after = userdata.read_image_folder(root)[0]
    np.testing.assert_array_equal(after[0], (255 - pixels).reshape(after[0].shape))
    np.testing.assert_array_equal(after[1:], before[1:])


def test_a_torchscript_models_weights_hash_survives_a_deepcopy():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.script(models.build_model("cnn8", 10).eval())
        traced = torch.jit.trace(models.build_model("cnn8", 10).eval(), torch.zeros(2, 1, 8, 8))
    for model in (scripted, traced):
        assert models.weights_hash(copy.deepcopy(model)) == models.weights_hash(model)
    changed = copy.deepcopy(scripted)
    with torch.no_grad():
        changed.classifier.bias.add_(1.0)
    assert models.weights_hash(changed) != models.weights_hash(scripted)
    assert models.weights_hash(traced) != models.weights_hash(scripted)  # other code (and weights)


def test_training_a_classifier_of_one_class_is_refused():
    images = np.zeros((20, 8, 8, 1), np.uint8)
    with pytest.raises(InputError, match="at least 2 classes") as caught:
        training.train(images, np.zeros(20, np.int64), 10, arch="cnn8", epochs=1)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="at least 2 classes"):
        training.train_small_cnn(images, np.full(20, 3), 10, arch="cnn8", epochs=1)
