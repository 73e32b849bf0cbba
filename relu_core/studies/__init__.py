"""The paper's studies on a run: ablations, tuning-split size, label-domain mismatch, calibration.

Each study is a module with ``NAME``, ``TITLE`` and ``run_study(run, ..., progress=None, cancel=None,
use_cache=True) -> StudyResult`` (see :mod:`relu_core.studies.base`). :data:`STUDIES` is the registry the
command line (``python -m relu_core study NAME``) and the Studies page share. No Streamlit here. Importing
this package imports no study module (and so not torch): the CLI parser stays fast; a study's module is
imported when it runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from relu_core.errors import InputError
from relu_core.registry import by_name


@dataclass(frozen=True)
class Study:
    """A registered study: its name, module, a one-line description and whether it needs the run's model."""

    name: str
    module_name: str
    description: str
    needs_model: bool = False

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    @property
    def title(self) -> str:
        return self.module.TITLE

    def run(self, run, **options):
        """``module.run_study(run, **options)``: a :class:`relu_core.studies.base.StudyResult`."""
        return self.module.run_study(run, **options)


STUDIES: dict[str, Study] = by_name(
    Study(
        "ablation",
        "relu_core.studies.ablation",
        "FPR95 and AUROC against λ (0..1), T (0.1..1000, log) and ε (the paper's grid; needs a model), one at "
        "a time, the others at T = 1, λ = 0.5, ε = 0",
    ),
    Study(
        "tuning-split",
        "relu_core.studies.tuning_split",
        "Rel-U and Doctor against the share of samples used for tuning (T = 1, ε = 0, λ = 0.5)",
    ),
    Study(
        "mismatch",
        "relu_core.studies.mismatch",
        "The run's model on its own test samples plus as many samples of another data set; D* fitted on a "
        "tuning part of the mixture",
        needs_model=True,
    ),
    Study(
        "calibration",
        "relu_core.studies.calibration",
        "ECE at T = 1 and after temperature scaling (cross-validated NLL on the tuning split), Doctor and "
        "Rel-U before and after",
    ),
    Study(
        "paper-protocol",
        "relu_core.studies.ladder",
        "Rel-U − Doctor rung by rung from the studio's honest protocol to the paper's: errors positive, the "
        "authors' T grid, oracle selection, the five best rows, their split; one change a rung",
    ),
)


def get(name: str) -> Study:
    """The registered study ``name``; :class:`InputError` naming the choices otherwise."""
    if name not in STUDIES:
        raise InputError(f"unknown study {name!r}: choose from {', '.join(STUDIES)}")
    return STUDIES[name]


__all__ = ["STUDIES", "Study", "get"]
