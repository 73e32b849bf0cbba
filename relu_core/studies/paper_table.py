"""The Rel-U paper's published tables (Dadalto, Romanelli, Pichler, Piantanida, ICLR 2024, arXiv 2306.01710),
number for number, as reference rows beside ours.

The numbers are read from CSV files shipped inside the package (``relu_core/reference/paper/*.csv``, copied from the
paper's LaTeX source; ``tests/test_paper_table.py`` checks them against the shared reference copy): they are the
paper's published results, never measured by this project, and every row says so (:attr:`PaperRow.label`).

The tables (:data:`TABLES`) and their units, as the paper prints them:

- ``table1``: Table 1 (``tab:main_misclassification_detection``): DenseNet-121 and ResNet-34 on CIFAR-10 and
  CIFAR-100, five training objectives; accuracy and FPR95 of MSP, ODIN, Doctor, Rel-U, in **percent**.
- ``conformal``: ``tab:main_misclassification_detection_conformal``: the same rows for three objectives plus a
  conformalized model ("Conf."), in **percent**.
- ``calibration``: ``tab:calibration``: ECE at T = 1 and after temperature calibration (a **fraction**), Doctor and
  Rel-U FPR95 uncalibrated and calibrated at λ = 0.5, ε = 0 (**percent**); also ResNet-50 on ImageNet.
- ``bayes``: ``tab:bayes``: cross-entropy models, FPR95 of MC-Dropout, Deep Ensembles, an MLP and Rel-U
  (**percent**).
- ``corruption_densenet121``, ``corruption_resnet34``: ``tab:corruption_d121``, ``tab:r34corruption``: CIFAR-10 →
  CIFAR-10-C at severity 5, per corruption (19) and tuning split (10, 20, 33, 50 % of the clean test split), Doctor
  and Rel-U AUROC and FPR95 as **fractions** (0.31 = 31 %).

Every value is a :class:`Value` that knows its unit and converts explicitly (:meth:`Value.percent`,
:meth:`Value.fraction`); a row keeps the paper's units unless converted.

How the numbers were made (the reference's facts on the authors' code, ``edadaltocg/relative-uncertainty`` at
``507a224``): the authors' table script (``src/utils/tables.py``) keeps, per model and method, the five result rows
of lowest FPR over all settings (T, ε, λ) and seeds together, measured on the evaluation part, and prints their
mean and standard deviation: the numbers were **selected on the evaluation split by the authors' five-best
aggregation** (:data:`FIVE_BEST`). Compare them with our oracle rows first, not with honest selection.

The paper's names (networks, data sets, objectives, corruptions) map to ours by :data:`NETWORKS`,
:data:`DATASETS`, :data:`OBJECTIVES` and :func:`corruption_name`. A study shows the paper's rows for its data set
(and objective, corruption, tuning split) whatever our network, with :func:`network_note` beside each row naming
the paper's network and accuracy, and saying so when ours differs.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from relu_core.errors import InputError

#: The paper, as every reference row cites it.
PAPER = "Dadalto et al., ICLR 2024, arXiv 2306.01710"
#: How the paper's numbers were selected (the reference README's account of the authors' table script).
FIVE_BEST = (
    "selected on the evaluation split by the authors' five-best aggregation (their table script keeps, per model "
    "and method, the five result rows of lowest FPR95 over all settings and seeds together and prints their mean "
    "and std)"
)
#: How the corruption tables' numbers were made, as far as the reference says.
CORRUPTION_SELECTION = (
    "mean ± std over ten seeds as the paper prints them, D* and the hyperparameters fitted on clean CIFAR-10 only; "
    "the reference does not say whether the authors' five-best table script (selection on the evaluation split) "
    "made this table"
)
#: The folder, inside the package, that holds the tables (its parts under ``relu_core``, and its path).
PACKAGE_FOLDER = ("reference", "paper")
PACKAGED_FOLDER = Path(__file__).resolve().parent.parent.joinpath(*PACKAGE_FOLDER)
PERCENT, FRACTION = "percent", "fraction"


@dataclass(frozen=True)
class PaperTable:
    """One of the paper's tables: its key here, CSV file, LaTeX label, printed number (None where the reference
    does not give it), what it holds, units in words, how its numbers were selected, and a short name for a
    reader where it has no printed number."""

    key: str
    file: str
    tex_label: str
    number: str | None
    what: str
    units: str
    selection: str
    name: str = ""

    @property
    def label(self) -> str:
        """``paper, Table 1 (tab:main_misclassification_detection)``, or for a table whose number the reference
        does not give ``paper, its calibration table (tab:calibration)``: the label every row of it carries."""
        if self.number:
            return f"paper, {self.number} ({self.tex_label})"
        return f"paper, its {self.name} table ({self.tex_label})"


_TABLE_LIST = (
    PaperTable(
        "table1",
        "table1_fpr95.csv",
        "tab:main_misclassification_detection",
        "Table 1",
        "accuracy and FPR95 of MSP, ODIN, Doctor and Rel-U per network, data set and training objective",
        "percent (accuracy and FPR95)",
        FIVE_BEST,
    ),
    PaperTable(
        "conformal",
        "table_conformal_fpr95.csv",
        "tab:main_misclassification_detection_conformal",
        None,
        "Table 1's rows for CrossEntropy, Mixup and RegMixUp, plus a conformalized model's FPR95 (Conf.)",
        "percent (accuracy and FPR95)",
        FIVE_BEST,
        name="conformal-prediction",
    ),
    PaperTable(
        "calibration",
        "table_calibration_fpr95.csv",
        "tab:calibration",
        None,
        "ECE at T = 1 and after temperature calibration; Doctor and Rel-U FPR95 uncalibrated and calibrated "
        "(λ = 0.5, ε = 0)",
        "ECE as a fraction; FPR95 in percent",
        "λ = 0.5, ε = 0 and the calibrated T (the paper's text), mean and std as printed; the reference does not say "
        "whether the authors' five-best table script (selection on the evaluation split) made this table",
        name="calibration",
    ),
    PaperTable(
        "bayes",
        "table_bayes_fpr95.csv",
        "tab:bayes",
        None,
        "cross-entropy models: FPR95 of MC-Dropout, Deep Ensembles, an MLP trained on the tuning data, and Rel-U",
        "percent (FPR95)",
        FIVE_BEST,
        name="Bayesian-baselines",
    ),
    PaperTable(
        "corruption_densenet121",
        "table_corruption_densenet121_severity5.csv",
        "tab:corruption_d121",
        None,
        "DenseNet-121, CIFAR-10 → CIFAR-10-C at severity 5, per corruption and tuning split (D* fitted on clean "
        "CIFAR-10 only): Doctor and Rel-U AUROC and FPR95",
        "fractions (0.31 = 31 %)",
        CORRUPTION_SELECTION,
        name="DenseNet-121 CIFAR-10-C",
    ),
    PaperTable(
        "corruption_resnet34",
        "table_corruption_resnet34_severity5.csv",
        "tab:r34corruption",
        None,
        "ResNet-34, CIFAR-10 → CIFAR-10-C at severity 5, per corruption and tuning split (D* fitted on clean "
        "CIFAR-10 only): Doctor and Rel-U AUROC and FPR95",
        "fractions (0.31 = 31 %)",
        CORRUPTION_SELECTION,
        name="ResNet-34 CIFAR-10-C",
    ),
)
#: The paper's tables by key.
TABLES: dict[str, PaperTable] = {table.key: table for table in _TABLE_LIST}
#: The label of Table 1's rows (kept for the importers of the earlier one-row module).
LABEL = TABLES["table1"].label
#: The corruption tables' network, by table key.
CORRUPTION_TABLES = {"corruption_densenet121": "DenseNet-121", "corruption_resnet34": "ResNet-34"}
#: The paper's tuning splits of the corruption tables, in % of the clean test split.
CORRUPTION_SPLITS = (10, 20, 33, 50)
#: The corruption tables' severity.
CORRUPTION_SEVERITY = 5

#: The paper's networks and our registered name of the same architecture (None: none registered).
NETWORKS: dict[str, str | None] = {
    "DenseNet-121": "densenet121_cifar",
    "ResNet-34": "resnet34_cifar",
    "ResNet-50": None,
}
#: The paper's data sets and our registered name of each.
DATASETS: dict[str, str] = {"CIFAR-10": "cifar10", "CIFAR-100": "cifar100", "ImageNet": "imagenet"}
#: The paper's training objectives and ours (``regmixup-appendix`` is read as RegMixUp, with a note).
OBJECTIVES: dict[str, str] = {
    "CrossEntropy": "cross-entropy",
    "LogitNorm": "logitnorm",
    "Mixup": "mixup",
    "OpenMix": "openmix",
    "RegMixUp": "regmixup",
}
#: Our objectives read as another's paper row, and what to say beside it.
OBJECTIVE_ALIASES = {
    "regmixup-appendix": (
        "regmixup",
        "ours is RegMixUp as the appendix writes it; the paper's numbers come from the authors' code's weighting",
    )
}
#: The detectors (our keys) of Table 1 and the conformal table, and the columns naming them.
TABLE1_DETECTORS = {"msp": "MSP", "odin": "ODIN", "doctor": "Doctor", "relu": "Rel-U"}
#: The detectors of the paper's Table 1, in ``studies.objectives.TABLE_KEYS`` order, as the paper names them.
DETECTOR_NAMES = tuple(TABLE1_DETECTORS.values())


@dataclass(frozen=True)
class Value:
    """A number of the paper: ``mean`` and ``std`` (the value in parentheses or after ±; None where the table
    prints none) in ``unit`` (:data:`PERCENT` or :data:`FRACTION`)."""

    mean: float
    std: float | None
    unit: str

    def percent(self) -> Value:
        """The same number in percent (a fraction × 100; a percent as it is)."""
        if self.unit == PERCENT:
            return self
        return Value(100.0 * self.mean, None if self.std is None else 100.0 * self.std, PERCENT)

    def fraction(self) -> Value:
        """The same number as a fraction (a percent ÷ 100; a fraction as it is)."""
        if self.unit == FRACTION:
            return self
        return Value(self.mean / 100.0, None if self.std is None else self.std / 100.0, FRACTION)

    def text(self) -> str:
        """As the paper prints it: ``14.3 (0.2)`` in percent (one decimal), ``0.31 ± 0.02`` as a fraction."""
        if self.unit == PERCENT:
            return f"{self.mean:.1f}" + ("" if self.std is None else f" ({self.std:.1f})")
        return f"{self.mean:.2f}" + ("" if self.std is None else f" ± {self.std:.2f}")

    def to_dict(self) -> dict[str, object]:
        return {"mean": self.mean, "std": self.std, "unit": self.unit}


@dataclass(frozen=True)
class PaperRow:
    """One row of one of the paper's tables, in the paper's units.

    ``network`` and ``dataset`` as the paper names them; ``accuracy`` the network's accuracy in % (from
    ``accuracy_source``; None where no table of the paper gives it); ``values`` the table's numbers by column
    (``msp_fpr95``, ``doctor_auroc``, ``ece_T1`` ...; the ``_std`` columns folded into each :class:`Value`);
    ``objective`` (Table 1, conformal), ``corruption`` and ``tuning_split_percent`` (the corruption tables) where
    the table has them."""

    table: PaperTable
    network: str
    dataset: str
    values: Mapping[str, Value] = field(default_factory=dict)
    accuracy: float | None = None
    accuracy_source: str = ""
    objective: str | None = None
    corruption: str | None = None
    tuning_split_percent: int | None = None

    @property
    def label(self) -> str:
        """The table's label (``paper, Table 1 (tab:main_misclassification_detection)``)."""
        return self.table.label

    @property
    def model(self) -> str | None:
        """Our registered name of the paper's network (None: not registered)."""
        return NETWORKS.get(self.network)

    def value(self, column: str) -> Value:
        """The number of ``column`` (InputError naming the table's columns otherwise)."""
        if column not in self.values:
            raise InputError(f"{self.label} has no column {column!r}; it has {', '.join(self.values)}")
        return self.values[column]

    def fpr95(self, detector: str) -> Value | None:
        """``<detector>_fpr95`` (our detector key: msp, odin, doctor, relu, conformal, mlp ...), or None."""
        return self.values.get(f"{detector}_fpr95")

    def accuracy_text(self) -> str:
        """The accuracy in % as the paper prints it (one decimal, no unit: the columns say %)."""
        return "not printed by the paper" if self.accuracy is None else f"{self.accuracy:.1f}"

    def to_dict(self) -> dict[str, object]:
        """Strict-JSON record: label, table, network (the paper's and ours), data set, the row's keys, accuracy,
        every value with its unit, units and selection in words."""
        return {
            "label": self.label,
            "paper": PAPER,
            "table": self.table.key,
            "tex_label": self.table.tex_label,
            "network": self.network,
            "model": self.model,
            "dataset": self.dataset,
            **({} if self.objective is None else {"objective": self.objective}),
            **({} if self.corruption is None else {"corruption": self.corruption}),
            **({} if self.tuning_split_percent is None else {"tuning_split_percent": self.tuning_split_percent}),
            "accuracy_percent": self.accuracy,
            "accuracy_source": self.accuracy_source,
            "values": {column: value.to_dict() for column, value in self.values.items()},
            "units": self.table.units,
            "selection": self.table.selection,
        }


