"""Headless CLI: evaluate (JSON and table), listings, demo, logits, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from relu_core import cli, protocol
from relu_core.cli import shared as cli_shared
from relu_core.cli.evaluate import PAPER_KEY
from relu_core.detectors import LAMBDA_GRID, protocol_keys
from relu_core.errors import InputError

REPO = Path(__file__).resolve().parent.parent
JSON_KEYS = {
    "fpr95",
    "fpr95_std",
    "auroc",
    "auroc_std",
    "aurc",
    "aurc_std",
    "eaurc",
    "eaurc_std",
    "augrc",
    "augrc_std",
    "accuracy",
    "fpr95_positives",
    "selection",
    "temperature",
    "lambda",
    "eps",
    "settings_searched",
    "fpr95_by_positive",
}


def _run_module(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "relu_core", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout
    )


def _logits(n: int = 400, c: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)).astype(np.float32)
    logits[np.arange(n), labels] += rng.normal(1.5, 1.5, n).astype(np.float32)
    return logits, labels


@pytest.fixture(scope="module")
def npz_file(tmp_path_factory) -> Path:
    logits, labels = _logits()
    path = tmp_path_factory.mktemp("cli") / "run.npz"
    np.savez(path, logits=logits, labels=labels, class_names=np.array([f"c{i}" for i in range(5)]))
    return path


def _assert_one_error_line(rc: int, stdout: str, stderr: str) -> None:
    assert rc == 2, (rc, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and stdout == ""


# ---------------------------------------------------------------------------------------- evaluate
@pytest.mark.slow
def test_evaluate_json_equals_protocol_evaluate(npz_file):
    proc = _run_module(
        "evaluate",
        "--logits",
        str(npz_file),
        "--seeds",
        "3",
        "--val-fraction",
        "0.33",
        "--lambda",
        "auto",
        "--temperature",
        "1.5,odin=1000",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    got = json.loads(proc.stdout)
    with np.load(npz_file) as data:
        expected = protocol.evaluate(
            data["logits"],
            data["labels"],
            protocol_keys(),
            temperature={**{k: 1.5 for k in protocol_keys()}, "odin": 1000},
            lam="auto",
            tune_fraction=0.33,
            seeds=3,
        ).to_dict()
    # the detectors in order, then the one other key: the paper's rows of the data set (none for run.npz)
    assert list(got) == [*protocol_keys(), PAPER_KEY]
    assert got.pop(PAPER_KEY)["rows"] == []
    assert set(got["relu"]) - JSON_KEYS == {"hamming_fallback", "minus_doctor", "operating_points"}
    assert set(got["relu"]["minus_doctor"]) == {"fpr95", "auroc", "aurc", "augrc"}
    assert (
        got["odin"]["temperature"] == 1000 and got["relu"]["temperature"] == 1.5 and got["msp"]["temperature"] is None
    )
    assert got["doctor"]["lambda"] is None and got["relu"]["eps"] == 0
    for key in protocol_keys():
        assert set(got[key]) - {"hamming_fallback", "minus_doctor", "operating_points"} == JSON_KEYS
        assert got[key].pop("fpr95_positives") == "correct"
        assert got[key].pop("selection") == protocol.FIXED_LABEL
        assert got[key] == expected[key]  # JSON floats round-trip exactly


def test_evaluate_table_names_the_convention_and_every_method(npz_file, capsys):
    assert cli.main(["evaluate", "--logits", str(npz_file), "--methods", "msp,relu,doctor", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "FPR at 95% TPR, positives = correctly classified" in out
    assert "Hyperparameters: fixed (as given); input pre-processing ε = 0." in out
    assert "fixed hyperparameters." not in out
    assert "Rel-U − Doctor on the same splits" in out and "95 % CI" in out
    for name in ("MSP", "Rel-U", "Doctor"):
        assert any(line.startswith(name) for line in out.splitlines())
    assert "ODIN" not in out
    rows = [line for line in out.splitlines() if line.startswith("Rel-U")]
    with np.load(npz_file) as data:
        result = protocol.evaluate(data["logits"], data["labels"], ["relu"], seeds=2)
    assert f"{result.mean('relu', 'fpr95'):.4f} ± {result.std('relu', 'fpr95'):.4f}" in rows[0]


def test_evaluate_select_and_oracle_are_labelled(npz_file, capsys):
    assert cli.main(["evaluate", "--logits", str(npz_file), "--methods", "relu", "--seeds", "2", "--select"]) == 0
    out = capsys.readouterr().out
    assert protocol.TUNING_LABEL in out
    assert "settings searched" in out and any(line.startswith("Rel-U") and " 50 " in line for line in out.splitlines())
    assert (
        cli.main(["evaluate", "--logits", str(npz_file), "--methods", "relu", "--seeds", "2", "--oracle", "--json"])
        == 0
    )
    oracle = json.loads(capsys.readouterr().out)
    with np.load(npz_file) as data:
        expected = protocol.evaluate_with_selection(
            data["logits"], data["labels"], ["relu"], selection="oracle", seeds=2
        ).to_dict()
    assert oracle["relu"].pop("selection") == protocol.ORACLE_LABEL and oracle["relu"].pop("fpr95_positives")
    assert oracle.pop(PAPER_KEY)["rows"] == []  # the paper's rows of the data set: none for this file
    assert oracle == expected
    assert cli.main(["evaluate", "--logits", str(npz_file), "--methods", "relu", "--seeds", "2", "--oracle"]) == 0
    assert "oracle (selected on the evaluation split)" in capsys.readouterr().out


# -------------------------------------------------------------------------------------- bad input
def _write(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


def _bad_files(tmp: Path) -> dict[str, str]:
    logits, labels = _logits(60, 4)
    nan = logits.copy()
    nan[2, 1] = np.nan
    garbage = tmp / "garbage.npz"
    garbage.write_bytes(b"this is not a zip archive at all")
    npy = tmp / "plain.npy"
    np.save(npy, logits)
    empty = tmp / "empty.npz"
    empty.write_bytes(b"")
    directory = tmp / "folder.npz"
    directory.mkdir()
    return {
        "missing": str(tmp / "nope.npz"),
        "no_labels": _write(tmp / "nolabels.npz", logits=logits),
        "nan": _write(tmp / "nan.npz", logits=nan, labels=labels),
        "one_d": _write(tmp / "oned.npz", logits=logits[:, 0], labels=labels),
        "length": _write(tmp / "length.npz", logits=logits, labels=labels[:-3]),
        "range": _write(tmp / "range.npz", logits=logits, labels=np.where(labels == 0, 7, labels)),
        "float_labels": _write(tmp / "flt.npz", logits=logits, labels=labels + 0.5),
        "pickle": _write(tmp / "pickle.npz", logits=np.array([{"a": 1}], dtype=object), labels=labels),
        "garbage": str(garbage),
        "npy": str(npy),
        "one_class": _write(tmp / "perfect.npz", logits=logits, labels=logits.argmax(1)),
        "strings": _write(tmp / "strings.npz", logits=np.array([["a", "b"]] * 60), labels=labels),
        "empty": str(empty),
        "directory": str(directory),
        # float64 logits beyond the float32 range: numpy warns while casting; still exactly one line.
        "overflow": _write(tmp / "overflow.npz", logits=logits.astype(np.float64) * 1e300, labels=labels),
        "one_sample": _write(tmp / "one.npz", logits=logits[:1], labels=labels[:1]),
        "one_column": _write(tmp / "onecol.npz", logits=logits[:, :1], labels=np.zeros(60, dtype=np.int64)),
    }


BAD_FILES = [
    "missing",
    "no_labels",
    "nan",
    "one_d",
    "length",
    "range",
    "float_labels",
    "pickle",
    "garbage",
    "npy",
    "one_class",
    "strings",
    "empty",
    "directory",
    "overflow",
    "one_sample",
    "one_column",
]


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_logits_files_give_one_error_line(case, tmp_path, capsys):
    path = _bad_files(tmp_path)[case]
    rc = cli.main(["evaluate", "--logits", path, "--seeds", "2"])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)


BAD_OPTIONS = [
    ["--val-fraction", "0"],
    ["--val-fraction", "1"],
    ["--val-fraction", "1.5"],
    ["--val-fraction", "abc"],
    ["--seeds", "0"],
    ["--seeds", "two"],
    ["--seeds", "99999999999999999999"],
    ["--seeds", "1001"],
    ["--temperature", "1e-320"],  # positive, but logits / T overflows
    ["--methods", "msp,mahalanobis"],
    ["--methods", ","],
    ["--lambda", "2"],
    ["--lambda", "often"],
    ["--temperature", "-1"],
    ["--temperature", "nan"],
    ["--temperature", "bogus=2"],
    ["--eps", "0.002"],
    ["--weights", "w.pt"],
    ["--select", "--oracle"],
    ["--criterion", "accuracy"],
    ["--folds", "0"],
    ["--select", "--folds", "1"],  # cross-validation needs two folds (it blamed the tuning split)
    ["--unknown-flag"],
]


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=lambda o: " ".join(o))
def test_bad_options_give_one_error_line(options, npz_file, capsys):
    rc = cli.main(["evaluate", "--logits", str(npz_file), *options])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["evaluate"],
        ["evaluate", "--model", "cnn8"],
        ["logits", "--model", "cnn8"],
    ],
    ids=lambda a: " ".join(a) or "nothing",
)
def test_usage_errors_give_one_error_line(argv, capsys):
    rc = cli.main(argv)
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)


@pytest.mark.slow
def test_bad_input_through_the_real_entry_point(tmp_path):
    proc = _run_module("evaluate", "--logits", _bad_files(tmp_path)["nan"])
    _assert_one_error_line(proc.returncode, proc.stdout, proc.stderr)
    assert "NaN" in proc.stderr


def test_a_tiny_tuning_fraction_keeps_one_sample_of_each_kind(npz_file, capsys):
    assert (
        cli.main(["evaluate", "--logits", str(npz_file), "--val-fraction", "1e-9", "--seeds", "1", "--methods", "relu"])
        == 0
    )
    assert "Split per seed: 2 tuning / 398 evaluation samples" in capsys.readouterr().out


def test_unexpected_failures_are_one_line_too(npz_file, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(protocol, "evaluate", broken)
    assert cli.main(["evaluate", "--logits", str(npz_file)]) == 1
    assert capsys.readouterr().err.strip() == "error: unexpected TypeError: a bug"


def test_warnings_of_a_successful_run_are_one_line_each(npz_file, capsys, monkeypatch):
    import warnings

    real = protocol.evaluate

    def noisy(*args, **kwargs):
        for _ in range(3):
            warnings.warn("something odd\nover two lines", RuntimeWarning)
        return real(*args, **kwargs)

    monkeypatch.setattr(protocol, "evaluate", noisy)
    assert cli.main(["evaluate", "--logits", str(npz_file), "--seeds", "1", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == "warning: something odd over two lines"
    assert set(json.loads(captured.out)) == {*protocol_keys(), PAPER_KEY}


def test_cancel_exits_130(npz_file, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(protocol, "evaluate", interrupted)
    assert cli.main(["evaluate", "--logits", str(npz_file)]) == 130
    assert capsys.readouterr().err.strip() == "error: cancelled"


# ------------------------------------------------------------------------------- listings and io
def test_models_and_datasets_list_the_accepted_names(capsys):
    from relu_core import datasets, models

    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert names == list(models.MODELS)
    assert {"resnet20", "resnet56", "cnn8", "densenet121_cifar"} <= set(names)
    assert cli.main(["datasets"]) == 0
    out = capsys.readouterr().out
    for info in datasets.list_datasets():
        assert any(line.startswith(info.name + " ") for line in out.splitlines())
    assert "digits" in out and "available" in out and "imagefolder:PATH" in out


def test_written_npz_is_a_valid_logits_file(tmp_path):
    logits, labels = _logits(30, 3)
    path = cli_shared.write_logits_npz(tmp_path / "out.npz", logits, labels, ["a", "b", "c"])
    run = cli_shared.load_logits_file(path)
    np.testing.assert_array_equal(run.logits, logits)
    np.testing.assert_array_equal(run.labels, labels)
    assert run.class_names == ("a", "b", "c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]  # no temporary file left behind


def test_failed_npz_write_keeps_the_old_file_and_leaves_no_partial_one(tmp_path, monkeypatch):
    """write_logits_npz goes through cache.atomic_write: an error while writing leaves the previous file whole."""
    logits, labels = _logits(30, 3)
    path = cli_shared.write_logits_npz(tmp_path / "out.npz", logits, labels, ["a", "b", "c"])
    before = path.read_bytes()

    def failing_savez(stream, **arrays):
        stream.write(b"PK half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(InputError, match=r"cannot write .*out\.npz \(disk full\)"):  # the path asked, not the temp
        cli_shared.write_logits_npz(path, logits * 2, labels, ["a", "b", "c"])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]


def test_progress_bar_stays_quiet_for_short_work_and_draws_for_long_work(capsys):
    import io

    quiet = io.StringIO()
    bar = cli_shared.ProgressBar(quiet, delay=10.0)
    for i in range(1, 11):
        bar(i, 10, "step")
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    bar = cli_shared.ProgressBar(loud, delay=0.0)
    for i in range(1, 101):
        bar(i, 100, "step")
    lines = loud.getvalue().splitlines()
    assert 5 <= len(lines) <= 11 and lines[-1].startswith("[" + "#" * 28 + "]") and "100.0%" in lines[-1]


# ---------------------------------------------------------------------- model-backed commands (engine)
@pytest.mark.slow
def test_logits_on_digits_feeds_evaluate(tmp_path, capsys):
    import torch

    from relu_core import datasets, engine, models

    torch.manual_seed(0)
    weights = tmp_path / "cnn8.pt"
    model = models.build_model("cnn8", 10)
    torch.save(model.state_dict(), weights)  # untrained weights: no training in this test
    out = tmp_path / "digits_cnn8.npz"
    argv = [
        "logits",
        "--model",
        "cnn8",
        "--weights",
        str(weights),
        "--dataset",
        "digits",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--batch-size",
        "64",
    ]
    assert cli.main(argv) == 0
    assert str(out) in capsys.readouterr().out
    test = datasets.load_dataset("digits")
    spec = models.MODELS["cnn8"]
    expected = engine.compute_logits(model.eval(), test.images, mean=spec.mean, std=spec.std, device="cpu")
    with np.load(out) as data:
        assert set(data.files) == {"logits", "labels", "class_names"}
        np.testing.assert_allclose(data["logits"], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(data["labels"], test.labels)
        assert tuple(data["class_names"]) == tuple(test.class_names)
    assert cli.main(["evaluate", "--logits", str(out), "--seeds", "2", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {*protocol_keys(), PAPER_KEY}


@pytest.mark.slow
def test_evaluate_with_model_and_eps_uses_the_perturbed_scorer(tmp_path, capsys, monkeypatch):
    import torch

    from relu_core import models, preprocessing

    torch.manual_seed(1)
    weights = tmp_path / "cnn8.pt"
    torch.save(models.build_model("cnn8", 10).state_dict(), weights)
    seen = []
    real = preprocessing.make_perturbed_scorer

    def spy(run, eps, **kw):
        scorer = real(run, eps, **kw)

        def wrapped(detector, eval_idx):
            seen.append((eps, type(detector).__name__, getattr(detector, "matrix_", None) is not None))
            return scorer(detector, eval_idx)

        return wrapped

    monkeypatch.setattr(preprocessing, "make_perturbed_scorer", spy)
    argv = [
        "evaluate",
        "--model",
        "cnn8",
        "--weights",
        str(weights),
        "--dataset",
        "digits",
        "--methods",
        "relu,odin",
        "--seeds",
        "1",
        "--device",
        "cpu",
    ]
    assert cli.main([*argv, "--eps", "0.002", "--json"]) == 0
    perturbed = json.loads(capsys.readouterr().out)
    assert seen == [(0.002, "RelU", True), (0.002, "ODIN", False)]  # D* fitted before perturbing
    assert cli.main([*argv, "--json"]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert len(seen) == 2 and perturbed != clean


def test_model_errors_give_one_error_line(tmp_path, capsys):
    for argv, said in (
        (["evaluate", "--logits", "/dev/null"], "/dev/null is not a regular file"),
        (["evaluate", "--model", "cnn8", "--dataset", "digits", "--weights", str(tmp_path)], "is a folder, not a file"),
    ):
        rc = cli.main(argv)
        captured = capsys.readouterr()
        _assert_one_error_line(rc, captured.out, captured.err)
        assert said in captured.err
    for argv in (
        ["evaluate", "--model", "resnet9000", "--dataset", "digits"],
        ["evaluate", "--model", "cnn8", "--dataset", "no-such-set"],
        ["evaluate", "--model", "cnn8", "--dataset", "digits", "--weights", str(tmp_path / "none.pt")],
        ["logits", "--model", "cnn8", "--dataset", "digits", "--out", str(tmp_path / "no" / "dir.npz")],
    ):
        rc = cli.main(argv)
        captured = capsys.readouterr()
        _assert_one_error_line(rc, captured.out, captured.err)


def test_hub_weights_offline_give_one_error_line(tmp_path, capsys, monkeypatch):
    import urllib.error

    import torch

    def offline(url: str, dst: str, **kwargs: object) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))
    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    argv = ["--model", "resnet18_cifar", "--dataset", "digits", "--weights", "hf:edadaltocg/resnet18_cifar10"]
    rc = cli.main(["logits", *argv, "--out", str(tmp_path / "l.npz")])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert "could not download edadaltocg/resnet18_cifar10" in captured.err and "internet" in captured.err
    assert not (tmp_path / "l.npz").exists()


@pytest.mark.slow
def test_demo_runs_end_to_end_and_reuses_its_cache(capsys, monkeypatch):
    from relu_core import training

    # The real pipeline (digits, cnn8 trained here, cached logits, six detectors), trained for 3 epochs
    # instead of the default so the test stays fast; the cache key includes the epoch count.
    monkeypatch.setitem(training.RECIPES, "cnn8", training.Recipe(3, 64))
    assert cli.main(["demo", "--seeds", "2"]) == 0
    captured = capsys.readouterr()
    assert "FPR at 95% TPR, positives = correctly classified" in captured.out
    for name in ("MSP", "ODIN", "Doctor", "Rel-U", "Entropy", "Energy"):
        assert any(line.startswith(name) for line in captured.out.splitlines())
    assert "cached under" in captured.err

    def no_training(*args, **kwargs):
        raise AssertionError("the demo retrained instead of loading its cached model")

    monkeypatch.setattr(training, "train_small_cnn", no_training)
    assert cli.main(["demo", "--seeds", "2", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(protocol_keys())


def test_fpr_convention_for_errors_as_positives_is_labelled(npz_file, capsys):
    args = ["evaluate", "--logits", str(npz_file), "--methods", "doctor,relu", "--seeds", "2"]

    def run(*extra: str) -> str:
        assert cli.main([*args, *extra]) == 0
        return capsys.readouterr().out

    paper = json.loads(run("--json"))
    errors = json.loads(run("--json", "--fpr-positive", "error"))
    with np.load(npz_file) as data:
        expected = protocol.evaluate(
            data["logits"], data["labels"], ["doctor", "relu"], seeds=2, fpr_positive="error"
        ).to_dict()
    for key in ("doctor", "relu"):
        assert paper[key]["fpr95_positives"] == "correct" and errors[key]["fpr95_positives"] == "error"
        assert errors[key]["fpr95"] == pytest.approx(expected[key]["fpr95"], abs=1e-12)
        assert errors[key]["fpr95"] != pytest.approx(paper[key]["fpr95"])
        assert errors[key]["auroc"] == pytest.approx(paper[key]["auroc"], abs=1e-12)
    assert "positives = misclassified" in run("--fpr-positive", "error")


def test_lambda_zero_is_labelled_as_doctor_in_the_table_and_the_json(npz_file, capsys):
    assert (
        cli.main(["evaluate", "--logits", str(npz_file), "--methods", "relu,doctor", "--seeds", "2", "--lambda", "0"])
        == 0
    )
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Rel-U "))
    assert "Hamming fallback (= Doctor)" in row
    assert (
        cli.main(
            [
                "evaluate",
                "--logits",
                str(npz_file),
                "--methods",
                "relu,doctor",
                "--seeds",
                "2",
                "--lambda",
                "0",
                "--json",
                "--bootstrap",
                "0",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["relu"]["hamming_fallback"] is True and got["relu"]["lambda"] == 0
    difference = got["relu"]["minus_doctor"]["auroc"]  # --bootstrap 0: the difference without its interval
    assert difference["mean"] == 0 and difference["ci_low"] is None and difference["n_resamples"] == 0
    assert difference["verdict"] == "AUROC: no bootstrap interval (0 resamples)"


def test_select_reports_the_values_chosen_per_seed(npz_file, capsys):
    assert (
        cli.main(
            [
                "evaluate",
                "--logits",
                str(npz_file),
                "--methods",
                "relu,doctor,msp",
                "--seeds",
                "3",
                "--select",
                "--json",
                "--bootstrap",
                "200",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    with np.load(npz_file) as data:
        result = protocol.evaluate_with_selection(
            data["logits"], data["labels"], ["relu", "doctor", "msp"], seeds=3, n_resamples=200
        )
    for key in ("relu", "doctor"):
        temperatures = [t for t, _ in result.params[key]]
        assert got[key]["temperature"] == (temperatures[0] if len(set(temperatures)) == 1 else temperatures)
    assert got["relu"]["settings_searched"] == 50 and got["doctor"]["settings_searched"] == 10
    assert got["msp"]["settings_searched"] == 1 and got["msp"]["temperature"] is None
    lambdas = got["relu"]["lambda"] if isinstance(got["relu"]["lambda"], list) else [got["relu"]["lambda"]]
    assert all(lam in LAMBDA_GRID for lam in lambdas)
    paired = got["relu"]["minus_doctor"]
    assert paired["auroc"]["n_resamples"] == 200 and len(paired["auroc"]["per_seed"]) == 3
    assert paired["auroc"]["ci_low"] <= paired["auroc"]["ci_high"]
    assert paired["auroc"]["verdict"] == result.paired["auroc"].verdict()


def test_bad_bootstrap_count_is_one_line(npz_file, capsys):
    # in this process (the real entry point's own exit and output: test_bad_input_through_the_real_entry_point)
    rc = cli.main(["evaluate", "--logits", str(npz_file), "--bootstrap", "-3"])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert "--bootstrap must be an integer >= 0, got -3" in captured.err  # 0 (no interval) is allowed


def _outputs(tmp: Path) -> dict[str, Path]:
    """Places an --out must never replace, and nothing the user keeps in them may change."""
    folder = tmp / "my-folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    fifo = tmp / "pipe"
    os.mkfifo(fifo)
    return {"folder": folder, "fifo": fifo, "nameless": Path(""), "no-folder": tmp / "missing" / "x.out"}


@pytest.mark.parametrize("place", ["folder", "fifo", "nameless", "no-folder"])
@pytest.mark.parametrize("command", ["report", "logits"])
def test_an_out_that_is_not_a_file_is_refused_before_any_work(command, place, npz_file, tmp_path, capsys, monkeypatch):
    """--out naming a folder (or a FIFO) used to be moved aside as a damaged cache entry and replaced, exit 0."""
    out = _outputs(tmp_path)[place]
    monkeypatch.setattr(cli_shared, "model_run", lambda *a: pytest.fail("the model ran before --out was checked"))
    argv = {
        "report": ["report", "--logits", str(npz_file)],
        "logits": ["logits", "--model", "cnn8", "--dataset", "digits"],
    }[command]
    rc = cli.main([*argv, "--out", str(out) if place != "nameless" else ""])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-folder", "pipe"]  # nothing moved aside or added
    assert (tmp_path / "my-folder" / "notes.txt").read_text() == "precious"


@pytest.mark.parametrize("command", [["study", "tuning-split"], ["baselines"]])
def test_an_out_folder_that_is_a_file_is_refused_before_any_work(command, npz_file, tmp_path, capsys):
    taken = tmp_path / "a-file"
    taken.write_text("precious")
    rc = cli.main([*command, "--logits", str(npz_file), "--seeds", "2", "--bootstrap", "0", "--out", str(taken)])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)  # no table printed first: checked before the work
    assert "is a file, not a folder" in captured.err and taken.read_text() == "precious"


def test_eps_defaults_to_the_detectors_it_is_defined_for(capsys, monkeypatch):
    """The README's `evaluate --model ... --eps 0.002` failed on Entropy, one of the default detectors; a
    detector named explicitly that pre-processing is not defined for is refused before the model runs."""
    from relu_core import preprocessing

    monkeypatch.setattr(
        cli_shared, "run_from_args", lambda *a: pytest.fail("the model ran before --methods was checked")
    )
    rc = cli.main(["evaluate", "--model", "cnn8", "--dataset", "digits", "--eps", "0.002", "--methods", "relu,energy"])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert "not Energy" in captured.err

    from relu_core.runs import Run

    logits, labels = _logits(200, 4)
    asked = []

    def evaluate(logits, labels, methods, **options):
        asked.append(methods)
        raise InputError("the detectors are all this test needs")

    monkeypatch.setattr(
        cli_shared, "run_from_args", lambda *a: (Run.from_logits(logits, labels, ("a", "b", "c", "d")), "")
    )
    monkeypatch.setattr(preprocessing, "make_perturbed_scorer", lambda *a, **k: None)
    monkeypatch.setattr(protocol, "evaluate", evaluate)
    cli.main(["evaluate", "--model", "cnn8", "--dataset", "digits", "--eps", "0.002"])
    assert asked == [["msp", "odin", "doctor", "relu"]]


@pytest.mark.slow  # a child Python (imports torch): 9-11 s on a busy machine
def test_a_reader_that_stops_early_is_not_an_error():
    """``python -m relu_core ... | head -1``: once the reader has gone, writing raises BrokenPipeError, which
    was reported as bad input (exit 2)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "relu_core", "models"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env
    )
    proc.stdout.close()  # the reader is gone before the first line
    assert proc.wait(timeout=120) == 1  # not "bad input" (2), and nothing said to nobody
    assert proc.stderr.read() == b""


