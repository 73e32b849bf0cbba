"""The Rel-U paper's Table 1 (Dadalto et al., ICLR 2024), where our data set and network match one of its rows:
its accuracy and FPR95 of MSP, ODIN, Doctor and Rel-U, shown as a labelled reference row under ours.

**Only one partial row is recorded**, and not from the paper itself: issue 35 quotes Table 1 for ResNet-34
trained with MixUp on CIFAR-10 (FPR95 Rel-U 19.0, Doctor 26.8; no accuracy, MSP or ODIN), and that quotation is
recorded with its source saying so. Every other number must be copied verbatim from the paper, each with where
it came from. This project's searches of the stored copies of the paper (arXiv 2306.01710: its HTML and ar5iv
renderings, the OpenReview page) and of the authors' repository (github.com/edadaltocg/relative-uncertainty:
README, ``src/utils/tables.py``, which prints the table from a results file that is not published) reached the
paper's first page, its reviews and its code, never Table 1 itself, so none is shown rather than a number from
memory. To add one, append a :class:`PaperRow` to :data:`TABLE1` with its ``source`` (the table, its row and the
document's version); every page, the CLI and the JSON then show it, and :func:`not_recorded` names the
objectives still without one. The paper's tables were selected on the evaluation split (the authors'
``tables.py`` keeps, per model and method, the five runs of lowest FPR95), so a paper row is compared with our
oracle row first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: The label of a reference row wherever it appears.
LABEL = "paper (Table 1; selected on the evaluation split)"
#: The detectors of the table, in ``studies.objectives.TABLE_KEYS`` order, as the paper names them.
DETECTOR_NAMES = ("MSP", "ODIN", "Doctor", "Rel-U")
#: The (data set, network) pairs of the paper's Table 1 that this project can train: CIFAR-10 with ResNet-34 or
#: DenseNet-121 (``resnet34_cifar``, ``densenet121_cifar``, the authors' architectures).
MATCHING = {("cifar10", "resnet34_cifar"), ("cifar10", "densenet121_cifar")}
#: Said where a matching table has no recorded paper row.
NOT_RECORDED = (
    "The paper's Table 1 numbers are not recorded in this project (not found verbatim in the sources it could "
    "read); no reference row is shown."
)


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 1: ``accuracy`` and per detector key (``msp``, ``odin``, ``doctor``,
    ``relu``) FPR95, both in % as the paper prints them (None: not given), and ``source``: where exactly they
    were read."""

    dataset: str
    model: str
    objective: str
    accuracy: float | None
    fpr95: dict[str, float] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "label": LABEL,
            "dataset": self.dataset,
            "model": self.model,
            "objective": self.objective,
            "accuracy_percent": self.accuracy,
            "fpr95_percent": dict(self.fpr95),
            "source": self.source,
        }


#: The recorded rows (see the module's docstring: one partial row, quoted by issue 35).
TABLE1: tuple[PaperRow, ...] = (
    PaperRow(
        "cifar10",
        "resnet34_cifar",
        "mixup",
        None,
        {"doctor": 26.8, "relu": 19.0},
        'quoted in issue 35 ("ResNet-34 with MixUp: Rel-U 19.0 vs Doctor 26.8 FPR95"); not read in the paper itself',
    ),
)


def matches(dataset: str, model: str) -> bool:
    """Whether ``dataset`` and ``model`` are one of the paper's Table 1 pairs (:data:`MATCHING`)."""
    return (dataset, model) in MATCHING


def rows_for(dataset: str, model: str, objectives: Sequence[str]) -> list[PaperRow]:
    """The recorded rows for ``dataset``, ``model`` and ``objectives``, in the order of ``objectives``."""
    if not matches(dataset, model):
        return []
    by_objective = {row.objective: row for row in TABLE1 if (row.dataset, row.model) == (dataset, model)}
    return [by_objective[o] for o in objectives if o in by_objective]


def not_recorded(dataset: str, model: str, objectives: Sequence[str]) -> str | None:
    """The sentence to show under a table of one of the paper's pairs where some of ``objectives`` have no
    recorded row (:data:`NOT_RECORDED` when none has); None when the pair is not the paper's or every objective has
    its row."""
    if not matches(dataset, model):
        return None
    recorded = {row.objective for row in rows_for(dataset, model, objectives)}
    missing = [o for o in objectives if o not in recorded]
    if not missing:
        return None
    if not recorded:
        return NOT_RECORDED
    return (
        f"The paper's Table 1 numbers for {', '.join(missing)} are not recorded in this project (not found verbatim "
        "in the sources it could read)."
    )