def _unit(table: PaperTable, column: str) -> str:
    if table.key.startswith("corruption") or column.startswith("ece"):
        return FRACTION
    return PERCENT


def read_text(key: str) -> str:
    """The CSV text of table ``key`` as shipped in the package."""
    table = _table(key)
    folder = resources.files("relu_core").joinpath(*PACKAGE_FOLDER)
    return folder.joinpath(table.file).read_text(encoding="utf-8")


def _table(key: str) -> PaperTable:
    if key not in TABLES:
        raise InputError(f"unknown paper table {key!r}; choose from {', '.join(TABLES)}")
    return TABLES[key]


@functools.cache
def rows(key: str) -> tuple[PaperRow, ...]:
    """Every row of table ``key`` (:data:`TABLES`), in the paper's order and units.

    A column ``X_std`` is the std of the column just before it; Table 1's, the conformal table's and the corruption
    tables' own keys (objective, corruption, tuning split) become the row's fields. Accuracy: Table 1's and the
    conformal table's own; the Bayesian table's from Table 1's CrossEntropy row of the same network and data set
    (its Rel-U column is that row's); none for the calibration and corruption tables, which print none."""
    table = _table(key)
    reader = csv.reader(io.StringIO(read_text(key)))
    header = next(reader)
    keys = {"network", "dataset", "objective", "accuracy", "corruption", "tuning_split_percent"}
    out = []
    for line in reader:
        if not line:
            continue
        cells = dict(zip(header, line, strict=True))
        values: dict[str, Value] = {}
        for i, column in enumerate(header):
            if column in keys or column.endswith("_std"):
                continue
            std_column = header[i + 1] if i + 1 < len(header) and header[i + 1].endswith("_std") else None
            values[column] = Value(
                float(cells[column]), None if std_column is None else float(cells[std_column]), _unit(table, column)
            )
        values = types.MappingProxyType(values)  # the rows are cached and shared: read-only
        network = cells.get("network") or CORRUPTION_TABLES[key]
        dataset = cells.get("dataset") or "CIFAR-10"
        accuracy, accuracy_source = None, ""
        if "accuracy" in cells:
            accuracy, accuracy_source = float(cells["accuracy"]), table.label
        out.append(
            PaperRow(
                table,
                network,
                dataset,
                values,
                accuracy,
                accuracy_source,
                cells.get("objective"),
                cells.get("corruption"),
                int(cells["tuning_split_percent"]) if "tuning_split_percent" in cells else None,
            )
        )
    if key == "bayes":
        table1 = {(r.network, r.dataset): r for r in rows("table1") if r.objective == "CrossEntropy"}
        out = [_with_table1_accuracy(row, table1.get((row.network, row.dataset))) for row in out]
    return tuple(out)


