"""More baselines (the paper's tables tab:bayes and tab:main_misclassification_detection_conformal) and the
"baselines" study.

Five detectors, registered in :data:`relu_core.detectors.REGISTRY` on import, each with the uncertainty
convention of :mod:`relu_core.detectors` (higher = more likely misclassified):

- ``mlp``, :class:`MLPDetector`: a two-hidden-layer MLP (128, 128, ReLU, dropout 0.2) trained with binary
  cross-entropy and Adam (lr 1e-3) on the soft-predictions ``softmax(z / T)`` to predict "misclassified";
  early stopping on a seeded, stratified held-out part of the data given to ``fit`` (the tuning split),
  never on anything else. Its uncertainty is the predicted probability of an error.
- ``mc_dropout``, :class:`MCDropout`: k = 10 stochastic passes with dropout (p = 0.2) inserted before the
  classifier head (the model's last ``nn.Linear``). The backbone runs once in eval mode through
  ``relu_core.engine``; the k dropout masks (seeded, drawn once over all N samples, so the result does not
  depend on the batch size) are applied to the head's input. Convention: the k passes' **logits are
  averaged**, then the uncertainty is the entropy (natural log) of ``softmax(mean logits)``. It needs the
  model and the images: ``score``/``score_probs`` on logits refuse with an :class:`InputError`.
- ``deep_ensemble``, :class:`DeepEnsemble`: the average of M models' logits on the same samples, then
  ``-max softmax(average)`` (MSP of the average). ``score`` takes the (M, N, C) stack of member logits.
  Members offline (:func:`ensemble_logits`): the shared pretrained CIFAR-10 ResNet-20/32/44/56 for a CIFAR
  ResNet run, or 5 small CNNs trained as the run was, with its seed s and s + 1 ... s + 4, for a small-CNN run; or logits given by the caller.
- ``conformal``, :class:`ConformalAPS`: split-conformal adaptive prediction sets (APS, Romano et al. 2020,
  randomised by default) calibrated on the tuning split at coverage ``1 - alpha``. The set of x is
  ``{c : E(x, c) <= q}`` with ``E(x, c)`` the probability mass of the classes ranked before c plus ``u p_c``
  (u uniform, seeded; u = 1 without randomisation) and ``q`` the ``ceil((n + 1)(1 - alpha))``-th smallest
  ``E(x_i, y_i)`` of the n calibration samples, so a new sample's set holds its label with probability
  >= 1 - alpha. ``conformal_raps``, :class:`ConformalRAPS`: RAPS (Angelopoulos et al., ICLR 2021), the same
  with ``lam * max(0, rank(c) - k_reg)`` added to ``E(x, c)`` (defaults k_reg = 1, lam = 0.01). The paper's
  rule rejects a
  prediction whose set holds more than one label, or (a threshold t) whose second largest probability
  inside the set exceeds t: the uncertainty is that second probability when the set holds two labels or
  more, and 0 otherwise (rejecting u > 0 is the plain "more than one label" rule).

The study (:func:`baselines_study`): on one run, per seed a stratified tuning / evaluation split
(``protocol.split_indices``); the learned detectors see the tuning rows only; every detector is scored on
the evaluation rows against the run model's own correctness (positives = correct predictions), so all rows
are paired. Rel-U (lam = 0.5) and Doctor at T = 1, no selection. Mean and std over seeds of FPR95, AUROC and
AURC, and the Rel-U − Doctor paired bootstrap interval (``stats.pooled_bootstrap``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from relu_core import cache, detectors, engine, figures, metric_info, metrics, models, protocol, stats, validation
from relu_core.detectors import Detector, register_detector
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress, within
from relu_core.threads import small_work

MC_PASSES = 10
MC_DROPOUT = 0.2
DEFAULT_COVERAGE = 0.9
#: RAPS's regularisation (:class:`ConformalRAPS`): classes beyond the k_reg most likely cost λ each.
RAPS_K_REG, RAPS_LAMBDA = 1, 0.01
ENSEMBLE_SEEDS = 5
CIFAR_RESNETS = ("resnet20", "resnet32", "resnet44", "resnet56")
BASELINE_KEYS = ("mlp", "mc_dropout", "deep_ensemble", "conformal", "conformal_raps")
#: The conformal detectors (their sets' coverage goes into the table's note).
CONFORMAL_KEYS = ("conformal", "conformal_raps")
#: What the study compares by default: the paired pair, MSP, then the four baselines.
STUDY_KEYS = (*protocol.PAIRED, "msp", *BASELINE_KEYS)
TABLE_COLUMNS = (
    "key",
    "detector",
    "learned",
    "needs_model",
    *(f"{m}_{statistic}" for m in metric_info.PAIRED_KEYS for statistic in ("mean", "std")),
    "note",
)


# --------------------------------------------------------------------------- MLP


class MLPDetector(Detector):
    """Learned baseline: an MLP on the soft-predictions predicting "misclassified" (see module docstring).

    ``fit``/``fit_probs`` train on the given (tuning) rows only: a seeded stratified ``holdout`` part of
    them stops the training (best held-out BCE, ``patience`` epochs without improvement), the rest trains.
    Deterministic given ``seed`` on the CPU. ``score_probs`` returns the predicted error probability
    (float64 numpy; not differentiable).
    """

    key = "mlp"
    name = "MLP"
    requires_fit = True
    protocol = False

    def __init__(
        self,
        seed: int = 0,
        temperature: float = 1.0,
        hidden: int = 128,
        dropout: float = 0.2,
        lr: float = 1e-3,
        batch_size: int = 128,
        max_epochs: int = 200,
        patience: int = 20,
        holdout: float = 0.2,
    ) -> None:
        super().__init__(temperature)
        if not 0.0 <= dropout < 1.0 or not 0.0 < holdout < 1.0 or min(hidden, batch_size, max_epochs, patience) < 1:
            raise InputError("MLP: dropout in [0, 1), holdout in (0, 1) and positive sizes are required")
        self.seed, self.hidden, self.dropout, self.lr = int(seed), int(hidden), float(dropout), float(lr)
        self.batch_size, self.max_epochs, self.patience, self.holdout = batch_size, max_epochs, patience, holdout
        self.net_: nn.Sequential | None = None
        self.epochs_: int | None = None
        self.stop_loss_: float | None = None

    def _network(self, n_inputs: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(n_inputs, self.hidden),
            nn.ReLU(),
            nn.Dropout(self.dropout),
            nn.Linear(self.hidden, self.hidden),
            nn.ReLU(),
            nn.Dropout(self.dropout),
            nn.Linear(self.hidden, 1),
        )

    @small_work
    def fit_probs(self, probs, correct) -> MLPDetector:
        probs = np.asarray(probs.detach().cpu() if isinstance(probs, torch.Tensor) else probs, dtype=np.float32)
        correct = np.asarray(correct.detach().cpu() if isinstance(correct, torch.Tensor) else correct, dtype=bool)
        if probs.ndim != 2 or correct.shape != (probs.shape[0],):
            raise InputError("MLP: probs must be (N, C) with one correctness flag per row")
        # the held-out stopping part and the training part, both holding correct and wrong samples
        try:
            stop_idx, train_idx = protocol.split_indices(probs.shape[0], self.holdout, self.seed, stratify=correct)
        except InputError:
            raise InputError(
                f"MLP: the tuning split holds {correct.size:,} samples, {int((~correct).sum()):,} of them "
                "misclassified: too few to train it and keep a part for early stopping; use a larger tuning split"
            ) from None
        x = torch.from_numpy(probs)
        y = torch.from_numpy((~correct).astype(np.float32))
        loss_fn = nn.BCEWithLogitsLoss()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            net = self._network(probs.shape[1])
            optimiser = torch.optim.Adam(net.parameters(), lr=self.lr)
            best, best_state, best_epoch, since = math.inf, None, 0, 0
            x_stop, y_stop = x[stop_idx], y[stop_idx]
            train = torch.from_numpy(train_idx)
            for epoch in range(1, self.max_epochs + 1):
                net.train()
                for batch in train[torch.randperm(train.numel())].split(self.batch_size):
                    optimiser.zero_grad()
                    loss_fn(net(x[batch])[:, 0], y[batch]).backward()
                    optimiser.step()
                net.eval()
                with torch.no_grad():
                    stop_loss = float(loss_fn(net(x_stop)[:, 0], y_stop))
                if stop_loss < best - 1e-7:
                    best, best_epoch, since = stop_loss, epoch, 0
                    best_state = {k: v.clone() for k, v in net.state_dict().items()}
                else:
                    since += 1
                    if since >= self.patience:
                        break
        net.load_state_dict(best_state)
        self.net_, self.epochs_, self.stop_loss_ = net.eval(), best_epoch, best
        return self

    @small_work
    def score_probs(self, probs) -> np.ndarray:
        if self.net_ is None:
            raise InputError("the MLP is not fitted yet: call fit(logits, labels) on a tuning split first")
        probs = probs.detach().cpu().numpy() if isinstance(probs, torch.Tensor) else np.asarray(probs)
        if probs.ndim != 2 or probs.shape[1] != self.net_[0].in_features:
            raise InputError(f"the MLP was fitted on {self.net_[0].in_features} classes, got shape {probs.shape}")
        with torch.no_grad():
            return torch.sigmoid(self.net_(torch.from_numpy(probs.astype(np.float32)))[:, 0]).double().numpy()

    def __repr__(self) -> str:
        return f"MLPDetector(seed={self.seed}, temperature={self.temperature:g})"


# --------------------------------------------------------------------------- MC-Dropout


def _head(net: nn.Module) -> nn.Linear:
    heads = [m for m in net.modules() if isinstance(m, nn.Linear)]
    if not heads:
        raise InputError(
            "MC-Dropout inserts dropout before the classifier head (the model's last nn.Linear); "
            "this model has none (e.g. TorchScript): it cannot be used"
        )
    return heads[-1]


def head_features(
    model: nn.Module,
    images: np.ndarray,
    mean: Sequence[float],
    std: Sequence[float],
    *,
    device: str = "auto",
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> tuple[np.ndarray, nn.Linear]:
    """The input of the model's classifier head (its last ``nn.Linear``) for every image, float32 (N, F),
    and that head (float32, on the CPU). One eval-mode pass through the engine's batched loop (fp32).

    Raises InputError when the head is not the model's output layer (its output differs from the model's).
    """
    engine.check_images(model, images, mean, std, None)
    dev = engine.select_device(device)
    net = engine.inference_model(model, dev, "fp32")
    head = _head(net)
    captured: dict[str, torch.Tensor] = {}
    hook = head.register_forward_hook(lambda _m, inputs, output: captured.update(x=inputs[0], y=output))
    normalise = models.Normalization(tuple(mean), tuple(std)).on(dev)

    def step(batch: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            out = engine.forward(net, normalise(batch), "fp32")
        if (
            captured["x"].ndim != 2
            or captured["y"].shape != out.shape
            or not torch.allclose(captured["y"].float(), out, rtol=1e-4, atol=1e-4)
        ):
            raise InputError(
                "the model's last nn.Linear is not its output layer: MC-Dropout cannot insert "
                "dropout before the classifier head of this model"
            )
        return captured["x"].float()

    try:
        features = engine.batched_outputs(
            step,
            images,
            device=dev,
            batch_size=batch_size or engine.default_batch_size(dev),
            task="MC-Dropout features",
            progress=progress,
            cancel=cancel,
        )
    finally:
        hook.remove()
    cpu_head = nn.Linear(head.in_features, head.out_features)
    cpu_head.load_state_dict({k: v.detach().float().cpu() for k, v in head.state_dict().items()})
    return features, cpu_head.eval()


class MCDropout(Detector):
    """MC-Dropout (Gal & Ghahramani, 2016) as a misclassification detector (see the module docstring).

    It needs the model and the images: :func:`head_features` of them, then :meth:`score_features`.
    ``score(logits)`` refuses (InputError).
    """

    key = "mc_dropout"
    name = "MC-Dropout"
    temperature_applies = False
    accepts_probs = False
    needs_model = True
    protocol = False

    def __init__(self, passes: int = MC_PASSES, p: float = MC_DROPOUT, seed: int = 0) -> None:
        super().__init__(1.0)
        validation.integer(passes, "the number of MC-Dropout passes", minimum=1)
        if not 0.0 <= float(p) < 1.0:
            raise InputError(f"the dropout probability must lie in [0, 1), got {p!r}")
        self.passes, self.p, self.seed = int(passes), float(p), int(seed)

    def _refuse(self, *_args) -> None:
        raise InputError(
            "MC-Dropout scores images through the model (k stochastic passes), not logits: it needs "
            "a run with a model and its images"
        )

    score = score_probs = _refuse

    @torch.no_grad()
    def head_logits(self, features: np.ndarray, head: nn.Linear) -> np.ndarray:
        """The k passes' logits (k, N, C) from the head's input: ``head(features * mask / (1 - p))`` with
        Bernoulli(1 - p) masks drawn from ``torch.Generator().manual_seed(seed)``, one (N, F) mask per pass."""
        x = torch.as_tensor(features, dtype=torch.float32)
        generator = torch.Generator().manual_seed(self.seed)
        passes = []
        for _ in range(self.passes):
            keep = torch.rand(x.shape, generator=generator) >= self.p
            passes.append(head(x * keep / (1.0 - self.p)))
        return torch.stack(passes).numpy()

    @small_work
    def score_features(self, features: np.ndarray, head: nn.Linear) -> np.ndarray:
        """Entropy of ``softmax(mean over the k passes of the logits)`` (float64, N)."""
        return detectors.Entropy().score(self.head_logits(features, head).mean(axis=0, dtype=np.float64))

    def __repr__(self) -> str:
        return f"MCDropout(passes={self.passes}, p={self.p:g}, seed={self.seed})"


# --------------------------------------------------------------------------- Deep Ensembles


class DeepEnsemble(Detector):
    """Deep Ensembles (Lakshminarayanan et al., 2017): ``-max softmax(mean_m z_m)`` of M members' logits.

    ``score`` takes the (M, N, C) stack (or a list of M (N, C) arrays) of the members' logits on the same
    samples; plain (N, C) logits of one model are refused.
    """

    key = "deep_ensemble"
    name = "Deep Ensembles"
    temperature_applies = False
    accepts_probs = False
    needs_model = True
    protocol = False

    def score(self, member_logits) -> np.ndarray:
        return detectors.MSP().score(average_logits(member_logits))

    def score_probs(self, probs) -> np.ndarray:
        raise InputError("Deep Ensembles averages several models' logits: call score with an (M, N, C) stack")


def average_logits(member_logits) -> np.ndarray:
    """The mean over members of an (M, N, C) stack (or list) of logits; InputError unless M >= 2 and the
    members agree on N and C."""
    if isinstance(member_logits, (list, tuple)):
        shapes = {np.shape(z) for z in member_logits}
        if len(shapes) > 1:
            raise InputError(f"the ensemble members' logits differ in shape: {sorted(shapes)}")
    stack = np.asarray(member_logits, dtype=np.float64)
    if stack.ndim != 3 or stack.shape[0] < 2:
        raise InputError(f"Deep Ensembles needs the logits of at least 2 models as (M, N, C), got shape {stack.shape}")
    detectors.validate_logits(stack.reshape(-1, stack.shape[-1]))
    return stack.mean(axis=0)


def _ensemble_builders(run, cancel: Cancel | None = None) -> list[tuple[str, Callable[[], nn.Module]]]:
    """``(name, build)`` of each offline ensemble member for ``run``; InputError (the reason) when there is none."""
    if run.images is None or run.model is None:
        raise InputError("Deep Ensembles needs a run with a model and its images (or the members' logits)")
    from relu_core import datasets, runs, training

    _, h, w, c = run.images.shape
    if run.model_name in CIFAR_RESNETS and (h, w, c) == (32, 32, 3) and run.n_classes == 10:
        found = [(name, models.pretrained_weights(name)) for name in CIFAR_RESNETS]
        found = [(name, path) for name, path in found if path is not None]
        if len(found) < 2:
            raise InputError("Deep Ensembles needs at least 2 of the pretrained CIFAR ResNets (set RELU_STUDIO_DATA)")
        return [
            (name, lambda name=name, path=path: models.load_state_dict_file(models.build_model(name), path))
            for name, path in found
        ]
    spec = run.dataset_name[:-5] if run.dataset_name.endswith("-test") else ""
    if run.model_name in training.RECIPES and spec in datasets.DATASETS:
        # the run's own training (seed and epochs of its recipe) is the first member, the next seeds the others
        recipe = dict(run.recipe)
        first, epochs = recipe.get("seed") or runs.SMALL_CNN_SEED, recipe.get("epochs")

        def member(seed: int) -> nn.Module:
            return runs.small_cnn(run.model_name, spec, epochs=epochs, seed=seed, cancel=cancel)

        return [(f"{run.model_name} seed {s}", lambda s=s: member(s)) for s in range(first, first + ENSEMBLE_SEEDS)]
    raise InputError(
        f"Deep Ensembles has no offline ensemble for {run.model_name or 'this model'} on "
        f"{run.dataset_name or 'this data'}: there is one for the CIFAR ResNets and for the small CNNs "
        "on registered data sets"
    )


def ensemble_logits(
    run,
    *,
    device: str = "auto",
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> tuple[tuple[str, ...], np.ndarray]:
    """``(member names, (M, N, C) logits)`` of the offline ensemble for ``run`` on its images, cached by content.

    A CIFAR ResNet run on 32x32 RGB images with 10 classes: the shared pretrained ResNet-20/32/44/56 found
    (at least 2). A small-CNN run on a registered data set: the same architecture trained as the run was
    (its epochs) with seeds s, s + 1, ..., s + 4, s the run's own seed (so the first member is the run's own model). Anything else raises InputError (pass member logits instead).
    """
    builders = _ensemble_builders(run, cancel)
    images_digest = cache.array_digest(run.images)
    stack = []
    for done, (name, build) in enumerate(builders):
        if cancel is not None and cancel():
            raise Cancelled("ensemble cancelled")
        if progress is not None:
            progress(done, len(builders), f"ensemble member {name}")
        model = build().eval()
        key = {
            "what": "ensemble member logits",
            "weights": models.weights_hash(model),
            "images": images_digest,
            "mean": list(map(float, run.mean)),
            "std": list(map(float, run.std)),
        }
        stack.append(
            cache.cached(
                "baseline_logits",
                key,
                lambda model=model: {
                    "logits": run.model_logits(
                        run.images, model, device=device, batch_size=batch_size, precision="fp32", cancel=cancel
                    )
                },
            )["logits"]
        )
    return tuple(name for name, _ in builders), np.stack(stack)


# --------------------------------------------------------------------------- conformal


def _cumulative_mass(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, cumsum)``: classes by decreasing probability (stable) and the running mass in that order."""
    order = np.argsort(-probs, axis=1, kind="stable")
    return order, np.cumsum(np.take_along_axis(probs, order, axis=1), axis=1)


