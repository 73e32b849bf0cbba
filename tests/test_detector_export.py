"""Deployable detectors (``relu_core.detector_export``, ``python -m relu_core export``): the ExportedProgram
(``.pt2``), the ONNX graph and the legacy TorchScript module return the library's predictions and scores on the
run's evaluation split, their accept flags give the operating point's TPR and FPR (or, at a guaranteed risk, the
certified threshold's risk and coverage), the card travels with them, is strict JSON and names no server path; the
images-in variant wraps a tiny model; bad requests are one line."""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

from relu_core import cli, detector_export, detectors, runs, stats
from relu_core.errors import InputError
from relu_core.explore import cached

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def run_onnx(content: bytes, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


def run_torchscript(content: bytes, x: np.ndarray) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.load's deprecation notice
        module = torch.jit.load(io.BytesIO(content))
    with torch.no_grad():
        return [t.numpy() for t in module(torch.from_numpy(x))]


def run_pt2(content: bytes, x: np.ndarray) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # torch.export.load is not deprecated: no notice to hide
        program = torch.export.load(io.BytesIO(content))
    with torch.no_grad():
        return [t.numpy() for t in program.module()(torch.from_numpy(x))]


def strict_json(text: str):
    """``json.loads`` that refuses NaN and infinities, as strict parsers do."""

    def refuse(constant: str):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


RUNNERS = {".pt2": run_pt2, ".onnx": run_onnx, ".pt": run_torchscript}
SETTINGS = {
    "relu": {"temperature": 1.5, "lam": 0.6},
    "relu-auto": {"temperature": 1.0, "lam": "auto"},
    "doctor": {"temperature": 2.0},
    "msp": {"temperature": 1.0},
}


@pytest.mark.parametrize("suffix", list(RUNNERS))
@pytest.mark.parametrize("name", list(SETTINGS))
def test_exported_detector_equals_the_library_on_the_evaluation_split(name, suffix, digits_run):
    key = name.split("-")[0]
    fitted = detector_export.fit_deployable(digits_run, key, tune_fraction=0.4, seed=3, **SETTINGS[name])
    _, correct = cached.correctness(digits_run)
    tune_idx, eval_idx = cached.split_for(digits_run, 0.4, 3)
    # the library, directly: the detector fitted on the tuning split, scored on the evaluation split
    library = detectors.make_detector(key, SETTINGS[name]["temperature"], SETTINGS[name].get("lam", 0.5))
    library.fit(digits_run.logits[tune_idx], digits_run.labels[tune_idx])
    expected = library.score(digits_run.logits[eval_idx])
    assert fitted.tuning.tpr >= 0.95  # the threshold reaches the target on the tuning split

    prediction, uncertainty, accept = RUNNERS[suffix](
        detector_export.export(digits_run, fitted, suffix), digits_run.logits[eval_idx]
    )
    assert prediction.dtype == np.int64 and accept.dtype == np.bool_
    np.testing.assert_array_equal(prediction, digits_run.logits[eval_idx].argmax(1))
    np.testing.assert_allclose(uncertainty, expected, rtol=1e-6, atol=1e-12)
    clear = np.abs(expected - fitted.threshold) > 1e-9  # the library and the file agree on every clear decision
    np.testing.assert_array_equal(accept[clear], (expected <= fitted.threshold)[clear])
    # the accept flags reproduce the operating point the card reports
    correct_eval = correct[eval_idx]
    assert accept[correct_eval].mean() == fitted.evaluation["tpr"].estimate
    assert accept[~correct_eval].mean() == fitted.evaluation["fpr"].estimate
    assert accept.mean() == fitted.evaluation["coverage"].estimate


def test_non_finite_logits_are_never_accepted(digits_run):
    fitted = detector_export.fit_deployable(digits_run, "relu")
    logits = np.array(digits_run.logits[:3])
    logits[1, 2] = np.nan
    for suffix, runner in RUNNERS.items():
        _, uncertainty, accept = runner(detector_export.export(digits_run, fitted, suffix), logits)
        assert np.isnan(uncertainty[1]) and not accept[1], suffix


def _tiny_cnn_run(digits_run) -> runs.Run:
    """The digits fixture behind a 1x1 convolution with a BatchNorm: a tiny CNN with the same logits."""
    conv, norm = nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([1.0, 0.5]).view(2, 1, 1, 1))
        conv.bias.zero_()
        norm.running_var.fill_(1.0 - norm.eps)  # an identity BatchNorm, up to rounding
    pick = nn.Conv2d(2, 1, 1, bias=False)
    with torch.no_grad():
        pick.weight.copy_(torch.tensor([1.0, 0.0]).view(1, 2, 1, 1))
    model = nn.Sequential(conv, norm, pick, *digits_run.model).eval()
    return runs.Run(
        "tiny-cnn-digits",
        digits_run.logits,
        digits_run.labels,
        digits_run.class_names,
        images=digits_run.images,
        model=model,
        model_name="tiny-cnn",
        mean=digits_run.mean,
        std=digits_run.std,
        dataset_name="digits",
        source="tiny CNN on digits (test)",
    )


