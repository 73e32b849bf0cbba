"""A *run*: the logits of one model on one labelled data set, with what the app needs around them.

Runs come from the engine (:func:`logits_for`: a model, given or trained here, on a data set), from an uploaded
logits file (:func:`load_logits_upload`) or from the default (:func:`default_run`: Fashion-MNIST when it is on
the machine, else scikit-learn digits, with a small CNN trained here on first use). This module assembles
runs on top of :mod:`relu_core.engine`, which only turns images into logits and imports none of it. The process
keeps the runs in use in :data:`RUNS` (bounded), where a run's id (a content hash) finds it again.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from relu_core import (
    cache,
    datasets,
    detectors,
    distributed,
    engine,
    limits,
    models,
    npz,
    onnx_model,
    paths,
    training,
    validation,
)
from relu_core.errors import InputError
from relu_core.progress import Cancel, Progress, count
from relu_core.registry import LRURegistry

LABEL_COLUMN = "label"
#: The environment variable that forces the default data set (the tests set ``digits``: seconds, not a minute).
DEFAULT_ENV = "RELU_STUDIO_DEFAULT"
#: The seed of a small CNN trained here when none is given (the default run's, unless ``DEFAULT_SEED_ENV`` says).
SMALL_CNN_SEED = 0
#: The environment variable that sets the default run's training seed (a whole number; default
#: ``SMALL_CNN_SEED``): another seed gives other weights, as another CPU's kernels do. The test suite sets it per
#: commit (tests/conftest.py), so no test's verdict can come to rest on one training's weights.
DEFAULT_SEED_ENV = "RELU_STUDIO_DEFAULT_SEED"


@dataclass(frozen=True)
class DefaultChoice:
    """A data set the default run can use, its small CNN and the training epochs (None: the model's recipe)."""

    dataset: str
    model: str
    epochs: int | None
    description: str


#: Best first. Fashion-MNIST has real class confusions (shirt / T-shirt / pullover / coat) and 10,000 test images,
#: so the evaluation split holds hundreds of errors; one epoch of ``cnn28`` keeps the whole first run (training,
#: logits, evaluation) under a minute on 2 quiet cores (docs/results/speed.md; two epochs took 99 s). Digits (always
#: offline) is the fallback, with about 5 errors in its evaluation split.
DEFAULT_CHOICES: dict[str, DefaultChoice] = {
    "fashion-mnist": DefaultChoice("fashion-mnist", "cnn28", 1, "Fashion-MNIST + small CNN (cnn28, 1 epoch)"),
    "digits": DefaultChoice("digits", "cnn8", None, "digits + small CNN (cnn8)"),
}


@dataclass(frozen=True, eq=False)
class Run:
    """Logits float32 (N, C), labels int64 (N,) and class names, plus optional images and model.

    ``run_id`` is a content hash (of the engine's cache key, or of the uploaded arrays) that keys caches and
    widgets; ``images`` (uint8 NHWC) and ``model`` are present for engine runs and enable galleries and input
    pre-processing; ``mean``/``std`` are the model's normalisation; ``source`` describes the run in words.
    ``onnx_file`` names the ONNX model of an :func:`onnx_run` (images, no PyTorch model: no ε), ``onnx_sha256`` its
    file's SHA-256 (the run's weights, in its provenance).

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> run = rc.Run.from_logits(np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32), np.array([0, 0]), ("a", "b"))
    >>> len(run), run.n_classes, run.class_names
    (2, 2, ('a', 'b'))
    """

    run_id: str
    logits: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]
    images: np.ndarray | None = None
    model: nn.Module | None = None
    model_name: str = ""
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    dataset_name: str = ""
    source: str = ""
    onnx_file: str = ""
    onnx_sha256: str = ""
    #: How to compute this run again on this machine (:func:`logits_for` arguments), empty when it cannot be
    #: (uploaded files); :func:`remember` stores it so that a shared URL naming the run reopens it.
    recipe: tuple[tuple[str, object], ...] = ()

    @classmethod
    def from_logits(cls, logits: np.ndarray, labels: np.ndarray, class_names: tuple[str, ...], **fields) -> Run:
        """A run of logits alone (an upload, a stored run, a synthetic one), its ``run_id`` their
        :func:`content_id`; ``fields`` set the others (``source``, ``dataset_name``)."""
        return cls(content_id(logits, labels, class_names), logits, labels, class_names, **fields)

    @property
    def n_classes(self) -> int:
        return int(self.logits.shape[1])

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def model_logits(self, images: np.ndarray, model: nn.Module | None = None, **engine_options) -> np.ndarray:
        """Float32 logits of the run's model, or of another ``model`` that reads images as it does (an ensemble
        member), on ``images`` (uint8 NHWC) with the run's normalisation; ``engine_options`` go to
        :func:`engine.compute_logits` (device, batch_size, precision, progress, cancel)."""
        model = self.model if model is None else model
        return engine.compute_logits(model, images, mean=self.mean, std=self.std, **engine_options)


def content_id(logits: np.ndarray, labels: np.ndarray, class_names: tuple[str, ...]) -> str:
    """16 hex digits of the SHA-256 of the logits, labels and class names (:func:`cache.array_digest`)."""
    arrays = (
        np.asarray(logits, dtype=np.float32),
        np.asarray(labels, dtype=np.int64),
        np.asarray(class_names, dtype=str),
    )
    return cache.array_digest(*arrays)[:16]


# --------------------------------------------------------------------------- uploads


