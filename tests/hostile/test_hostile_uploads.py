"""Hostile uploads through the functions the app's sidebar calls (``studio.sidebar.load_upload``, which reads
logits with ``runs.load_logits_upload``, data sets from their bytes with ``datasets.load_uploaded_dataset`` and
models with ``runs.logits_for``): one InputError line each,
nothing big allocated. Also: a real scripted CNN works end to end (logits, ε, galleries)."""

from __future__ import annotations

import logging
import re
import tempfile

import hostile_files as hf
import numpy as np
import pytest
import torch

from relu_core import detectors, engine, errors, limits, models, preprocessing, runs
from relu_core.datasets import load_uploaded_dataset
from relu_core.errors import InputError
from studio import sidebar


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text.lower()


@pytest.mark.parametrize("name", list(hf.LOGITS_FILES))
def test_logits_upload_refuses_hostile_file(name):
    data, message = hf.LOGITS_FILES[name]
    with pytest.raises(InputError) as caught:
        sidebar.load_upload("logits", data, f"{name}.npz")
    if name == "empty":
        message = "is empty"
    assert message.lower() in _one_line(caught)


def test_allocation_bomb_is_refused_before_allocating(monkeypatch):
    def no_allocation(*args, **kwargs):
        raise AssertionError("np.load must not be reached")

    monkeypatch.setattr(np, "load", no_allocation)
    with pytest.raises(InputError, match="announces shape"):
        runs.load_logits_upload(hf.LOGITS_BOMB, "bomb.npz")


def test_5000_class_upload_is_refused_up_front_with_the_limit():
    data = hf.npz(logits=np.zeros((200, 5000), np.float32), labels=np.zeros(200, int))
    with pytest.raises(InputError, match=r"MAX_CLASSES"):
        runs.load_logits_upload(data, "wide.npz")


def test_1000_classes_are_accepted():
    labels = np.arange(2000) % 1000
    logits = np.eye(1000, dtype=np.float32)[labels]
    run = runs.load_logits_upload(hf.npz(logits=logits, labels=labels), "thousand.npz")
    assert run.n_classes == limits.MAX_CLASSES


@pytest.mark.parametrize("name", [*hf.BAD_SCRIPTED, "scripted-nan-weights", "state-nan", "state-inf"])
def test_model_upload_refuses_hostile_checkpoint(name, bad_models):
    expected = hf.BAD_SCRIPTED[name][1] if name in hf.BAD_SCRIPTED else "nan or infinite weights"
    with pytest.raises(InputError) as caught:
        sidebar.load_upload(
            "model",
            b"",
            "",
            model_data=bad_models[name].read_bytes(),
            model_filename="m.pt",
            arch="cnn8",
            dataset_spec="digits",
        )
    assert expected in _one_line(caught)


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("bomb.npz", hf.allocation_bomb("x", (10**7, 32, 32, 3), y=np.zeros(4, int)), "announces shape"),
        ("single.npz", hf.npy(np.zeros((4, 8, 8), np.uint8)), "single .npy array"),
        (
            "object.npz",
            hf.zip_members(**{"x.npy": hf.npy_header((2,), "|O", b""), "y.npy": hf.npy([0, 1])}),
            "pickled object array",
        ),
        ("labels-bomb.npz", hf.allocation_bomb("y", (10**11,), x=np.zeros((4, 8, 8), np.uint8)), "array 'y'"),
    ],
)
def test_data_set_upload_refuses_hostile_npz(name, data, message):
    with pytest.raises(InputError) as caught:
        load_uploaded_dataset(data, name)
    assert message in _one_line(caught)


def test_model_output_checks_name_the_problem():
    x = torch.zeros(3, 1, 8, 8)
    with pytest.raises(InputError, match="returned a list"):
        engine.check_outputs([x], 3)
    with pytest.raises(InputError, match="N = 3"):
        engine.check_outputs(torch.zeros(2, 10), 3)
    assert engine.check_outputs(torch.zeros(3, 10, dtype=torch.float64), 3).dtype == torch.float32


def test_unexpected_error_is_logged_with_a_reference(caplog):
    with caplog.at_level(logging.ERROR, logger="relu_core"):
        try:
            raise ZeroDivisionError("division by zero")
        except ZeroDivisionError as exc:
            line = errors.unexpected(exc, "Loading x.npz")
    reference = re.search(r"reference ([0-9a-f]{8})", line).group(1)
    assert "\n" not in line and "ZeroDivisionError" in line
    record = caplog.records[-1]
    assert reference in record.getMessage() and record.exc_info[0] is ZeroDivisionError


# ------------------------------------------------------------------------------- a valid TorchScript model


