"""Hostile input, round four, on the detector export (issue 37, items 3, 4 and 10) and the optional dependencies
(issue 34): every kind of run exports or says in one line why not; the card is strict JSON; the export writes the
file asked for and its own card, nothing else, in one file mode, with the ONNX file's hash and no escape codes
echoed; a missing optional package is one line naming the extra to install (exit 2)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import stat
import sys
import warnings
import zipfile

import numpy as np
import pytest
import torch

from relu_core import cli, corruptions, detector_export, models, runs, stats
from relu_core.errors import InputError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def _strict(text: str | bytes):
    def refuse(constant: str):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def scripted_file(tmp_path_factory) -> tuple[bytes, object]:
    """A TorchScript cnn8 (random weights) as the bytes of an upload."""
    torch.manual_seed(0)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(models.build_model("cnn8", 10).eval()), buffer)
    path = tmp_path_factory.mktemp("scripted") / "scripted_cnn8.pt"
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture(scope="module")
def logits_file(digits_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "digits.npz"
    np.savez(path, logits=digits_run.logits, labels=digits_run.labels, class_names=np.array(digits_run.class_names))
    return path


# ------------------------------------------------------------------------------- 3: every kind of run exports


def test_a_torchscript_model_run_exports_its_images_in_detector(scripted_file, tmp_path, capsys):
    """Was: ``copy.deepcopy(model).eval().requires_grad_(False)``, refused by a ScriptModule: exit 1."""
    run = runs.logits_for("cnn8", scripted_file.read_bytes(), "digits", weights_name="scripted.pt", device="cpu")
    assert isinstance(run.model, torch.jit.ScriptModule)
    flags = ["export", "--model", "cnn8", "--weights", str(scripted_file), "--dataset", "digits", "--device", "cpu"]
    out = tmp_path / "images.onnx"
    assert cli.main([*flags, "--input", "images", "--out", str(out)]) == 0, capsys.readouterr().err
    fitted = detector_export.fit_deployable(run, "relu")
    session = ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"])
    _, uncertainty, _ = session.run(None, {"images": np.asarray(run.images[:64])})
    np.testing.assert_allclose(uncertainty, fitted.detector.score(run.logits[:64]), atol=1e-5)
    # .pt2 cannot hold TorchScript: one line saying what to write instead, nothing written
    status = cli.main([*flags, "--input", "images", "--out", str(tmp_path / "images.pt2")])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "cannot be written as .pt2" in line and "write it as .onnx" in line
    assert not (tmp_path / "images.pt2").exists()
    # what Explore's button downloads: the run's model is left as it was
    archive = zipfile.ZipFile(io.BytesIO(detector_export.export_zip(run, fitted)))
    assert {"detector.onnx", "detector.pt2", "detector_images.onnx", "detector_images.pt"} <= set(archive.namelist())
    card = _strict(archive.read("detector.json"))
    assert "cannot be written as .pt2" in card["not_written"]["detector_images.pt2"]
    assert isinstance(run.model, torch.jit.ScriptModule) and run.model(torch.zeros(1, 1, 8, 8)).requires_grad


def test_an_onnx_run_exports_its_logits_in_detector_and_says_why_not_images(digits_run, tmp_path, capsys):
    onnx_path = tmp_path / "linear.onnx"
    torch.onnx.export(
        digits_run.model,
        (torch.zeros(1, 1, 8, 8),),
        str(onnx_path),
        dynamo=False,
        opset_version=17,
        input_names=["x"],
        dynamic_axes={"x": {0: "n"}},
    )
    flags = ["export", "--weights", str(onnx_path), "--dataset", "digits", "--device", "cpu"]
    assert cli.main([*flags, "--out", str(tmp_path / "logits.onnx")]) == 0
    card = _strict((tmp_path / "logits.onnx.json").read_text())
    sha = hashlib.sha256(onnx_path.read_bytes()).hexdigest()
    # was: "weights SHA-256": "— (logits only)" for a run that has a model, the ONNX file
    assert card["run"]["weights SHA-256"].startswith(sha) and "linear.onnx" in card["run"]["weights SHA-256"]
    capsys.readouterr()
    assert cli.main([*flags, "--input", "images", "--out", str(tmp_path / "images.onnx")]) == 2
    assert "this run's model is ONNX" in _one_error_line(capsys.readouterr().err)


# ------------------------------------------------------------------------------- 4: strict JSON


def test_a_zero_over_zero_rate_is_null_in_every_copy_of_the_card(digits_run):
    """Was: bare ``NaN`` in the card, the ONNX metadata and the TorchScript extra file."""
    fitted = detector_export.fit_deployable(digits_run, "relu")
    correct = np.ones(fitted.n_eval, bool)  # an evaluation split without errors: FPR 0/0
    nothing = np.zeros(fitted.n_eval, bool)  # and nothing accepted: risk 0/0
    undefined = dataclasses.replace(
        fitted,
        evaluation={
            **stats.acceptance_rates(nothing, ~correct | True, n_resamples=50),
            "risk": stats.acceptance_rates(nothing, correct, n_resamples=50)["risk"],
        },
    )
    assert np.isnan(undefined.evaluation["fpr"].estimate) and np.isnan(undefined.evaluation["risk"].estimate)
    card = detector_export.card(digits_run, undefined, {"detector.pt2": "logits"})
    text = json.dumps(card, allow_nan=False)  # raises on NaN
    assert card["operating_point"]["evaluation"]["fpr"]["estimate"] is None
    assert card["operating_point"]["evaluation"]["risk"]["ci_low"] is None
    assert "null" in card["null"] and "never as NaN" in card["null"]
    copies = {}
    props = onnx.load_model_from_string(detector_export.export(digits_run, undefined, ".onnx")).metadata_props
    copies["onnx"] = {p.key: p.value for p in props}["detector.json"]
    extra = {"detector.json": ""}
    torch.export.load(io.BytesIO(detector_export.export(digits_run, undefined, ".pt2")), extra_files=extra)
    copies["pt2"] = extra["detector.json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        legacy = {"detector.json": ""}
        torch.jit.load(io.BytesIO(detector_export.export(digits_run, undefined, ".pt")), _extra_files=legacy)
    copies["pt"] = legacy["detector.json"]
    for where, copy in copies.items():  # each parses as strict JSON (bare NaN would raise)
        assert _strict(copy)["operating_point"]["evaluation"]["fpr"]["estimate"] is None, where
    assert _strict(text) == card


# ------------------------------------------------------------------------------- 10: the file asked for


def test_an_existing_json_beside_the_output_is_left_alone(logits_file, tmp_path, capsys):
    """Was: ``X.json`` beside ``--out X.onnx`` replaced silently."""
    mine = tmp_path / "det.json"
    mine.write_text('{"my": "notes"}')
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / "det.onnx")]) == 0
    assert mine.read_text() == '{"my": "notes"}'
    assert _strict((tmp_path / "det.onnx.json").read_text())["files"] == {"det.onnx": "logits"}
    # a file where the card would go that is not this output's card: refused, nothing written
    squat = tmp_path / "other.pt2.json"
    squat.write_text("my own file")
    capsys.readouterr()
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / "other.pt2")]) == 2
    assert "not the card of other.pt2" in _one_error_line(capsys.readouterr().err)
    assert squat.read_text() == "my own file" and not (tmp_path / "other.pt2").exists()
    # its own card, from an earlier export of the same file, is replaced with the file
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / "det.onnx")]) == 0


def test_two_formats_of_one_stem_keep_their_own_cards(logits_file, tmp_path):
    """Was: relu.onnx then relu.pt shared relu.json (the second replaced the first's card)."""
    for name in ("relu.onnx", "relu.pt", "relu.pt2"):
        assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / name)]) == 0
        assert not (tmp_path / "relu.json").exists()
        assert _strict((tmp_path / "relu.onnx.json").read_text())["files"] == {"relu.onnx": "logits"}
    for name in ("relu.onnx", "relu.pt", "relu.pt2"):
        assert _strict((tmp_path / f"{name}.json").read_text())["files"] == {name: "logits"}