def _with_table1_accuracy(row: PaperRow, reference: PaperRow | None) -> PaperRow:
    if reference is None:
        return row
    source = f"{reference.label}, CrossEntropy row (the same models: this table's Rel-U column is that row's)"
    return PaperRow(row.table, row.network, row.dataset, row.values, reference.accuracy, source)


# ------------------------------------------------------------------------------------------ our names, theirs


def paper_dataset(dataset: str) -> str | None:
    """The paper's name of our data set ``dataset`` (a registered name or a run's ``dataset_name`` such as
    ``cifar10-test``, ``cifar10-exact-test``), or None when the paper has no table of it."""
    name = (dataset or "").lower()
    for suffix in ("-test", "-train"):
        name = name.removesuffix(suffix)
    name = name.removesuffix("-exact")
    for theirs, ours in DATASETS.items():
        if name == ours:
            return theirs
    return None


def corruption_name(paper_name: str) -> str:
    """Our corruption key of the paper's name (``Jpeg compression`` -> ``jpeg_compression``)."""
    return paper_name.strip().lower().replace(" ", "_")


def objective_of(ours: str) -> tuple[str | None, str]:
    """The paper's objective for ours, and what to say beside its row ("" when it is the same objective)."""
    ours, note = OBJECTIVE_ALIASES.get(ours, (ours, ""))
    for theirs, name in OBJECTIVES.items():
        if name == ours:
            return theirs, note
    return None, ""