@pytest.mark.slow  # a child Python (imports torch): 9-11 s on a busy machine
def test_a_study_writes_its_out_folder_even_when_stdout_stops_early(npz_file, tmp_path):
    """The table was printed before the files were written: a reader that stopped early lost them."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "RELU_STUDIO_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "out"
    argv = ["study", "tuning-split", "--logits", str(npz_file), "--seeds", "2", "--bootstrap", "0", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "relu_core", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env
    )
    proc.stdout.close()
    proc.wait(timeout=120)
    assert "result.json" in {p.name for p in out.iterdir()}, proc.stderr.read()


@pytest.mark.parametrize("command", [["study", "tuning-split"], ["baselines"]])
def test_a_refused_command_creates_no_out_folder(command, tmp_path, capsys):
    out = tmp_path / "new" / "deeper"
    rc = cli.main([*command, "--logits", str(tmp_path / "missing.npz"), "--out", str(out)])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert not (tmp_path / "new").exists()
    rc = cli.main([*command, "--logits", str(tmp_path / "missing.npz"), "--out", ""])  # was silently ignored
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert "--out needs a folder name" in captured.err


def test_options_are_never_abbreviated(npz_file, capsys):
    """``evaluate --seed 3`` silently meant ``--seeds 3`` (report's --seed is a split seed, not a count)."""
    rc = cli.main(["evaluate", "--logits", str(npz_file), "--seed", "3"])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert "unrecognized arguments: --seed 3" in captured.err


# ---------------------------------------------------------------------------------------- evaluate --risk
def test_evaluate_at_a_guaranteed_risk_equals_the_library(tmp_path, capsys):
    from relu_core import risk_control

    logits, labels = _logits(n=3000, seed=4)
    path = tmp_path / "big.npz"
    np.savez(path, logits=logits, labels=labels)
    argv = ["evaluate", "--logits", str(path), "--methods", "relu,doctor", "--seeds", "2", "--bootstrap", "200"]
    assert cli.main([*argv, "--risk", "0.15", "--delta", "0.2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    expected = risk_control.at_risk(
        logits, labels, ["relu", "doctor"], risk=0.15, delta=0.2, temperature=None, seeds=2, n_resamples=200
    )
    for key in ("relu", "doctor"):
        summary = expected.summary(key)
        assert got[key]["guarantee"]["threshold"] == pytest.approx(summary["threshold"], rel=1e-12)
        assert got[key]["guarantee"]["evaluation_coverage"] == pytest.approx(summary["evaluation_coverage"])
        assert got[key]["guarantee"]["n_calibration"] == summary["n_calibration"]
        assert got[key]["guarantee"]["guarantee"] == "at most 15 % errors among accepted, with 80 % confidence"
    paired = got["relu"]["guarantee"]["minus_doctor"]
    assert paired["n_resamples"] == 200 and paired["ci_low"] <= paired["estimate"] <= paired["ci_high"]
    assert paired["verdict"] == expected.minus_doctor.verdict() and len(paired["per_seed"]) == 2
    assert paired["calibration_draws"]["kind"] == "seeds" and "certified" in paired["conditional_on"]
    assert cli.main([*argv, "--risk", "0.15", "--delta", "0.2"]) == 0
    text = capsys.readouterr().out
    assert "At most 15 % errors among accepted, with 80 % confidence: Rel-U lets you act on" in text
    assert "Rel-U − Doctor, coverage on the evaluation split at the same guarantee" in text


@pytest.mark.parametrize(
    "extra, phrase",
    [
        (["--delta", "0.1"], "--delta goes with --risk"),
        (["--risk", "0.1", "--select"], "does not go with --select"),
        (["--risk", "1.5"], "--risk must lie in [0, 1)"),
        (["--risk", "x"], "must be numbers"),
        (["--risk", "0.1", "--delta", "1"], "strictly between 0 and 1"),
    ],
)
def test_evaluate_risk_options_are_checked_first(extra, phrase, npz_file, capsys):
    rc = cli.main(["evaluate", "--logits", str(npz_file), "--seeds", "1", *extra])
    captured = capsys.readouterr()
    _assert_one_error_line(rc, captured.out, captured.err)
    assert phrase in captured.err