def test_the_detector_and_its_card_share_one_file_mode(logits_file, tmp_path):
    """Was: .onnx/.pt 0600, the card 0644."""
    for name in ("m.onnx", "m.pt2", "m.pt"):
        assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / name)]) == 0
        modes = {stat.S_IMODE((tmp_path / n).stat().st_mode) for n in (name, f"{name}.json")}
        assert modes == {0o644}, (name, [oct(m) for m in modes])


def test_the_success_line_echoes_no_escape_codes(logits_file, tmp_path, capsys):
    name = "evil\x1b[31m\x1b]0;title\x07.onnx"
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / name)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and out.startswith("wrote ")
    assert (tmp_path / name).is_file()


# ------------------------------------------------------------------------------- issue 34: the optional extras


def test_export_as_onnx_without_the_onnx_extra_is_one_line(logits_file, tmp_path, capsys, monkeypatch):
    """Was: "unexpected ModuleNotFoundError", exit 1, after a plain ``pip install .``."""
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now fails as if it were not installed
    status = cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / "det.onnx")])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and 'pip install "relu-core[onnx]"' in line and "exporting a detector as ONNX" in line
    assert not (tmp_path / "det.onnx").exists()
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(tmp_path / "det.pt2")]) == 0  # no extra


@pytest.mark.parametrize("hidden", ["onnx", "onnxruntime"])
def test_an_onnx_model_in_without_the_extra_is_one_line(hidden, digits_run, tmp_path, capsys, monkeypatch):
    onnx_path = tmp_path / "linear.onnx"
    torch.onnx.export(
        digits_run.model,
        (torch.zeros(1, 1, 8, 8),),
        str(onnx_path),
        dynamo=False,
        opset_version=17,
        input_names=["x"],
        dynamic_axes={"x": {0: "n"}},
    )
    monkeypatch.setitem(sys.modules, hidden, None)
    argv = ["logits", "--weights", str(onnx_path), "--dataset", "digits", "--out", str(tmp_path / "l.npz")]
    status = cli.main(argv)
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and 'pip install "relu-core[onnx]"' in line and "running an ONNX model" in line


def test_frost_without_the_corruptions_extra_names_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "imagecorruptions", None)
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))  # no frost/ folder in any data directory
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path / "cache"))
    images = np.zeros((1, 32, 32, 3), np.uint8)
    with pytest.raises(InputError) as info:
        corruptions.corrupt(images, "frost", 3)
    message = str(info.value)
    assert 'pip install "relu-core[corruptions]"' in message and "\n" not in message
    assert corruptions.corrupt(images, "fog", 3).shape == images.shape  # the others need nothing more


def test_explores_export_without_the_onnx_extra_still_gives_the_pt2(digits_run, monkeypatch):
    """What Explore's button downloads after a plain ``pip install .``: the .pt2 and a card saying why no .onnx."""
    fitted = detector_export.fit_deployable(digits_run, "relu")
    monkeypatch.setitem(sys.modules, "onnx", None)
    archive = zipfile.ZipFile(io.BytesIO(detector_export.export_zip(digits_run, fitted)))
    assert {"detector.pt2", "detector.json"} <= set(archive.namelist())
    assert not [n for n in archive.namelist() if n.endswith(".onnx")]
    card = _strict(archive.read("detector.json"))
    assert 'pip install "relu-core[onnx]"' in card["not_written"]["detector.onnx"]