def network_note(row: PaperRow, model: str | None) -> str:
    """Beside a paper row: the paper's network and accuracy, and whether ours (registered name ``model``) is
    the same architecture."""
    accuracy = "" if row.accuracy is None else f", {row.accuracy:.1f} % accuracy"
    theirs = f"the paper's {row.network}{accuracy}"
    if model and row.model == model:
        return f"{theirs}: the same network as ours"
    return f"{theirs}: a different network from ours ({model or 'unknown'})"


def images_note(run_or_source) -> str | None:
    """A line when our CIFAR-10 test images are the JPEG folder (quality 75), not the paper's original images: a
    run (``dataset_name`` and ``source``) whose data set is registered CIFAR-10 read from that folder on this
    machine, or a ``source`` text naming it. An uploaded logits file named after CIFAR-10 gets no line: where its
    images came from is not known."""
    if isinstance(run_or_source, str):
        source, dataset = run_or_source, ""
    else:
        source, dataset = getattr(run_or_source, "source", ""), getattr(run_or_source, "dataset_name", "")
    jpeg = "jpeg" in (source or "").lower()
    if not jpeg and shown_dataset(dataset) == "cifar10" and UPLOADED not in (source or ""):
        jpeg = "jpeg" in _cifar10_test_location().lower()
    if jpeg:
        return "our test images are the CIFAR-10 JPEG folder (quality 75), not the original images the paper used"
    return None