def _read_npz(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Logits, labels and class names (or None) of an uploaded .npz. Their declared shapes are checked against
    each other from the headers, before any array is inflated (a small file whose labels inflate to gigabytes
    is refused without reading them)."""

    def agree(headers: dict) -> None:
        missing = [key for key in ("logits", "labels") if key not in headers]
        if missing:
            raise InputError(
                f"the .npz file has no {' and no '.join(repr(k) for k in missing)} array "
                f"(found: {', '.join(sorted(headers)) or 'nothing'})"
            )
        shape = headers["logits"][0]
        if len(shape) == 2:
            limits.check_logits_shape(*shape)
            labels = headers["labels"][0]
            if labels and labels[0] != shape[0]:
                raise InputError(f"labels and logits disagree on the number of samples: {labels[0]:,} vs {shape[0]:,}")
            names = headers.get("class_names", ((shape[1],),))[0]
            if len(names) == 1 and names[0] != shape[1]:
                raise InputError(f"class_names holds {count(names[0], 'name')} for {shape[1]:,} logit columns")

    arrays = npz.read(
        data,
        label="the .npz file",
        names=("logits", "labels", "class_names"),
        max_bytes=limits.MEMORY_BUDGET_BYTES,
        check=agree,
    )
    return arrays["logits"], arrays["labels"], arrays.get("class_names")


def _read_table(data: bytes, suffix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import pandas as pd

    try:
        if suffix == ".csv":
            table = pd.read_csv(io.BytesIO(data))
        else:
            table = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pandas/pyarrow raise many types for malformed files
        detail = " ".join(str(exc).split())[:160]
        raise InputError(f"the {suffix} file cannot be read: {detail}") from None
    columns = [str(c) for c in table.columns]
    if LABEL_COLUMN not in columns:
        raise InputError(f"the {suffix} file has no {LABEL_COLUMN!r} column (columns: {', '.join(columns[:12])})")
    class_columns = [c for c in table.columns if str(c) != LABEL_COLUMN]
    try:
        logits = table[class_columns].to_numpy(dtype=np.float64)
    except (ValueError, TypeError):
        raise InputError(f"every column except {LABEL_COLUMN!r} must hold numbers (one logit per class)") from None
    labels = table[LABEL_COLUMN].to_numpy()
    names = np.array([str(c) for c in class_columns])
    if labels.dtype.kind in "OUST":  # labels given as class names
        lookup = {name: index for index, name in enumerate(names.tolist())}
        unknown = sorted({str(v) for v in labels if str(v) not in lookup})
        if unknown:
            raise InputError(f"labels {', '.join(unknown[:5])} are not class columns of the {suffix} file")
        labels = np.array([lookup[str(v)] for v in labels], dtype=np.int64)
    return logits, labels, names


def _as_int_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise InputError(f"labels must be one-dimensional, got shape {labels.shape}")
    if labels.dtype.kind in "iuf" and labels.size and float(np.max(labels)) >= 2.0**62:
        # cast to int64 it would wrap around (2^63 + k reads as a negative label)
        raise InputError(f"label {np.max(labels)} is out of range: far beyond any class index")
    if labels.dtype.kind in "iu":
        return labels.astype(np.int64)
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.all(labels == np.round(labels)):
        return labels.astype(np.int64)
    if labels.dtype.kind == "b":
        raise InputError("labels must be integer class indices, got booleans")
    raise InputError(f"labels must be integer class indices, got {labels.dtype} values")


def load_logits_upload(data: bytes, filename: str) -> Run:
    """A :class:`Run` from an uploaded logits file; InputError (one line) for any malformed file.

    Formats: ``.npz`` with ``logits`` (N, C), ``labels`` (N,) and optionally ``class_names`` (C,) strings,
    read with ``allow_pickle=False``; ``.csv`` / ``.parquet`` with one numeric column per class (the headers
    are the class names) and a ``label`` column holding class indices or class names. Logits must be finite,
    with at least 2 samples and 2 classes; labels integers in ``0 .. C-1``.
    """
    suffix = Path(filename).suffix.lower()
    if suffix == ".npz":
        logits, labels, names = _read_npz(data)
    elif suffix in (".csv", ".parquet"):
        logits, labels, names = _read_table(data, suffix)
    else:
        raise InputError(f"unsupported logits file {filename!r}: upload a .npz, .csv or .parquet file")
    logits = np.asarray(logits)
    if logits.dtype.kind not in "iuf":
        raise InputError(f"logits must be numbers, got {logits.dtype}")
    if logits.ndim != 2:
        raise InputError(f"logits must be a 2-D array (samples, classes), got shape {logits.shape}")
    if logits.shape[0] < 2:
        raise InputError(f"at least 2 samples are needed, got {logits.shape[0]}")
    limits.check_logits_shape(*logits.shape)
    logits = logits.astype(np.float32)
    detectors.validate_logits(logits)
    labels = _as_int_labels(labels)
    detectors.validate_labels(labels, logits.shape[0], logits.shape[1])
    if names is None:
        class_names = tuple(str(k) for k in range(logits.shape[1]))
    else:
        names = np.asarray(names)
        if names.ndim != 1 or names.dtype.kind not in "US":
            raise InputError("class_names must be a list of strings, one per logit column")
        class_names = tuple(str(name) for name in names.tolist())
    return Run.from_logits(
        logits,
        labels,
        class_names,
        dataset_name=Path(filename).stem,
        source=f"{Path(filename).name} (uploaded logits)",  # the name first: the run picker cuts long labels
    )


def load_logits(path: str | Path) -> Run:
    """A :class:`Run` from a logits file on disk, read like an upload (:func:`load_logits_upload`).

    Parameters
    ----------
    path : str or Path
        A ``.npz`` with ``logits`` (N, C), ``labels`` (N,) and optionally ``class_names`` (C,); or a ``.csv`` /
        ``.parquet`` table with one column per class and a ``label`` column.

    Returns
    -------
    Run
        ``run.logits`` float32 (N, C), ``run.labels`` int64 (N,), ``run.class_names`` (``"0"``, ``"1"`` ... when
        the file names none).

    Raises
    ------
    InputError
        For a folder, a device, or a malformed file (one line saying what is wrong).
    FileNotFoundError
        When nothing is at ``path``.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> import relu_core as rc
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.npz"
    >>> np.savez(path, logits=np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]), labels=np.array([0, 1, 1]))
    >>> run = rc.load_logits(path)
    >>> run.logits.shape, run.labels.tolist(), run.class_names
    ((3, 2), [0, 1, 1], ('0', '1'))
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a logits file")
    if not path.is_file():
        if path.exists():
            raise InputError(f"{path} is not a regular file (a device or a pipe), not a logits file")
        raise FileNotFoundError(f"no such file: {path}")
    return load_logits_upload(path.read_bytes(), path.name)


