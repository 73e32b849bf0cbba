"""Each training objective against a direct numpy computation on a tiny batch, and the objectives' settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from relu_core.errors import InputError
from relu_core.training import objectives
from relu_core.training.objectives import DropOutlierClass, Objective

C, D, N = 3, 4, 5
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D))
X_OTHER = RNG.normal(size=(N, D))
Y = np.array([0, 2, 1, 1, 0])
Y_OTHER = np.array([1, 0, 2, 0, 2])
LAM = 0.3


def _linear(outputs: int) -> tuple[nn.Linear, np.ndarray, np.ndarray]:
    """A float64 linear model and its weight and bias as numpy arrays (the hand computation's f)."""
    layer = nn.Linear(D, outputs).double()
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(RNG.normal(size=(outputs, D))))
        layer.bias.copy_(torch.from_numpy(RNG.normal(size=outputs)))
    return layer, layer.weight.detach().numpy(), layer.bias.detach().numpy()


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _ce(z: np.ndarray, q: np.ndarray) -> float:
    """−mean_i Σ_k q_ik log softmax(z_i)_k."""
    return float(-(q * _log_softmax(z)).sum(axis=1).mean())


def _onehot(labels: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[labels]


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a)


def test_cross_entropy_by_hand() -> None:
    z = RNG.normal(size=(N, C))
    expected = -np.mean([_log_softmax(z)[i, Y[i]] for i in range(N)])
    assert objectives.cross_entropy(_t(z), _t(Y)).item() == pytest.approx(expected, rel=1e-12)


def test_logitnorm_by_hand() -> None:
    z = RNG.normal(size=(N, C)) * 3
    tau = 0.04
    scaled = z / (tau * (np.sqrt((z**2).sum(axis=1, keepdims=True)) + 1e-7))
    expected = _ce(scaled, _onehot(Y, C))
    assert objectives.logitnorm(_t(z), _t(Y), tau).item() == pytest.approx(expected, rel=1e-12)
    # the loss depends on the logits' direction only (up to ε)
    assert objectives.logitnorm(_t(5 * z), _t(Y), tau).item() == pytest.approx(expected, rel=1e-6)


def test_mixup_by_hand() -> None:
    model, w, b = _linear(C)
    mixed = LAM * X + (1 - LAM) * X_OTHER
    target = LAM * _onehot(Y, C) + (1 - LAM) * _onehot(Y_OTHER, C)
    expected = _ce(mixed @ w.T + b, target)
    got = objectives.mixup(model, _t(X), _t(Y), _t(X_OTHER), _t(Y_OTHER), LAM, C)
    assert got.item() == pytest.approx(expected, rel=1e-12)


def test_regmixup_by_hand_is_the_mean_over_the_concatenated_batch() -> None:
    """The authors' code (``src/RegMixup/train.py``): ``lam·CE(out, cat[y, y]) + (1−lam)·CE(out, cat[y, y_perm])``
    over ``out = f(cat[x, x̃])``, each CE a mean over the 2N rows: written here exactly so, then checked to equal
    ½·CE(clean) + ½·CE(mixed)."""
    model, w, b = _linear(C)
    mixed = LAM * X + (1 - LAM) * X_OTHER
    out = np.concatenate([X, mixed]) @ w.T + b
    targets_a = np.concatenate([Y, Y])
    targets_b = np.concatenate([Y, Y_OTHER])
    authors = LAM * _ce(out, _onehot(targets_a, C)) + (1 - LAM) * _ce(out, _onehot(targets_b, C))
    target = LAM * _onehot(Y, C) + (1 - LAM) * _onehot(Y_OTHER, C)
    halves = 0.5 * _ce(X @ w.T + b, _onehot(Y, C)) + 0.5 * _ce(mixed @ w.T + b, target)
    assert authors == pytest.approx(halves, rel=1e-12)
    got = objectives.regmixup(model, _t(X), _t(Y), _t(X_OTHER), _t(Y_OTHER), LAM, C)
    assert got.item() == pytest.approx(authors, rel=1e-12)


def test_regmixup_appendix_by_hand() -> None:
    model, w, b = _linear(C)
    gamma = 0.5
    mixed = LAM * X + (1 - LAM) * X_OTHER
    target = LAM * _onehot(Y, C) + (1 - LAM) * _onehot(Y_OTHER, C)
    expected = _ce(X @ w.T + b, _onehot(Y, C)) + gamma * _ce(mixed @ w.T + b, target)
    got = objectives.regmixup_appendix(model, _t(X), _t(Y), _t(X_OTHER), _t(Y_OTHER), LAM, C, gamma)
    assert got.item() == pytest.approx(expected, rel=1e-12)
    # the two weightings differ: the appendix weighs the clean term twice as much
    assert got.item() != pytest.approx(
        objectives.regmixup(model, _t(X), _t(Y), _t(X_OTHER), _t(Y_OTHER), LAM, C).item()
    )


