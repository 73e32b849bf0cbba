"""Runs: uploaded logits files (good and malformed) and the offline default run (digits + small CNN)."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from relu_core import engine, models, runs, training
from relu_core.errors import InputError

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(20, 3)).astype(np.float32)
LABELS = RNG.integers(0, 3, 20)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _table(kind: str, logits=LOGITS, labels=LABELS, names=("cat", "dog", "owl")) -> bytes:
    frame = pd.DataFrame(logits, columns=list(names))
    frame["label"] = labels
    if kind == "csv":
        return frame.to_csv(index=False).encode()
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    return buffer.getvalue()


def test_npz_upload_with_and_without_class_names():
    run = runs.load_logits_upload(_npz(logits=LOGITS, labels=LABELS, class_names=np.array(["a", "b", "c"])), "x.npz")
    assert np.array_equal(run.logits, LOGITS) and run.logits.dtype == np.float32
    assert np.array_equal(run.labels, LABELS) and run.labels.dtype == np.int64
    assert run.class_names == ("a", "b", "c") and run.images is None and run.model is None
    plain = runs.load_logits_upload(_npz(logits=LOGITS.astype(np.float64), labels=LABELS.astype(np.float32)), "y.npz")
    assert plain.class_names == ("0", "1", "2")
    assert plain.run_id != run.run_id  # class names are part of the content
    assert runs.load_logits_upload(_npz(logits=LOGITS, labels=LABELS), "z.npz").run_id == plain.run_id
    # the run picker's label starts with the file name (it cuts long labels) and tells same-named files apart
    from studio.runs import run_label

    assert run_label(run).startswith("x.npz (uploaded logits) · 20 samples × 3 classes · ")
    same_name = runs.load_logits_upload(_npz(logits=LOGITS + 1, labels=LABELS), "x.npz")
    assert run_label(same_name) != run_label(run) and run_label(run).endswith(run.run_id[:6])


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_table_uploads(kind):
    run = runs.load_logits_upload(_table(kind), f"logits.{kind}")
    assert run.class_names == ("cat", "dog", "owl")
    np.testing.assert_allclose(run.logits, LOGITS, rtol=1e-6)
    assert np.array_equal(run.labels, LABELS)
    by_name = runs.load_logits_upload(_table(kind, labels=np.array(["cat", "dog", "owl"])[LABELS]), f"n.{kind}")
    assert np.array_equal(by_name.labels, LABELS)


class _Hostile:
    def __reduce__(self):
        return (print, ("pwned",))


BAD_UPLOADS = {
    "truncated npz": (_npz(logits=LOGITS, labels=LABELS)[:200], "a.npz", "npz"),
    "not a zip": (b"hello world", "a.npz", "npz"),
    "missing labels": (_npz(logits=LOGITS), "a.npz", "'labels'"),
    "object array": (_npz(logits=np.array([LOGITS], dtype=object), labels=LABELS), "a.npz", "pickled"),
    "raw pickle": (pickle.dumps(_Hostile()), "a.npz", "pickled|npz"),
    "nan logits": (_npz(logits=np.where(np.eye(20, 3) > 0, np.nan, LOGITS), labels=LABELS), "a.npz", "NaN"),
    "inf logits": (_npz(logits=np.full((20, 3), np.inf), labels=LABELS), "a.npz", "infinite"),
    "1-d logits": (_npz(logits=LOGITS[:, 0], labels=LABELS), "a.npz", "2-D"),
    "one class": (_npz(logits=LOGITS[:, :1], labels=LABELS * 0), "a.npz", "2 classes"),
    "one sample": (_npz(logits=LOGITS[:1], labels=LABELS[:1]), "a.npz", "2 samples"),
    "label out of range": (_npz(logits=LOGITS, labels=LABELS + 3), "a.npz", "out of range"),
    "negative label": (_npz(logits=LOGITS, labels=LABELS - 1), "a.npz", "out of range"),
    "fractional labels": (_npz(logits=LOGITS, labels=LABELS + 0.5), "a.npz", "integer"),
    "label count": (_npz(logits=LOGITS, labels=LABELS[:5]), "a.npz", "disagree"),
    "2-d labels": (_npz(logits=LOGITS, labels=LABELS[:, None]), "a.npz", "one-dimensional"),
    "string logits": (_npz(logits=np.array([["a", "b"]] * 3), labels=np.zeros(3, int)), "a.npz", "numbers"),
    "bad class names": (
        _npz(logits=LOGITS, labels=LABELS, class_names=np.array(["a"])),
        "a.npz",
        "class_names holds 1 name for 3 logit columns",
    ),
    "numeric class names": (
        _npz(logits=LOGITS, labels=LABELS, class_names=np.arange(3)),
        "a.npz",
        "class_names must be a list of strings",
    ),
    "csv without label": (pd.DataFrame(LOGITS).to_csv(index=False).encode(), "a.csv", "'label'"),
    "csv text column": (b"a,b,label\n1,x,0\n2,y,1\n", "a.csv", "numbers"),
    "csv unknown label name": (_table("csv", labels=np.array(["cat"] * 19 + ["emu"])), "a.csv", "emu"),
    "garbage parquet": (b"PAR1 not really", "a.parquet", "cannot be read"),
    "empty csv": (b"", "a.csv", "cannot be read"),
    "unknown suffix": (b"1,2,3", "a.txt", "unsupported"),
}


@pytest.mark.parametrize("case", sorted(BAD_UPLOADS))
def test_bad_uploads_raise_one_line_input_error(case, capsys):
    data, name, message = BAD_UPLOADS[case]
    with pytest.raises(InputError, match=message) as info:
        runs.load_logits_upload(data, name)
    assert "\n" not in str(info.value)
    assert "pwned" not in capsys.readouterr().out


@pytest.mark.slow
def test_default_run_trains_once_then_is_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))  # a cold cache, whatever other tests computed
    progress: list[str] = []
    first = runs.default_run(progress=lambda done, total, message: progress.append(message))
    assert first.logits.shape == (899, 10) and first.images.shape == (899, 8, 8, 1)
    assert float((first.logits.argmax(1) == first.labels).mean()) >= 0.95
    assert first.model is not None and first.model_name == "cnn8" and first.class_names[3] == "3"
    assert progress  # training and logits reported progress

    def must_not_train(*args, **kwargs):
        raise AssertionError("the cached model should have been used")

    real = engine.compute_logits
    spot_checked: list[int] = []

    def must_not_compute(model, images, *args, **kwargs):
        # reading the entry recomputes a few rows only (runs.check_logits' spot check), never the whole set
        if len(images) > runs.SPOT_CHECK_ROWS:
            raise AssertionError("the cached logits should have been used")
        spot_checked.append(len(images))
        return real(model, images, *args, **kwargs)

    monkeypatch.setattr(training, "train_small_cnn", must_not_train)
    monkeypatch.setattr(engine, "compute_logits", must_not_compute)
    second = runs.default_run()
    assert np.array_equal(second.logits, first.logits) and second.run_id == first.run_id
    assert len(spot_checked) == 1  # the cached entry was checked against the model on read


def test_default_choice_prefers_fashion_mnist_then_digits(monkeypatch, shared_data):
    import dataclasses

    from relu_core import datasets

    monkeypatch.delenv(runs.DEFAULT_ENV, raising=False)
    monkeypatch.setenv("RELU_STUDIO_DATA", str(shared_data))
    assert runs.default_choice().dataset == "fashion-mnist" and runs.default_choice().model == "cnn28"
    missing = dataclasses.replace(datasets.DATASETS["fashion-mnist"], find=lambda split: (None, []))
    monkeypatch.setitem(datasets.DATASETS, "fashion-mnist", missing)  # nowhere on this machine
    assert runs.default_choice().dataset == "digits"
    monkeypatch.setenv(runs.DEFAULT_ENV, "fashion-mnist")  # forced: used even when it must fail clearly later
    assert runs.default_choice().dataset == "fashion-mnist"
    monkeypatch.setenv(runs.DEFAULT_ENV, "imagenet")
    with pytest.raises(InputError, match="RELU_STUDIO_DEFAULT"):
        runs.default_choice()


@pytest.mark.slow
def test_real_default_is_fashion_mnist_with_hundreds_of_errors(monkeypatch, shared_data):
    """The app's real default (no RELU_STUDIO_DEFAULT): trained here (one epoch, under a minute), then cached."""
    monkeypatch.delenv(runs.DEFAULT_ENV, raising=False)
    monkeypatch.setenv("RELU_STUDIO_DATA", str(shared_data))
    run = runs.default_run()
    assert run.logits.shape == (10_000, 10) and run.model_name == "cnn28"
    assert run.class_names[6] == "Shirt" and "epoch 1/1)" in run.source
    errors = int((run.logits.argmax(1) != run.labels).sum())
    assert 0.85 <= 1 - errors / 10_000 < 0.99  # a real classifier with real confusions
    assert errors >= 400  # hundreds of errors in each half of a 50 % split