@pytest.mark.parametrize("suffix", list(RUNNERS))
def test_the_images_in_detector_wraps_the_model(suffix, digits_run):
    run = _tiny_cnn_run(digits_run)
    fitted = detector_export.fit_deployable(run, "relu")
    _, eval_idx = cached.split_for(run, 0.5, 0)
    prediction, uncertainty, accept = RUNNERS[suffix](
        detector_export.export(run, fitted, suffix, "images"), np.array(run.images[eval_idx])
    )
    expected = fitted.detector.score(run.logits[eval_idx])
    np.testing.assert_array_equal(prediction, run.logits[eval_idx].argmax(1))
    np.testing.assert_allclose(uncertainty, expected, atol=1e-5)  # the model's float32 logits, recomputed
    clear = np.abs(expected - fitted.threshold) > 1e-5  # away from the threshold the decisions agree exactly
    assert clear.mean() > 0.95
    np.testing.assert_array_equal(accept[clear], (expected <= fitted.threshold)[clear])


def test_the_card_travels_with_the_files_and_names_no_server_path(digits_run, tmp_path):
    run = runs.Run.from_logits(
        digits_run.logits,
        digits_run.labels,
        digits_run.class_names,
        source=f"{tmp_path}/secret/folder/weights.pt on {tmp_path}/data",
        dataset_name="digits",
    )
    fitted = detector_export.fit_deployable(run, "relu", op_kind="coverage", op_target=0.9)
    archive = zipfile.ZipFile(io.BytesIO(detector_export.export_zip(run, fitted)))
    assert sorted(archive.namelist()) == ["detector.json", "detector.onnx", "detector.pt2"]  # no model: logits only
    card = strict_json(archive.read("detector.json"))
    text = json.dumps(card)
    assert str(tmp_path) not in text and "weights.pt" in card["run"]["source"]
    assert card["class_names"] == list(run.class_names) and card["threshold"] == fitted.threshold
    assert list(card["inputs"]) == ["logits"]  # no images line ("mean [], std []") for a logits-only run
    with_images = detector_export.card(digits_run, fitted, {"detector.pt2": "logits", "detector_images.pt2": "images"})
    assert with_images["inputs"]["images"].endswith(f"mean {list(digits_run.mean)}, std {list(digits_run.std)}")
    assert card["detector"]["lambda"] == 0.5 and card["detector"]["temperature"] == 1.0
    evaluation = card["operating_point"]["evaluation"]
    assert evaluation["samples"] == fitted.n_eval and evaluation["tpr"]["n_resamples"] == 1000
    assert evaluation["fpr"]["ci_low"] <= evaluation["fpr"]["estimate"] <= evaluation["fpr"]["ci_high"]
    assert {"torch", "onnx", "onnxruntime", "numpy"} <= set(card["versions"])
    assert card["input_preprocessing"].startswith("none: the detector scores the classifier's clean outputs (ε = 0)")
    assert "tuning split" in card["operating_point"]["versus_explore"]
    assert card["formats"]["detector.pt2"].startswith("PyTorch ExportedProgram (torch.export)")
    extra = {"detector.json": ""}
    torch.export.load(io.BytesIO(archive.read("detector.pt2")), extra_files=extra)
    assert strict_json(extra["detector.json"]) == card
    props = {p.key: p.value for p in onnx.load_model_from_string(archive.read("detector.onnx")).metadata_props}
    assert strict_json(props["detector.json"]) == card and json.loads(props["class_names"]) == list(run.class_names)
    legacy = detector_export.export(run, fitted, ".pt")  # TorchScript, legacy: its card inside too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        extra = {"detector.json": ""}
        torch.jit.load(io.BytesIO(legacy), _extra_files=extra)
    assert strict_json(extra["detector.json"])["formats"] == {"detector.pt": detector_export.FORMATS[".pt"]}
    assert "legacy" in detector_export.FORMATS[".pt"]
    with_model = zipfile.ZipFile(io.BytesIO(detector_export.export_zip(_tiny_cnn_run(digits_run), fitted)))
    assert {"detector_images.onnx", "detector_images.pt2"} <= set(with_model.namelist())


