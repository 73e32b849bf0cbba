"""The paper's Table 1 for one data set and architecture: one model per training objective (cross-entropy,
LogitNorm, MixUp, RegMixUp, OpenMix), each evaluated with MSP, ODIN, Doctor and Rel-U over seeded splits of its
test logits, with Rel-U − Doctor and its paired interval per objective.

Models are trained here on the data set's training split under a named recipe (``training.recipes``: ``plain``,
``fast``, ``paper``; ``runs.trained_model``: early stopping on a held-out part of the *training* split within the
schedule's final phase, cached by content, resumed after a cancel), then their test-split logits are split into
tuning and evaluation parts (``protocol``): by default the paper's protocol, T (and λ for Rel-U) selected per seed
by k-fold cross-validation inside the tuning part (``protocol.evaluate_with_selection``), never on the evaluation
part; ``selection="fixed"`` keeps T = 1 (ODIN 1000) and λ = 0.5. Under selection the Rel-U − Doctor interval is
conditional on the settings each seed selected (it does not resample the selection). Beside the honest selection
the table shows the **oracle** one (T and λ selected on the evaluation split, as the paper's tables were, labelled
"oracle" wherever it appears), so a reader sees how much of an advantage is selection; and where the data set is one
of the paper's Table 1 (:mod:`relu_core.studies.paper_table`), the paper's rows of it beneath ours, every network,
each naming its network and accuracy and saying so where ours differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import cache, datasets, metric_info, models, paper_protocol, paths, protocol, runs, stats, training
from relu_core.errors import InputError
from relu_core.progress import Cancel, Progress, count, report, within
from relu_core.registry import LRURegistry
from relu_core.studies import paper_table

#: The paper's five objectives, in its order (RegMixUp weighted as the authors' code; ``regmixup-appendix`` can be
#: named too).
OBJECTIVES: tuple[str, ...] = training.PAPER_OBJECTIVES
#: The epoch cap of the table's models under the ``plain`` recipe: the five Fashion-MNIST models and their table
#: take 6.5 minutes from a cold cache on two quiet CPU cores at one epoch, 11.4 at two, against a target of 10
#: (README, "Training objectives"). Other recipes default to their own cap (:func:`default_epochs`).
TABLE_EPOCHS = 1
#: The detectors of the paper's Table 1.
TABLE_KEYS = ("msp", "odin", "doctor", "relu")
SELECTIONS = ("tuning", "fixed")
#: Where a model's evaluation is stored (keyed by its logits' content and the settings), and the version of
#: that record: a table whose models are cached reads every row back instead of redoing the selection.
NAMESPACE = "objectives"
CACHE_VERSION = 3  # 2: AUGRC, intervals labelled conditional on the selection; 3: both FPR95 operating points
#: The outlier set OpenMix uses by default for each data set (README, Training objectives: why each is fair). The
#: 28x28 sets use each other's test images (MNIST's training images are not shipped); the 32x32 RGB sets use the
#: generated dead-leaves images (``datasets.generated``). Digits (8x8) has none: OpenMix is left out there.
DEFAULT_OUTLIERS = {
    "fashion-mnist": "mnist",
    "mnist": "fashion-mnist",
    "cifar10": "dead-leaves",
    "cifar100": "dead-leaves",
    "svhn": "dead-leaves",
}
#: The label of the oracle columns: T and λ selected on the evaluation split itself.
ORACLE = "oracle"
#: The label of the paper's-protocol columns (:mod:`relu_core.paper_protocol`): FPR95 with errors positive, the mean
#: of each detector's five best (setting, seed) rows on the evaluation split; no interval.
PAPER = "paper's protocol"


def supported_objectives(dataset: str, objectives: Sequence[str] = OBJECTIVES) -> tuple[str, ...]:
    """``objectives`` without OpenMix where ``dataset`` has no outlier set of its image size (digits)."""
    return tuple(o for o in objectives if o != "openmix" or dataset in DEFAULT_OUTLIERS)


def left_out_note(dataset: str) -> str | None:
    """One line saying which of the paper's objectives ``dataset`` cannot run by default, and why (None: all)."""
    if dataset in DEFAULT_OUTLIERS:
        return None
    return (
        f"OpenMix is left out: no registered outlier data set has {dataset}'s image size (name one with --outliers, "
        "e.g. npz:PATH)"
    )


