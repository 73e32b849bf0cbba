"""The one training loop: any objective, a held-out part of the training set for early stopping, a checkpoint per
epoch to resume from, progress and cancel, one process or several under ``torchrun`` (DistributedDataParallel).

Optimiser, learning-rate schedule, weight decay, batch size and augmentation come from a named recipe
(:mod:`relu_core.training.recipes`: ``plain``, the default run's AdamW one-cycle without augmentation;
``fast``; ``paper``). Mini-batches are sliced from one in-memory uint8 tensor on the training device in an order
drawn from a ``torch.Generator`` seeded with ``seed``, random crops and flips are drawn per epoch and applied as
one gather per batch (:mod:`relu_core.training.augment`); the mixing draws (λ, partners, outlier images) of epoch
``e`` come from a numpy generator seeded with ``(seed, e)``, so a resumed run draws what an uninterrupted one
would have drawn.

**Early stopping.** With ``holdout_fraction > 0`` a seeded random part of the *training* images is kept out of
the gradient steps; after each epoch the model's accuracy on it is measured. Only the epochs of the schedule's
final phase count (:meth:`relu_core.training.recipes.Schedule.first_stopping_epoch`: never during a warm-up or
at a high learning rate): training stops once the held-out accuracy has not improved (strictly) for
``patience`` of them, or at the epoch cap, and the weights of the best final-phase epoch are returned. The loop
only ever sees the images it is given: the test split never reaches it.

**Checkpoints.** After every epoch the model, the optimiser, the schedule, the random generators and the
history are written atomically to ``checkpoint`` (rank 0 only) behind their SHA-256
(:mod:`relu_core.training.resume`). A later call with the same ``checkpoint`` and ``checkpoint_key`` continues
after the last finished epoch, so a cancelled or killed run resumes instead of restarting and ends with the
weights an uninterrupted run would have (bit-identical on the same machine and thread count). A checkpoint of
another key is ignored; a damaged one (or a folder on its path) is moved aside; training then restarts.

**Several processes.** Under ``torchrun`` (``WORLD_SIZE`` > 1) the model is wrapped in
``DistributedDataParallel`` (gloo on the CPU, NCCL on CUDA): every rank draws the same global batch and mixing,
trains on its contiguous share of it (``distributed.shard_bounds``), and the gradients are averaged, so K ranks
take the steps one process would take with the same global batch. The held-out logits are sharded and
gathered (``distributed.sharded_logits``), so every rank takes the same early-stopping decision.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from relu_core import distributed, threads
from relu_core.errors import Cancelled, InputError
from relu_core.models.normalization import Normalization
from relu_core.progress import Cancel, Progress
from relu_core.training import augment, recipes, resume
from relu_core.training.objectives import Objective

DEFAULT_LR = 3e-3
WEIGHT_DECAY = 5e-4
#: Held-out images scored per forward pass.
EVAL_BATCH = 1000


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of the training curve: mean training loss, held-out accuracy (None without a held-out part)
    and wall-clock seconds."""

    epoch: int
    loss: float
    heldout_accuracy: float | None
    seconds: float


@dataclass(frozen=True, eq=False)
class Trained:
    """A trained model (eval mode, CPU) with its training curve.

    ``best_epoch``: the epoch whose weights are returned (the last one without a held-out part);
    ``stopped_early``: training stopped before the epoch cap; ``holdout_index``: the training images held out;
    ``resumed_from``: epochs read back from a checkpoint (0 when training started afresh)."""

    model: nn.Module
    history: tuple[EpochRecord, ...]
    best_epoch: int
    stopped_early: bool
    holdout_index: np.ndarray
    resumed_from: int

    @property
    def final_accuracy(self) -> float | None:
        """Held-out accuracy of the returned weights (None without a held-out part)."""
        return self.history[self.best_epoch - 1].heldout_accuracy if self.history else None