def rank_penalties(n_classes: int, k_reg: int, lam: float) -> np.ndarray:
    """RAPS's regularisation by rank (Angelopoulos et al., ICLR 2021): ``lam * max(0, o - k_reg)`` for the class
    ranked o = 1..C (by decreasing probability): classes beyond the ``k_reg`` most likely cost ``lam`` each."""
    return float(lam) * np.maximum(np.arange(1, n_classes + 1) - int(k_reg), 0)


def aps_scores(
    probs: np.ndarray, labels: np.ndarray, u: np.ndarray | None = None, penalties: np.ndarray | None = None
) -> np.ndarray:
    """APS conformity score of the label: the mass of the classes ranked before y, plus ``u * p_y``
    (``u=None``: all of ``p_y``, the non-randomised score; else one uniform draw per sample); with ``penalties``
    (:func:`rank_penalties`, per rank) the RAPS score, plus the penalty of y's rank."""
    order, mass = _cumulative_mass(probs)
    rank = np.argmax(order == np.asarray(labels)[:, None], axis=1)
    rows = np.arange(len(rank))
    own = probs[rows, np.asarray(labels)]
    score = mass[rows, rank] - own + (own if u is None else u * own)
    return score if penalties is None else score + penalties[rank]


class ConformalAPS(Detector):
    """Split-conformal APS sets calibrated on the tuning split; the paper's rejection rule as an uncertainty.

    ``fit(logits, labels)`` (the labels are needed, correctness alone is not enough) sets ``qhat_``;
    :meth:`set_sizes` / :meth:`prediction_sets` give the sets, ``score`` the uncertainty (module docstring).
    ``randomized=True`` (default, Romano et al.'s APS): a class enters the set when the mass ranked before
    it plus ``u`` times its own probability is <= ``qhat_``, with one uniform ``u`` per sample drawn from
    ``numpy.random.default_rng([seed, 0])`` (calibration) or ``([seed, 1])`` (any later set), so sets are
    small and coverage is exact in expectation; ``randomized=False`` counts the whole own probability
    (deterministic, conservative: far larger sets for confident models).
    """

    key = "conformal"
    name = "Conformal (APS)"
    requires_fit = True
    protocol = False

    def __init__(
        self, coverage: float = DEFAULT_COVERAGE, temperature: float = 1.0, randomized: bool = True, seed: int = 0
    ) -> None:
        super().__init__(temperature)
        if not 0.0 < float(coverage) < 1.0:
            raise InputError(f"the conformal coverage level must lie strictly between 0 and 1, got {coverage!r}")
        self.coverage, self.randomized, self.seed = float(coverage), bool(randomized), int(seed)
        self.qhat_: float | None = None

    @small_work
    def fit(self, logits, labels) -> ConformalAPS:
        detectors.validate_logits(logits)
        logits = np.asarray(logits, dtype=np.float64)
        detectors.validate_labels(labels, *logits.shape)
        return self.calibrate(detectors.softmax(logits, self.temperature), np.asarray(labels))

    def fit_probs(self, probs, correct) -> ConformalAPS:
        raise InputError("conformal calibration needs the labels, not only the correctness: call fit(logits, labels)")

    def _uniforms(self, n: int, stream: int) -> np.ndarray | None:
        return np.random.default_rng([self.seed, stream]).random(n) if self.randomized else None

    def _penalties(self, n_classes: int) -> np.ndarray | None:
        """What each rank adds to the score (RAPS); none for APS."""
        return None

    def calibrate(self, probs: np.ndarray, labels: np.ndarray) -> ConformalAPS:
        """``qhat_``: the ``ceil((n + 1) coverage)``-th smallest of the n calibration scores; +inf (every set
        holds every label) when n is too small for the level."""
        probs = np.asarray(probs, dtype=np.float64)
        scores = aps_scores(probs, labels, self._uniforms(probs.shape[0], 0), self._penalties(probs.shape[1]))
        n = scores.size
        k = math.ceil((n + 1) * self.coverage)
        self.qhat_ = math.inf if k > n else float(np.sort(scores)[k - 1])
        return self

    def set_sizes(self, probs) -> np.ndarray:
        """Number of labels in each sample's prediction set (a prefix of the classes by decreasing p)."""
        if self.qhat_ is None:
            raise InputError("the conformal detector is not calibrated yet: call fit(logits, labels) first")
        probs = np.asarray(probs, dtype=np.float64)
        order, mass = _cumulative_mass(probs)
        u = self._uniforms(probs.shape[0], 1)
        if u is not None:  # mass before each class plus u times its own (increasing along the ranks)
            ranked = np.take_along_axis(probs, order, axis=1)
            mass = mass - (1.0 - u[:, None]) * ranked
        penalties = self._penalties(probs.shape[1])
        if penalties is not None:  # non-decreasing along the ranks: the set stays a prefix of them
            mass = mass + penalties
        return (mass <= self.qhat_).sum(axis=1)

    def prediction_sets(self, probs) -> np.ndarray:
        """Boolean (N, C): whether class c is in sample n's set."""
        probs = np.asarray(probs, dtype=np.float64)
        order, _ = _cumulative_mass(probs)
        inside = np.arange(probs.shape[1])[None, :] < self.set_sizes(probs)[:, None]
        sets = np.zeros(probs.shape, dtype=bool)
        np.put_along_axis(sets, order, inside, axis=1)
        return sets

    def score_probs(self, probs) -> np.ndarray:
        probs = np.asarray(probs.detach().cpu() if isinstance(probs, torch.Tensor) else probs, dtype=np.float64)
        second = -np.partition(-probs, 1, axis=1)[:, 1]
        return np.where(self.set_sizes(probs) >= 2, second, 0.0)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(coverage={self.coverage:g}, temperature={self.temperature:g}, "
            f"randomized={self.randomized}, seed={self.seed}{self._extra_repr()})"
        )

    def _extra_repr(self) -> str:
        return ""


