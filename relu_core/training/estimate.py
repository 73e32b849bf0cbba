"""How long a training takes, estimated before it starts, so a page can say it and warn before hours of work.

The estimate is the images a training passes through its network, over a throughput measured for that network
with ``bench/bench_train_throughput.py`` (the training loop with its augmentation, the second epoch's rate):
- the images: the epoch cap × the training split less its held-out tenth;
- twice that for the objectives that pass a clean and a mixed batch each step (RegMixUp, OpenMix: measured at
  about twice cross-entropy's time per epoch, README "Training objectives").

On a CPU the measured rate is scaled to the machine as the work will find it (:func:`cpu_share`): the torch
threads the training will get (``relu_core.threads.model_threads``: the idle CPUs, or the count fixed by
``RELU_STUDIO_MODEL_THREADS``) and the machine's current load (the 1-minute load average), against the reference's
:data:`REFERENCE_THREADS` threads on a quiet machine. A resnet9_small on CIFAR-10 said "about 12 min" from the quiet
figure and took about 8 times that at 1 model thread and a load of 8-10 on 2 cores: each runnable thread then gets
about 2 / 10 of a core.

It is an estimate, not a promise. The reference machines are named in :data:`THROUGHPUT`: a faster CPU, another
GPU, a load that changes while it trains or early stopping changes the time, and models already in the cache take
none. Where no throughput was measured for a network on a device, the estimate says so and gives no number.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

#: Training-loop images per second, per (network, device type), measured with bench/bench_train_throughput.py
#: (cnn28: bench/bench_objectives.py; cnn8: 20 epochs of digits timed whole). "cpu": this project's 2-vCPU development machine, quiet, 2026-11-27
#: and 28; "cuda": one NVIDIA H200 with bf16 autocast, eager, 2026-11-28 (README, "CIFAR-10 trained here").
THROUGHPUT: dict[tuple[str, str], float] = {
    ("cnn8", "cpu"): 17_700.0,
    ("cnn28", "cpu"): 1_220.0,
    ("cnn32", "cpu"): 872.0,
    ("resnet9_small", "cpu"): 866.0,
    ("resnet9", "cpu"): 67.0,
    ("resnet18_cifar", "cpu"): 58.0,
    ("resnet34_cifar", "cpu"): 31.0,
    ("densenet121_cifar", "cpu"): 89.0,
    ("resnet9", "cuda"): 67_741.0,
    ("resnet34_cifar", "cuda"): 6_376.0,
    ("densenet121_cifar", "cuda"): 1_711.0,
}
#: Where each device type's figures were measured, for the sentence that gives an estimate.
REFERENCE = {"cpu": "2 CPU cores", "cuda": "one NVIDIA H200"}
#: The torch threads the CPU figures were measured with: one per core of the quiet 2-core machine.
REFERENCE_THREADS = 2
#: The training split's size of each registered data set that trains here (``tests/test_training_estimate.py``
#: checks them against the data).
TRAIN_IMAGES = {
    "digits": 898,
    "mnist": 60_000,
    "fashion-mnist": 60_000,
    "cifar10": 50_000,
    "cifar100": 50_000,
    "svhn": 73_257,
}
#: Objectives that pass two batches through the network each step (the clean and the mixed one).
TWO_BATCHES = frozenset({"regmixup", "regmixup-appendix", "openmix"})
#: Above this many seconds for one model on a CPU, a page warns before the work starts.
WARN_SECONDS = 30 * 60.0


@dataclass(frozen=True)
class Machine:
    """The CPU a training will run on as it is now: the torch ``threads`` it will get, the 1-minute ``load``
    average and the ``cores`` of this process (:func:`current_machine`)."""

    threads: int
    load: float
    cores: int

    def words(self) -> str:
        """E.g. "1 model thread, load 8.5 on 2 cores"."""
        return (
            f"{self.threads} model thread{'s' if self.threads != 1 else ''}, load {self.load:.1f} on {self.cores} cores"
        )


def current_machine(threads: int | None = None, load: float | None = None) -> Machine:
    """This machine now: ``threads`` None takes the count model work would get (``threads.model_threads``: the
    idle CPUs, or the fixed count), ``load`` None the 1-minute load average (0 where the system does not say)."""
    from relu_core import threads as thread_policy

    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Machine(thread_policy.model_threads() if threads is None else max(1, int(threads)), float(load), cores)


def cpu_share(machine: Machine) -> float:
    """The training's speed on ``machine`` as a fraction of the reference (:data:`REFERENCE_THREADS` threads on a
    quiet machine): its threads, each getting the share of a core that the runnable threads leave it, all of
    them (the load, which counts the other work, and the training's own) sharing the cores evenly:
    ``threads × min(1, cores / (load + threads)) / REFERENCE_THREADS``. A fair-share approximation: it leaves
    out what a thread count does to a network's own parallel speed-up."""
    threads = max(1, machine.threads)
    per_thread = min(1.0, machine.cores / max(machine.load + threads, 1e-9))
    return threads * per_thread / REFERENCE_THREADS


@dataclass(frozen=True)
class TrainingEstimate:
    """The estimated ``seconds`` to train ``models`` models of ``model`` on a ``device`` type (None: no
    throughput measured for that pair), and the longest one model takes (``per_model_seconds``); on a CPU, the
    ``machine`` it was scaled to (:func:`cpu_share`). ``cached``: the objectives whose models are already in the
    cache (read back, no time, not counted in ``models``), None where nobody looked; ``training``: the others."""

    model: str
    device: str
    models: int
    seconds: float | None
    per_model_seconds: float | None
    machine: Machine | None = None
    cached: tuple[str, ...] | None = None
    training: tuple[str, ...] = ()

    @property
    def too_long_for_a_cpu(self) -> bool:
        """Whether one model takes longer than :data:`WARN_SECONDS` on a CPU."""
        return self.device == "cpu" and self.per_model_seconds is not None and self.per_model_seconds > WARN_SECONDS

    def sentence(self) -> str:
        """The estimate in words, with its reference machine; where the cache was looked at (``cached``), the
        count is of the models to train, naming them and the cached ones."""
        if self.cached and not self.training:
            return f"No training: {_models(len(self.cached))} of {self.model} ({', '.join(self.cached)}) cached."
        if self.seconds is None:
            return f"No training time was measured for {self.model} on {self.device.upper()}: no estimate."
        where = "a GPU" if self.device == "cuda" else "the CPU"
        measured = f"the throughput measured on {REFERENCE.get(self.device, self.device)}"
        if self.machine is not None:
            measured += f", scaled to this machine now: {self.machine.words()}"
        if self.cached is None:
            return (
                f"Training {_models(self.models)} of {self.model} on {where}: about {duration(self.seconds)} if "
                f"none is cached (estimated from {measured}; cached models take no time, early stopping may end "
                "sooner)."
            )
        cached = (
            f"{', '.join(self.cached)} {'is' if len(self.cached) == 1 else 'are'} cached, read back"
            if self.cached
            else "none is cached"
        )
        return (
            f"Training {_models(self.models)} of {self.model} on {where}: about {duration(self.seconds)} for "
            f"{', '.join(self.training)} ({cached}; estimated from {measured}; early stopping may end sooner)."
        )


def _models(n: int) -> str:
    return f"{n} model{'s' if n != 1 else ''}"


def estimate(
    model: str,
    dataset: str,
    objectives: Sequence[str],
    epochs: int,
    device: str,
    *,
    machine: Machine | None = None,
    cached: Sequence[str] | None = None,
) -> TrainingEstimate:
    """The estimated time to train one ``model`` per objective on ``dataset``'s training split for ``epochs``
    epochs on ``device`` (a device type: ``cpu`` or ``cuda``; ``mps`` has no figures). ``objectives`` named twice
    train one model. On a CPU the time is scaled to ``machine`` (None: :func:`current_machine`, this machine
    now: the threads model work gets and the load average; :func:`cpu_share`). ``cached``: the objectives whose
    models are in the cache (``relu_core.studies.objectives.cached_objectives``): they are read back, not
    trained, and are neither counted nor timed; None: not looked at, every model counted ("if none is cached")."""
    objectives = tuple(dict.fromkeys(objectives))  # as the study trains them: one model per objective
    if cached is not None:
        cached = tuple(o for o in objectives if o in set(cached))
        objectives = tuple(o for o in objectives if o not in cached)
    rate = THROUGHPUT.get((model, device))
    images = TRAIN_IMAGES.get(dataset)
    if rate is None or images is None:
        return TrainingEstimate(model, device, len(objectives), None, None, cached=cached, training=objectives)
    from relu_core.training import HOLDOUT_FRACTION  # the package imports this module's siblings, not this one

    if device == "cpu":
        machine = current_machine() if machine is None else machine
        rate *= cpu_share(machine)
    else:
        machine = None
    per_epoch = math.ceil(images * (1.0 - HOLDOUT_FRACTION)) / rate
    each = [per_epoch * epochs * (2.0 if name in TWO_BATCHES else 1.0) for name in objectives]
    return TrainingEstimate(
        model,
        device,
        len(objectives),
        float(sum(each)),
        max(each, default=0.0),
        machine,
        cached=cached,
        training=objectives,
    )


def cpu_warning(
    model: str,
    dataset: str,
    objectives: Sequence[str],
    epochs: int,
    *,
    machine: Machine | None = None,
    cached: Sequence[str] | None = None,
) -> str | None:
    """The warning a page shows before training ``model`` on a CPU when one model would take longer than
    :data:`WARN_SECONDS` (on ``machine``, None: this machine now), naming the data set's CPU network and its
    time at its own recipe's cap; None otherwise. ``cached`` as :func:`estimate`'s: cached models train not."""
    machine = current_machine() if machine is None else machine
    guess = estimate(model, dataset, objectives, epochs, "cpu", machine=machine, cached=cached)
    if not guess.too_long_for_a_cpu:
        return None
    from relu_core import models
    from relu_core.training import recipes

    text = (
        f"No GPU here: {model} takes up to about {duration(guess.per_model_seconds)} a model on this CPU "
        f"({duration(guess.seconds)} for all {guess.models}; RegMixUp and OpenMix take twice as long as the others)."
    )
    cpu_network = models.trainable_models(dataset, gpu=False)[0]
    recipe = recipes.get(recipes.default_for(dataset))
    cpu_epochs = recipes.default_epochs(recipe, cpu_network)
    cpu_guess = estimate(cpu_network, dataset, objectives, cpu_epochs, "cpu", machine=machine)
    if cpu_network != model and cpu_guess.per_model_seconds is not None:
        text += (
            f" {cpu_network} is this data set's CPU network (up to about {duration(cpu_guess.per_model_seconds)} a "
            f"model with the {recipe.name} recipe's cap)."
        )
    return text


def before_training(
    model: str,
    dataset: str,
    objectives: Sequence[str],
    epochs: int,
    device: str,
    *,
    machine: Machine | None = None,
    cached: Sequence[str] | None = None,
) -> list[str]:
    """What the command line says on stderr before it trains (``train``, ``study objectives``), the Objectives
    page's words: the :func:`estimate`'s sentence and, on a CPU (``device`` a device type), the :func:`cpu_warning`
    when one model takes longer than :data:`WARN_SECONDS` (on ``machine``, None: this machine now). ``cached``
    as :func:`estimate`'s: the objectives whose model is read back from the cache."""
    if device == "cpu":
        machine = current_machine() if machine is None else machine
    lines = [estimate(model, dataset, objectives, epochs, device, machine=machine, cached=cached).sentence()]
    if device == "cpu" and (warning := cpu_warning(model, dataset, objectives, epochs, machine=machine, cached=cached)):
        lines.append(warning)
    return lines


def duration(seconds: float) -> str:
    """``seconds`` rounded for a person: "40 s", "12 min", "3 h 10 min", "31 h", "24 days"."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    if minutes < 10 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours} h" + (f" {rest} min" if rest else "")
    hours = round(seconds / 3600)
    return f"{hours} h" if hours < 48 else f"{round(seconds / 86400)} days"