def default_epochs(recipe: str, model: str) -> int:
    """The epoch cap the table trains with unless one is given: :data:`TABLE_EPOCHS` under ``plain``, else the
    recipe's cap for the network (:func:`training.recipes.default_epochs`)."""
    if recipe == training.recipes.PLAIN.name:
        return TABLE_EPOCHS
    return training.recipes.default_epochs(recipe, model)


@dataclass(frozen=True)
class ObjectiveRow:
    """One objective's model (``run``, its logits on the test split), its evaluation (``result``) and, under
    selection inside the tuning split, the oracle evaluation of the same logits (``oracle``: T and λ selected on
    the evaluation split; None otherwise)."""

    objective: str
    run: object
    result: protocol.EvaluationResult
    oracle: protocol.EvaluationResult | None = None
    #: The paper's protocol on the same logits (:func:`paper_summary`; None when not computed).
    paper: dict | None = None

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.run.logits.argmax(1) == self.run.labels))


def _difference(result: protocol.EvaluationResult, metric: str = "fpr95") -> str:
    """Rel-U − Doctor on ``metric``: the mean over seeds and, when there is one, the paired interval."""
    diff = (result.paired or {}).get(metric)
    mean = metric_info.signed(result.mean("relu", metric) - result.mean("doctor", metric))
    return mean + (f" ({diff.interval_text()})" if diff is not None else "")


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
    recipe: str = training.recipes.PLAIN.name
    notes: tuple[str, ...] = ()
    #: The ε grid searched with T and λ (``objectives_study(epsilons=...)``), None when ε was not selected (0).
    epsilons: tuple[float, ...] | None = None

    def table(self) -> pd.DataFrame:
        """One row per objective, the answer first: accuracy, Rel-U − Doctor on FPR95 with its interval and the
        verdicts in words, the same difference under the oracle selection (when computed), then per detector FPR95
        "mean (std)" with ``*`` on the row's best mean. AUROC: :meth:`auroc_table`."""
        fpr = metric_info.FPR95
        out = []
        for row in self.rows:
            result = row.result
            paired = result.paired or {}
            line = {"objective": row.objective, "accuracy": f"{row.accuracy:.2%}"}
            line[f"Rel-U − Doctor {fpr.label}"] = _difference(result)
            line["verdict"] = "; ".join(paired[m].verdict() for m in ("fpr95", "auroc") if m in paired) or (
                "no bootstrap interval (0 resamples)"
            )
            if row.oracle is not None:
                line[f"Rel-U − Doctor {fpr.label}, {ORACLE}"] = _difference(row.oracle)
            if row.paper is not None:
                line[f"Rel-U − Doctor {fpr.label} (errors positive), {PAPER}"] = _paper_difference(row.paper)
            means = {k: result.mean(k, "fpr95") for k in result.methods}
            best = min(means.values())
            for k in result.methods:
                mark = " *" if means[k] == best else ""
                line[f"{result.names[k]} {fpr.label}"] = f"{means[k]:.4f} ({result.std(k, 'fpr95'):.4f}){mark}"
            out.append(line)
        return pd.DataFrame(out)

    def summary_table(self) -> pd.DataFrame:
        """The answer per objective in few, narrow columns (the page's first table): accuracy, Rel-U − Doctor on
        FPR95 with its 95 % interval in brackets, the verdict in two or three words, and the oracle difference."""
        out = []
        for row in self.rows:
            diff = (row.result.paired or {}).get("fpr95")
            line = {"objective": row.objective, "accuracy": f"{row.accuracy:.2%}"}
            line["Rel-U − Doctor FPR95 [95 % CI]"] = _compact(row.result)
            line["verdict (FPR95)"] = "no interval" if diff is None else diff.outcome()
            other = row.result.paired_fpr95_other
            if row.result.fpr95_other is not None:  # the other operating point, with its own interval
                line["Rel-U − Doctor FPR95, errors positive [95 % CI]"] = _compact_other(row.result)
                line["verdict (errors positive)"] = "no interval" if other is None else other.outcome()
            if row.oracle is not None:
                line[f"{ORACLE}: Rel-U − Doctor FPR95"] = _compact(row.oracle)
            if row.paper is not None:
                line[f"{PAPER}: Rel-U − Doctor FPR95 (errors positive)"] = _paper_difference(row.paper)
            out.append(line)
        return pd.DataFrame(out)

    def fpr_table(self) -> pd.DataFrame:
        """Per objective and detector, FPR95 "mean (std)" over the seeds, ``*`` on the row's lowest mean."""
        columns = [
            c
            for c in self.table().columns
            if c == "objective" or (c.endswith(metric_info.FPR95.label) and "−" not in c)
        ]
        return self.table()[columns]

    def operating_points(self) -> list[str]:
        """Per objective, Rel-U vs Doctor at both operating points in plain words (keep 95 % of the correct
        predictions; catch 95 % of the errors), each with its paired interval (honest selection)."""
        return [f"{row.objective}: {line}" for row in self.rows for line in row.result.operating_points()]

    def verdicts(self) -> list[str]:
        """Per objective, the FPR95 and AUROC verdicts in words with their intervals."""
        return [f"{row.objective}: {line}" for row, line in zip(self.rows, self.table()["verdict"], strict=True)]

    def auroc_table(self) -> pd.DataFrame:
        """Per objective and detector, AUROC "mean (std)" over the seeds (honest selection)."""
        auroc = metric_info.AUROC
        out = []
        for row in self.rows:
            result = row.result
            line = {"objective": row.objective}
            for k in result.methods:
                line[f"{result.names[k]} {auroc.label}"] = (
                    f"{result.mean(k, 'auroc'):.4f} ({result.std(k, 'auroc'):.4f})"
                )
            out.append(line)
        return pd.DataFrame(out)

    def answer(self) -> str:
        """The page's question (where does Rel-U help?) answered in one sentence from the FPR95 verdicts, each a
        paired 95 % interval: how many objectives Rel-U is significantly better, worse, or no different."""
        outcomes = [(row.result.paired or {}).get("fpr95") for row in self.rows]
        if not self.rows or any(diff is None for diff in outcomes):
            return (
                f"{self.model} on {self.dataset}: no paired intervals were computed (0 bootstrap resamples), so "
                "no verdict is given."
            )
        better = [
            row.objective for row, d in zip(self.rows, outcomes, strict=True) if d.significant and d.a_is_better()
        ]
        worse = [
            row.objective for row, d in zip(self.rows, outcomes, strict=True) if d.significant and not d.a_is_better()
        ]
        n = len(self.rows)
        tied = n - len(better) - len(worse)
        parts = []
        if better:
            parts.append(f"Rel-U tells errors apart better than Doctor under {_listed(better, n)}")
        if worse:
            parts.append(f"Doctor is better than Rel-U under {_listed(worse, n)}")
        if tied:
            parts.append(f"no significant difference under {count(tied, 'objective')}")
        selection = "T and λ chosen inside the tuning split" if self.selection == "tuning" else "fixed T = 1, λ = 0.5"
        if self.epsilons is not None:
            selection = f"T, λ and ε chosen inside the tuning split, {protocol.describe_eps_grid(self.epsilons)}"
        sentence = "; ".join(parts)
        return (
            f"{sentence[0].upper()}{sentence[1:]} (FPR95, paired 95 % intervals over {count(len(self.seeds), 'seed')}; "
            f"{self.model} on {self.dataset}, {self.recipe} recipe, {selection})."
        )

    def reference_rows(self) -> list[paper_table.PaperRow]:
        """The paper's Table 1 rows for this data set and these objectives, every network of the paper (ours
        first where it is one of them); empty when the paper has no row of the data set."""
        return paper_table.objective_rows(self.dataset, [row.objective for row in self.rows], model=self.model)

    def images_note(self) -> str | None:
        """The line beside the paper's rows when a row's test images are the CIFAR-10 JPEG folder, not the paper's
        original images (``paper_table.images_note``); None where they are not or the paper has no row here."""
        if not self.reference_rows():
            return None
        notes = {paper_table.images_note(row.run) for row in self.rows if row.run is not None} - {None}
        return min(notes) if notes else None

    def reference_table(self) -> pd.DataFrame:
        """Per objective with paper rows: ours (honest selection, then oracle) and the paper's (labelled with its
        table, network, accuracy, and a note where its network differs from ours), FPR95 of MSP, ODIN, Doctor
        and Rel-U in % (the paper's units; ours converted from fractions). Where the paper has our network, ours −
        that row's value follows ours in brackets."""
        out = []
        references = self.reference_rows()
        for row in self.rows:
            objective, alias_note = paper_table.objective_of(row.objective)
            refs = [ref for ref in references if ref.objective == objective]
            if not refs:
                continue
            same = next((ref for ref in refs if ref.model == self.model), None)
            for label, result in (("ours", row.result), (f"ours, {ORACLE}", row.oracle)):
                if result is None:
                    continue
                line = {
                    "objective": row.objective,
                    "row": label,
                    "network": self.model,
                    "accuracy %": f"{100 * row.accuracy:.1f}",
                }
                for key, name in zip(TABLE_KEYS, paper_table.DETECTOR_NAMES, strict=True):
                    value = 100 * result.mean(key, "fpr95")
                    paper = None if same is None else same.fpr95(key)
                    gap = "" if paper is None else f" ({value - paper.mean:+.1f})"
                    line[f"{name} FPR95 %"] = f"{value:.1f}{gap}"
                line["note"] = "" if same is None else f"(ours − the paper's {same.network} row)"
                out.append(line)
            for ref in refs:
                line = {
                    "objective": row.objective,
                    "row": ref.label,
                    "network": ref.network,
                    "accuracy %": _maybe(ref.accuracy),
                }
                for key, name in zip(TABLE_KEYS, paper_table.DETECTOR_NAMES, strict=True):
                    value = ref.fpr95(key)
                    line[f"{name} FPR95 %"] = "not given" if value is None else value.text()
                line["note"] = "; ".join(
                    part for part in (paper_table.network_note(ref, self.model), alias_note) if part
                )
                out.append(line)
        return pd.DataFrame(out)

    def to_dict(self) -> dict[str, object]:
        """The settings and, per objective, its run id, source, accuracy and ``EvaluationResult.to_dict`` (the
        oracle one under ``oracle`` when computed)."""
        return {
            "dataset": self.dataset,
            "model": self.model,
            "recipe": self.recipe,
            "epochs": self.epochs,
            "train_seed": self.train_seed,
            "outliers": self.outliers,
            "seeds": list(self.seeds),
            "tune_fraction": self.tune_fraction,
            "selection": self.selection,
            "eps_grid": None if self.epsilons is None else list(self.epsilons),
            "eps_selection": None if self.epsilons is None else protocol.describe_eps_grid(self.epsilons),
            "fpr95_positives": "correct",
            "answer": self.answer(),
            "notes": list(self.notes),
            "objectives": {
                row.objective: {
                    "run_id": row.run.run_id,
                    "source": row.run.source,
                    "accuracy": row.accuracy,
                    "selection": row.result.selection,
                    "detectors": row.result.to_dict(),
                    **(
                        {}
                        if row.oracle is None
                        else {ORACLE: {"selection": row.oracle.selection, "detectors": row.oracle.to_dict()}}
                    ),
                    **({} if row.paper is None else {"paper_protocol": row.paper}),
                }
                for row in self.rows
            },
            "paper_reference": [
                {**ref.to_dict(), "network_note": paper_table.network_note(ref, self.model)}
                for ref in self.reference_rows()
            ],
            "paper_images_note": self.images_note(),
        }


