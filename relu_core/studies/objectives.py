"""The paper's Table 1 for one data set and architecture: one model per training objective (cross-entropy,
LogitNorm, MixUp, RegMixUp, OpenMix), each evaluated with MSP, ODIN, Doctor and Rel-U over seeded splits of its
test logits, with Rel-U − Doctor and its paired interval per objective.

Models are trained here on the data set's training split (``runs.trained_model``: early stopping on a held-out
part of the *training* split, cached by content, resumed after a cancel), then their test-split logits are
split into tuning and evaluation parts (``protocol``): by default the paper's protocol, T (and λ for Rel-U)
selected per seed by k-fold cross-validation inside the tuning part (``protocol.evaluate_with_selection``),
never on the evaluation part; ``selection="fixed"`` keeps T = 1 (ODIN 1000) and λ = 0.5. Under selection the
Rel-U − Doctor interval is conditional on the settings each seed selected (it does not resample the selection).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import cache, datasets, metric_info, models, protocol, runs, stats, training
from relu_core.errors import InputError
from relu_core.progress import Cancel, Progress, report, within

#: The paper's five objectives, in its order.
OBJECTIVES: tuple[str, ...] = training.OBJECTIVES
#: The epoch cap of the table's models: the five Fashion-MNIST models and their table take 6.5 minutes from a cold
#: cache on two quiet CPU cores at one epoch, 11.4 at two, against a target of 10 (README, "Training objectives").
TABLE_EPOCHS = 1
#: The detectors of the paper's Table 1.
TABLE_KEYS = ("msp", "odin", "doctor", "relu")
SELECTIONS = ("tuning", "fixed")
#: Where a model's evaluation is stored (keyed by its logits' content and the settings), and the version of
#: that record: a table whose models are cached reads every row back instead of redoing the selection.
NAMESPACE = "objectives"
CACHE_VERSION = 2  # 2: AUGRC, intervals labelled conditional on the selection
#: The outlier set OpenMix uses by default for each data set available offline.
DEFAULT_OUTLIERS = {"fashion-mnist": "mnist", "mnist": "fashion-mnist"}


@dataclass(frozen=True)
class ObjectiveRow:
    """One objective's model (``run``, its logits on the test split) and its evaluation (``result``)."""

    objective: str
    run: object
    result: protocol.EvaluationResult

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.run.logits.argmax(1) == self.run.labels))


@dataclass(frozen=True)
class ObjectivesResult:
    """The table's rows and the settings that made them."""

    dataset: str
    model: str
    epochs: int
    train_seed: int
    outliers: str | None
    seeds: tuple[int, ...]
    tune_fraction: float
    selection: str
    rows: tuple[ObjectiveRow, ...]

    def table(self) -> pd.DataFrame:
        """One row per objective: accuracy, then per detector FPR95 "mean (std)" with ``*`` on the row's best
        mean, AUROC "mean (std)", then Rel-U − Doctor on FPR95 with its interval and the verdicts in words."""
        fpr, auroc = metric_info.FPR95, metric_info.AUROC
        out = []
        for row in self.rows:
            result = row.result
            means = {k: result.mean(k, "fpr95") for k in result.methods}
            best = min(means.values())
            line = {"objective": row.objective, "accuracy": f"{row.accuracy:.2%}"}
            for k in result.methods:
                mark = " *" if means[k] == best else ""
                line[f"{result.names[k]} {fpr.label}"] = f"{means[k]:.4f} ({result.std(k, 'fpr95'):.4f}){mark}"
            for k in result.methods:
                line[f"{result.names[k]} {auroc.label}"] = (
                    f"{result.mean(k, 'auroc'):.4f} ({result.std(k, 'auroc'):.4f})"
                )
            paired = result.paired or {}
            diff = paired.get("fpr95")
            line[f"Rel-U − Doctor {fpr.label}"] = metric_info.signed(
                result.mean("relu", "fpr95") - result.mean("doctor", "fpr95")
            ) + (f" ({diff.interval_text()})" if diff is not None else "")
            line["verdict"] = "; ".join(paired[m].verdict() for m in ("fpr95", "auroc") if m in paired) or (
                "no bootstrap interval (0 resamples)"
            )
            out.append(line)
        return pd.DataFrame(out)

    def to_dict(self) -> dict[str, object]:
        """The settings and, per objective, its run id, source, accuracy and ``EvaluationResult.to_dict``."""
        return {
            "dataset": self.dataset,
            "model": self.model,
            "epochs": self.epochs,
            "train_seed": self.train_seed,
            "outliers": self.outliers,
            "seeds": list(self.seeds),
            "tune_fraction": self.tune_fraction,
            "selection": self.selection,
            "fpr95_positives": "correct",
            "objectives": {
                row.objective: {
                    "run_id": row.run.run_id,
                    "source": row.run.source,
                    "accuracy": row.accuracy,
                    "detectors": row.result.to_dict(),
                }
                for row in self.rows
            },
        }