def _hub_cached(tmp_path, monkeypatch, repo: str, arch: str, n_classes: int) -> torch.nn.Module:
    """The authors' Hub checkpoint ``repo`` as if downloaded before (a seeded model in the cache); nothing is
    fetched."""
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))
    torch.manual_seed(0)
    source = models.build_model(arch, n_classes).eval()
    (tmp_path / "hub").mkdir(exist_ok=True)
    torch.save(source.state_dict(), tmp_path / "hub" / f"{repo.replace('/', '--')}.pth")
    monkeypatch.setattr(torch.hub, "download_url_to_file", pytest.fail)
    return source


def test_hub_weights_give_a_run_with_the_checkpoints_normalisation(tmp_path, monkeypatch):
    from relu_core.datasets import ImageSet
    from relu_core.models.normalization import CIFAR100_MEAN, CIFAR100_STD

    source = _hub_cached(tmp_path, monkeypatch, "edadaltocg/resnet18_cifar100", "resnet18_cifar", 100)
    rng = np.random.default_rng(0)
    data = ImageSet(
        "tiny", rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8), np.arange(6), tuple(map(str, range(100)))
    )
    run = runs.logits_for("resnet18_cifar", "hf:edadaltocg/resnet18_cifar100", data, device="cpu")
    assert (run.mean, run.std) == (CIFAR100_MEAN, CIFAR100_STD)  # not the model family's CIFAR-10 statistics
    assert "Hugging Face Hub edadaltocg/resnet18_cifar100" in run.source
    expected = engine.compute_logits(source, data.images, mean=CIFAR100_MEAN, std=CIFAR100_STD, device="cpu")
    np.testing.assert_allclose(run.logits, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(InputError, match="is a resnet18_cifar for 100 classes, not a resnet34_cifar for 100"):
        runs.logits_for("resnet34_cifar", "hf:edadaltocg/resnet18_cifar100", data, device="cpu")
    with pytest.raises(InputError, match="unknown Hub checkpoint 'someone/else'"):
        runs.logits_for("resnet18_cifar", "hf:someone/else", data, device="cpu")


@pytest.mark.parametrize("labels", [np.array([0, 1, 2**63 + 1] * 20, dtype=np.uint64), np.array([0, 1, 1e30] * 20)])
def test_labels_too_large_for_a_class_index_are_named_as_they_are(labels):
    """uint64 2^63 + k was cast to int64 first and reported as "label -9223372036854775807 is out of range"."""
    with pytest.raises(InputError, match=r"label (9223372036854775809|1e\+30) is out of range"):
        runs.load_logits_upload(_npz(logits=np.zeros((60, 3)), labels=labels), "big.npz")


def test_a_small_cnn_without_weights_is_refused_on_user_data(tmp_path):
    """It is trained on a registered set's training split; user data has one split ("use split='test'")."""
    with pytest.raises(InputError, match=r"cnn28 has no weights for imagefolder:.*--weights FILE"):
        runs.small_cnn("cnn28", f"imagefolder:{tmp_path}")