#: How a run read from a logits file names its source (``runs.load_logits_upload``).
UPLOADED = "(uploaded logits)"


def _cifar10_test_location() -> str:
    """Where the registered CIFAR-10 test split is read from on this machine ("" where it is not found)."""
    from relu_core import datasets

    found, _searched = datasets.DATASETS["cifar10"].find("test")
    return "" if found is None else found.location


def our_accuracy(run) -> str:
    """The run's top-1 accuracy in % on all its samples, one decimal as the paper's ("" without logits)."""
    import numpy as np

    logits, labels = getattr(run, "logits", None), getattr(run, "labels", None)
    if logits is None or labels is None:
        return ""
    return f"{100.0 * float(np.mean(np.argmax(logits, axis=1) == np.asarray(labels))):.1f}"


def _ordered(found: list[PaperRow], model: str | None) -> list[PaperRow]:
    """Our network's rows first, then the paper's order."""
    return sorted(found, key=lambda row: row.model != model)


def objective_rows(
    dataset: str, objectives: Sequence[str] | None = None, *, model: str | None = None, key: str = "table1"
) -> list[PaperRow]:
    """Table 1's (or the conformal table's, ``key="conformal"``) rows of our ``dataset`` for our ``objectives``
    (None: all), every network of the paper, ``model``'s first; ordered by our objectives, then network."""
    theirs = paper_dataset(dataset)
    if theirs is None:
        return []
    found = [row for row in rows(key) if row.dataset == theirs]
    if objectives is None:
        return _ordered(found, model)
    out = []
    for ours in objectives:
        objective, _note = objective_of(ours)
        out += _ordered([row for row in found if row.objective == objective], model)
    return out


def dataset_rows(key: str, dataset: str, *, model: str | None = None) -> list[PaperRow]:
    """The rows of table ``key`` (``calibration``, ``bayes``, ``conformal``, ``table1``) of our ``dataset``,
    ``model``'s network first."""
    theirs = paper_dataset(dataset)
    return [] if theirs is None else _ordered([row for row in rows(key) if row.dataset == theirs], model)


def calibration_rows(dataset: str, *, model: str | None = None) -> list[PaperRow]:
    """The calibration table's rows (``tab:calibration``) of our ``dataset``."""
    return dataset_rows("calibration", dataset, model=model)


def bayes_rows(dataset: str, *, model: str | None = None) -> list[PaperRow]:
    """The Bayesian table's rows (``tab:bayes``) of our ``dataset``."""
    return dataset_rows("bayes", dataset, model=model)


def conformal_rows(dataset: str, *, model: str | None = None) -> list[PaperRow]:
    """The conformal table's rows (``tab:main_misclassification_detection_conformal``) of our ``dataset``."""
    return dataset_rows("conformal", dataset, model=model)


def nearest_split(tune_fraction: float) -> int:
    """The paper's corruption tuning split (in %) nearest ``tune_fraction`` (1/3 -> 33)."""
    return min(CORRUPTION_SPLITS, key=lambda split: (abs(split / 100.0 - tune_fraction), split))