def trainable_datasets() -> dict[str, str]:
    """The registered data sets whose training split is on this machine, with the small CNN that fits each
    (what the page offers offline: Fashion-MNIST and digits here; MNIST's training images are not shipped)."""
    out = {}
    for name, entry in datasets.DATASETS.items():
        cnn = next((m for m in models.DATASET_MODELS.get(name, ()) if m.startswith("cnn")), None)
        if cnn is not None and entry.find("train")[0] is not None:
            out[name] = cnn
    return out


def objective_run(
    dataset: str,
    model: str,
    objective: str,
    *,
    epochs: int,
    seed: int = 0,
    outliers: str | None = None,
    device: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
):
    """The run of ``model`` trained with ``objective`` on ``dataset``'s training split (cached by content;
    OpenMix mixes in ``outliers``, a registered data set, default :data:`DEFAULT_OUTLIERS`)."""
    settings: dict[str, object] = {"objective": {"name": objective}, "epochs": epochs, "seed": seed}
    if objective == "openmix":
        settings["outliers"] = outliers or DEFAULT_OUTLIERS.get(dataset)
        if settings["outliers"] is None:
            raise InputError(f"openmix needs an outlier data set for {dataset}: name one")
    return runs.logits_for(
        model, None, dataset, device=device, training_settings=settings, progress=progress, cancel=cancel
    )