def test_openmix_by_hand() -> None:
    model, w, b = _linear(C + 1)
    gamma = 1.0
    outliers = X_OTHER
    mixed = LAM * X + (1 - LAM) * outliers
    outlier_class = np.zeros((N, C + 1))
    outlier_class[:, C] = 1.0  # e_{C+1}: the extra, last output
    target = LAM * _onehot(Y, C + 1) + (1 - LAM) * outlier_class
    expected = _ce(X @ w.T + b, _onehot(Y, C + 1)) + gamma * _ce(mixed @ w.T + b, target)
    got = objectives.openmix(model, _t(X), _t(Y), _t(outliers), LAM, C, gamma)
    assert got.item() == pytest.approx(expected, rel=1e-12)


def test_objective_loss_dispatches_to_each_function() -> None:
    model, _, _ = _linear(C)
    x, y, xo, yo = _t(X), _t(Y), _t(X_OTHER), _t(Y_OTHER)
    draws = {"lam": LAM, "x_other": xo, "labels_other": yo}
    assert Objective("cross-entropy").loss(model, x, y, C) == objectives.cross_entropy(model(x), y)
    assert Objective("logitnorm", tau=0.5).loss(model, x, y, C) == objectives.logitnorm(model(x), y, 0.5)
    assert Objective("mixup").loss(model, x, y, C, **draws) == objectives.mixup(model, x, y, xo, yo, LAM, C)
    assert Objective("regmixup").loss(model, x, y, C, **draws) == objectives.regmixup(model, x, y, xo, yo, LAM, C)
    assert Objective("regmixup-appendix").loss(model, x, y, C, **draws) == objectives.regmixup_appendix(
        model, x, y, xo, yo, LAM, C, 0.5
    )
    wide, _, _ = _linear(C + 1)
    assert Objective("openmix", gamma=2.0).loss(wide, x, y, C, lam=LAM, x_other=xo) == objectives.openmix(
        wide, x, y, xo, LAM, C, 2.0
    )


def test_dropping_the_outlier_class_removes_the_last_logit_before_any_softmax() -> None:
    model, w, b = _linear(C + 1)
    logits = DropOutlierClass(model, C)(_t(X)).detach().numpy()
    np.testing.assert_allclose(logits, (X @ w.T + b)[:, :C])
    assert logits.shape == (N, C)


def test_defaults_and_settings() -> None:
    assert Objective("logitnorm").tau == 0.04
    assert Objective("mixup").alpha == 1.0
    # RegMixUp as the authors' code: α = 20 for 10-class data, 10 for CIFAR-100; no γ (the halves weigh ½ each)
    assert (Objective("regmixup").alpha, Objective("regmixup").gamma) == (None, None)
    assert Objective("regmixup").for_classes(10).alpha == 20.0 and Objective("regmixup").for_classes(100).alpha == 10.0
    assert Objective("regmixup", alpha=3).for_classes(10).alpha == 3.0
    assert Objective("regmixup").for_classes(10).settings() == {"name": "regmixup", "alpha": 20.0}
    assert (Objective("regmixup-appendix").alpha, Objective("regmixup-appendix").gamma) == (10.0, 0.5)
    assert (Objective("openmix").alpha, Objective("openmix").gamma) == (10.0, 1.0)
    assert Objective().settings() == {"name": "cross-entropy"}
    assert Objective("regmixup-appendix", gamma=0).settings() == {
        "name": "regmixup-appendix",
        "alpha": 10.0,
        "gamma": 0.0,
    }
    assert Objective("regmixup").describe() == "regmixup (alpha by class count)"
    assert Objective("regmixup").mixes and not Objective("logitnorm").mixes
    assert Objective("openmix").extra_classes == 1 and Objective("mixup").extra_classes == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "focal"}, "unknown objective 'focal'; choose one of: cross-entropy, logitnorm"),
        ({"name": "logitnorm", "tau": 0}, r"tau \(LogitNorm's τ\) must be a finite number > 0"),
        ({"name": "logitnorm", "tau": -1}, "must be a finite number > 0"),
        ({"name": "logitnorm", "tau": float("nan")}, "must be a finite number > 0"),
        ({"name": "regmixup-appendix", "gamma": -0.1}, "must be a finite number >= 0"),
        ({"name": "regmixup", "gamma": 0.5}, "gamma .* applies to regmixup-appendix and openmix, not regmixup"),
        ({"name": "openmix", "gamma": float("inf")}, "must be a finite number >= 0"),
        ({"name": "mixup", "alpha": 0}, "must be a finite number > 0"),
        ({"name": "mixup", "tau": 1.0}, "tau .* applies to logitnorm, not mixup"),
        (
            {"name": "cross-entropy", "gamma": 1.0},
            "gamma .* applies to regmixup-appendix and openmix, not cross-entropy",
        ),
        ({"name": "mixup", "alpha": "a lot"}, "alpha must be a number"),
    ],
)
def test_bad_settings_are_one_line_input_errors(arguments: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        Objective(**arguments)
    assert "\n" not in str(caught.value)