# --------------------------------------------------------------------------- runs computed by the engine


def _source_digest(*modules: object) -> list[str]:
    """SHA-256 of modules' source files: a change to the training code retrains cached models."""
    return [cache.file_digest(Path(module.__file__)) for module in modules]  # type: ignore[attr-defined]


#: The modules of the training loop: their source is in the key of every model trained here.
TRAINING_CODE = (training, training.loop, training.objectives, training.recipes, training.augment)
#: Training images a model trained here is checked on before it is stored (its logits must be finite).
FINITE_CHECK_IMAGES = 256


def trained_source(model_name: str, objective: str, recipe: str, seed: int, epoch: int, cap: int, data: str) -> str:
    """The one name of a run whose model was trained here: ``cnn28 cross-entropy (trained here: plain recipe,
    seed 0, epoch 1/1) on fashion-mnist-test``, the epoch being the one whose weights the run uses, of the cap."""
    return f"{model_name} {objective} (trained here: {recipe} recipe, seed {seed}, epoch {epoch}/{cap}) on {data}"


def check_finite_model(model: nn.Module, images: np.ndarray, normalization: models.Normalization, what: str) -> None:
    """InputError (one line) unless every weight of ``model`` and its logits on the first
    :data:`FINITE_CHECK_IMAGES` of ``images`` are finite: a diverged model is never stored in the cache."""
    finite = all(bool(torch.isfinite(t).all()) for t in model.state_dict().values() if t.is_floating_point())
    if finite:
        sample = torch.from_numpy(np.array(images[:FINITE_CHECK_IMAGES]))  # a writable copy
        with torch.inference_mode():
            finite = bool(torch.isfinite(model.eval()(normalization.on(torch.device("cpu"))(sample))).all())
    if not finite:
        raise training.Diverged(
            f"{what} diverged: its weights or logits are not finite (NaN or infinite); nothing was stored "
            "(try another recipe, a lower learning rate or another seed)"
        )


def small_cnn(
    arch: str,
    dataset_spec: str,
    *,
    epochs: int | None = None,
    seed: int = SMALL_CNN_SEED,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    download: bool = False,
) -> nn.Module:
    """Small CNN ``arch`` trained (seeded, CPU) on the training split of ``dataset_spec``, cached by content.

    The state dict lives in ``cache_dir("models")`` keyed by (arch, training-data fingerprint, seed, epochs,
    digest of the model and training code); later calls load it instead of training.
    """
    models.get_spec(arch)
    if arch not in training.RECIPES:
        raise InputError(f"{arch} is not a small CNN that can be trained here ({', '.join(training.RECIPES)})")
    if dataset_spec.strip() not in datasets.DATASETS:  # user data has one split: nothing to train on
        raise InputError(
            f"{arch} has no weights for {dataset_spec}: it is trained here on a registered data set's training "
            "split only; give the weights of a model trained on your data (--weights FILE, or a checkpoint upload)"
        )
    recipe = training.RECIPES[arch]
    epochs = recipe.epochs if epochs is None else epochs
    train = datasets.load_dataset(dataset_spec, split="train", download=download, progress=progress)
    settings = {"arch": arch, "seed": seed, "epochs": epochs, "batch_size": recipe.batch_size}  # key and training
    key = {
        "kind": "small-cnn",
        "data": train.fingerprint,
        **settings,
        "code": _source_digest(models.small_cnn, models.registry, models.normalization, *TRAINING_CODE),
    }

    def fit() -> dict[str, np.ndarray]:
        model = training.train_small_cnn(
            train.images, train.labels, len(train.class_names), **settings, progress=progress, cancel=cancel
        )
        check_finite_model(
            model, train.images, models.get_spec(arch).normalization, f"{arch} trained on {dataset_spec}"
        )
        return {name: tensor.detach().cpu().numpy() for name, tensor in model.state_dict().items()}

    state = cache.cached("models", key, fit, check_state(arch, len(train.class_names), f"{arch} on {dataset_spec}"))
    return _built(arch, len(train.class_names), state)


def check_state(
    arch: str, n_outputs: int, what: str, prefix: str = "", also: tuple[str, ...] = ()
) -> Callable[[Mapping[str, np.ndarray]], None]:
    """The check of cached model weights (:func:`cache.cached`'s ``check``): InputError unless the entry holds
    exactly the state dict of a fresh ``arch`` with ``n_outputs`` outputs (every name, under ``prefix``, with its
    shape and dtype) and the arrays named in ``also``; ``what`` names the model. A forged entry then fails in one
    line (and is moved aside and trained again) instead of torch's "Error(s) in loading state_dict"."""

    def check(arrays: Mapping[str, np.ndarray]) -> None:
        expected = {
            f"{prefix}{name}": (tuple(t.shape), str(t.dtype).removeprefix("torch."))
            for name, t in models.build_model(arch, n_outputs).state_dict().items()
        }
        stored = {name: a for name, a in arrays.items() if name.startswith(prefix) and name not in also}
        missing = sorted(set(expected) - set(stored)) + [name for name in also if name not in arrays]
        extra = sorted(set(stored) - set(expected))
        wrong = [
            f"{name} {a.shape} {a.dtype}"
            for name, a in stored.items()
            if name in expected and (tuple(a.shape), str(a.dtype)) != expected[name]
        ]
        if missing or extra or wrong:
            parts = [("missing", missing), ("not of the network", extra), ("of another shape or dtype", wrong)]
            detail = "; ".join(f"{label}: {', '.join(names[:3])}" for label, names in parts if names)
            raise InputError(f"the cached weights of {what} do not fit {arch}: {detail}")

    return check