def test_acceptance_rates_against_a_direct_count_and_a_naive_bootstrap():
    rng = np.random.default_rng(1)
    correct = rng.random(300) < 0.8
    accepted = np.where(correct, rng.random(300) < 0.9, rng.random(300) < 0.3)
    rates = stats.acceptance_rates(accepted, correct, n_resamples=4000, seed=2)
    assert rates["tpr"].estimate == accepted[correct].mean() and rates["fpr"].estimate == accepted[~correct].mean()
    assert rates["risk"].estimate == (~correct[accepted]).mean() and rates["coverage"].estimate == accepted.mean()
    draws = rng.integers(0, 300, size=(4000, 300))  # resampling the samples themselves gives the same spread
    naive = [accepted[d][correct[d]].mean() for d in draws]
    assert rates["tpr"].low == pytest.approx(np.percentile(naive, 2.5), abs=0.01)
    assert rates["tpr"].high == pytest.approx(np.percentile(naive, 97.5), abs=0.01)
    no_errors = stats.acceptance_rates(np.ones(5, bool), np.ones(5, bool), n_resamples=10)
    assert np.isnan(no_errors["fpr"].estimate) and no_errors["fpr"].n_resamples == 0
    assert (no_errors["coverage"].low, no_errors["coverage"].high) == (1.0, 1.0)
    with pytest.raises(InputError):
        stats.acceptance_rates(np.ones(3, bool), np.ones(4, bool))


# ------------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def logits_file(digits_run, tmp_path):
    path = tmp_path / "digits.npz"
    np.savez(path, logits=digits_run.logits, labels=digits_run.labels, class_names=np.array(digits_run.class_names))
    return path


def test_cli_export_writes_the_detector_and_its_card(logits_file, digits_run, tmp_path, capsys):
    out = tmp_path / "detector.onnx"
    argv = ["export", "--logits", str(logits_file), "--detector", "relu", "--lambda", "0.5", "--temperature", "1"]
    assert cli.main([*argv, "--target-tpr", "0.95", "--out", str(out)]) == 0
    assert "TPR" in capsys.readouterr().out
    card = strict_json((tmp_path / "detector.onnx.json").read_text())
    assert card["files"] == {"detector.onnx": "logits"} and str(tmp_path) not in json.dumps(card)
    fitted = detector_export.fit_deployable(runs.load_logits_upload(logits_file.read_bytes(), "digits.npz"), "relu")
    assert card["threshold"] == fitted.threshold
    _, uncertainty, _ = run_onnx(out.read_bytes(), digits_run.logits)
    np.testing.assert_allclose(uncertainty, fitted.detector.score(digits_run.logits), rtol=1e-12, atol=1e-12)


def test_cli_export_reopens_a_run_by_its_id(digits_run, tmp_path, capsys):
    run = runs.Run.from_logits(digits_run.logits, digits_run.labels, digits_run.class_names, source="stored run")
    runs.remember(run)
    out = tmp_path / "doctor.pt2"
    assert cli.main(["export", "--run", run.run_id, "--detector", "doctor", "--out", str(out)]) == 0
    card = strict_json((tmp_path / "doctor.pt2.json").read_text())
    assert card["run"]["run id"] == run.run_id and card["detector"]["key"] == "doctor"
    _, uncertainty, accept = run_pt2(out.read_bytes(), digits_run.logits)
    np.testing.assert_allclose(uncertainty, detectors.Doctor().score(digits_run.logits), atol=1e-12)


