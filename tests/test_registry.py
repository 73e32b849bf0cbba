"""The detector registry: every detector declares its key, label and capabilities, and a detector registered
there is available to the protocol, the grid search and the CLI with no other edit."""

from __future__ import annotations

import json
from types import MappingProxyType

import numpy as np
import pytest

from relu_core import cli, detectors, metric_info, metrics, preprocessing, protocol
from relu_core.cli.evaluate import PAPER_KEY
from relu_core.errors import InputError

PAPER_T = (0.5, 1.0, 1.1, 1.2, 1.5, 2.0, 5.0, 10.0, 100.0, 1000.0)


def _synthetic(n: int = 500, c: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c))
    logits[np.arange(n), labels] += rng.normal(1.5, 1.5, n)
    return logits, labels


def _margin(probs: np.ndarray) -> np.ndarray:
    """Minus the gap between the two largest probabilities, written independently of the toy class."""
    top = np.sort(probs, axis=1)
    return top[:, -2] - top[:, -1]


class Margin(detectors.Detector):
    """A toy training-free detector: ``-(p(1) - p(2))`` of ``softmax(z / T)``."""

    key = "toy_margin"
    name = "Toy Margin"
    grids = MappingProxyType({"temperature": (1.0, 2.0, 5.0)})

    def score_probs(self, probs):
        part = np.partition(np.asarray(probs, dtype=np.float64), -2, axis=1)
        return -(part[:, -1] - part[:, -2])


class ErrorCentroid(detectors.Detector):
    """A toy learned detector: similarity ``p . m`` to the mean soft-prediction ``m`` of the fitting errors."""

    key = "toy_centroid"
    name = "Toy Centroid"
    requires_fit = True
    grids = MappingProxyType({"temperature": (0.5, 1.0, 3.0)})

    def __init__(self, temperature: float | None = None) -> None:
        super().__init__(temperature)
        self.centroid_: np.ndarray | None = None

    def fit_probs(self, probs, correct):
        self.centroid_ = np.asarray(probs, dtype=np.float64)[~np.asarray(correct, dtype=bool)].mean(0)
        return self

    def score_probs(self, probs):
        if self.centroid_ is None:
            raise InputError("not fitted")
        return np.asarray(probs, dtype=np.float64) @ self.centroid_


@pytest.fixture()
def toys():
    """Register the two toys for one test and remove them afterwards, whatever happens."""
    before = dict(detectors.REGISTRY)
    detectors.register_detector(Margin)
    detectors.register_detector(ErrorCentroid)
    try:
        yield
    finally:
        detectors.unregister_detector(Margin.key)
        detectors.unregister_detector(ErrorCentroid.key)
        assert detectors.REGISTRY == before


# ------------------------------------------------------------------------------------------ declarations
def test_every_detector_declares_its_capabilities() -> None:
    declared = {
        key: (
            cls.name,
            cls.requires_fit,
            cls.temperature_applies,
            cls.default_temperature,
            cls.perturbation,
            dict(cls.grids),
            cls.accepts_probs,
            cls.protocol,
            cls.can_fall_back,
        )
        for key, cls in detectors.REGISTRY.items()
        if key in detectors.protocol_keys()
    }
    t_grid = {"temperature": PAPER_T}
    assert declared == {
        "msp": ("MSP", False, False, 1.0, "confidence", {}, True, True, False),
        "odin": ("ODIN", False, True, 1000.0, "confidence", t_grid, True, True, False),
        "doctor": ("Doctor", False, True, 1.0, "uncertainty", t_grid, True, True, False),
        "relu": (
            "Rel-U",
            True,
            True,
            1.0,
            "uncertainty",
            {**t_grid, "lam": (0.4, 0.5, 0.6, 0.8, 1.0)},
            True,
            True,
            True,
        ),
        "entropy": ("Entropy", False, True, 1.0, None, t_grid, True, True, False),
        "energy": ("Energy", False, True, 1.0, None, t_grid, False, True, False),
    }
    assert detectors.protocol_keys() == ("msp", "odin", "doctor", "relu", "entropy", "energy")
    for key, cls in detectors.REGISTRY.items():
        assert cls.key == key and detectors.label(key) == cls.name and detectors.detector_key(cls.name) == key
    # instances agree with their class and with the constructor defaults
    for key in detectors.protocol_keys():
        detector = detectors.make_detector(key)
        assert type(detector) is detectors.REGISTRY[key]
        assert detector.temperature == detectors.REGISTRY[key].default_temperature
        assert set(detector.settings()) == ({"temperature"} if detector.temperature_applies else set()) | (
            {"lam"} if "lam" in detector.grids else set()
        )


def test_protocol_and_preprocessing_read_the_declarations() -> None:
    assert {k: protocol.grid_size(k) for k in detectors.protocol_keys()} == {
        "msp": 1,
        "odin": 10,
        "doctor": 10,
        "relu": 50,
        "entropy": 10,
        "energy": 10,
    }
    for key in detectors.protocol_keys():
        detector = detectors.make_detector(key)
        if detector.perturbation is None:
            with pytest.raises(InputError, match="input pre-processing is defined for"):
                preprocessing.check_detector(detector)
        else:
            preprocessing.check_detector(detector)
    with pytest.raises(InputError, match="has no hyperparameters"):
        protocol.grid_search(*_synthetic(), tune_idx=np.arange(200), method="msp")