def _built(arch: str, n_outputs: int, state: dict[str, np.ndarray]) -> nn.Module:
    """A fresh ``arch`` with ``n_outputs`` outputs holding the stored ``state`` dict, in eval mode."""
    model = models.build_model(arch, n_outputs)
    model.load_state_dict({name: torch.from_numpy(array) for name, array in state.items()}, strict=True)
    return model.eval()


@dataclass(frozen=True, eq=False)
class TrainedModel:
    """A model trained here with an objective (:func:`trained_model`), what it was trained with and its curve.

    ``metadata``: the settings (architecture, data set, objective, outliers, seed, epoch cap, batch size,
    learning rate, held-out fraction, patience), the epochs run, the best epoch, whether training stopped
    early, the final held-out accuracy, the device and process count; ``curve``: per epoch ``loss``,
    ``heldout_accuracy`` and ``seconds``. Both are stored with the weights."""

    model: nn.Module
    metadata: dict[str, object]
    curve: dict[str, np.ndarray]


WEIGHTS_PREFIX = "weights/"
CURVE_NAMES = ("loss", "heldout_accuracy", "seconds")


def _outlier_set(spec: str, download: bool, progress: Progress | None) -> tuple[datasets.ImageSet, str]:
    """OpenMix's outlier images: the training split of ``spec`` when there is one here (or downloaded), else its
    test split (offline MNIST has only its test images; they never meet the inlier set's test split)."""
    try:
        return datasets.load_dataset(spec, split="train", download=download, progress=progress), "train"
    except datasets.DatasetError:
        return datasets.load_dataset(spec, split="test", download=download, progress=progress), "test"


class _TrainingPlan(NamedTuple):
    """What :func:`trained_model` trains, read from its arguments and the data: the settings checked, the
    training split and outlier set loaded, the ``recorded`` settings and the model's cache ``key``."""

    objective: training.Objective
    recipe: training.recipes.TrainingRecipe
    epochs: int
    seed: int
    train: datasets.ImageSet
    outliers: datasets.ImageSet | None
    n_classes: int
    batch_size: int
    augmentation: training.augment.Augmentation
    recorded: dict[str, object]
    key: dict[str, object]


def _training_plan(
    arch: str,
    dataset_spec: str,
    settings: dict[str, object],
    download: bool,
    progress: Progress | None,
    loaded: dict[str, tuple[datasets.ImageSet, str]] | None = None,
) -> _TrainingPlan:
    """The settings of :func:`trained_model` checked, its data loaded (or taken from ``loaded``, where the sets
    read are kept by their role and spec) and the cache key of its model."""
    loaded = {} if loaded is None else loaded
    models.get_spec(arch)
    if dataset_spec.strip() not in datasets.DATASETS:
        raise InputError(f"a model is trained here on a registered data set's training split only, not {dataset_spec}")
    unknown = set(settings) - {"objective", "epochs", "seed", "outliers", "recipe"}
    if unknown:
        raise InputError(f"unknown training settings: {', '.join(sorted(unknown))}")
    chosen = dict(settings.get("objective") or {"name": "cross-entropy"})
    objective = training.Objective(chosen.pop("name", "cross-entropy"), **chosen)
    recipe = training.recipes.get(settings.get("recipe") or training.recipes.default_for(dataset_spec))
    epochs = validation.integer(
        training.recipes.default_epochs(recipe, arch) if settings.get("epochs") is None else settings.get("epochs"),
        "epochs",
        minimum=1,
    )
    seed = validation.integer(settings.get("seed", 0), "seed", minimum=0)
    outliers_spec = settings.get("outliers")
    if objective.uses_outliers and not outliers_spec:
        raise InputError("openmix needs an outlier data set (e.g. --outliers mnist for Fashion-MNIST)")
    if outliers_spec and not objective.uses_outliers:
        raise InputError(f"outliers are used by openmix only, not by {objective.name}")
    if f"train:{dataset_spec}" not in loaded:
        loaded[f"train:{dataset_spec}"] = (
            datasets.load_dataset(dataset_spec, split="train", download=download, progress=progress),
            "train",
        )
    train = loaded[f"train:{dataset_spec}"][0]
    if outliers_spec and f"outliers:{outliers_spec}" not in loaded:
        loaded[f"outliers:{outliers_spec}"] = _outlier_set(str(outliers_spec), download, progress)
    outliers, outlier_split = loaded[f"outliers:{outliers_spec}"] if outliers_spec else (None, "")
    n_classes = len(train.class_names)
    objective = objective.for_classes(n_classes)
    batch_size = training.batch_size_for(arch, recipe)
    augmentation = (
        training.augment.for_dataset(dataset_spec, train.images.shape[1:]) if recipe.augment else training.augment.NONE
    )
    recorded = {
        "arch": arch,
        "dataset": dataset_spec,
        "objective": objective.settings(),
        "outliers": f"{outliers_spec} ({outlier_split} split)" if outliers is not None else None,
        "seed": seed,
        "epochs": epochs,
        "recipe": recipe.settings(),
        "augmentation": augmentation.describe(),
        "batch_size": batch_size,
        "lr": recipe.lr,
        "holdout_fraction": training.HOLDOUT_FRACTION,
        "patience": recipe.patience,
    }
    key = {
        "kind": "trained",
        "data": train.fingerprint,
        "outlier_data": None if outliers is None else outliers.fingerprint,
        **recorded,
        "code": _source_digest(
            models.small_cnn,
            models.paper_cifar,
            models.fast_cifar,
            models.registry,
            models.normalization,
            *TRAINING_CODE,
        ),
    }
    return _TrainingPlan(
        objective, recipe, epochs, seed, train, outliers, n_classes, batch_size, augmentation, recorded, key
    )