class EarlyStopping:
    """Stop once the held-out accuracy has not improved (strictly) for ``patience`` epochs (None: never), counting
    only the epochs from ``counts_from`` on (1-based; :meth:`recipes.Schedule.first_stopping_epoch`, the schedule's
    final phase): an earlier epoch's accuracy is recorded by the loop but neither counts towards patience nor can
    be the best epoch, whose weights are returned."""

    def __init__(self, patience: int | None, counts_from: int = 1) -> None:
        self.patience = patience
        self.counts_from = counts_from
        self.best = -math.inf
        self.best_epoch = 0
        self.stale = 0

    def update(self, epoch: int, accuracy: float) -> bool:
        """Record ``accuracy`` at ``epoch``; True when it is a new best (never before ``counts_from``)."""
        if epoch < self.counts_from:
            return False
        if accuracy > self.best:
            self.best, self.best_epoch, self.stale = accuracy, epoch, 0
            return True
        self.stale += 1
        return False

    @property
    def stop(self) -> bool:
        return self.patience is not None and self.stale >= self.patience

    def state(self) -> list[float]:
        return [self.best, float(self.best_epoch), float(self.stale)]

    def restore(self, state: list[float]) -> None:
        self.best, self.best_epoch, self.stale = float(state[0]), int(state[1]), int(state[2])