def objectives_study(
    dataset: str = "fashion-mnist",
    model: str = "cnn28",
    *,
    objectives: Sequence[str] = OBJECTIVES,
    epochs: int = TABLE_EPOCHS,
    train_seed: int = 0,
    outliers: str | None = None,
    seeds: int | Sequence[int] = 10,
    tune_fraction: float = 0.5,
    selection: str = "tuning",
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    device: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> ObjectivesResult:
    """Train (or read from the cache) one model per objective and evaluate MSP, ODIN, Doctor and Rel-U on each.

    ``epochs`` is each model's epoch cap (early stopping on the training split's held-out part may stop it
    sooner); ``selection`` "tuning" (the paper's protocol, T and λ chosen inside each tuning part) or "fixed".
    Progress: one step per objective for its model (the training's own progress inside it), then one per
    objective for its evaluation.
    """
    objectives = tuple(dict.fromkeys(objectives))
    for name in objectives:
        training.Objective(name)  # an unknown name: one line before any training
    if not objectives:
        raise InputError("choose at least one objective")
    if selection not in SELECTIONS:
        raise InputError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    seeds = protocol.resolve_seeds(seeds)
    if "openmix" in objectives:  # the set it mixes in, named in the result
        outliers = outliers or DEFAULT_OUTLIERS.get(dataset)
    steps = 2 * len(objectives)
    trained = []
    for i, name in enumerate(objectives):
        trained.append(
            objective_run(
                dataset,
                model,
                name,
                epochs=epochs,
                seed=train_seed,
                outliers=outliers,
                device=device,
                progress=None if progress is None else within(progress, i, steps),
                cancel=cancel,
            )
        )
    rows = []
    for i, (name, run) in enumerate(zip(objectives, trained, strict=True)):
        options = {"seeds": seeds, "tune_fraction": tune_fraction, "n_resamples": n_resamples, "cancel": cancel}
        rows.append(ObjectiveRow(name, run, _evaluation(run, selection, options)))
        report(progress, len(objectives) + i + 1, steps, f"{name}: MSP, ODIN, Doctor and Rel-U evaluated")
    return ObjectivesResult(
        dataset,
        model,
        int(epochs),
        int(train_seed),
        outliers,
        seeds,
        float(tune_fraction),
        selection,
        tuple(rows),
    )


def _evaluation(run, selection: str, options: dict) -> protocol.EvaluationResult:
    """MSP, ODIN, Doctor and Rel-U on ``run`` (the protocol with ``selection``), stored by the content of its
    logits and labels and the settings (:data:`NAMESPACE`), so a table of cached models is read back."""
    key = {
        "logits": cache.array_digest(np.asarray(run.logits)),
        "labels": cache.array_digest(np.asarray(run.labels)),
        "selection": selection,
        "seeds": list(options["seeds"]),
        "tune_fraction": float(options["tune_fraction"]),
        "n_resamples": int(options["n_resamples"]),
        "version": CACHE_VERSION,
    }
    stored = cache.load(NAMESPACE, key)
    if stored is not None:
        return _from_arrays(stored)
    if selection == "tuning":
        result = protocol.evaluate_with_selection(run.logits, run.labels, TABLE_KEYS, **options)
    else:
        result = protocol.evaluate(run.logits, run.labels, TABLE_KEYS, temperature=None, lam=0.5, **options)
    cache.save(NAMESPACE, key, _to_arrays(result))
    return result


def _to_arrays(result: protocol.EvaluationResult) -> dict[str, np.ndarray]:
    """Every field of ``result`` as plain arrays (None as NaN, strings as 0-d string arrays)."""
    arrays = {
        "methods": np.array(result.methods),
        "names": np.array([result.names[k] for k in result.methods]),
        "seeds": np.array(result.seeds),
        "sizes": np.array([result.n_tune, result.n_eval]),
        "tune_fraction": np.array(result.tune_fraction),
        "accuracy": np.asarray(result.accuracy),
        "labels": np.array([result.selection, result.fpr_positive]),
        "eps": np.array(result.eps),
    }
    for k in result.methods:
        for metric, values in result.per_seed[k].items():
            arrays[f"per_seed/{k}/{metric}"] = np.asarray(values)
        arrays[f"params/{k}"] = np.array([[np.nan if v is None else v for v in pair] for pair in result.params[k]])
        arrays[f"fallback/{k}"] = np.array(result.fallback[k], dtype=bool)
        arrays[f"n_settings/{k}"] = np.array(result.n_settings[k])
    for metric, diff in (result.paired or {}).items():
        arrays[f"paired/{metric}"] = np.array([diff.estimate, diff.low, diff.high, diff.n_resamples, diff.confidence])
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray]) -> protocol.EvaluationResult:
    """The inverse of :func:`_to_arrays`."""
    methods = tuple(str(k) for k in arrays["methods"])
    selection, fpr_positive = (str(v) for v in arrays["labels"])
    per_seed = {k: {m: arrays[f"per_seed/{k}/{m}"] for m in metric_info.KEYS} for k in methods}
    params = {
        k: [tuple(None if np.isnan(v) else float(v) for v in pair) for pair in arrays[f"params/{k}"]] for k in methods
    }
    paired = {
        name.split("/", 1)[1]: stats.PairedDifference(
            name.split("/", 1)[1],
            float(v[0]),
            float(v[1]),
            float(v[2]),
            metric_info.BY_KEY[name.split("/", 1)[1]].higher_is_better,
            int(v[3]),
            float(v[4]),
            conditional=selection != protocol.FIXED_LABEL,
        )
        for name, v in arrays.items()
        if name.startswith("paired/")
    }
    n_tune, n_eval = (int(v) for v in arrays["sizes"])
    return protocol.EvaluationResult(
        methods=methods,
        names=dict(zip(methods, (str(n) for n in arrays["names"]), strict=True)),
        seeds=tuple(int(v) for v in arrays["seeds"]),
        tune_fraction=float(arrays["tune_fraction"]),
        n_tune=n_tune,
        n_eval=n_eval,
        per_seed=per_seed,
        accuracy=arrays["accuracy"],
        params=params,
        fallback={k: [bool(v) for v in arrays[f"fallback/{k}"]] for k in methods},
        n_settings={k: int(arrays[f"n_settings/{k}"]) for k in methods},
        selection=selection,
        fpr_positive=fpr_positive,
        eps=float(arrays["eps"]),
        paired=paired or None,
    )