def _paper_difference(summary: dict) -> str:
    """``-0.0304 (no interval)``: Rel-U − Doctor under the paper's protocol, the five best rows' means."""
    return f"{metric_info.signed(summary['relu_minus_doctor']['fpr95'])} (no interval)"


def paper_summary(run, seeds: Sequence[int], tune_fraction: float) -> dict:
    """:func:`relu_core.paper_protocol.evaluate` on the run's logits (ε = 0; r = ``round(1 / tune_fraction)``, at
    least 2; as many seeds as ``seeds``, numbered 1..S as the authors do, :func:`relu_core.paper_protocol.paper_seeds`;
    the five lowest-FPR95 rows, every metric read at them), as its JSON record without the kept rows, stored by the
    logits' content and the settings (:data:`NAMESPACE`)."""
    import json

    r = max(2, int(round(1.0 / tune_fraction)))
    key = {
        "kind": "paper-protocol",
        "logits": cache.array_digest(np.asarray(run.logits)),
        "labels": cache.array_digest(np.asarray(run.labels)),
        "seeds": list(paper_protocol.paper_seeds(len(seeds))),
        "r": r,
        "version": 2,
    }
    stored = cache.load(NAMESPACE, key)
    if stored is not None:
        return json.loads(str(stored["result"]))
    record = paper_protocol.evaluate(run.logits, run.labels, r=r, seeds=len(seeds)).to_dict()  # seeds 1..S
    for method in record["methods"].values():
        for metric in method.values():
            metric.pop("rows")
    cache.save(NAMESPACE, key, {"result": np.array(json.dumps(record))})
    return record