def split_matches(tune_fraction: float) -> bool:
    """Whether ``tune_fraction`` is one of the paper's corruption splits (to the paper's whole percent)."""
    return math.isclose(100.0 * tune_fraction, nearest_split(tune_fraction), abs_tol=0.5)


def corruption_rows(
    dataset: str,
    corruptions: Sequence[str] | None = None,
    tune_fraction: float | None = None,
    *,
    model: str | None = None,
) -> list[PaperRow]:
    """The corruption tables' rows (both networks, ``model``'s first) for our ``dataset`` (CIFAR-10 only), our
    corruption keys ``corruptions`` (None: all 19) and the paper's split nearest ``tune_fraction`` (None: all
    four); ordered by our corruptions, then network."""
    if paper_dataset(dataset) != "CIFAR-10":
        return []
    split = None if tune_fraction is None else nearest_split(tune_fraction)
    found = [
        row for key in CORRUPTION_TABLES for row in rows(key) if split is None or row.tuning_split_percent == split
    ]
    if corruptions is None:
        return _ordered(found, model)
    out = []
    for name in corruptions:
        out += _ordered([row for row in found if corruption_name(row.corruption or "") == name], model)
    return out


def no_table(what: str, dataset: str) -> str:
    """The one line said where the paper has no ``what`` (e.g. "Table 1 row") for ``dataset``."""
    covered = {
        "table1": "CIFAR-10, CIFAR-100",
        "conformal": "CIFAR-10, CIFAR-100",
        "bayes": "CIFAR-10, CIFAR-100",
        "calibration": "CIFAR-10, CIFAR-100, ImageNet",
        "corruption": "CIFAR-10 → CIFAR-10-C",
    }[what]
    title = {
        "table1": TABLES["table1"].label,
        "conformal": TABLES["conformal"].label,
        "bayes": TABLES["bayes"].label,
        "calibration": TABLES["calibration"].label,
        "corruption": f"{TABLES['corruption_densenet121'].label} and {TABLES['corruption_resnet34'].label}",
    }[what]
    verb = "cover" if what == "corruption" else "covers"  # the two corruption tables
    return f"No paper reference for {shown_dataset(dataset) or 'this data set'}: {title} {verb} {covered} only."


def heading(key: str, shown: str) -> str:
    """The line above a table of ``key``'s rows: its label, the paper, what is ``shown`` in which units, and how
    the paper's numbers were selected."""
    table = _table(key)
    return f"Beside ours: {table.label}, {PAPER}. {shown[0].upper()}{shown[1:]}; {table.selection}."


def objectives_heading() -> str:
    """The line above the objectives table's paper rows."""
    return heading(
        "table1",
        "FPR95 and accuracy in %, the paper's units (ours converted from fractions; ours − the paper's row of our "
        "network in brackets where the paper has it)",
    )


# ------------------------------------------------------------------------------------------ the corruption study

#: The corruption tables' columns and their headers, in the paper's units (fractions).
CORRUPTION_COLUMNS = {
    "doctor_auroc": "Doctor AUROC",
    "doctor_fpr95": "Doctor FPR95",
    "relu_auroc": "Rel-U AUROC",
    "relu_fpr95": "Rel-U FPR95",
}


def corruption_heading(tune_fraction: float) -> str:
    """The line above the corruption study's paper rows: labels, units, the split shown, selection."""
    split = nearest_split(tune_fraction)
    same = (
        f"the paper's {split} % tuning split, as ours"
        if split_matches(tune_fraction)
        else f"the paper's nearest tuning split, {split} % (ours: {100 * tune_fraction:.0f} %; the paper has "
        f"{', '.join(map(str, CORRUPTION_SPLITS))} %)"
    )
    labels = " and ".join(TABLES[key].label for key in CORRUPTION_TABLES)
    return (
        f"Beside ours: {labels}, {PAPER}; severity {CORRUPTION_SEVERITY}, {same}. AUROC and FPR95 as fractions "
        f"(0.31 = 31 %), the paper's units and ours, mean ± std; {CORRUPTION_SELECTION}."
    )