def test_detectors_outside_the_protocol_are_refused_there() -> None:
    class NeedsModel(detectors.Detector):
        key, name, needs_model, protocol = "toy_needs_model", "Toy Needs Model", True, False

    detectors.register_detector(NeedsModel)
    try:
        logits, labels = _synthetic()
        with pytest.raises(InputError, match="cannot be evaluated from logits"):
            protocol.evaluate(logits, labels, ["toy_needs_model"], seeds=1)
        with pytest.raises(InputError, match="cannot be evaluated from logits"):
            protocol.evaluate(logits, labels, ["msp"], temperature={"Toy Needs Model": 2.0}, seeds=1)
        assert "toy_needs_model" not in detectors.protocol_keys()
    finally:
        detectors.unregister_detector(NeedsModel.key)
    with pytest.raises(ValueError, match="key and a name"):
        detectors.register_detector(type("Nameless", (detectors.Detector,), {}))


# ------------------------------------------------------------------------------------------ a new detector
def test_a_registered_detector_runs_through_the_protocol(toys) -> None:
    logits, labels = _synthetic()
    correct = logits.argmax(1) == labels
    result = protocol.evaluate(logits, labels, ["Toy Margin", "toy_centroid"], temperature=2.0, seeds=2, n_resamples=0)
    assert result.methods == ("toy_margin", "toy_centroid")
    assert result.names == {"toy_margin": "Toy Margin", "toy_centroid": "Toy Centroid"}
    for s in range(2):
        tune, ev = protocol.split_indices(len(labels), 0.5, s, stratify=correct)
        probs = detectors.softmax(logits, 2.0)
        centroid = probs[tune][~correct[tune]].mean(0)
        for key, uncertainty in (("toy_margin", _margin(probs[ev])), ("toy_centroid", probs[ev] @ centroid)):
            expected = metrics.summary(uncertainty, correct[ev])
            for metric in metric_info.KEYS:
                assert result.per_seed[key][metric][s] == pytest.approx(expected[metric], rel=1e-9)
    assert result.params["toy_margin"] == [(2.0, None), (2.0, None)]
    assert result.settings("toy_centroid")["settings_searched"] == 1


def test_a_registered_learned_detector_is_selected_by_cross_validation(toys) -> None:
    logits, labels = _synthetic(seed=1)
    correct = logits.argmax(1) == labels
    tune, ev = protocol.split_indices(len(labels), 0.5, 0, stratify=correct)
    grid = protocol.grid_search(
        logits, labels, tune_idx=tune, eval_idx=ev, method="toy_centroid", n_folds=3, fold_seed=4
    )
    assert grid.temperatures == ErrorCentroid.grids["temperature"] and grid.lambdas == ()
    # the same cross-validation by hand: fit on the other folds, FPR95 on the held-out one, mean over folds
    fold = protocol._stratified_folds(correct[tune], 3, 4)
    for i, t in enumerate(grid.temperatures):
        probs = detectors.softmax(logits, t)
        values = []
        for f in range(3):
            fit_rows, held = tune[fold != f], tune[fold == f]
            centroid = probs[fit_rows][~correct[fit_rows]].mean(0)
            values.append(metrics.fpr_at_tpr(probs[held] @ centroid, correct[held]))
        assert grid.table[i, 0] == pytest.approx(np.mean(values), abs=1e-12)
    assert grid.best_temperature == grid.temperatures[int(np.argmin(grid.table[:, 0]))]
    # select_and_fit refits on the whole tuning part at the selected temperature
    fitted = protocol.select_and_fit(logits, labels, "toy_centroid", tune_idx=tune, n_folds=3, fold_seed=4)
    probs = detectors.softmax(logits, grid.best_temperature)
    np.testing.assert_allclose(fitted.centroid_, probs[tune][~correct[tune]].mean(0), rtol=1e-12)
    selected = protocol.evaluate_with_selection(
        logits, labels, ["toy_margin", "toy_centroid"], seeds=2, n_folds=3, n_resamples=0
    )
    assert selected.n_settings == {"toy_margin": 3, "toy_centroid": 3}
    assert all(t in Margin.grids["temperature"] for t, _ in selected.params["toy_margin"])


def test_a_registered_detector_is_available_on_the_command_line(toys, tmp_path, capsys) -> None:
    logits, labels = _synthetic()
    path = tmp_path / "run.npz"
    np.savez(path, logits=logits, labels=labels)
    assert (
        cli.main(
            [
                "evaluate",
                "--logits",
                str(path),
                "--methods",
                "toy_margin,Toy Centroid",
                "--seeds",
                "2",
                "--temperature",
                "1,toy_margin=5",
                "--bootstrap",
                "0",
                "--json",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert list(got) == ["toy_margin", "toy_centroid", PAPER_KEY]  # the detectors, then the paper's rows
    assert got["toy_margin"]["temperature"] == 5 and got["toy_centroid"]["temperature"] == 1
    expected = protocol.evaluate(logits, labels, ["toy_margin"], temperature=5.0, seeds=2, n_resamples=0)
    assert got["toy_margin"]["auroc"] == pytest.approx(expected.mean("toy_margin", "auroc"), rel=1e-9)
    # the default method list is every protocol detector, the new ones included
    assert cli.main(["evaluate", "--logits", str(path), "--seeds", "1", "--bootstrap", "0", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == [*detectors.protocol_keys(), PAPER_KEY]
    assert {"toy_margin", "toy_centroid"} <= set(detectors.protocol_keys())
