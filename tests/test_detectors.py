"""Detectors: the Rel-U matrix properties, equivalences with Gini/Doctor, numpy/torch agreement, validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch
from scipy.stats import rankdata

from relu_core import detectors
from relu_core.detectors import (
    MSP,
    ODIN,
    Doctor,
    Energy,
    Entropy,
    RelU,
    gini,
    hamming_matrix,
    make_detector,
    protocol_keys,
    quadratic_score,
    relu_matrix,
    softmax,
)
from relu_core.errors import InputError

SEEDS = range(6)


def _logits(seed: int, n: int = 300, n_classes: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Logits of an imperfect classifier (roughly 70% accurate) with a few confusable class pairs."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    logits = rng.standard_normal((n, n_classes)) * 1.5
    logits[np.arange(n), labels] += rng.uniform(0, 3.5, n)
    return logits, labels


def _probs_correct(seed: int, n_classes: int = 5) -> tuple[np.ndarray, np.ndarray]:
    logits, labels = _logits(seed, n_classes=n_classes)
    return softmax(logits), logits.argmax(1) == labels


def _assert_same_ranking(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(rankdata(np.round(a, 12)), rankdata(np.round(b, 12)))


# --------------------------------------------------------------------------- pure functions


def test_softmax_is_stable_and_matches_definition() -> None:
    logits = np.array([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]])
    probs = softmax(logits)
    assert probs.dtype == np.float64 and np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0)
    np.testing.assert_allclose(probs[0, :2], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))])
    np.testing.assert_allclose(probs[1], 1 / 3)
    z = np.random.default_rng(0).standard_normal((4, 7))
    np.testing.assert_allclose(softmax(z, 2.5), np.exp(z / 2.5) / np.exp(z / 2.5).sum(1, keepdims=True))
    float32 = z.astype(np.float32)
    softmax(float32, 3.0)
    np.testing.assert_array_equal(float32, z.astype(np.float32))  # the input is never modified


def test_softmax_torch_keeps_type_and_device() -> None:
    z = torch.randn(4, 6, dtype=torch.float32)
    probs = softmax(z, 2.0)
    assert isinstance(probs, torch.Tensor) and probs.dtype == torch.float32 and probs.device == z.device
    np.testing.assert_allclose(probs.numpy(), softmax(z.numpy(), 2.0), atol=1e-6)
    with pytest.raises(InputError, match="temperature"):
        softmax(z, 0.0)


@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9, 1.0, "auto"])
@pytest.mark.parametrize("seed", SEEDS)
def test_relu_matrix_properties(seed: int, lam) -> None:
    probs, correct = _probs_correct(seed)
    assert 0 < correct.sum() < correct.size
    matrix = relu_matrix(probs, correct, lam)
    assert matrix.shape == (5, 5) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix, matrix.T)
    np.testing.assert_array_equal(np.diag(matrix), 0.0)
    assert (matrix >= 0).all()
    assert np.linalg.norm(matrix) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_relu_matrix_is_the_closed_form(seed: int) -> None:
    probs, correct = _probs_correct(seed)
    lam = 0.7
    # Reference: explicit means of outer products, sample by sample.
    negative = np.mean([np.outer(p, p) for p in probs[~correct]], axis=0)
    positive = np.mean([np.outer(p, p) for p in probs[correct]], axis=0)
    expected = np.maximum(lam * negative - (1 - lam) * positive, 0.0)
    np.fill_diagonal(expected, 0.0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(relu_matrix(probs, correct, lam), expected, atol=1e-12)


def test_lambda_auto_uses_fraction_of_correct_samples() -> None:
    logits, labels = _logits(1)
    correct = logits.argmax(1) == labels
    detector = RelU(lam="auto").fit(logits, labels)
    assert detector.lam_ == pytest.approx(correct.sum() / correct.size)
    np.testing.assert_array_equal(detector.matrix_, relu_matrix(softmax(logits), correct, detector.lam_))
    assert RelU(lam=0.3).fit(logits, labels).lam_ == 0.3


@pytest.mark.parametrize("seed", SEEDS)
def test_lambda_zero_gives_the_gini_ranking(seed: int) -> None:
    logits, labels = _logits(seed)
    detector = RelU(lam=0.0).fit(logits, labels)
    np.testing.assert_array_equal(detector.matrix_, hamming_matrix(5))
    _assert_same_ranking(detector.score(logits), gini(softmax(logits)))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_hamming_matrix_gives_doctor(seed: int, temperature: float) -> None:
    logits, _ = _logits(seed)
    probs = softmax(logits, temperature)
    doctor = Doctor(temperature).score(logits)
    hamming_score = quadratic_score(probs, hamming_matrix(5))
    np.testing.assert_allclose(hamming_score, doctor / np.sqrt(5 * 4), atol=1e-14)
    _assert_same_ranking(hamming_score, doctor)
    unnormalised = quadratic_score(probs, 1.0 - np.eye(5))
    np.testing.assert_allclose(unnormalised, doctor, atol=1e-14)


def test_hamming_fallback_when_a_side_is_empty() -> None:
    logits, labels = _logits(2)
    right = logits.argmax(1)
    no_errors = RelU(lam=0.5).fit(logits, right)
    np.testing.assert_array_equal(no_errors.matrix_, hamming_matrix(5))
    assert no_errors.lam_ == 0.5
    all_wrong = RelU(lam=0.5).fit(logits, (right + 1) % 5)
    np.testing.assert_array_equal(all_wrong.matrix_, hamming_matrix(5))
    _assert_same_ranking(no_errors.score(logits), Doctor().score(logits))
    assert RelU(lam="auto").fit(logits, right).lam_ == 1.0


def test_relu_differs_from_doctor_when_errors_have_structure() -> None:
    # Classes 0 and 1 are confused with each other, so D* should concentrate on the (0, 1) entry.
    rng = np.random.default_rng(0)
    n = 2000
    labels = rng.integers(0, 4, n)
    logits = rng.standard_normal((n, 4))
    logits[np.arange(n), labels] += 3.0
    confusable = labels < 2
    logits[confusable, 0] += 1.5
    logits[confusable, 1] += 1.5
    detector = RelU(lam=0.5).fit(logits, labels)
    off_diagonal = detector.matrix_[~np.eye(4, dtype=bool)]
    assert detector.matrix_[0, 1] == off_diagonal.max()
    assert not np.allclose(detector.matrix_, hamming_matrix(4))


def test_quadratic_score_never_builds_n_by_n() -> None:
    probs, correct = _probs_correct(0)
    matrix = relu_matrix(probs, correct, 0.5)
    np.testing.assert_allclose(quadratic_score(probs, matrix), np.diag(probs @ matrix @ probs.T), atol=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_quadratic_score_any_matrix_numpy_and_torch(seed: int) -> None:
    # The numpy path uses a triangular BLAS product: it must equal the plain formula for any D,
    # symmetric or not, with a diagonal, on strided input too.
    rng = np.random.default_rng(seed)
    probs = softmax(rng.standard_normal((41, 7)))
    matrix = rng.standard_normal((7, 7))
    expected = ((probs @ matrix) * probs).sum(1)
    np.testing.assert_allclose(quadratic_score(probs, matrix), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(quadratic_score(probs[::3], matrix), expected[::3], rtol=1e-12, atol=1e-14)
    torch_scores = quadratic_score(torch.from_numpy(probs), matrix)
    np.testing.assert_allclose(torch_scores.numpy(), expected, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- detector objects


def _reference_scores(logits: np.ndarray) -> dict[str, np.ndarray]:
    def sm(t: float) -> np.ndarray:
        e = np.exp((logits - logits.max(1, keepdims=True)) / t)
        return e / e.sum(1, keepdims=True)

    return {
        "msp": -sm(1.0).max(1),
        "odin": -sm(1000.0).max(1),
        "doctor": 1 - (sm(1.0) ** 2).sum(1),
        "entropy": -(sm(1.0) * np.log(sm(1.0))).sum(1),
        "energy": -np.log(np.exp(logits).sum(1)),
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_baselines_match_their_formulas(seed: int) -> None:
    logits, labels = _logits(seed)
    for key, expected in _reference_scores(logits).items():
        detector = make_detector(key).fit(logits, labels)
        scores = detector.score(logits)
        assert scores.dtype == np.float64 and scores.shape == (logits.shape[0],)
        np.testing.assert_allclose(scores, expected, rtol=1e-12, atol=1e-12, err_msg=key)


def test_energy_temperature() -> None:
    logits, _ = _logits(0)
    t = 4.0
    np.testing.assert_allclose(Energy(t).score(logits), -t * np.log(np.exp(logits / t).sum(1)), rtol=1e-12)
    with pytest.raises(InputError, match="logits"):
        Energy().score_probs(softmax(logits))
    assert not Energy.accepts_probs and Doctor.accepts_probs


@pytest.mark.parametrize("key", protocol_keys())
def test_score_probs_equals_score(key: str) -> None:
    logits, labels = _logits(3)
    detector = make_detector(key, temperature=2.0, lam=0.6)
    fitted = detector.fit(logits, labels)
    assert fitted is detector
    if not detector.accepts_probs:
        return
    probs = softmax(logits, detector.temperature)
    via_probs = make_detector(key, temperature=2.0, lam=0.6)
    via_probs.fit_probs(probs, logits.argmax(1) == labels)
    np.testing.assert_array_equal(via_probs.score_probs(probs), detector.score(logits))


@pytest.mark.parametrize("key", protocol_keys())
def test_numpy_and_torch_agree_and_torch_is_differentiable(key: str) -> None:
    logits, labels = _logits(4)
    detector = make_detector(key).fit(logits, labels)
    expected = detector.score(logits)
    tensor = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    scores = detector.score(tensor)
    assert isinstance(scores, torch.Tensor) and scores.dtype == torch.float64 and scores.device == tensor.device
    np.testing.assert_allclose(scores.detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    scores.sum().backward()
    assert tensor.grad is not None and torch.isfinite(tensor.grad).all() and tensor.grad.abs().sum() > 0
    # Fitting from tensors gives the same detector as fitting from numpy.
    torch_fitted = make_detector(key).fit(torch.tensor(logits), torch.tensor(labels))
    np.testing.assert_allclose(torch_fitted.score(logits), expected, rtol=1e-10, atol=1e-12)


def test_torch_float32_and_gradient_through_relu() -> None:
    logits, labels = _logits(5)
    detector = RelU(lam=0.5, temperature=2.0).fit(logits, labels)
    tensor = torch.tensor(logits, dtype=torch.float32, requires_grad=True)
    scores = detector.score(tensor)
    assert scores.dtype == torch.float32
    np.testing.assert_allclose(scores.detach().numpy(), detector.score(logits), atol=1e-6)
    (grad,) = torch.autograd.grad(scores.sum(), tensor)
    # Finite differences on one logit confirm the gradient is the gradient of the score.
    eps = 1e-6
    shifted = logits.copy()
    shifted[0, 2] += eps
    numeric = (detector.score(shifted)[0] - detector.score(logits)[0]) / eps
    assert grad[0, 2].item() == pytest.approx(numeric, rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("key", ["doctor", "relu", "energy", "entropy"])
def test_a_temperature_that_overflows_the_logits_is_refused(key: str) -> None:
    # 1e-320 is a valid positive float, but logits / T overflows: a clear error, never NaN scores.
    logits, labels = _logits(0)
    detector = make_detector(key, temperature=1.0, lam=0.5).fit(logits, labels)
    detector.temperature = 1e-320
    for values in (logits, torch.tensor(logits)):
        with pytest.raises(InputError, match="too small"):
            detector.score(values)
    with pytest.raises(InputError, match="too small"):
        softmax(logits, 1e-320)
    with np.errstate(all="raise"):  # and the refusal itself does not trip numpy's overflow warning
        with pytest.raises(InputError):
            softmax(logits, 1e-320)


def test_entropy_handles_underflowing_probabilities() -> None:
    logits = np.array([[0.0, -2000.0, 5.0]])
    assert np.isfinite(Entropy().score(logits)).all()
    # the underflowing class adds nothing: the entropy of the other two classes, computed by scipy
    two = scipy.special.softmax([0.0, 5.0])
    np.testing.assert_allclose(Entropy().score(logits), [scipy.stats.entropy(two)], rtol=1e-9)
    tensor = torch.tensor(logits, requires_grad=True)
    Entropy().score(tensor).sum().backward()
    assert torch.isfinite(tensor.grad).all()
    assert tensor.grad[0, 1] == 0  # the underflowing class has no influence on the entropy


def test_names_defaults_and_factory() -> None:
    names = {key: make_detector(key).name for key in protocol_keys()}
    assert names == {
        "msp": "MSP",
        "odin": "ODIN",
        "doctor": "Doctor",
        "relu": "Rel-U",
        "entropy": "Entropy",
        "energy": "Energy",
    }
    assert [key for key in protocol_keys() if make_detector(key).requires_fit] == ["relu"]
    assert make_detector("odin").temperature == 1000.0
    assert make_detector("odin", temperature=10).temperature == 10.0
    assert make_detector("msp", temperature=10).temperature == 1.0  # MSP is defined at T = 1
    relu = make_detector("Rel-U", temperature=2.0, lam="auto")
    assert isinstance(relu, RelU) and relu.lam == "auto" and relu.temperature == 2.0
    assert isinstance(make_detector("MSP"), MSP) and isinstance(make_detector("odin"), ODIN)
    with pytest.raises(InputError, match="unknown detector"):
        make_detector("mahalanobis")
    assert [detectors.detector_key(n) for n in ("Rel-U", " REL_U ", "Doctor", "energy")] == [
        "relu",
        "relu",
        "doctor",
        "energy",
    ]


def test_relu_requires_fit_and_matching_classes() -> None:
    logits, labels = _logits(0)
    with pytest.raises(InputError, match="not fitted"):
        RelU().score(logits)
    detector = RelU().fit(logits, labels)
    with pytest.raises(InputError, match="classes"):
        detector.score(logits[:, :4])


@pytest.mark.parametrize("lam", [-0.1, 1.5, "half", None])
def test_bad_lambda(lam) -> None:
    with pytest.raises(InputError, match="lambda"):
        RelU(lam=lam)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("logits", "message"),
    [
        (np.array([[0.0, np.nan]]), "NaN"),
        (np.array([[0.0, np.inf]]), "NaN"),
        (np.zeros(5), "2-D"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((4, 1)), "2 classes"),
        (np.array([["a", "b"]]), "real"),
        (torch.tensor([[0.0, float("nan")]]), "NaN"),
        (torch.zeros(3), "2-D"),
    ],
)
def test_bad_logits(logits, message: str) -> None:
    with pytest.raises(InputError, match=message):
        detectors.validate_logits(logits)
    with pytest.raises(InputError, match=message):
        Doctor().score(logits)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.array([0, 1, 3]), "out of range"),
        (np.array([0, -1, 2]), "out of range"),
        (np.array([0.0, 1.0, 2.0]), "integers"),
        (np.array([0, 1]), "number of samples"),
        (np.array([[0, 1, 2]]), "1-D"),
        (torch.tensor([0, 1, 5]), "out of range"),
    ],
)
def test_bad_labels(labels, message: str) -> None:
    logits = np.zeros((3, 3))
    with pytest.raises(InputError, match=message):
        detectors.validate_labels(labels, 3, 3)
    with pytest.raises(InputError, match=message):
        RelU().fit(logits, labels)


def test_validation_accepts_good_input() -> None:
    detectors.validate_logits(np.zeros((2, 3), dtype=np.float32))
    detectors.validate_logits(torch.zeros(2, 3))
    detectors.validate_labels(np.array([0, 2], dtype=np.uint8), 2, 3)
    # the accepted input is scored: uniform probabilities over 3 classes have Gini 1 - 3 * (1/3)^2 = 2/3
    np.testing.assert_allclose(Doctor().score(np.zeros((2, 3), dtype=np.float32)), [2 / 3, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(Doctor().score(torch.zeros(2, 3)).numpy(), [2 / 3, 2 / 3], rtol=1e-6)


@pytest.mark.parametrize("lam", [0.5, "auto", 0.0])
def test_weighted_refits_are_the_fits_of_the_repeated_rows(lam) -> None:
    """One D* per row of draw counts, in one batched product: each equals RelU fitted on the fitting rows repeated
    as often as drawn (the fallback included: a resample with no error, λ = 0), and so do its scores."""
    rng = np.random.default_rng(1)
    n, classes, fits = 80, 4, 12
    logits = rng.normal(size=(n, classes))
    labels = rng.integers(0, classes, n)
    probs, correct = detectors.softmax(logits), logits.argmax(1) == labels
    weights = rng.multinomial(n, np.full(n, 1 / n), size=fits)
    weights[0] = np.where(correct, 1, 0)  # no error drawn: the Hamming fallback
    matrices = detectors.weighted_relu_matrices(probs, correct, weights, lam)
    scores = detectors.quadratic_scores(probs, matrices)
    for r in range(fits):
        drawn = np.repeat(np.arange(n), weights[r])
        fitted = detectors.RelU(lam=lam).fit_probs(probs[drawn], correct[drawn])
        np.testing.assert_allclose(matrices[r], fitted.matrix_, atol=1e-12)
        np.testing.assert_allclose(scores[r], fitted.score_probs(probs), atol=1e-12)
    assert detectors.is_fallback(matrices[0])