def trained_model_key(
    arch: str,
    dataset_spec: str,
    settings: dict[str, object],
    *,
    download: bool = False,
    loaded: dict[str, tuple[datasets.ImageSet, str]] | None = None,
) -> dict[str, object]:
    """The cache key (namespace ``models``) of the model :func:`trained_model` trains from these arguments,
    without training it: ``cache.path_for("models", key)`` exists once it is stored. Loads the training split
    (and an OpenMix outlier set) for their fingerprints; ``loaded``, a dict kept between calls, reads each once."""
    return _training_plan(arch, dataset_spec, settings, download, None, loaded).key


def trained_model(
    arch: str,
    dataset_spec: str,
    settings: dict[str, object],
    *,
    device: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    download: bool = False,
) -> TrainedModel:
    """``arch`` trained here on the training split of the registered ``dataset_spec`` with an objective, cached
    by content (``cache_dir("models")``, with its metadata and curve), resumed from its per-epoch checkpoint
    (``cache_dir("checkpoints")``) when an earlier attempt was cancelled or killed.

    ``settings``: ``objective`` (:meth:`training.Objective.settings`: its name and parameters), ``recipe`` (a
    preset name of :data:`training.PRESETS`; default :func:`training.recipes.default_for` the data set), ``epochs``
    (the cap; default the recipe's for the network, :func:`training.recipes.default_epochs`), ``seed`` and
    ``outliers`` (a data set spec, OpenMix only). The recipe's augmentation is the data set's standard one
    (:func:`training.augment.for_dataset`). Early stopping holds out
    ``training.HOLDOUT_FRACTION`` of the training split (:func:`training.train`); the test split is never read
    here. A model whose weights or logits are not finite is never stored (:class:`training.Diverged`, one line).
    An OpenMix model comes back wrapped in :class:`training.DropOutlierClass` (C logits).
    """
    objective, recipe, epochs, seed, train, outliers, n_classes, batch_size, augmentation, recorded, key = (
        _training_plan(arch, dataset_spec, settings, download, progress)
    )
    checkpoint = paths.cache_dir("checkpoints") / f"{cache.key_digest(key)}.pt"
    resolved = engine.select_device(device)

    def fit() -> dict[str, np.ndarray]:
        trained = training.train(
            train.images,
            train.labels,
            n_classes,
            arch=arch,
            objective=objective,
            outliers=None if outliers is None else outliers.images,
            epochs=epochs,
            seed=seed,
            batch_size=batch_size,
            recipe=recipe,
            augmentation=augmentation,
            patience=recipe.patience,
            checkpoint=checkpoint,
            checkpoint_key=cache.key_digest(key),
            device=resolved,
            progress=progress,
            cancel=cancel,
        )
        what = f"{arch} ({objective.name}, {recipe.name} recipe) trained on {dataset_spec}"
        check_finite_model(trained.model, train.images, models.get_spec(arch).normalization, what)
        inner = trained.model.model if isinstance(trained.model, training.DropOutlierClass) else trained.model
        metadata = {
            "settings": recorded,
            "epochs_run": len(trained.history),
            "best_epoch": trained.best_epoch,
            "stopped_early": trained.stopped_early,
            "final_heldout_accuracy": trained.final_accuracy,
            "device": str(resolved),
            "processes": distributed.world_size(),
            "resumed_from": trained.resumed_from,
        }
        curve = {
            "loss": [r.loss for r in trained.history],
            "heldout_accuracy": [r.heldout_accuracy for r in trained.history],
            "seconds": [r.seconds for r in trained.history],
        }
        weights = {f"{WEIGHTS_PREFIX}{name}": t.detach().cpu().numpy() for name, t in inner.state_dict().items()}
        curves = {f"curve/{name}": np.asarray(values, dtype=np.float64) for name, values in curve.items()}
        return {"metadata": np.array(json.dumps(metadata)), **curves, **weights}

    try:
        check = check_state(
            arch,
            n_classes + objective.extra_classes,
            f"{arch} trained on {train.name}",
            WEIGHTS_PREFIX,
            ("metadata", *(f"curve/{name}" for name in CURVE_NAMES)),
        )
        stored = cache.cached("models", key, fit, check)
    except training.Diverged:
        if distributed.is_main_process():
            checkpoint.unlink(missing_ok=True)  # resuming a diverged run would diverge again
        raise
    if distributed.is_main_process():
        checkpoint.unlink(missing_ok=True)  # the weights are stored: nothing left to resume
    state = {name[len(WEIGHTS_PREFIX) :]: a for name, a in stored.items() if name.startswith(WEIGHTS_PREFIX)}
    model = _built(arch, n_classes + objective.extra_classes, state)
    if objective.extra_classes:
        model = training.DropOutlierClass(model, n_classes).eval()
    curve = {name: stored[f"curve/{name}"] for name in CURVE_NAMES}
    return TrainedModel(model, json.loads(str(stored["metadata"])), curve)


#: ``weights`` of :func:`logits_for` starting with this name a Hugging Face Hub repository.
HUB_PREFIX = "hf:"


def _hub_model(repo_id: str, model_name: str, n_classes: int) -> tuple[nn.Module, models.Normalization]:
    """One of the authors' Hub checkpoints for ``model_name`` on ``n_classes`` classes, and its normalisation."""
    entry = models.HUB_MODELS.get(repo_id)
    if entry is None:
        raise InputError(f"unknown Hub checkpoint {repo_id!r}; the authors' are: {', '.join(models.HUB_MODELS)}")
    if (entry.arch, entry.num_classes) != (model_name, n_classes):
        raise InputError(
            f"{repo_id} is a {entry.arch} for {entry.num_classes} classes, not a {model_name} for {n_classes}"
        )
    return models.load_hub_model(repo_id), entry.normalization