def corruption_reference(result, run) -> tuple[object, list[str]]:
    """The corruption study's ``result`` (``robustness.RobustnessResult``) beside the paper's CIFAR-10-C rows of
    the same corruptions at the paper's split nearest its tuning fraction: per corruption, ours then the paper's
    two networks (the run's first), Doctor and Rel-U AUROC and FPR95 as fractions (the paper's units: ours need no
    conversion), each paper row labelled with its table and network note. Returns ``(frame, notes)``; the frame is
    empty and one note says so where the run's data set is not CIFAR-10."""
    import pandas as pd

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    names = [name for name in dict.fromkeys(result.table["corruption"]) if name != "clean"]
    found = corruption_rows(dataset, names, result.tune_fraction, model=model)
    if not found:
        return pd.DataFrame(), [no_table("corruption", shown_dataset(dataset))]
    table = result.table.set_index(["corruption", "detector", "metric"])
    lines = []
    for name in names:
        ours = {"corruption": name, "row": "ours", "network": model or "logits only"}
        for column, header in CORRUPTION_COLUMNS.items():
            detector = TABLE1_DETECTORS[column.split("_")[0]]
            key = (name, detector, column.split("_")[1])
            ours[header] = (
                f"{table.loc[key, 'mean']:.2f} ± {table.loc[key, 'std']:.2f}" if key in table.index else "not run"
            )
        ours["note"] = f"severity {result.severity}, tuning split {100 * result.tune_fraction:.0f} %"
        lines.append(ours)
        for row in (row for row in found if corruption_name(row.corruption or "") == name):
            line = {"corruption": name, "row": row.label, "network": row.network}
            for column, header in CORRUPTION_COLUMNS.items():
                line[header] = row.value(column).text()
            line["note"] = f"{network_note(row, model)}; tuning split {row.tuning_split_percent} %"
            lines.append(line)
    notes = []
    if result.severity != CORRUPTION_SEVERITY:
        notes.append(
            f"the paper's tables are at severity {CORRUPTION_SEVERITY}; this study ran severity {result.severity}"
        )
    jpeg = images_note(run)
    if jpeg:
        notes.append(jpeg)
    return pd.DataFrame(lines), notes


def shown_dataset(dataset: str) -> str:
    """A run's data set name without its split (``cifar10-test`` -> ``cifar10``)."""
    for suffix in ("-test", "-train"):
        dataset = (dataset or "").removesuffix(suffix)
    return dataset


# ------------------------------------------------------------------------------------------------- the ladder


def ladder_heading() -> str:
    """The line above the paper's Table 1 rows beside the ladder (the paper's protocol study)."""
    return heading(
        "table1",
        "Doctor and Rel-U FPR95 in %, the paper's units, and Rel-U − Doctor in percentage points, the difference "
        "of the paper's two means (no interval: the paper prints none, and a five-best mean has none that is valid); "
        "the ladder above is in fractions, ×100 for points. The run's training objective is not recorded, so "
        "every objective of the data set is shown",
    )


def ladder_reference(run) -> tuple[object, list[str]]:
    """The paper's Table 1 rows of the run's data set (every objective and network, the run's network first):
    Doctor and Rel-U FPR95 in % and Rel-U − Doctor in points, each labelled with its table and a network note;
    ``(frame, notes)``, the frame empty and one note saying so where the paper has no row of the data set."""
    import pandas as pd

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    found = objective_rows(dataset, list(OBJECTIVES.values()), model=model)
    if not found:
        return pd.DataFrame(), [no_table("table1", dataset)]
    lines = []
    for row in found:
        doctor, relu = row.value("doctor_fpr95"), row.value("relu_fpr95")
        lines.append(
            {
                "row": row.label,
                "network": row.network,
                "objective": row.objective,
                "accuracy %": row.accuracy_text(),
                "Doctor FPR95 %": doctor.text(),
                "Rel-U FPR95 %": relu.text(),
                "Rel-U − Doctor (points)": f"{relu.mean - doctor.mean:+.1f}",
                "note": network_note(row, model),
            }
        )
    jpeg = images_note(run)
    return pd.DataFrame(lines), [jpeg] if jpeg else []


# -------------------------------------------------------------- one run's data set: the report, CLI evaluate

#: The title of the paper's rows of a run's data set (the HTML report's section, the CLI ``evaluate`` block).
REFERENCE_TITLE = "The paper's numbers for this data set"
#: Table 1's FPR95 columns and their headers, in the paper's units (percent).
TABLE1_COLUMNS = {f"{key}_fpr95": f"{name} FPR95 %" for key, name in TABLE1_DETECTORS.items()}