@pytest.fixture(scope="module")
def scripted_digits(tmp_path_factory):
    """The trained digits cnn8 (from the engine's cache) scripted into a TorchScript file."""
    path = tmp_path_factory.mktemp("scripted") / "cnn8_scripted.pt"
    torch.jit.script(runs.small_cnn("cnn8", "digits")).save(str(path))
    return path


@pytest.mark.slow
def test_scripted_cnn_runs_end_to_end(scripted_digits):
    path = scripted_digits
    scripted = sidebar.load_upload(
        "model", b"", "", model_data=path.read_bytes(), model_filename="cnn8.pt", arch="cnn8", dataset_spec="digits"
    )
    plain = runs.logits_for("cnn8", None, "digits", device="cpu")
    assert isinstance(scripted.model, torch.jit.ScriptModule)
    np.testing.assert_allclose(scripted.logits, plain.logits, rtol=1e-4, atol=1e-4)
    assert scripted.images is not None and scripted.images.shape[0] == len(scripted)  # galleries
    doctor = detectors.Doctor(1.0)
    idx = np.arange(64)
    perturbed = preprocessing.perturbed_scores(
        scripted.model, scripted.images, doctor, 0.002, mean=scripted.mean, std=scripted.std, indices=idx, device="cpu"
    )
    reference = preprocessing.perturbed_scores(
        plain.model, plain.images, doctor, 0.002, mean=plain.mean, std=plain.std, indices=idx, device="cpu"
    )
    np.testing.assert_allclose(perturbed, reference, rtol=1e-4, atol=1e-6)
    clean = doctor.score(scripted.logits[idx])
    assert not np.allclose(perturbed, clean)  # ε moved the scores


@pytest.mark.slow
def test_uploaded_checkpoint_is_read_from_its_bytes_without_a_temporary_file(scripted_digits, monkeypatch):
    upload = {"model_data": scripted_digits.read_bytes(), "model_filename": "cnn8.pt", "arch": "cnn8"}
    first = sidebar.load_upload("model", b"", "", dataset_spec="digits", **upload)  # caches the logits (atomic writes)

    def refuse(*args, **kwargs):
        raise AssertionError("the uploaded checkpoint went through a file")

    for name in (
        "TemporaryDirectory",
        "NamedTemporaryFile",
        "TemporaryFile",
        "SpooledTemporaryFile",
        "mkdtemp",
        "mkstemp",
    ):
        monkeypatch.setattr(tempfile, name, refuse)
    monkeypatch.setattr(models, "load_model_file", refuse)
    again = sidebar.load_upload("model", b"", "", dataset_spec="digits", **upload)
    assert again.run_id == first.run_id and again.source.startswith("cnn8 (cnn8.pt) on ")  # the upload's name


@pytest.mark.slow
def test_uploaded_data_set_is_read_from_its_bytes(scripted_digits):
    from relu_core import datasets

    digits = datasets.load_dataset("digits")
    data = hf.npz(x=digits.images[..., 0], y=digits.labels)
    uploaded = sidebar.load_upload(
        "model", data, "my digits.npz", model_data=scripted_digits.read_bytes(), model_filename="cnn8.pt", arch="cnn8"
    )
    plain = runs.logits_for("cnn8", None, "digits", device="cpu")
    assert uploaded.dataset_name == "my digits" and "on my digits" in uploaded.source  # the upload's own name
    np.testing.assert_array_equal(uploaded.labels, plain.labels)
    np.testing.assert_allclose(uploaded.logits, plain.logits, rtol=1e-4, atol=1e-4)
    with pytest.raises(InputError, match="upload a .zip of an image folder"):
        sidebar.load_upload(
            "model", data, "digits.csv", model_data=scripted_digits.read_bytes(), model_filename="cnn8.pt", arch="cnn8"
        )


@pytest.mark.slow
def test_scripted_cnn_through_the_cli_with_eps(scripted_digits, capsys):
    from relu_core import cli

    path = scripted_digits
    status = cli.main(hf.evaluate_argv(path, "--methods", "relu,doctor", "--eps", "0.002", "--json"))
    out = capsys.readouterr().out
    assert status == 0 and '"eps": 0.002' in out


def test_data_set_beyond_the_class_limit_is_refused_before_inference(tmp_path):
    labels = np.arange(limits.MAX_CLASSES + 1)
    (tmp_path / "wide.npz").write_bytes(hf.npz(x=np.zeros((labels.size, 8, 8), np.uint8), y=labels))
    with pytest.raises(InputError, match="1,001 classes, more than the limit of 1,000"):
        runs.logits_for("cnn8", None, f"npz:{tmp_path / 'wide.npz'}", device="cpu")
