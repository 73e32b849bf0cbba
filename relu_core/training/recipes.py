"""Named training recipes (optimiser, learning-rate schedule, weight decay, batch size, augmentation, epoch cap,
early-stopping patience) and the schedules' shapes, written once so the loop, the early-stopping rule and the tests
read the same numbers.

Presets (:data:`PRESETS`, selectable by name in ``train --recipe``, ``study objectives --recipe`` and on the
Training objectives page):

- ``plain``: the project's recipe before presets existed, kept bit for bit (the default run, the Fashion-MNIST
  objectives table): AdamW (weight decay 5e-4), torch's one-cycle schedule peaking at 3e-3 over the epoch cap,
  no augmentation.
- ``fast``: a recipe that converges in few epochs (Page, "How to train your ResNet", 2018, the ideas airbench
  builds on): SGD with Nesterov momentum 0.9, batch 512, a linear warm-up to 0.4 over the first fifth of the
  cap then a linear decay to 0 at the cap, weight decay 5e-4, random crop + flip; meant for ``resnet9`` on a GPU
  and ``resnet9_small`` on a CPU. No label smoothing, on purpose: it is known to degrade selective
  classification (Xia et al., ICLR 2025; Zhu et al., 2022) and would turn every objective of the table into
  that objective plus label smoothing.
- ``paper``: the Rel-U authors' training scripts, as published (``github.com/edadaltocg/relative-uncertainty``,
  ``src/MixUp/train.py`` and ``src/RegMixup/train.py``): SGD, learning rate 0.1, momentum 0.9, batch 128,
  random crop (pad 4) + horizontal flip, the learning rate divided by 10 twice (MixUp: at epochs 100 and 150 of
  200, weight decay 1e-4; RegMixup: at 100 and 250 of 350, weight decay 5e-4); the OpenMix authors' script
  (``github.com/Impression2805/OpenMix``, ``main_cvpr.py``) uses SGD 0.1, momentum 0.9, weight decay 5e-4, ÷10 at
  100 and 150 of 200. This preset takes the common part: SGD 0.1, momentum 0.9, weight decay 5e-4, batch 128,
  ÷10 at half and at three quarters of the cap, 200 epochs. The paper's appendix text itself was not found
  verbatim by this project; these settings come from the published code.

**Early stopping never fires before the schedule's final phase** (:meth:`Schedule.final_phase_start`): for
schedules that anneal continuously (one-cycle, linear), once the learning rate has fallen to
:data:`FINAL_PHASE_FRACTION` of its peak after the peak; for step schedules, after the last drop. Before that
the held-out accuracy is measured and recorded but neither counts towards patience nor chooses the returned
weights: at a high learning rate it plateaus and jumps when the rate drops, so a patience rule fired there
returns an un-annealed model (``train --epochs 24`` stopped at epoch 6 of a one-cycle schedule, still warming up,
with 89.8 % against 92.9 % at ``--epochs 12``). The returned weights are those of the best held-out epoch of the
final phase, which always contains the cap's last epoch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from relu_core import validation
from relu_core.errors import InputError

#: A continuously annealed schedule enters its final phase when the learning rate is at most this share of its peak.
FINAL_PHASE_FRACTION = 0.1
#: torch's ``OneCycleLR`` defaults, which the ``plain`` recipe uses.
ONE_CYCLE_DIV = 25.0
ONE_CYCLE_FINAL_DIV = 1e4


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule over ``total`` optimiser steps, as a multiplier of the peak learning rate.

    ``kind``: ``one-cycle`` (torch's ``OneCycleLR`` with its defaults: cosine from peak/25 to the peak over the
    first ``warmup`` of the steps, then cosine down to peak/(25·10⁴)); ``linear`` (0 at step 0, linearly to the
    peak at ``warmup`` of the steps, then linearly to 0 at the last step); ``step`` (the peak, multiplied by
    ``gamma`` at each of ``milestones``, fractions of the steps)."""

    kind: str
    warmup: float = 0.0
    milestones: tuple[float, ...] = ()
    gamma: float = 0.1

    def __post_init__(self) -> None:
        if self.kind not in ("one-cycle", "linear", "step"):
            raise ValueError(f"unknown schedule kind {self.kind!r}")

    def multiplier_at(self, steps, total: int) -> np.ndarray:
        """The learning rate of the optimiser steps ``steps`` (an index or an array of them; index s: the rate the
        (s+1)-th step uses) in a schedule of ``total`` steps, divided by the peak: the formula evaluated at those
        steps only, so that a schedule of any length allocates nothing per step (``train --epochs 10**9``)."""
        steps = np.asarray(steps, dtype=np.float64)  # one element as an array: the table's own arithmetic
        if self.kind == "one-cycle":  # torch.optim.lr_scheduler.OneCycleLR, anneal_strategy="cos", two phases
            initial = 1.0 / ONE_CYCLE_DIV
            final = initial / ONE_CYCLE_FINAL_DIV
            end_up = float(self.warmup * total) - 1
            end_down = total - 1
            up = np.clip(steps / max(end_up, 1e-12), 0.0, 1.0)
            down = np.clip((steps - end_up) / max(end_down - end_up, 1e-12), 0.0, 1.0)
            rising = 1.0 + (initial - 1.0) / 2.0 * (np.cos(math.pi * up) + 1.0)
            falling = final + (1.0 - final) / 2.0 * (np.cos(math.pi * down) + 1.0)
            return np.where(steps <= end_up, rising, falling)
        if self.kind == "linear":
            peak = max(self.warmup * total, 1e-12)
            last = max(total - 1, 1)
            return np.where(steps <= peak, steps / peak, np.clip((last - steps) / max(last - peak, 1e-12), 0.0, 1.0))
        drops = np.zeros(steps.shape)
        for milestone in self.milestones:
            drops += steps >= round(milestone * total)
        return self.gamma**drops

    def multipliers(self, total: int) -> np.ndarray:
        """The learning rate of each of the ``total`` steps (index s: the rate the (s+1)-th optimiser step uses),
        divided by the peak: :meth:`multiplier_at` of every step, a table of ``total`` floats (the tests'; the
        training loop never builds it)."""
        return self.multiplier_at(np.arange(total), total)

    def lr_lambda(self, total: int):
        """A ``LambdaLR`` function of the step count (the ``linear`` and ``step`` kinds): the formula at that step
        (:meth:`multiplier_at`), no table."""
        return lambda step: float(self.multiplier_at([min(step, total - 1)], total)[0])

    def _peak_step(self, total: int) -> int:
        """The first step of the largest rate (``argmax`` of :meth:`multipliers`) without the table: the rate rises
        up to the warm-up's end and falls after it, so the peak is the step at or just after that end (or 0)."""
        end = float(self.warmup * total) - (1 if self.kind == "one-cycle" else 0)
        base = math.floor(end) if math.isfinite(end) and end >= 0 else 0
        candidates = sorted({min(max(k, 0), total - 1) for k in (0, base, base + 1)})
        rates = self.multiplier_at(np.array(candidates), total)
        return int(candidates[int(np.argmax(rates))])

    def final_phase_start(self, total: int) -> int:
        """The first step of the schedule's final phase, where early stopping may act: for ``step``, the last
        drop; otherwise the first step after the peak whose rate is at most :data:`FINAL_PHASE_FRACTION` of the
        peak (the last step at the latest). Found by bisection on the falling part of the formula (it only falls
        after the peak), never from a table of every step."""
        if total <= 1:
            return 0
        if self.kind == "step":
            return min(max((round(m * total) for m in self.milestones), default=0), total - 1)
        low, high = self._peak_step(total), total - 1
        if float(self.multiplier_at([high], total)[0]) > FINAL_PHASE_FRACTION:
            return total - 1
        while low < high:  # the first step in [peak, total - 1] at most the fraction
            middle = (low + high) // 2
            if float(self.multiplier_at([middle], total)[0]) <= FINAL_PHASE_FRACTION:
                high = middle
            else:
                low = middle + 1
        return low

    def first_stopping_epoch(self, epochs: int, steps_per_epoch: int) -> int:
        """The first epoch (1-based) that ends inside the final phase: where held-out accuracy starts to count."""
        start = self.final_phase_start(epochs * steps_per_epoch)
        # epoch e ends after e·steps_per_epoch steps; it counts once its last step (index e·spe − 1) is in the phase
        return min(epochs, max(1, -(-(start + 1) // steps_per_epoch)))

    def describe(self) -> str:
        if self.kind == "one-cycle":
            return f"one-cycle (cosine up over the first {self.warmup:.0%}, then down; torch's OneCycleLR)"
        if self.kind == "linear":
            return f"linear warm-up over the first {self.warmup:.0%}, then linear decay to 0 at the cap"
        return f"×{self.gamma:g} at " + ", ".join(f"{m:.0%}" for m in self.milestones) + " of the cap"


@dataclass(frozen=True)
class TrainingRecipe:
    """How a model is trained: the optimiser (``adamw`` or ``sgd``) with its peak learning rate, momentum
    (SGD; Nesterov or not) and weight decay, the schedule, the batch size (None: the architecture's,
    ``training.RECIPES`` / ``DEFAULT_BATCH_SIZE``), whether the data set's standard augmentation is applied
    (:mod:`relu_core.training.augment`), the default epoch cap, the early-stopping patience (epochs of the final
    phase without a better held-out accuracy) and where the settings come from."""

    name: str
    description: str
    optimizer: str
    lr: float
    weight_decay: float
    schedule: Schedule
    epochs: int
    patience: int
    augment: bool
    batch_size: int | None = None
    momentum: float = 0.9
    nesterov: bool = False
    source: str = field(default="", compare=False)

    def settings(self) -> dict[str, object]:
        """Every setting that changes the weights (cache keys and the stored metadata)."""
        out = asdict(self)
        out.pop("description")
        out.pop("source")
        out["schedule"] = asdict(self.schedule)
        out["schedule"]["milestones"] = list(self.schedule.milestones)
        return out

    def with_lr(self, lr: float) -> TrainingRecipe:
        return TrainingRecipe(**{**self.__dict__, "lr": float(lr)})


PLAIN = TrainingRecipe(
    "plain",
    "AdamW 3e-3 one-cycle, no augmentation (the default run's recipe)",
    optimizer="adamw",
    lr=3e-3,
    weight_decay=5e-4,
    schedule=Schedule("one-cycle", warmup=0.3),
    epochs=5,
    patience=2,
    augment=False,
    source="this project's default-run recipe (bench/bench_training.py)",
)
FAST = TrainingRecipe(
    "fast",
    "SGD Nesterov 0.4, batch 512, linear warm-up then decay to 0, crop + flip (resnet9: GPU, resnet9_small: CPU)",
    optimizer="sgd",
    lr=0.4,
    weight_decay=5e-4,
    schedule=Schedule("linear", warmup=0.2),
    epochs=24,
    patience=3,
    augment=True,
    batch_size=512,
    momentum=0.9,
    nesterov=True,
    source="Page, 'How to train your ResNet' (myrtle.ai, 2018): ResNet-9, 24 epochs, batch 512, linear 0 → 0.4 → 0",
)
PAPER = TrainingRecipe(
    "paper",
    "SGD 0.1, momentum 0.9, weight decay 5e-4, batch 128, ÷10 at 50 % and 75 % of 200 epochs, crop + flip",
    optimizer="sgd",
    lr=0.1,
    weight_decay=5e-4,
    schedule=Schedule("step", milestones=(0.5, 0.75), gamma=0.1),
    epochs=200,
    patience=10,
    augment=True,
    batch_size=128,
    momentum=0.9,
    nesterov=False,
    source=(
        "the Rel-U authors' scripts (github.com/edadaltocg/relative-uncertainty src/MixUp/train.py, "
        "src/RegMixup/train.py) and OpenMix's (github.com/Impression2805/OpenMix main_cvpr.py)"
    ),
)
PRESETS: dict[str, TrainingRecipe] = {recipe.name: recipe for recipe in (PLAIN, FAST, PAPER)}
#: The recipe a data set trains with unless one is named: CIFAR-like sets converge with the fast recipe; the 28×28
#: and 8×8 sets keep the plain one (their table's 10-minute budget on two CPU cores was measured with it).
DATASET_RECIPES = {"cifar10": "fast", "cifar100": "fast", "svhn": "fast"}


#: A network's own epoch cap under a recipe where it differs from the recipe's: ``resnet9_small`` is the fast recipe
#: sized for two CPU cores: 14 epochs of CIFAR-10's 45,000 training images took 12 min 8 s from the command to the
#: logits on two quiet cores (52 s an epoch; 85.8 % on the JPEG test folder), inside the 15-minute budget with room
#: for a slower CPU (README, "CIFAR-10 trained here").
EPOCHS_BY_MODEL = {("fast", "resnet9_small"): 14}


#: The largest epoch cap the studio takes: the schedule spans the cap (its warm-up and drops are shares of it), so a
#: cap far beyond any training that can run would never anneal, and its step count must stay an exact integer.
#: The paper's recipe runs 200 epochs; 10,000 epochs of CIFAR-10 on one H200 with the fast network take about 2 h.
MAX_EPOCHS = 10_000


def check_epochs(value: object, what: str = "the epoch cap") -> int:
    """``value`` as an epoch cap from 1 to :data:`MAX_EPOCHS`; else InputError naming ``what`` and the limit."""
    epochs = validation.integer(value, what, minimum=1)
    if epochs > MAX_EPOCHS:
        raise InputError(
            f"{what} must be at most {MAX_EPOCHS:,} epochs (relu_core.training.recipes.MAX_EPOCHS), got {epochs:,}: "
            "the learning-rate schedule spans the cap, so a longer one would not anneal within any training that runs"
        )
    return epochs


def default_epochs(recipe: str | TrainingRecipe, model: str) -> int:
    """The epoch cap of ``model`` under ``recipe`` unless one is given (:data:`EPOCHS_BY_MODEL`, else the
    recipe's)."""
    chosen = get(recipe)
    return EPOCHS_BY_MODEL.get((chosen.name, model), chosen.epochs)


def get(name: str | TrainingRecipe) -> TrainingRecipe:
    """The preset named ``name`` (a recipe is returned as it is); InputError naming the choices otherwise."""
    if isinstance(name, TrainingRecipe):
        return name
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown recipe {name!r}; choose one of: {', '.join(PRESETS)}") from None


def default_for(dataset: str) -> str:
    """The recipe ``dataset`` trains with unless told otherwise (:data:`DATASET_RECIPES`, else ``plain``)."""
    return DATASET_RECIPES.get(dataset, PLAIN.name)