def logits_for(
    model_name: str,
    weights: str | Path | bytes | None,
    dataset_spec: str | datasets.ImageSet,
    *,
    weights_name: str = "model.pt",
    device: str = "auto",
    batch_size: int | None = None,
    precision: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    download: bool = False,
    epochs: int | None = None,
    seed: int | None = None,
    training_settings: dict[str, object] | None = None,
) -> Run:
    """The :class:`Run` of model ``model_name`` on the test split of ``dataset_spec``, logits cached by content.

    ``weights``: a checkpoint file (state dict for ``model_name`` or TorchScript), or its bytes (an upload, read
    without a file) named ``weights_name`` (its suffix tells safetensors from ``torch.save``), or
    ``"hf:<repo>"``, one of the Rel-U authors' checkpoints on the Hugging Face Hub (``models.HUB_MODELS``,
    downloaded once, with the normalisation it was trained with); None uses the shared
    pretrained weights of ``model_name`` or, for a small CNN, one trained on the data set's training split
    (see :func:`small_cnn`, trained for ``epochs``, default its recipe's, with ``seed``, default
    :data:`SMALL_CNN_SEED`). ``training_settings`` (with
    ``weights`` None): ``model_name`` trained here with an objective (:func:`trained_model`). The cache key is (weights hash, data set fingerprint, mean, std, input size,
    precision), so the same model on the same pixels is computed once whatever the file or set is called.
    ``dataset_spec`` may also be a loaded set (e.g. an upload, ``datasets.load_uploaded_dataset``).

    Examples
    --------
    >>> import pathlib, tempfile, torch
    >>> import relu_core as rc
    >>> from relu_core import models
    >>> weights = pathlib.Path(tempfile.mkdtemp()) / "cnn8.pt"
    >>> torch.save(models.build_model("cnn8", 10).state_dict(), weights)  # your trained weights go here
    >>> run = rc.logits_for("cnn8", weights, "digits", device="cpu")  # scikit-learn's digits, test split
    >>> run.logits.shape, run.class_names[:3], run.model_name
    ((899, 10), ('0', '1', '2'), 'cnn8')
    """
    spec = models.get_spec(model_name)
    registered = isinstance(dataset_spec, str) and dataset_spec in datasets.DATASETS
    data = _test_images(dataset_spec, download, progress)
    n_classes = len(data.class_names)
    normalization = spec.normalization
    if training_settings is not None and weights is not None:
        raise InputError("a model trained here takes no weights: give either weights or training settings")
    if isinstance(weights, bytes):
        model = models.load_model_bytes(weights, weights_name, arch=model_name, num_classes=n_classes)
        source = f"{model_name} ({weights_name}) on {data.name}"
    elif isinstance(weights, str) and weights.startswith(HUB_PREFIX):
        model, normalization = _hub_model(weights.removeprefix(HUB_PREFIX), model_name, n_classes)
        source = f"{model_name} (Hugging Face Hub {weights.removeprefix(HUB_PREFIX)}) on {data.name}"
    elif weights is not None:
        model = models.load_model_file(weights, arch=model_name, num_classes=n_classes)
        source = f"{model_name} ({Path(weights).name}) on {data.name}"
    elif training_settings is not None and isinstance(dataset_spec, str):
        trained = trained_model(
            model_name,
            dataset_spec,
            training_settings,
            device=device,
            progress=progress,
            cancel=cancel,
            download=download,
        )
        model, meta = trained.model, trained.metadata
        chosen = meta["settings"]
        source = trained_source(
            model_name,
            chosen["objective"]["name"],
            chosen["recipe"]["name"],
            chosen["seed"],
            meta["best_epoch"],
            chosen["epochs"],
            data.name,
        )
    elif (pretrained := models.pretrained_weights(model_name)) is not None:
        model = models.load_state_dict_file(models.build_model(model_name, n_classes), pretrained)
        source = f"{model_name} (pretrained {pretrained.name}) on {data.name}"
    elif model_name in training.RECIPES and isinstance(dataset_spec, str):
        seed = SMALL_CNN_SEED if seed is None else validation.integer(seed, "seed", minimum=0)
        model = small_cnn(
            model_name, dataset_spec, epochs=epochs, seed=seed, progress=progress, cancel=cancel, download=download
        )
        ran = training.RECIPES[model_name].epochs if epochs is None else epochs  # no early stopping: the last epoch
        source = trained_source(model_name, "cross-entropy", "plain", seed, ran, ran, data.name)
    else:
        raise InputError(f"no weights given for {model_name} and no pretrained weights found: pass a checkpoint file")
    model.eval()
    selected = engine.select_device(device)
    resolved = engine.resolve_precision(precision, selected)
    # What the logits depend on besides the weights and the data: in the key and the engine call alike.
    inputs = {
        "mean": normalization.mean,
        "std": normalization.std,
        "input_size": spec.input_size,
        "precision": resolved,
    }
    # and the kind of device: a GPU's float32 logits are not the CPU's to the last bit (1.9e-5 on an H100)
    key = {
        "kind": "logits",
        "weights": models.weights_hash(model),
        "data": data.fingerprint,
        **inputs,
        "device": selected.type,
    }

    def compute() -> dict[str, np.ndarray]:
        logits = engine.compute_logits(
            model, data.images, **inputs, device=selected, batch_size=batch_size, progress=progress, cancel=cancel
        )
        if logits.shape[1] != n_classes:
            raise InputError(f"the model has {logits.shape[1]} outputs but {data.name} has {n_classes} classes")
        return {"logits": logits}

    def rows_again(rows: np.ndarray) -> np.ndarray:  # a few rows from the model: the cached entry's spot check
        return engine.compute_logits(model, data.images[rows], **inputs, device=selected, shard=False)

    what = f"the logits of {data.name}"
    tolerance = 1e-4 if resolved == "fp32" else 5e-2  # bf16 / fp16 autocast rounds far more
    checks = {"read": check_logits(len(data), n_classes, what, rows_again, tolerance)}
    checks["computed"] = check_logits(len(data), n_classes, what)  # just computed: no rows to compute again
    computed: list[np.ndarray] = []

    def compute_kept() -> dict[str, np.ndarray]:
        arrays = compute()
        computed.append(arrays["logits"])
        return arrays

    def check(arrays: Mapping[str, np.ndarray]) -> None:
        fresh = any(arrays.get("logits") is logits for logits in computed)
        checks["computed" if fresh else "read"](arrays)

    logits = cache.cached("logits", key, compute_kept, check)["logits"]
    return Run(
        run_id=cache.key_digest(key)[:16],
        logits=logits,
        labels=data.labels,
        class_names=tuple(data.class_names),
        images=data.images,
        model=model,
        model_name=model_name,
        mean=tuple(normalization.mean),
        std=tuple(normalization.std),
        dataset_name=data.name,
        source=source,
        # a registered set with known weights can be recomputed from these arguments (:func:`reopen`)
        recipe=(
            ("model_name", model_name),
            ("weights", weights),
            ("dataset_spec", dataset_spec),
            ("device", device),
            ("epochs", epochs),
            *((("seed", seed),) if seed is not None else ()),
            *((("training_settings", training_settings),) if training_settings is not None else ()),
        )
        if (weights is None or (isinstance(weights, str) and weights.startswith(HUB_PREFIX))) and registered
        else (),
    )