@pytest.mark.parametrize(
    "extra, phrase",
    [
        (["--out", "x.zip"], "must end in .pt2, .onnx, .pt"),
        (["--delta", "0.1"], "--delta goes with --risk"),
        (["--risk", "1"], "--risk must lie in [0, 1)"),
        (["--risk", "0.05", "--delta", "0"], "--delta (the guarantee holds with confidence 1 − δ) must lie"),
        (["--risk", "0.05", "--target-tpr", "0.9"], "not allowed with argument"),
        (["--risk", "0"], "r* = 0 cannot be certified"),
        (["--risk", "0.001"], "too few calibration samples"),
        (["--detector", "msp", "--temperature", "2"], "defined at t = 1"),
        (["--detector", "entropy"], "cannot be exported"),
        (["--input", "images"], "logits only"),
        (["--target-tpr", "1.5"], "(0, 1]"),
        (["--lambda", "2"], "--lambda"),
        (["--run", "0123456789abcdef"], "name one run"),
    ],
)
def test_cli_export_bad_requests_give_one_line(extra, phrase, logits_file, tmp_path, capsys):
    argv = ["export", "--logits", str(logits_file), "--out", str(tmp_path / "d.pt"), *extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and phrase in err.lower(), err
    assert not (tmp_path / "d.pt").exists()


def test_cli_export_needs_a_run(tmp_path, capsys):
    assert cli.main(["export", "--out", str(tmp_path / "d.pt")]) == 2
    assert "name one run" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ at a guarantee


@pytest.mark.parametrize("suffix", list(RUNNERS))
def test_a_guaranteed_risk_export_accepts_by_the_certified_threshold(suffix, digits_run):
    from relu_core import risk_control

    fitted = detector_export.fit_deployable(digits_run, "relu", seed=2, op_kind="risk", op_target=0.05, op_delta=0.2)
    _, correct = cached.correctness(digits_run)
    tune_idx, held_out = cached.split_for(digits_run, 0.5, 2)
    cal_idx, eval_idx = risk_control.calibration_split(held_out, 2)
    library = detectors.RelU(lam=0.5).fit(digits_run.logits[tune_idx], digits_run.labels[tune_idx])
    expected = risk_control.guaranteed_risk(library.score(digits_run.logits[cal_idx]), correct[cal_idx], 0.05, 0.2)
    assert expected.certified and fitted.guarantee is not None and fitted.tuning is None
    assert fitted.threshold == pytest.approx(expected.threshold, rel=1e-12)
    assert (fitted.guarantee.n_calibration, fitted.n_eval) == (cal_idx.size, eval_idx.size)
    _, uncertainty, accept = RUNNERS[suffix](
        detector_export.export(digits_run, fitted, suffix), digits_run.logits[eval_idx]
    )
    np.testing.assert_allclose(uncertainty, library.score(digits_run.logits[eval_idx]), rtol=1e-6, atol=1e-12)
    correct_eval = correct[eval_idx]
    assert accept.mean() == fitted.evaluation["coverage"].estimate
    assert (~correct_eval[accept]).mean() == fitted.evaluation["risk"].estimate


def test_the_card_states_the_guarantee_the_calibration_size_and_the_assumptions(digits_run):
    from relu_core import risk_control

    fitted = detector_export.fit_deployable(digits_run, "doctor", op_kind="risk", op_target=0.05, op_delta=0.2)
    card = detector_export.card(digits_run, fitted, {"detector.pt2": "logits"})
    point = card["operating_point"]
    assert point["target"] == "guaranteed risk: at most 5 % errors among accepted, with 80 % confidence"
    guarantee = point["guarantee"]
    assert (guarantee["risk"], guarantee["delta"]) == (0.05, 0.2)
    assert guarantee["n_calibration"] == fitted.guarantee.n_calibration > 0
    assert guarantee["calibration"]["clopper_pearson_upper_bound"] <= 0.05
    assert guarantee["assumptions"] == risk_control.ASSUMPTIONS and "exchangeable" in guarantee["assumptions"]
    assert "calibration split" in point["chosen_on"] and point["evaluation"]["samples"] == fitted.n_eval
    assert "certified for at most 5 % errors among accepted" in card["outputs"]["accept"]
    strict_json(json.dumps(card))


def test_cli_export_at_a_guaranteed_risk(logits_file, tmp_path, capsys):
    out = tmp_path / "guaranteed.onnx"
    argv = ["export", "--logits", str(logits_file), "--risk", "0.05", "--delta", "0.2", "--out", str(out)]
    assert cli.main(argv) == 0
    line = capsys.readouterr().out
    assert "certified for at most 5 % errors among accepted, with 80 % confidence on" in line
    card = strict_json((tmp_path / "guaranteed.onnx.json").read_text())
    assert card["operating_point"]["guarantee"]["n_calibration"] > 0
    props = {p.key: p.value for p in onnx.load_model_from_string(out.read_bytes()).metadata_props}
    assert strict_json(props["detector.json"]) == card