def table1_heading() -> str:
    """The line above Table 1's rows of a run's data set (the report, ``evaluate``): label, units, selection."""
    return heading(
        "table1",
        "accuracy and FPR95 of MSP, ODIN, Doctor and Rel-U in %, the paper's units, mean (std) as printed (our "
        "numbers are fractions: × 100 to compare). The run's training objective is not recorded, so every objective "
        "of the data set is shown",
    )


def network_line(run) -> str:
    """One line on our network beside the paper's (the report, ``evaluate``): ours, its accuracy on the run's
    samples, and whether the paper has a row of the same architecture."""
    model = getattr(run, "model_name", "") or None
    accuracy = our_accuracy(run)
    ours = f"Ours: {model or 'a logits file (network not recorded)'}" + (
        f", {accuracy} % accuracy on the run's {len(run.labels):,} samples" if accuracy else ""
    )
    same = [row.network for row in objective_rows(getattr(run, "dataset_name", ""), model=model) if row.model == model]
    if model and same:
        return f"{ours}: the paper's {same[0]} architecture, trained and evaluated by us, not the paper's weights."
    networks = ", ".join(dict.fromkeys(row.network for row in rows("table1")))
    return f"{ours}: our network differs from the paper's ({networks}), so its rows are a reference, not a replication."


def table1_reference(run) -> tuple[object, list[str]]:
    """Table 1's rows of the run's data set (every objective and both of the paper's networks, the run's first):
    the paper's accuracy and the FPR95 of MSP, ODIN, Doctor and Rel-U in % as printed, each row labelled with its
    table and a network note. Returns ``(frame, notes)``: the notes say how our network compares
    (:func:`network_line`) and, where so, that our test images are the JPEG folder; where the paper has no row of
    the data set the frame is empty and the one note says so."""
    import pandas as pd

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    found = objective_rows(dataset, list(OBJECTIVES.values()), model=model)
    if not found:
        return pd.DataFrame(), [no_table("table1", dataset)]
    lines = []
    for row in found:
        line = {"row": row.label, "network": row.network, "objective": row.objective, "accuracy %": row.accuracy_text()}
        line.update({header: row.value(column).text() for column, header in TABLE1_COLUMNS.items()})
        line["note"] = network_note(row, model)
        lines.append(line)
    jpeg = images_note(run)
    return pd.DataFrame(lines), [network_line(run), *([jpeg] if jpeg else [])]


def table1_reference_dict(run) -> dict[str, object]:
    """:func:`table1_reference` for a JSON output: title, heading, rows (``PaperRow.to_dict`` with the network
    note), ``note`` (the one line where the paper has no row of the data set, else None), ``network_line`` (None
    where there are no rows) and ``images_note`` (None where our test images are not the JPEG folder)."""
    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    found = objective_rows(dataset, list(OBJECTIVES.values()), model=model)
    return {
        "title": REFERENCE_TITLE,
        "heading": table1_heading(),
        "rows": [{**row.to_dict(), "network_note": network_note(row, model)} for row in found],
        "note": None if found else no_table("table1", dataset),
        "network_line": network_line(run) if found else None,
        "images_note": images_note(run) if found else None,
    }


def table1_text(run) -> str:
    """:func:`table1_reference` as a text block: title, heading, the rows, the notes (the CLI ``evaluate``)."""
    frame, notes = table1_reference(run)
    lines = [REFERENCE_TITLE]
    if not frame.empty:
        lines += [table1_heading(), frame.to_string(index=False)]
    return "\n".join(lines + [f"Note: {note}" for note in notes])


# ---------------------------------------------------------------------------- the earlier API, kept working


def matches(dataset: str, model: str) -> bool:
    """Whether the paper's Table 1 has rows of ``dataset`` with ``model``'s network."""
    return any(row.model == model for row in objective_rows(dataset))


def rows_for(dataset: str, model: str, objectives: Sequence[str]) -> list[PaperRow]:
    """Table 1's rows of ``dataset`` for ``objectives``, every network (``model``'s first)."""
    return objective_rows(dataset, objectives, model=model)


def not_recorded(dataset: str, model: str, objectives: Sequence[str]) -> str | None:
    """The line to show under an objectives table where the paper's Table 1 has nothing for some of
    ``objectives`` (None: it has rows for every one); :func:`no_table` when it has no row of ``dataset`` at all."""
    if not objective_rows(dataset):
        return no_table("table1", dataset)
    missing = [o for o in objectives if not objective_rows(dataset, [o])]
    if not missing:
        return None
    return f"The paper's Table 1 has no row for {', '.join(missing)} (its objectives: {', '.join(OBJECTIVES)})."
