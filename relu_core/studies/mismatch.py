"""Label-domain mismatch (the paper's Figure 4 and its MNIST/SVHN figure): in-distribution samples mixed with
samples of another data set through the same model.

The run's model sees its own test samples and, in equal numbers, samples of another data set whose labels
are not classes of the model. Positives are the in-distribution samples the model classifies correctly;
negatives are every sample of the other set (whatever the model predicts, it cannot be right) and the
in-distribution misclassifications. D* is fitted on a tuning part of the mixture (stratified by
correctness) and evaluated on the rest, for tuning fractions 10/20/33/50 % and 10 seeds, at T = 1, λ = 0.5
(:func:`relu_core.studies.tuning_split.fraction_sweep`).

The paper's pair is CIFAR-10 against CIFAR-100 without the 13 classes that resemble CIFAR-10 classes
(:data:`CIFAR100_REMOVED`, removed by default whenever the other set has CIFAR-100's class names). Offline
pairs: the CIFAR-10 ResNets on the JPEG test set against the 916 lossless CIFAR-100 images
(``cifar100-exact``), and a small CNN on the grey pair. ``../shared/data`` holds MNIST's test split only, so
offline the small CNN is trained on Fashion-MNIST and sees MNIST as the other set; with MNIST's training
split (``--download``) the paper's direction, an MNIST-trained CNN against Fashion-MNIST, runs the same way. Pairs whose images the model cannot take (another
size or number of channels) are refused with one line. The other set's logits are cached on disk under
(weights hash, the other set's fingerprint, normalisation, precision).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relu_core import cache, datasets, engine, models, protocol, runs
from relu_core.errors import InputError
from relu_core.progress import Cancel, Progress, report
from relu_core.studies import base, tuning_split

NAME = "mismatch"
TITLE = "Label-domain mismatch: Rel-U and Doctor on in-distribution plus other-domain samples"
CIFAR100_REMOVED: tuple[str, ...] = (
    "bus",
    "camel",
    "cattle",
    "fox",
    "leopard",
    "lion",
    "pickup_truck",
    "streetcar",
    "tank",
    "tiger",
    "tractor",
    "train",
    "wolf",
)
ASSEMBLY_SEED = 0


def check_run(run) -> None:
    if run.model is None or run.images is None:
        raise InputError(
            "the mismatch study runs the model on another data set, so it needs a run with its model "
            "and images (uploaded logits cannot be used)"
        )


def check_shapes(run, other) -> None:
    """InputError (one line) unless the other set's images have the shape of the run's images."""
    mine, theirs = tuple(run.images.shape[1:]), tuple(other.images.shape[1:])
    if mine != theirs:

        def text(shape):
            return f"{shape[0]}x{shape[1]}x{shape[2]}"

        raise InputError(
            f"the model of this run takes {text(mine)} images ({run.dataset_name or 'its data set'}) but "
            f"{other.name} has {text(theirs)} images: choose another data set of the same shape"
        )


def check_exclusions(exclude: Sequence[str], class_names: Sequence[str]) -> None:
    """InputError naming the classes of ``exclude`` that are not among the other set's ``class_names``."""
    unknown = [c for c in exclude if c not in class_names]
    if unknown:
        raise InputError(f"class(es) {', '.join(unknown)} to exclude are not classes of the other data set")


def default_exclusions(class_names: Sequence[str]) -> tuple[str, ...]:
    """The 13 CIFAR-100 classes that resemble CIFAR-10 ones when the names are CIFAR-100's, else none."""
    return CIFAR100_REMOVED if set(CIFAR100_REMOVED) <= set(class_names) else ()


def assemble(
    logits_in: np.ndarray,
    correct_in: np.ndarray,
    logits_out: np.ndarray,
    labels_out: np.ndarray,
    class_names_out: Sequence[str],
    exclude: Sequence[str],
    seed: int = ASSEMBLY_SEED,
) -> dict:
    """The mixture: equal counts of in-distribution and kept other-set samples (seeded draws without replacement).

    Returns ``logits`` (2n, C: in-distribution first), ``correct`` (the in-distribution correctness, then False),
    ``in_idx`` and ``out_idx`` (sorted indices drawn from each side), ``kept`` (how many other-set samples remain
    after dropping the classes ``exclude``) and ``excluded`` (the names dropped).
    """
    names = list(class_names_out)
    check_exclusions(exclude, names)
    dropped = [names.index(c) for c in exclude]
    kept = np.flatnonzero(~np.isin(np.asarray(labels_out), dropped))
    n = min(len(logits_in), len(kept))
    if n < 2:
        raise InputError("the mixture needs at least 2 samples on each side")
    if logits_out.shape[1] != logits_in.shape[1]:
        raise InputError("the two sets' logits have different numbers of classes")
    rng = np.random.default_rng(seed)
    in_idx = np.sort(rng.choice(len(logits_in), n, replace=False))
    out_idx = np.sort(rng.choice(kept, n, replace=False))
    return {
        "logits": np.concatenate([np.asarray(logits_in)[in_idx], np.asarray(logits_out)[out_idx]]),
        "correct": np.concatenate([np.asarray(correct_in, dtype=bool)[in_idx], np.zeros(n, dtype=bool)]),
        "in_idx": in_idx,
        "out_idx": out_idx,
        "kept": len(kept),
        "excluded": tuple(exclude),
    }