class ConformalRAPS(ConformalAPS):
    """Regularised adaptive prediction sets (RAPS, Angelopoulos et al., ICLR 2021): APS whose score adds
    ``lam * max(0, o - k_reg)`` for a class of rank o (:func:`rank_penalties`), so that sets seldom grow past
    the ``k_reg`` most likely classes; calibrated and used exactly like :class:`ConformalAPS` (same split-conformal
    quantile, same randomisation, same rejection rule), with the same coverage guarantee.

    ``k_reg`` (default :data:`RAPS_K_REG` = 1): how many top-ranked classes are free of the penalty; ``lam``
    (default :data:`RAPS_LAMBDA` = 0.01): the penalty per class beyond them (0: APS exactly). The paper tunes
    both on part of the calibration data; here they are fixed arguments, the defaults its small-set regime.
    """

    key = "conformal_raps"
    name = "Conformal (RAPS)"

    def __init__(
        self,
        coverage: float = DEFAULT_COVERAGE,
        temperature: float = 1.0,
        randomized: bool = True,
        seed: int = 0,
        k_reg: int = RAPS_K_REG,
        lam: float = RAPS_LAMBDA,
    ) -> None:
        super().__init__(coverage, temperature, randomized, seed)
        self.k_reg = validation.integer(k_reg, "RAPS's k_reg", minimum=0)
        self.lam = validation.non_negative(lam, "RAPS's λ")

    def _penalties(self, n_classes: int) -> np.ndarray:
        return rank_penalties(n_classes, self.k_reg, self.lam)

    def _extra_repr(self) -> str:
        return f", k_reg={self.k_reg}, lam={self.lam:g}"