def _compact_other(result: protocol.EvaluationResult) -> str:
    """:func:`_compact` of FPR95 under the other convention (errors positive): ``result.paired_fpr95_other``."""
    other = np.mean(result.fpr95_other["relu"]) - np.mean(result.fpr95_other["doctor"])
    diff = result.paired_fpr95_other
    return metric_info.signed(other) + ("" if diff is None else f" [{diff.low:+.3f}, {diff.high:+.3f}]")


def _compact(result: protocol.EvaluationResult, metric: str = "fpr95") -> str:
    """``+0.048 [+0.014, +0.084]``: Rel-U − Doctor, mean over seeds, and its paired 95 % interval."""
    diff = (result.paired or {}).get(metric)
    mean = metric_info.signed(result.mean("relu", metric) - result.mean("doctor", metric))
    return mean if diff is None else f"{mean} [{diff.low:+.3f}, {diff.high:+.3f}]"


def _listed(names: list[str], total: int) -> str:
    if len(names) == total:
        return f"all {total} objectives" if total > 1 else f"its one objective ({names[0]})"
    return f"{count(len(names), 'objective')} of {total} ({', '.join(names)})"


def _maybe(value: float | None) -> str:
    return "not given" if value is None else f"{value:.1f}"


def trainable_datasets(gpu: bool = False) -> dict[str, str]:
    """The registered data sets whose training split is on this machine, with the network trained on each by
    default (``models.trainable_models``; on a ``gpu`` the GPU's choice): Fashion-MNIST, digits and CIFAR-10 here."""
    out = {}
    for name, entry in datasets.DATASETS.items():
        choices = models.trainable_models(name, gpu)
        if choices and entry.find("train")[0] is not None:
            out[name] = choices[0]
    return out


