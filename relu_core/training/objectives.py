"""The five training objectives, each one function written with its formula, and :class:`Objective`, their settings.

Notation: ``f(x)`` the model's logits, ``C`` the number of classes, ``e_k`` the one-hot vector of class ``k``,
``CE(z, q) = −Σ_k q_k log softmax(z)_k`` the cross-entropy of logits ``z`` against a target distribution ``q``
(``CE(z, y)`` for ``q = e_y``); every loss is the mean over the batch. The mixing draws (λ, partners, outlier
images) come from the training loop (:mod:`relu_core.training.loop`), so each function here is a plain,
deterministic computation of a loss that a test can redo by hand.

- cross-entropy: ``CE(f(x), y)``.
- LogitNorm (Wei et al., 2022): ``CE(f(x) / (τ‖f(x)‖₂), y)``, τ = 0.04 (the paper's default).
- MixUp (Zhang et al., 2018): ``x̃ = λxᵢ + (1−λ)xⱼ``, ``ỹ = λe_{yᵢ} + (1−λ)e_{yⱼ}``, loss ``CE(f(x̃), ỹ)``,
  λ ~ Beta(α, α), α = 1, j a random permutation of the batch.
- RegMixUp (Pinto et al., 2022), as the code behind the Rel-U paper's numbers computes it (``regmixup``): the
  mean cross-entropy over one concatenated batch of the clean and the mixed images, i.e.
  ``½·CE(f(x), y) + ½·CE(f(x̃), ỹ)`` with MixUp's x̃, ỹ, λ ~ Beta(α, α), α = 20 for data of at most 10 classes and
  10 otherwise (the Rel-U authors' ``src/RegMixup/train.py``: ``alpha = 20 if dataset_name == "cifar10" else
  10``, ``mixup_criterion`` over ``torch.cat([inputs, mixup_x])``; the RegMixup authors' code averages the same
  way). The paper's appendix text instead writes ``CE(f(x), y) + γ·CE(f(x̃), ỹ)``, γ = 0.5, λ ~ Beta(10, 10):
  selectable as ``regmixup-appendix``. Either way clean and mixed images go through the model in one batch
  (BatchNorm sees both).
- OpenMix (Zhu et al., 2023): the model has C + 1 outputs, the last one an "outlier" class; an inlier xᵢ is
  mixed with an image oᵢ of an outlier data set, ``x̃ = λxᵢ + (1−λ)oᵢ``, ``ỹ = λe_{yᵢ} + (1−λ)e_{C+1}``, loss
  ``CE(f(x), y) + γ·CE(f(x̃), ỹ)``, λ ~ Beta(10, 10), γ = 1 (the authors' default ``lambda_o``), clean and
  mixed in one batch. **At evaluation the extra class is dropped**: the logits' last column is removed before
  any softmax (:class:`DropOutlierClass`), so every detector reads ``softmax(f(x)[:C])``, the distribution over
  the C real classes. This is what the OpenMix paper evaluates (the first C logits); taking the C first
  probabilities of the (C+1)-way softmax instead would leave rows that do not sum to one, which the detectors
  (MSP, Doctor, Rel-U) do not expect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relu_core.errors import InputError

#: LogitNorm's ε in the norm (the authors' ``+ 1e-7``): a zero logit vector does not divide by zero.
LOGITNORM_EPS = 1e-7


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``mean_i CE(zᵢ, qᵢ) = −mean_i Σ_k q_ik log softmax(zᵢ)_k`` for target distributions ``q`` (N, K)."""
    return -(targets * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``CE(f(x), y) = −mean_i log softmax(f(xᵢ))_{yᵢ}``."""
    return F.cross_entropy(logits, labels)


def logitnorm(logits: torch.Tensor, labels: torch.Tensor, tau: float) -> torch.Tensor:
    """LogitNorm ``CE(f(x) / (τ (‖f(x)‖₂ + ε)), y)``: the cross-entropy of the logits scaled to norm 1/τ."""
    norms = torch.linalg.vector_norm(logits, dim=1, keepdim=True) + LOGITNORM_EPS
    return F.cross_entropy(logits / (norms * tau), labels)


def _target_dtype(logits: torch.Tensor) -> torch.dtype:
    """The soft targets' dtype: the logits', at least float32 (under bf16 autocast λ keeps its precision)."""
    return torch.promote_types(logits.dtype, torch.float32)


def mixed(x: torch.Tensor, x_other: torch.Tensor, lam: float) -> torch.Tensor:
    """``λx + (1−λ)x'``: the mixed images (normalised inputs; mixing commutes with the affine normalisation)."""
    return lam * x + (1.0 - lam) * x_other


def mixed_targets(
    labels: torch.Tensor, labels_other: torch.Tensor, lam: float, classes: int, dtype: torch.dtype
) -> torch.Tensor:
    """``λe_y + (1−λ)e_{y'}`` over ``classes`` classes, in the logits' ``dtype``."""
    return lam * F.one_hot(labels, classes).to(dtype) + (1.0 - lam) * F.one_hot(labels_other, classes).to(dtype)


def mixup(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    x_other: torch.Tensor,
    labels_other: torch.Tensor,
    lam: float,
    num_classes: int,
) -> torch.Tensor:
    """MixUp ``CE(f(x̃), ỹ)``, ``x̃ = λx + (1−λ)x'``, ``ỹ = λe_y + (1−λ)e_{y'}`` (``x'``: the partners)."""
    logits = model(mixed(x, x_other, lam))
    return soft_cross_entropy(logits, mixed_targets(labels, labels_other, lam, num_classes, _target_dtype(logits)))


def regmixup(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    x_other: torch.Tensor,
    labels_other: torch.Tensor,
    lam: float,
    num_classes: int,
) -> torch.Tensor:
    """RegMixUp as the authors' code computes it: the mean cross-entropy over the concatenated batch of the
    clean and the mixed images, ``½·CE(f(x), y) + ½·CE(f(x̃), ỹ)`` with MixUp's ``x̃``, ``ỹ``; one forward pass."""
    x_mixed = mixed(x, x_other, lam)
    return _clean_and_mixed(model, x, labels, x_mixed, labels_other, lam, num_classes, 0.5, clean_weight=0.5)


def regmixup_appendix(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    x_other: torch.Tensor,
    labels_other: torch.Tensor,
    lam: float,
    num_classes: int,
    gamma: float,
) -> torch.Tensor:
    """RegMixUp as the Rel-U paper's appendix writes it: ``CE(f(x), y) + γ·CE(f(x̃), ỹ)``; one forward pass."""
    return _clean_and_mixed(model, x, labels, mixed(x, x_other, lam), labels_other, lam, num_classes, gamma)


def openmix(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    outliers: torch.Tensor,
    lam: float,
    num_classes: int,
    gamma: float,
) -> torch.Tensor:
    """OpenMix ``CE(f(x), y) + γ·CE(f(x̃), ỹ)``, ``x̃ = λx + (1−λ)o``, ``ỹ = λe_y + (1−λ)e_{C+1}``.

    ``model`` has ``num_classes + 1`` outputs (C = ``num_classes``; the last is the outlier class); ``outliers``
    holds one outlier image per inlier. One forward pass of the clean and the mixed images.
    """
    outlier_class = torch.full_like(labels, num_classes)
    return _clean_and_mixed(model, x, labels, mixed(x, outliers, lam), outlier_class, lam, num_classes + 1, gamma)


def _clean_and_mixed(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    x_mixed: torch.Tensor,
    labels_other: torch.Tensor,
    lam: float,
    classes: int,
    gamma: float,
    *,
    clean_weight: float = 1.0,
) -> torch.Tensor:
    """``a·CE(f(x), y) + γ·CE(f(x̃), λe_y + (1−λ)e_{y'})`` over ``classes`` outputs (``a`` = ``clean_weight``), the
    clean and the mixed images in one forward pass (as the authors' code: BatchNorm sees both): RegMixUp's and
    OpenMix's loss."""
    logits = model(torch.cat([x, x_mixed]))
    clean, mix = logits[: len(x)], logits[len(x) :]
    targets = mixed_targets(labels, labels_other, lam, classes, _target_dtype(mix))
    return clean_weight * F.cross_entropy(clean, labels) + gamma * soft_cross_entropy(mix, targets)


class DropOutlierClass(nn.Module):
    """An OpenMix model as a C-class classifier: its logits without the last (outlier) column, ``f(x)[:, :C]``.

    Every softmax downstream (the engine's logits, the detectors, input pre-processing) then reads the
    distribution over the C real classes, as the OpenMix paper evaluates."""

    def __init__(self, model: nn.Module, num_classes: int) -> None:
        super().__init__()
        self.model = model
        self.num_classes = num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[:, : self.num_classes]


# ------------------------------------------------------------------------------------------ settings

#: Each objective's parameters and their defaults (what :class:`Objective` accepts for it); None: it depends on the
#: number of classes (:meth:`Objective.for_classes`).
DEFAULTS: dict[str, dict[str, float | None]] = {
    "cross-entropy": {},
    "logitnorm": {"tau": 0.04},
    "mixup": {"alpha": 1.0},
    "regmixup": {"alpha": None},
    "regmixup-appendix": {"alpha": 10.0, "gamma": 0.5},
    "openmix": {"alpha": 10.0, "gamma": 1.0},
}
OBJECTIVES = tuple(DEFAULTS)
#: The paper's five objectives (its Table 1), in its order; ``regmixup`` weighted as the authors' code.
PAPER_OBJECTIVES = ("cross-entropy", "logitnorm", "mixup", "regmixup", "openmix")
MIXING = frozenset({"mixup", "regmixup", "regmixup-appendix", "openmix"})


def regmixup_alpha(num_classes: int) -> float:
    """RegMixUp's α in the authors' code: 20 for data of at most 10 classes (CIFAR-10), 10 otherwise (CIFAR-100)."""
    return 20.0 if num_classes <= 10 else 10.0


#: What each parameter means, for messages and help texts.
PARAMETERS = {"tau": "LogitNorm's τ", "alpha": "the Beta(α, α) of λ", "gamma": "the weight γ of the mixed term"}


@dataclass(frozen=True)
class Objective:
    """An objective by name with its parameters; None takes the objective's default (:data:`DEFAULTS`).

    Refuses (InputError, one line) an unknown name, a parameter the objective does not use, τ ≤ 0, α ≤ 0 and
    γ < 0 (or any non-finite number)."""

    name: str = "cross-entropy"
    tau: float | None = None
    alpha: float | None = None
    gamma: float | None = None

    def __post_init__(self) -> None:
        if self.name not in DEFAULTS:
            raise InputError(f"unknown objective {self.name!r}; choose one of: {', '.join(OBJECTIVES)}")
        defaults = DEFAULTS[self.name]
        for parameter in PARAMETERS:
            value = getattr(self, parameter)
            if value is None:
                object.__setattr__(self, parameter, defaults.get(parameter))
                continue
            if parameter not in defaults:
                users = [name for name, known in DEFAULTS.items() if parameter in known]
                raise InputError(
                    f"{parameter} ({PARAMETERS[parameter]}) applies to {' and '.join(users)}, not {self.name}"
                )
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise InputError(f"{parameter} must be a number, got {value!r}") from None
            positive = parameter != "gamma"
            if not math.isfinite(number) or number < 0 or (positive and number == 0):
                kind = "a finite number > 0" if positive else "a finite number >= 0"
                raise InputError(f"{parameter} ({PARAMETERS[parameter]}) must be {kind}, got {value!r}")
            object.__setattr__(self, parameter, number)

    @property
    def mixes(self) -> bool:
        """True when the objective draws λ (MixUp, both RegMixUps, OpenMix)."""
        return self.name in MIXING

    def for_classes(self, num_classes: int) -> Objective:
        """This objective with the parameters that depend on the class count filled in (RegMixUp's α:
        :func:`regmixup_alpha`); itself when none is missing."""
        if self.name == "regmixup" and self.alpha is None:
            return Objective(self.name, alpha=regmixup_alpha(num_classes))
        return self

    @property
    def uses_outliers(self) -> bool:
        """True for OpenMix: it needs an outlier data set and one extra output."""
        return self.name == "openmix"

    @property
    def extra_classes(self) -> int:
        """Outputs the model has beyond the C classes (1 for OpenMix's outlier class)."""
        return int(self.uses_outliers)

    def settings(self) -> dict[str, object]:
        """The name and the parameters this objective uses (JSON: cache keys and stored metadata)."""
        return {"name": self.name, **{p: getattr(self, p) for p in DEFAULTS[self.name]}}

    def describe(self) -> str:
        """``mixup (alpha=1)`` and the like, for messages and run names."""
        values = ", ".join(
            f"{p}={value:g}" if (value := getattr(self, p)) is not None else f"{p} by class count"
            for p in DEFAULTS[self.name]
        )
        return f"{self.name} ({values})" if values else self.name

    def loss(
        self,
        model: nn.Module,
        x: torch.Tensor,
        labels: torch.Tensor,
        num_classes: int,
        *,
        lam: float = 1.0,
        x_other: torch.Tensor | None = None,
        labels_other: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """This objective's loss on a batch; ``lam`` and the partners ``x_other`` (mixing partners, or outlier
        images for OpenMix) with their ``labels_other`` are the loop's draws."""
        if self.name == "cross-entropy":
            return cross_entropy(model(x), labels)
        if self.name == "logitnorm":
            return logitnorm(model(x), labels, self.tau)
        if self.name == "mixup":
            return mixup(model, x, labels, x_other, labels_other, lam, num_classes)
        if self.name == "regmixup":
            return regmixup(model, x, labels, x_other, labels_other, lam, num_classes)
        if self.name == "regmixup-appendix":
            return regmixup_appendix(model, x, labels, x_other, labels_other, lam, num_classes, self.gamma)
        return openmix(model, x, labels, x_other, lam, num_classes, self.gamma)