for _cls in (MLPDetector, MCDropout, DeepEnsemble, ConformalAPS, ConformalRAPS):
    register_detector(_cls)


# --------------------------------------------------------------------------- the study


@dataclass(frozen=True)
class BaselinesResult:
    """What :func:`baselines_study` returns.

    ``table``: one row per detector studied (:data:`TABLE_COLUMNS`): FPR at 95 % TPR (positives = correct
    predictions), AUROC and AURC, mean and population std over seeds, and a note (e.g. the conformal sets'
    coverage on the evaluation split). ``per_seed``: ``seed, key, detector, metric, value``. ``paired``:
    Rel-U − Doctor per metric (``stats.PairedDifference``, pooled over seeds), empty when either is missing.
    ``skipped``: key -> why a detector could not run on this run. ``curves``: display name ->
    ``(uncertainty, correct)`` on the first seed's evaluation split (for the figures).
    """

    table: pd.DataFrame
    per_seed: pd.DataFrame
    paired: dict[str, stats.PairedDifference]
    skipped: dict[str, str]
    curves: dict[str, tuple[np.ndarray, np.ndarray]]
    seeds: tuple[int, ...]
    tune_fraction: float
    coverage: float
    n_tune: int
    n_eval: int
    ensemble_members: tuple[str, ...] = ()
    notes: dict[str, str] = field(default_factory=dict)

    def paired_frame(self) -> pd.DataFrame:
        """Rel-U − Doctor per metric of ``paired`` (:func:`stats.paired_rows`): mean ± std over seeds, the
        interval and the verdict."""
        a, b = protocol.PAIRED
        differences = {}
        for metric in self.paired:
            values = self.per_seed[self.per_seed["metric"] == metric].pivot(index="seed", columns="key", values="value")
            differences[metric] = (values[a] - values[b]).to_numpy()
        rows = stats.paired_rows(differences, self.paired)
        return pd.DataFrame(
            [{k: row[k] for k in stats.PAIRED_ROW_COLUMNS} for row in rows], columns=stats.PAIRED_ROW_COLUMNS
        )