def objective_run(
    dataset: str,
    model: str,
    objective: str,
    *,
    epochs: int,
    seed: int = 0,
    outliers: str | None = None,
    recipe: str | None = None,
    device: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
):
    """The run of ``model`` trained with ``objective`` under ``recipe`` (default the data set's,
    ``training.recipes.default_for``) on ``dataset``'s training split (cached by content; OpenMix mixes in
    ``outliers``, a registered data set, default :data:`DEFAULT_OUTLIERS`)."""
    settings = _training_settings(dataset, objective, epochs, seed, outliers, recipe)
    return runs.logits_for(
        model, None, dataset, device=device, training_settings=settings, progress=progress, cancel=cancel
    )


def _training_settings(
    dataset: str, objective: str, epochs: int, seed: int, outliers: str | None, recipe: str | None
) -> dict[str, object]:
    """The training settings (``runs.trained_model``) of :func:`objective_run`'s model."""
    settings: dict[str, object] = {
        "objective": {"name": objective},
        "epochs": epochs,
        "seed": seed,
        "recipe": recipe or training.recipes.default_for(dataset),
    }
    if objective == "openmix":
        settings["outliers"] = outliers or DEFAULT_OUTLIERS.get(dataset)
        if settings["outliers"] is None:
            raise InputError(f"openmix needs an outlier data set for {dataset}: name one")
    return settings