def _test_images(dataset_spec, download: bool, progress: Progress | None) -> datasets.ImageSet:
    """The images a model's run is computed on: ``dataset_spec`` itself (an ImageSet) or its test split, its
    logits' size checked against the input limits before any model runs."""
    data = (
        dataset_spec
        if isinstance(dataset_spec, datasets.ImageSet)
        else datasets.load_dataset(dataset_spec, split="test", download=download, progress=progress)
    )
    limits.check_logits_shape(len(data), len(data.class_names), f"the logits of {data.name}")
    return data


def onnx_normalization(classifier: onnx_model.OnnxClassifier, dataset_spec: object, channels: int):
    """The normalisation an ONNX model's inputs get, and where it comes from in words: the model's metadata
    (``mean``, ``std``), else that of the models registered for the data set, else ``(x/255 − 0.5)/0.5``."""
    if classifier.normalization is not None:
        return classifier.normalization, "the model's metadata"
    registered = models.DATASET_MODELS.get(dataset_spec) if isinstance(dataset_spec, str) else None
    if registered:
        return models.get_spec(registered[0]).normalization, f"{dataset_spec}'s registered models"
    return models.Normalization((0.5,) * channels, (0.5,) * channels), "the default (x/255 − 0.5)/0.5"


def onnx_run(
    weights: str | Path | bytes,
    dataset_spec: str | datasets.ImageSet,
    *,
    weights_name: str = "model.onnx",
    device: str = "auto",
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    download: bool = False,
) -> Run:
    """The :class:`Run` of the ONNX classifier ``weights`` (a file, or its bytes named ``weights_name``) on the
    test split of ``dataset_spec`` (:mod:`relu_core.onnx_model`), logits cached by the file's content hash, the
    data set's fingerprint and the normalisation (:func:`onnx_normalization`). The run keeps the images but no
    PyTorch model, so ε (which needs gradients) is not available for it."""
    if not isinstance(weights, bytes):
        weights_name = Path(weights).name
        weights = models.checkpoints.file_bytes(Path(weights))
    classifier = onnx_model.load_onnx(weights, weights_name, device, cancel)
    data = _test_images(dataset_spec, download, progress)
    n_classes = len(data.class_names)
    normalization, origin = onnx_normalization(classifier, dataset_spec, data.images.shape[-1])
    key = {
        "kind": "onnx-logits",
        "model": cache.bytes_digest(weights),
        "data": data.fingerprint,
        "mean": normalization.mean,
        "std": normalization.std,
    }

    def compute() -> dict[str, np.ndarray]:
        logits = onnx_model.compute_logits(
            classifier, data.images, normalization, batch_size=batch_size, progress=progress, cancel=cancel
        )
        if logits.shape[1] != n_classes:
            raise InputError(f"the ONNX model has {logits.shape[1]} outputs but {data.name} has {n_classes} classes")
        return {"logits": logits}

    check = check_logits(len(data.labels), n_classes, f"the cached logits of {weights_name}")
    logits = cache.cached("logits", key, compute, check=check)["logits"]
    return Run(
        run_id=cache.key_digest(key)[:16],
        logits=logits,
        labels=data.labels,
        class_names=tuple(data.class_names),
        images=data.images,
        model_name="onnx",
        mean=tuple(normalization.mean),
        std=tuple(normalization.std),
        dataset_name=data.name,
        source=f"{weights_name} (ONNX, normalisation from {origin}) on {data.name}",
        onnx_file=weights_name,
        onnx_sha256=key["model"],
    )


#: Rows of a cached logits entry recomputed from the model when it is read (:func:`check_logits`): the first, the
#: last and a few drawn at random on every read (unseeded, so that a forger cannot know them).
SPOT_CHECK_ROWS = 4