def available_keys(run) -> dict[str, str | None]:
    """Every registered detector key -> None when it can run on ``run``, else the reason it cannot."""
    out: dict[str, str | None] = {}
    for key, cls in detectors.REGISTRY.items():
        reason = None
        if cls.needs_model and (run.model is None or run.images is None):
            reason = f"{cls.name} needs a run with a model and its images (this run has logits only)"
        elif key == "deep_ensemble":
            try:
                _ensemble_builders(run)
            except InputError as exc:
                reason = str(exc)
        out[key] = reason
    return out


def trains_on_first_use(run) -> dict[str, str]:
    """The detectors whose first study on ``run`` trains models (key -> a sentence saying so): Deep Ensembles
    on a small-CNN run trains its members (minutes on a CPU, then cached). Pages leave them out of their default
    selection; the CLI runs what it is asked."""
    from relu_core import training

    if run.model_name in training.RECIPES:
        return {
            "deep_ensemble": f"Deep Ensembles trains {ENSEMBLE_SEEDS} {run.model_name} models on its first run "
            "(several minutes on a CPU; cached afterwards), so it is not selected by default"
        }
    return {}


def _check_options(keys, tune_fraction, seeds, coverage) -> None:
    unknown = [k for k in keys if k not in detectors.REGISTRY]
    if unknown or not keys:
        raise InputError(
            f"unknown detector(s) {', '.join(map(str, unknown)) or '(none given)'}: choose from "
            f"{', '.join(detectors.REGISTRY)}"
        )
    validation.fraction(tune_fraction, "the tuning fraction")
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError("give at least one seed, without repeats")
    validation.fraction(coverage, "the conformal coverage level")