#: The cache keys of the models :func:`cached_objectives` was asked about, by their settings and where the data
#: and the cache are: a key costs a read of the training split (its fingerprint), a page asks on every rerun.
_MODEL_KEYS = LRURegistry(64)


def cached_objectives(
    dataset: str,
    model: str,
    objectives: Sequence[str],
    *,
    epochs: int,
    recipe: str | None = None,
    seed: int = 0,
    outliers: str | None = None,
) -> tuple[str, ...] | None:
    """Which of ``objectives`` already have their model (:func:`objective_run`'s, these settings) in the cache:
    the study reads them back and trains only the others. None where that cannot be told (the training data
    cannot be read, a setting is refused: the study itself will say why). The first question about a data set
    reads its training split once for its fingerprint; later ones only look for the cache files."""
    found, loaded = [], {}  # the training split read once for all the objectives
    for name in dict.fromkeys(objectives):
        try:
            settings = _training_settings(dataset, name, epochs, seed, outliers, recipe)
            where = (model, dataset, cache.key_text(settings), *map(str, paths.data_dirs()), str(paths.cache_dir()))
            key = _MODEL_KEYS.get(where)
            if key is None:
                key = _MODEL_KEYS.setdefault(where, runs.trained_model_key(model, dataset, settings, loaded=loaded))
        except InputError:
            return None
        if cache.path_for("models", key).exists():
            found.append(name)
    return tuple(found)


def run_dataset(run, available: Sequence[str]) -> str | None:
    """The data set of ``available`` (registered names) that ``run`` was computed on, None when it is none of
    them: its recipe's registered spec, else its data set's name without the split (a run of a registered set is
    named ``cifar10-test``)."""
    spec = dict(getattr(run, "recipe", None) or ()).get("dataset_spec")
    name = spec if isinstance(spec, str) else str(getattr(run, "dataset_name", "") or "")
    for suffix in ("-test", "-train"):
        name = name.removesuffix(suffix)
    return name if name in available else None


def objectives_study(
    dataset: str = "fashion-mnist",
    model: str = "cnn28",
    *,
    objectives: Sequence[str] | None = None,
    recipe: str | None = None,
    epochs: int | None = None,
    train_seed: int = 0,
    outliers: str | None = None,
    seeds: int | Sequence[int] = 10,
    tune_fraction: float = 0.5,
    selection: str = "tuning",
    oracle: bool = True,
    paper: bool = True,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    device: str = "auto",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    epsilons: Sequence[float] | None = None,
) -> ObjectivesResult:
    """Train (or read from the cache) one model per objective and evaluate MSP, ODIN, Doctor and Rel-U on each.

    ``objectives`` None: the paper's five the data set supports (:func:`supported_objectives`; the result's
    ``notes`` say which were left out). ``recipe`` None: the data set's (``training.recipes.default_for``);
    ``epochs`` is each model's cap (None: :func:`default_epochs`; early stopping on the training split's
    held-out part may stop it sooner); ``selection`` "tuning" (the paper's protocol, T and λ chosen inside each
    tuning part) or "fixed"; under "tuning", ``oracle`` also evaluates each model with T and λ chosen on the
    evaluation split (labelled :data:`ORACLE`). ``epsilons`` (an ε grid, e.g. ``protocol.AUTHORS_EPSILONS``,
    with ``selection="tuning"``) also selects ε jointly with T and λ, inside the tuning split (the oracle: on the
    evaluation split), through each trained model (``preprocessing.make_perturbation``); ODIN, Doctor and Rel-U
    get an ε, MSP none. Progress: one step per objective for its model (the training's own progress inside it),
    then one per objective for its evaluation.
    """
    notes = []
    if objectives is None:
        objectives = supported_objectives(dataset)
        if (note := left_out_note(dataset)) is not None:
            notes.append(note)
    objectives = tuple(dict.fromkeys(objectives))
    for name in objectives:
        training.Objective(name)  # an unknown name: one line before any training
    if not objectives:
        raise InputError("choose at least one objective")
    if selection not in SELECTIONS:
        raise InputError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    if epsilons is not None:
        epsilons = protocol.check_epsilons(epsilons)
        if selection != "tuning":
            raise InputError("an ε grid is searched by the selection: it goes with selection 'tuning', not 'fixed'")
    recipe = training.recipes.get(recipe or training.recipes.default_for(dataset)).name
    epochs = default_epochs(recipe, model) if epochs is None else epochs
    seeds = protocol.resolve_seeds(seeds)
    if "openmix" in objectives:  # the set it mixes in, named in the result
        outliers = outliers or DEFAULT_OUTLIERS.get(dataset)
        if outliers is None:
            raise InputError(f"openmix needs an outlier data set for {dataset}: name one (--outliers)")
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
                recipe=recipe,
                device=device,
                progress=None if progress is None else within(progress, i, steps),
                cancel=cancel,
            )
        )
    rows = []
    for i, (name, run) in enumerate(zip(objectives, trained, strict=True)):
        options = {"seeds": seeds, "tune_fraction": tune_fraction, "n_resamples": n_resamples, "cancel": cancel}
        if epsilons is not None:
            from relu_core import preprocessing

            options.update(epsilons=epsilons, perturbation=preprocessing.make_perturbation(run, cancel=cancel))
        honest = _evaluation(run, selection, options)
        beside = _evaluation(run, ORACLE, options) if oracle and selection == "tuning" else None
        authors = paper_summary(run, seeds, tune_fraction) if paper and selection == "tuning" else None
        rows.append(ObjectiveRow(name, run, honest, beside, authors))
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
        recipe,
        tuple(notes),
        epsilons,
    )