def holdout_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (training, held-out) indices of ``n`` images: a seeded random ``fraction`` is held out."""
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"the held-out fraction must lie in [0, 1), got {fraction!r}")
    held = round(n * fraction)
    if fraction > 0 and not 1 <= held <= n - 2:
        raise InputError(f"a held-out fraction of {fraction:g} of {n} images leaves no held-out or training part")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[held:]), np.sort(order[:held])


@contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[Callable[[], None]]:
    """Seed torch; on the CPU also use deterministic kernels and the model-work thread policy
    (:func:`relu_core.threads.model_work`: the idle cores, shared between the ranks of a ``torchrun`` launch);
    restore all of it afterwards. Yields the policy's ``recheck()``, to call between steps.

    The global RNG is forked, so training neither depends on nor disturbs the caller's random state. On CUDA
    training is seeded but not bit-deterministic (cuDNN's fastest kernels are kept); on the CPU it is
    deterministic for one thread count (another count changes the float rounding)."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), contextlib.ExitStack() as stack:
        torch.manual_seed(seed)
        recheck: Callable[[], None] = lambda: None  # noqa: E731 - the GPU's threads are not ours to pick
        if device.type == "cpu":
            recheck = stack.enter_context(threads.model_work(max(1, cores // distributed.world_size())))
            torch.use_deterministic_algorithms(True)
        try:
            yield recheck
        finally:
            torch.use_deterministic_algorithms(deterministic)


def _heldout_accuracy(
    model: nn.Module, pixels: torch.Tensor, labels: torch.Tensor, normalise, num_classes: int, device: torch.device
) -> float:
    """Accuracy of ``model`` on held-out images, over the first ``num_classes`` logits (OpenMix's extra class is
    no answer), sharded over the ranks of a ``torchrun`` launch."""

    def compute(start: int, stop: int, _device: torch.device) -> np.ndarray:
        rows = []
        with torch.inference_mode():
            for lo in range(start, stop, EVAL_BATCH):
                rows.append(model(normalise(pixels[lo : min(lo + EVAL_BATCH, stop)]))[:, :num_classes].float().cpu())
        return torch.cat(rows).numpy() if rows else np.zeros((0, num_classes), np.float32)

    model.eval()
    try:
        logits = distributed.sharded_logits(compute, len(labels), device)
    finally:
        model.train()
    return float(np.mean(logits.argmax(1) == labels.cpu().numpy()))


def _load_checkpoint(path: Path | None, key: str) -> dict | None:
    """The checkpoint at ``path`` when its SHA-256 matches and it was written for ``key``, else None; a damaged
    one is set aside (:func:`relu_core.training.resume.load`)."""
    return resume.load(path, key)


def _save_checkpoint(path: Path, state: dict) -> None:
    """``state`` at ``path`` behind its SHA-256; skipped with a warning on a full disk (:mod:`.resume`)."""
    resume.save(path, state)


def _optimizer(model: nn.Module, recipe: recipes.TrainingRecipe) -> torch.optim.Optimizer:
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.SGD(
        model.parameters(),
        lr=recipe.lr,
        momentum=recipe.momentum,
        weight_decay=recipe.weight_decay,
        nesterov=recipe.nesterov,
    )


def _scheduler(optimizer: torch.optim.Optimizer, recipe: recipes.TrainingRecipe, total: int):
    """torch's ``OneCycleLR`` for a one-cycle schedule (the ``plain`` recipe, bit for bit as before presets),
    else a ``LambdaLR`` of :meth:`recipes.Schedule.multipliers` (the same formula for every kind, tested against
    ``OneCycleLR``)."""
    if recipe.schedule.kind == "one-cycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=recipe.lr, total_steps=total, pct_start=recipe.schedule.warmup
        )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, recipe.schedule.lr_lambda(total))


class Diverged(InputError):
    """The training loss became NaN or infinite: the model is never stored."""


#: On CUDA the loss is read back (a synchronisation) every this many steps for the progress message, not every step.
CUDA_REPORT_EVERY = 20
#: ``RELU_STUDIO_TRAIN_COMPILE=1`` compiles the training step's model with ``torch.compile`` on CUDA (off by
#: default: ``bench/bench_training_gpu.py`` measures whether it pays for a given network; never on the CPU).
COMPILE_ENV = "RELU_STUDIO_TRAIN_COMPILE"
#: The numpy stream of the augmentation draws of epoch e is ``(seed, e, AUGMENT_STREAM)``; the mixing draws keep
#: ``(seed, e)``, so turning augmentation on or off leaves the mixing draws alone.
AUGMENT_STREAM = 1


def fit(
    build: Callable[[], nn.Module],
    normalization: Normalization,
    images: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    epochs: int,
    seed: int,
    batch_size: int,
    objective: Objective | None = None,
    outliers: np.ndarray | None = None,
    lr: float = DEFAULT_LR,
    recipe: recipes.TrainingRecipe | None = None,
    augmentation: augment.Augmentation | None = None,
    holdout_fraction: float = 0.0,
    patience: int | None = None,
    checkpoint: Path | None = None,
    checkpoint_key: str = "",
    device: str | torch.device = "cpu",
    compile_model: bool | None = None,
    name: str = "model",
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> Trained:
    """Train the model ``build()`` returns (called once, seeded) on uint8 NHWC ``images`` with int64 ``labels``.

    ``recipe`` (default: ``plain`` at learning rate ``lr``) gives the optimiser, its schedule over the ``epochs``
    cap and the weight decay; ``batch_size`` is the global batch. ``augmentation`` (default none) is applied to
    every training batch as batched tensor operations (:mod:`relu_core.training.augment`; draws seeded per epoch).
    ``objective`` (default cross-entropy) gives the loss; OpenMix mixes with ``outliers`` (uint8 NHWC, the
    images' size; not augmented). Inputs are normalised with ``normalization`` (the engine's arithmetic). On CUDA
    the forward passes run under bf16 autocast, channels-last; ``compile_model`` (None: ``$RELU_STUDIO_TRAIN_COMPILE``
    is ``1``) compiles the model there. Early stopping (``patience``, None: never) counts only the epochs of the
    schedule's final phase (:meth:`recipes.Schedule.first_stopping_epoch`), whose best held-out epoch gives the
    returned weights. ``progress(done, total, message)`` is called after every batch (every
    :data:`CUDA_REPORT_EVERY` on CUDA; ``training <name>: epoch e/E, loss ...``) and, with a held-out part, once
    more after each epoch with its loss and held-out accuracy; when ``cancel()`` returns True the training stops
    with ``Cancelled`` (the last finished epoch stays in the checkpoint). A loss that becomes NaN or infinite
    raises :class:`Diverged` (one line) at the end of its epoch. The inputs are assumed valid
    (:func:`relu_core.training.train` checks them).
    """
    objective = (objective or Objective()).for_classes(num_classes)
    recipe = recipes.PLAIN.with_lr(lr) if recipe is None else recipe
    augmentation = augmentation or augment.NONE
    device = torch.device(device)
    cuda = device.type == "cuda"
    if compile_model is None:
        compile_model = os.environ.get(COMPILE_ENV, "") == "1"
    train_index, holdout_index = holdout_split(len(labels), holdout_fraction, seed)
    whole = holdout_fraction == 0.0  # nothing held out: the images as given (copied only when read-only)
    pixels = torch.from_numpy(np.require(images if whole else images[train_index], requirements=["C", "W"]))
    targets = torch.from_numpy(np.require(labels if whole else labels[train_index], np.int64, ["W"]))
    held_pixels = torch.from_numpy(np.ascontiguousarray(images[holdout_index])).to(device)
    held_labels = torch.from_numpy(np.asarray(labels[holdout_index], dtype=np.int64))
    outlier_pixels = (
        None if outliers is None else torch.from_numpy(np.require(outliers, requirements=["C", "W"])).to(device)
    )
    pixels, targets = pixels.to(device), targets.to(device)  # the whole uint8 training set on the device, once
    normalise = normalization.on(device)
    n = len(targets)
    batch_size = min(batch_size, n)
    steps_per_epoch = n // batch_size + (n % batch_size >= 2)  # a last batch of one would break BatchNorm
    total = epochs * steps_per_epoch
    size, rank = distributed.world_size(), distributed.rank()
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else contextlib.nullcontext

    def to_device(tensor: torch.Tensor) -> torch.Tensor:
        """Onto the training device; on CUDA from pinned memory without waiting (no synchronisation per step)."""
        return tensor.pin_memory().to(device, non_blocking=True) if cuda else tensor.to(device)

    report_every = CUDA_REPORT_EVERY if cuda else 1

    with seeded(seed, device) as recheck:
        model = build().to(device, memory_format=torch.channels_last).train()
        optimizer = _optimizer(model, recipe)
        schedule = _scheduler(optimizer, recipe, total)
        order = torch.Generator().manual_seed(seed)
        stopper = EarlyStopping(patience, recipe.schedule.first_stopping_epoch(epochs, steps_per_epoch))
        history: list[EpochRecord] = []
        best_state: dict[str, torch.Tensor] | None = None
        start, stopped = 0, False
        resumed = _load_checkpoint(checkpoint, checkpoint_key)
        if resumed is not None:
            model.load_state_dict(resumed["model"])
            optimizer.load_state_dict(resumed["optimizer"])
            schedule.load_state_dict(resumed["schedule"])
            order.set_state(resumed["order"])
            torch.set_rng_state(resumed["rng"])
            if cuda and "cuda_rng" in resumed:
                torch.cuda.set_rng_state(resumed["cuda_rng"], device)
            history = [
                EpochRecord(int(e), loss, None if math.isnan(acc) else acc, s) for e, loss, acc, s in resumed["history"]
            ]
            best_state = resumed["best_state"]
            stopper.restore(resumed["stopper"])
            start, stopped = int(resumed["epoch"]), bool(resumed["stopped"])
        net: nn.Module = model
        if size > 1:
            distributed.init_process_group(device)
            net = nn.parallel.DistributedDataParallel(model, device_ids=[device] if cuda else None)
        if compile_model and cuda:
            net = torch.compile(net)
        done = start * steps_per_epoch
        for epoch in range(start, epochs):
            if stopped:
                break
            began = time.perf_counter()
            permutation = torch.randperm(n, generator=order)
            on_device = to_device(permutation)  # the epoch's order, moved once
            draws = np.random.default_rng((seed, epoch))
            crops = None
            if augmentation.active:  # every position of the epoch's order at once, moved once
                crops = augmentation.draw(n, np.random.default_rng((seed, epoch, AUGMENT_STREAM))).on(to_device)
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            running = 0.0
            for step in range(steps_per_epoch):
                if cancel is not None and cancel():
                    raise Cancelled(f"training of {name} cancelled at epoch {epoch + 1}/{epochs}")
                recheck()
                first = step * batch_size
                index = permutation[first : first + batch_size]
                count = len(index)
                lam, other, positions = 1.0, None, None
                if objective.mixes:  # drawn for the whole global batch, the same on every rank
                    lam = float(draws.beta(objective.alpha, objective.alpha))
                    if objective.uses_outliers:
                        other = to_device(torch.from_numpy(draws.integers(0, len(outlier_pixels), count)))
                    else:  # the partner of batch position i: position positions[i] of the same batch
                        positions = to_device(torch.from_numpy(draws.permutation(count)))
                        other = on_device[first : first + count][positions]
                lo, hi = distributed.shard_bounds(count, size, rank) if size > 1 else (0, count)
                local = on_device[first + lo : first + hi]
                batch_pixels = pixels[local]
                if crops is not None:
                    batch_pixels = augmentation.apply(batch_pixels, crops[first + lo : first + hi])
                batch = normalise(batch_pixels)  # NCHW view of the NHWC batch: channels-last, no copy
                x_other = labels_other = None
                if other is not None:
                    partner = other[lo:hi]
                    source = outlier_pixels if objective.uses_outliers else pixels
                    partner_pixels = source[partner]
                    if crops is not None and positions is not None:  # a partner is augmented as in its own place
                        partner_pixels = augmentation.apply(partner_pixels, crops[first + positions[lo:hi]])
                    x_other = normalise(partner_pixels)
                    labels_other = None if objective.uses_outliers else targets[partner]
                with autocast():
                    loss = objective.loss(
                        net, batch, targets[local], num_classes, lam=lam, x_other=x_other, labels_other=labels_other
                    )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                loss_sum += loss.detach()
                done += 1
                if progress is not None and ((step + 1) % report_every == 0 or step + 1 == steps_per_epoch):
                    running = loss_sum.item() / (step + 1)
                    progress(done, total, f"training {name}: epoch {epoch + 1}/{epochs}, loss {running:.3f}")
            running = loss_sum.item() / steps_per_epoch
            if not math.isfinite(running):
                raise Diverged(
                    f"training of {name} diverged at epoch {epoch + 1}/{epochs}: the loss is not finite; nothing "
                    "was stored (try another recipe, a lower learning rate or another seed)"
                )
            accuracy = None
            if len(held_labels):
                with autocast():
                    accuracy = _heldout_accuracy(model, held_pixels, held_labels, normalise, num_classes, device)
                if stopper.update(epoch + 1, accuracy):
                    best_state = {key: value.detach().clone() for key, value in model.state_dict().items()}
                stopped = stopper.stop
            history.append(EpochRecord(epoch + 1, running, accuracy, time.perf_counter() - began))
            if accuracy is not None and progress is not None:
                if stopper.best_epoch:
                    best = f"best {stopper.best:.2%} at epoch {stopper.best_epoch}"
                else:
                    best = f"counted from epoch {stopper.counts_from}, the schedule's final phase"
                ending = ", stopping early" if stopped and epoch + 1 < epochs else ""
                message = f"training {name}: epoch {epoch + 1}/{epochs}, loss {running:.3f}, held-out accuracy "
                progress(done, total, f"{message}{accuracy:.2%} ({best}){ending}")
            if checkpoint is not None and distributed.is_main_process():
                state = {
                    "key": checkpoint_key,
                    "epoch": epoch + 1,
                    "stopped": stopped,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "order": order.get_state(),
                    "rng": torch.get_rng_state(),
                    "history": [
                        [r.epoch, r.loss, math.nan if r.heldout_accuracy is None else r.heldout_accuracy, r.seconds]
                        for r in history
                    ],
                    "best_state": best_state,
                    "stopper": stopper.state(),
                }
                if cuda:
                    state["cuda_rng"] = torch.cuda.get_rng_state(device)
                _save_checkpoint(checkpoint, state)
        if best_state is not None:
            model.load_state_dict(best_state)
    last = history[-1].epoch if history else 0
    return Trained(
        model=model.to("cpu", memory_format=torch.contiguous_format).eval(),
        history=tuple(history),
        best_epoch=stopper.best_epoch if best_state is not None else last,
        stopped_early=stopped and last < epochs,
        holdout_index=holdout_index,
        resumed_from=start,
    )