def baselines_study(
    run,
    *,
    keys: Sequence[str] | None = None,
    tune_fraction: float = 0.2,
    seeds: Sequence[int] = tuple(range(10)),
    coverage: float = DEFAULT_COVERAGE,
    member_logits: np.ndarray | Sequence[np.ndarray] | None = None,
    mc_passes: int = MC_PASSES,
    mc_p: float = MC_DROPOUT,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    device: str = "auto",
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> BaselinesResult:
    """Every detector of ``keys`` on ``run`` (see the module docstring for the protocol).

    ``keys=None`` studies :data:`STUDY_KEYS`, leaving out (in ``skipped``, with the reason) those this run
    cannot support; a key given explicitly that the run cannot support raises InputError. ``member_logits``
    (M, N, C) replaces the offline ensemble (:func:`ensemble_logits`). Raises ``Cancelled`` on ``cancel()``.
    """
    explicit = keys is not None
    keys = tuple(STUDY_KEYS if keys is None else dict.fromkeys(keys))
    seeds = tuple(int(s) for s in seeds)
    _check_options(keys, tune_fraction, seeds, coverage)
    progress = progress or (lambda done, total, message: None)
    logits, labels = np.asarray(run.logits), np.asarray(run.labels)
    correct = protocol.correctness(logits, labels)
    reasons = available_keys(run)
    if member_logits is not None:
        reasons["deep_ensemble"] = None
        average = average_logits(member_logits)
        if average.shape != logits.shape:
            raise InputError(f"the ensemble members' logits are {average.shape}, the run's {logits.shape}")
    skipped = {k: reasons[k] for k in keys if reasons[k] is not None}
    if explicit and skipped:
        raise InputError(next(iter(skipped.values())))
    studied = [k for k in keys if k not in skipped]
    total = len(seeds) + 2
    models_run = {"device": device, "batch_size": batch_size, "cancel": cancel}
    fixed, members, notes = _model_scores(run, studied, member_logits, mc_passes, mc_p, progress, total, models_run)

    probs = detectors.softmax(logits, 1.0)
    records, curves, pairs, pair_samples = [], {}, [], []
    conformal: dict[str, list] = {}
    splits = protocol.seeded_splits(correct, tune_fraction, seeds)
    for done, (seed, tune, ev) in enumerate(splits.checked(cancel, "baselines study")):
        progress(2 + done, total, f"seed {seed}: fitting on the tuning split, scoring the evaluation split")
        scores = {}
        for key in studied:
            scores[key], detector = _scored(key, fixed, logits, labels, tune, ev, seed, coverage)
            if key in CONFORMAL_KEYS:
                inside = detector.prediction_sets(probs[ev])
                conformal.setdefault(key, []).append(
                    (inside[np.arange(len(ev)), labels[ev]].mean(), inside.sum(1).mean())
                )
        for key, uncertainty in scores.items():
            summary = metrics.summary(uncertainty, correct[ev])
            name = detectors.REGISTRY[key].name
            records += [(seed, key, name, m, float(summary[m])) for m in metric_info.PAIRED_KEYS]
            if done == 0:
                curves[name] = (uncertainty, correct[ev])
        if all(k in scores for k in protocol.PAIRED):
            pairs.append((*(scores[k] for k in protocol.PAIRED), correct[ev]))
            pair_samples.append(ev)
    per_seed = pd.DataFrame.from_records(records, columns=["seed", "key", "detector", "metric", "value"])
    for key, per_seed_sets in conformal.items():
        seen, size = np.mean(per_seed_sets, axis=0)
        notes[key] = (
            f"sets reach {seen:.1%} coverage on the evaluation split (target {coverage:.0%}), mean set size {size:.2f}"
        )
    paired = (  # the seeds' evaluation splits share samples: resampled once per draw
        stats.pooled_bootstrap(pairs, sample_ids=pair_samples, n_resamples=n_resamples) if pairs and n_resamples else {}
    )
    progress(total, total, "done")
    return BaselinesResult(
        table=_table(studied, per_seed, notes),
        per_seed=per_seed,
        paired=paired,
        skipped=skipped,
        curves=curves,
        seeds=seeds,
        tune_fraction=float(tune_fraction),
        coverage=float(coverage),
        n_tune=len(splits.parts[-1][0]),
        n_eval=len(splits.parts[-1][1]),
        ensemble_members=members,
        notes=notes,
    )


def _scored(key, fixed, logits, labels, tune, ev, seed, coverage) -> tuple[np.ndarray, Detector | None]:
    """Detector ``key``'s uncertainty on the evaluation rows ``ev`` (float64) and the detector, fitted on the tuning
    rows when it learns (seeded per split); None for the detectors scored once for every sample (``fixed``)."""
    if key in fixed:
        return fixed[key][ev], None
    conformal = {"coverage": coverage, "seed": seed}
    options = {"mlp": {"seed": seed}, "conformal": conformal, "conformal_raps": conformal}.get(key, {})
    detector = detectors.REGISTRY[key](**options)
    if detector.requires_fit:
        detector.fit(logits[tune], labels[tune])
    return np.asarray(detector.score(logits[ev]), dtype=np.float64), detector


def _model_scores(run, studied, member_logits, mc_passes, mc_p, progress, total, models_run):
    """``(fixed, members, notes)``: the uncertainties of MC-Dropout and Deep Ensembles on every sample when
    ``studied`` holds them (they run models, once for all seeds: MC-Dropout's head features are cached on disk),
    the ensemble's member names and a note per detector on how it ran. ``models_run``: device, batch_size, cancel."""
    fixed: dict[str, np.ndarray] = {}
    members: tuple[str, ...] = ()
    notes: dict[str, str] = {}
    if "mc_dropout" in studied:
        progress(0, total, f"MC-Dropout: {mc_passes} passes with dropout p = {mc_p:g} before the head")
        cache_key = {
            "what": "mc-dropout features",
            "weights": models.weights_hash(run.model),
            "images": cache.array_digest(run.images),
            "mean": list(map(float, run.mean)),
            "std": list(map(float, run.std)),
        }

        def compute() -> dict[str, np.ndarray]:
            features, head = head_features(
                run.model, run.images, run.mean, run.std, progress=within(progress, 0, total), **models_run
            )
            return {"features": features, "weight": head.weight.detach().numpy(), "bias": head.bias.detach().numpy()}

        stored = cache.cached("baseline_features", cache_key, compute)
        head = nn.Linear(*stored["weight"].shape[::-1])
        head.load_state_dict({"weight": torch.from_numpy(stored["weight"]), "bias": torch.from_numpy(stored["bias"])})
        fixed["mc_dropout"] = MCDropout(mc_passes, mc_p, seed=0).score_features(stored["features"], head.eval())
        notes["mc_dropout"] = f"{mc_passes} passes, p = {mc_p:g}, entropy of the softmax of the mean logits"
    if "deep_ensemble" in studied:
        progress(1, total, "Deep Ensembles: the members' logits")
        if member_logits is None:
            members, member_logits = ensemble_logits(run, progress=within(progress, 1, total), **models_run)
        fixed["deep_ensemble"] = DeepEnsemble().score(member_logits)
        members = members or tuple(f"member {m}" for m in range(len(member_logits)))
        notes["deep_ensemble"] = f"{len(members)} members: {', '.join(members)}"
    return fixed, members, notes


def _table(studied: Sequence[str], per_seed: pd.DataFrame, notes: dict[str, str]) -> pd.DataFrame:
    """:data:`TABLE_COLUMNS`: per detector, each metric's mean and population std over seeds, and its note."""
    rows = []
    for key in studied:
        cls = detectors.REGISTRY[key]
        row = {"key": key, "detector": cls.name, "learned": cls.requires_fit, "needs_model": cls.needs_model}
        for m in metric_info.PAIRED_KEYS:
            values = per_seed.loc[(per_seed["key"] == key) & (per_seed["metric"] == m), "value"].to_numpy()
            row[f"{m}_mean"], row[f"{m}_std"] = float(values.mean()), float(values.std())
        row["note"] = notes.get(key, "")
        rows.append(row)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def study_figures(result: BaselinesResult, max_points: int | None = 1500) -> tuple:
    """``(roc, risk_coverage)`` plotly figures of every detector on the first seed's evaluation split."""
    roc_curves, rc_curves, at_95 = {}, {}, {}
    for name, (uncertainty, correct) in result.curves.items():
        fpr, tpr, _ = metrics.roc_curve(uncertainty, correct, drop_intermediate=False)
        roc_curves[name] = (fpr, tpr, metrics.auroc(uncertainty, correct))
        point = metrics.operating_point(uncertainty, correct, "tpr", 0.95)
        at_95[name] = (point.fpr, point.tpr)
        coverage, risk = metrics.risk_coverage_curve(uncertainty, correct)
        rc_curves[name] = (coverage, risk, metrics.aurc(uncertainty, correct))
    seed = result.seeds[0]
    roc = figures.roc_figure(
        roc_curves, target_points=at_95, max_points=max_points, title=f"ROC, seed {seed}'s evaluation split"
    )
    rc = figures.risk_coverage_figure(
        rc_curves, max_points=max_points, title=f"Risk-coverage, seed {seed}'s evaluation split"
    )
    return roc, rc


# --------------------------------------------------------------------------- the paper's tables beside ours

#: The paper's Bayesian (``tab:bayes``) and conformal (``tab:main_misclassification_detection_conformal``) columns:
#: paper table key -> (paper column, our detector key, header), FPR95 in % (the paper's units).
PAPER_COLUMNS = {
    "bayes": (
        ("mc_dropout_fpr95", "mc_dropout", "MC-Dropout FPR95 %"),
        ("deep_ensembles_fpr95", "deep_ensemble", "Deep Ensembles FPR95 %"),
        ("mlp_fpr95", "mlp", "MLP FPR95 %"),
        ("relu_fpr95", "relu", "Rel-U FPR95 %"),
    ),
    "conformal": (
        ("msp_fpr95", "msp", "MSP FPR95 %"),
        ("odin_fpr95", "odin", "ODIN FPR95 %"),
        ("doctor_fpr95", "doctor", "Doctor FPR95 %"),
        ("relu_fpr95", "relu", "Rel-U FPR95 %"),
        ("conformal_fpr95", "conformal", "Conf. FPR95 %"),
    ),
}
#: Said beside our conformal number: the two are not the same method.
CONFORMAL_NOTE = (
    "ours under Conf.: the split-conformal APS sets' rejection rule; the paper's Conf. column is its conformalized "
    "model's FPR95"
)


def paper_heading(key: str) -> str:
    """The line above the paper's ``key`` rows (``bayes`` or ``conformal``): label, units, selection."""
    from relu_core.studies import paper_table

    return paper_table.heading(key, "FPR95 in %, the paper's units (ours converted from fractions)")


def paper_reference(result: BaselinesResult, run) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """Per paper table (``bayes``, ``conformal``): ours (the detectors this study ran; "not run" elsewhere) beside
    the paper's rows of the run's data set (every network, the run's first; the conformal table's three
    objectives), FPR95 in % as the paper prints them, each paper row labelled with its table and a note naming its
    network and accuracy, and the lines to show under it (no paper row of the data set: one line)."""
    from relu_core.studies import paper_table

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    ours_by_key = result.table.set_index("key")
    out: dict[str, tuple[pd.DataFrame, list[str]]] = {}
    jpeg = paper_table.images_note(run)
    for key, columns in PAPER_COLUMNS.items():
        found = paper_table.dataset_rows(key, dataset, model=model)
        if not found:
            out[key] = (pd.DataFrame(), [paper_table.no_table(key, dataset)])
            continue
        ours = {"row": "ours", "network": model or "logits only", "accuracy %": paper_table.our_accuracy(run)}
        if key == "conformal":
            ours["objective"] = "this run's"
        for _, detector, header in columns:
            if detector in ours_by_key.index:
                mean, std = ours_by_key.loc[detector, "fpr95_mean"], ours_by_key.loc[detector, "fpr95_std"]
                ours[header] = f"{100 * mean:.1f} ({100 * std:.1f})"
            else:
                ours[header] = "not run"
        ours["note"] = CONFORMAL_NOTE if key == "conformal" else "mean (std) over our seeds"
        lines = [ours]
        for row in found:
            line = {"row": row.label, "network": row.network, "accuracy %": row.accuracy_text()}
            if key == "conformal":
                line["objective"] = row.objective
            for column, _, header in columns:
                line[header] = row.value(column).text()
            line["note"] = paper_table.network_note(row, model)
            lines.append(line)
        out[key] = (pd.DataFrame(lines), [jpeg] if jpeg else [])
    if all(frame.empty for frame, _ in out.values()):  # neither table has the data set: one line, not two
        labels = " and ".join(paper_table.TABLES[key].label for key in PAPER_COLUMNS)
        line = f"No paper reference for {paper_table.shown_dataset(dataset) or 'this data set'}: {labels} cover "
        out = {key: (frame, []) for key, (frame, _) in out.items()}
        out["bayes"] = (out["bayes"][0], [line + "CIFAR-10, CIFAR-100 only."])
    return out


def paper_reference_dict(run) -> dict[str, object]:
    """The paper's Bayesian and conformal rows of the run's data set for a JSON output: per table its heading, the
    rows (``PaperRow.to_dict`` with the network note), or the one line saying the paper has none."""
    from relu_core.studies import paper_table

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    out = {}
    for key in PAPER_COLUMNS:
        found = paper_table.dataset_rows(key, dataset, model=model)
        out[key] = {
            "heading": paper_heading(key),
            "rows": [{**row.to_dict(), "network_note": paper_table.network_note(row, model)} for row in found],
            "note": None if found else paper_table.no_table(key, dataset),
            "images_note": paper_table.images_note(run),
        }
    return out