def other_logits(
    run, other, *, device: str = "auto", progress: Progress | None = None, cancel: Cancel | None = None
) -> np.ndarray:
    """The run's model on the other set's images (float32 logits), cached by content."""
    check_run(run)
    check_shapes(run, other)
    engine.check_images(run.model, other.images, run.mean, run.std, None)
    precision = engine.resolve_precision("auto", engine.select_device(device))
    key = {
        "kind": "mismatch logits",
        "weights": models.weights_hash(run.model),
        "data": other.fingerprint,
        "mean": list(run.mean),
        "std": list(run.std),
        "precision": precision,
    }

    def compute() -> dict[str, np.ndarray]:
        return {
            "logits": run.model_logits(
                other.images, device=device, precision=precision, progress=progress, cancel=cancel
            )
        }

    check = runs.check_logits(len(other), run.n_classes, f"the logits of {other.name}")
    return cache.cached("logits", key, compute, check)["logits"]


def run_study(
    run,
    *,
    other: str | object = "cifar100-exact",
    exclude: Sequence[str] | None = None,
    fractions: Sequence[float] = tuning_split.FRACTIONS,
    device: str = "auto",
    **options,
) -> base.StudyResult:
    """The mismatch study of ``run`` against ``other`` (a data set spec for ``datasets.load_dataset`` or an
    ``ImageSet``). ``exclude``: class names of the other set to drop (None: :func:`default_exclusions`);
    ``device`` runs the model on the other set; the keyword ``options`` as :func:`base.options`."""
    check_run(run)
    fractions = tuning_split.check_fractions(fractions)
    common = base.options(**options)
    progress, cancel = common.progress, common.cancel
    if isinstance(other, str):
        other = datasets.load_dataset(other, split="test")
    check_shapes(run, other)
    exclude = default_exclusions(other.class_names) if exclude is None else tuple(exclude)
    check_exclusions(exclude, other.class_names)  # before the model runs on the other set
    correct_in = protocol.correctness(run.logits, run.labels)
    key = {
        "weights": models.weights_hash(run.model),
        "other": other.fingerprint,
        "exclude": exclude,
        "fractions": fractions,
        "assembly_seed": ASSEMBLY_SEED,
    }

    def sweep(collector: base.Collector) -> base.Sweep:
        report(progress, 0, 1, f"classifying {len(other.labels):,} images of {other.name}")
        logits_out = other_logits(run, other, device=device, progress=progress, cancel=cancel)
        mix = assemble(run.logits, correct_in, logits_out, other.labels, other.class_names, exclude)
        n = len(mix["in_idx"])
        tuning_split.fraction_sweep(mix["logits"], mix["correct"], fractions, collector, common, series="mismatch")
        errors_in = int(n - mix["correct"][:n].sum())
        settings = {
            "other": other.name,
            "in_distribution": run.dataset_name,
            "excluded_classes": list(exclude),
            "n_per_side": n,
            "other_kept": mix["kept"],
            "fractions": list(fractions),
            "T": tuning_split.TEMPERATURE,
            "lambda": tuning_split.LAMBDA,
            "eps": 0.0,
        }
        mixture = (
            f"{n:,} in-distribution samples ({run.dataset_name}; {errors_in:,} of them misclassified) and {n:,} "
            f"samples of {other.name}"
            + (f" without its {len(exclude)} classes {', '.join(exclude)}" if exclude else "")
            + "; positives: in-distribution samples classified correctly"
        )
        return base.Sweep(settings, {"mismatch": {**tuning_split.SERIES_INFO}}, [mixture])

    return common.study(NAME, TITLE, run, key, sweep)