def _evaluation(run, selection: str, options: dict) -> protocol.EvaluationResult:
    """MSP, ODIN, Doctor and Rel-U on ``run`` (the protocol with ``selection``: ``tuning``, ``fixed`` or
    :data:`ORACLE`), stored by the content of its
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
    if options.get("epsilons") is not None:  # the model's weights are the logits' (the run's content)
        key["epsilons"] = list(options["epsilons"])
    stored = cache.load(NAMESPACE, key)
    if stored is not None:
        return _from_arrays(stored)
    if selection in ("tuning", ORACLE):
        result = protocol.evaluate_with_selection(run.logits, run.labels, TABLE_KEYS, selection=selection, **options)
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
    if result.eps_grid is not None:
        arrays["eps_grid"] = np.array(result.eps_grid, dtype=np.float64)
        for k in result.methods:
            arrays[f"eps_per_seed/{k}"] = np.array(result.eps_per_seed[k], dtype=np.float64)
    for k in result.methods:
        for metric, values in result.per_seed[k].items():
            arrays[f"per_seed/{k}/{metric}"] = np.asarray(values)
        arrays[f"params/{k}"] = np.array([[np.nan if v is None else v for v in pair] for pair in result.params[k]])
        arrays[f"fallback/{k}"] = np.array(result.fallback[k], dtype=bool)
        arrays[f"n_settings/{k}"] = np.array(result.n_settings[k])
    if result.fpr95_other is not None:
        for k in result.methods:
            arrays[f"fpr95_other/{k}"] = np.asarray(result.fpr95_other[k], dtype=np.float64)
    if (d := result.paired_fpr95_other) is not None:
        arrays["paired_fpr95_other"] = np.array([d.estimate, d.low, d.high, d.n_resamples, d.confidence])
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
    other = arrays.get("paired_fpr95_other")
    paired_other = (
        None
        if other is None
        else stats.PairedDifference(
            "fpr95",
            float(other[0]),
            float(other[1]),
            float(other[2]),
            False,
            int(other[3]),
            float(other[4]),
            conditional=selection != protocol.FIXED_LABEL,
        )
    )
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
        eps_grid=tuple(float(v) for v in arrays["eps_grid"]) if "eps_grid" in arrays else None,
        eps_per_seed={k: [float(v) for v in arrays[f"eps_per_seed/{k}"]] for k in methods}
        if "eps_grid" in arrays
        else None,
        perturbed="eps_grid" in arrays,
        fpr95_other={k: arrays[f"fpr95_other/{k}"] for k in methods} if f"fpr95_other/{methods[0]}" in arrays else None,
        paired_fpr95_other=paired_other,
    )