def check_logits(
    rows: int,
    classes: int,
    what: str,
    recompute: Callable[[np.ndarray], np.ndarray] | None = None,
    tolerance: float = 1e-4,
) -> Callable[[Mapping[str, np.ndarray]], None]:
    """The check of cached logits (:func:`cache.cached`'s ``check``): InputError unless the entry's ``logits``
    are finite float32 numbers (what the engine computes) of shape (``rows``, ``classes``); ``what`` names them.
    With ``recompute`` (the logits of some row indices, from the model), :data:`SPOT_CHECK_ROWS` rows are
    recomputed and must match within ``tolerance`` relative to the logits' scale (a batch rounds differently:
    about 1e-6 in float32; bf16 needs more): a rewritten entry whose rows were reversed or shuffled fails."""

    def check(arrays: Mapping[str, np.ndarray]) -> None:
        logits = arrays.get("logits")
        if logits is None:
            raise InputError(f"{what} are missing")
        try:
            detectors.validate_logits(logits)
        except InputError as error:
            raise InputError(f"{what}: {error}") from None
        if logits.shape != (rows, classes):
            raise InputError(f"{what} have shape {logits.shape}, not ({rows}, {classes})")
        if logits.dtype != np.float32:
            raise InputError(f"{what} are {logits.dtype}, not float32 as the engine computes them")
        if recompute is None or rows == 0:
            return
        drawn = np.random.default_rng().integers(0, rows, SPOT_CHECK_ROWS - 2)
        picked = np.unique(np.r_[0, rows - 1, drawn])
        fresh = np.asarray(recompute(picked), dtype=np.float64)
        scale = max(1.0, float(np.abs(fresh).max()))
        if not np.allclose(logits[picked], fresh, rtol=tolerance, atol=tolerance * scale):
            raise InputError(
                f"{what} do not match the model: rows {', '.join(map(str, picked))} recomputed differ from the entry"
            )

    return check


# --------------------------------------------------------------------------- the offline default


def default_choice() -> DefaultChoice:
    """The default run's data set: ``$RELU_STUDIO_DEFAULT`` when set, else Fashion-MNIST when both its splits
    are on this machine (a data directory, or Debian's ``dataset-fashion-mnist`` package), else digits."""
    forced = os.environ.get(DEFAULT_ENV, "").strip()
    if forced:
        if forced not in DEFAULT_CHOICES:
            raise InputError(f"{DEFAULT_ENV}={forced!r}: choose one of {', '.join(DEFAULT_CHOICES)}")
        return DEFAULT_CHOICES[forced]
    entry = datasets.DATASETS["fashion-mnist"]
    if all(entry.find(split)[0] is not None for split in ("train", "test")):
        return DEFAULT_CHOICES["fashion-mnist"]
    return DEFAULT_CHOICES["digits"]


def default_run(progress: Progress | None = None, cancel: Cancel | None = None) -> Run:
    """The default run (:func:`default_choice`): a small CNN trained here, seeded, on the training split, its
    logits on the test split.

    The trained weights and the test-split logits are cached under ``data_cache/``: the first call trains
    (under a minute for Fashion-MNIST on 2 cores, a second for digits), later calls load both. Images are kept for
    galleries and input pre-processing.
    """
    choice = default_choice()
    return logits_for(
        choice.model,
        None,
        choice.dataset,
        device="cpu",
        epochs=choice.epochs,
        seed=default_seed(),
        progress=progress,
        cancel=cancel,
    )


def default_seed() -> int:
    """The default run's training seed: ``$RELU_STUDIO_DEFAULT_SEED`` when set, else :data:`SMALL_CNN_SEED`."""
    value = os.environ.get(DEFAULT_SEED_ENV, "").strip()
    if not value:
        return SMALL_CNN_SEED
    return validation.parse_int(value, DEFAULT_SEED_ENV, minimum=0)


# --------------------------------------------------------------------------- the process's runs

#: Runs kept for this process (content-addressed, so sessions share them), least recently used dropped.
RUNS = LRURegistry(limits.MAX_RUNS)


def register_run(run: Run) -> str:
    """Keep ``run`` for this process (runs are content-addressed, so sessions can share them)."""
    RUNS.setdefault(run.run_id, run)
    return run.run_id


def get_run(run_id: str) -> Run:
    """The registered run ``run_id`` (InputError when unknown, e.g. dropped from the bounded registry)."""
    try:
        return RUNS[run_id]
    except KeyError:
        raise InputError(
            f"this run was dropped from memory (the server keeps the {limits.MAX_RUNS} most recently "
            "used runs): load it again"
        ) from None


# --------------------------------------------------------------------------- reopening a run by its id


def _record_key(run_id: str) -> dict[str, str]:
    return {"run": run_id}


def remember(run: Run) -> None:
    """Record on disk (``cache_dir("runs")``) what reopens ``run`` from its id alone: its recipe (engine runs on
    registered sets), or its arrays (uploaded logits). Runs with neither (an uploaded model, PyTorch or ONNX) are
    not recorded."""
    record = {"source": run.source, "recipe": dict(run.recipe)}
    arrays: dict[str, np.ndarray] = {}
    if not run.recipe:
        if run.model is not None or run.onnx_file:
            return
        arrays = {"logits": run.logits, "labels": run.labels, "class_names": np.asarray(run.class_names, dtype=str)}
        record["dataset_name"] = run.dataset_name
    if cache.load("runs", _record_key(run.run_id)) is None:
        cache.save("runs", _record_key(run.run_id), {"record": np.array(json.dumps(record)), **arrays})


def describe(run_id: str) -> str | None:
    """The source of a remembered run in words, or None when this machine has no record of it."""
    stored = cache.load("runs", _record_key(run_id))
    return None if stored is None else json.loads(str(stored["record"]))["source"]


def reopen(run_id: str, progress: Progress | None = None, cancel: Cancel | None = None) -> Run:
    """The remembered run ``run_id`` (cached logits: fast), or InputError naming what is missing."""
    stored = cache.load("runs", _record_key(run_id))
    if stored is None:
        raise InputError(f"run {run_id} is not on this machine")
    record = json.loads(str(stored["record"]))
    if record["recipe"]:
        run = logits_for(**record["recipe"], progress=progress, cancel=cancel)
    else:
        names = tuple(str(name) for name in stored["class_names"].tolist())
        run = Run.from_logits(
            stored["logits"],
            stored["labels"],
            names,
            dataset_name=record.get("dataset_name", ""),
            source=record["source"],
        )
    if run.run_id != run_id:
        raise InputError(f"run {run_id} ({record['source']}) cannot be reproduced here: its inputs changed")
    return run
