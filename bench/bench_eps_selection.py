"""ε selected inside the tuning split: the wall time of honest selection over (T, λ, ε) on a model run,
and what the two-stage pass (one backward pass per detector setting, one forward pass per ε) saves.

Default: the pretrained CIFAR-10 ResNet-56 on the JPEG test folder, the CPU subset of the grid
(:data:`CPU_SUBSET`), one seed. Prints the date, the machine, its load (``os.getloadavg()``: the machine may be
shared) before and after, the subset, the time of each part, the perturbation's counted work and the result.
Run: ``RELU_STUDIO_DATA=../shared/data .venv/bin/python bench/bench_eps_selection.py`` (``--help`` for the knobs;
``--grid authors --images 0`` is the whole authors' grid on all images, for a GPU).
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import detectors, preprocessing, protocol, runs  # noqa: E402
from relu_core.runs import Run  # noqa: E402

#: The authors' T grid (their src/RelU/main.py).
AUTHORS_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 2.0)
#: The bounded subset measured on 2 CPU cores (docs/results/eps-selection.md says why each part).
CPU_SUBSET = {
    "temperatures": (1.0, 1.5),
    "lambdas": (0.5,),
    "epsilons": preprocessing.CPU_EPSILONS,
    "images": 2000,
    "folds": 3,
}


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def subsample(run: Run, n: int, seed: int = 0) -> Run:
    """``n`` of the run's images, stratified by correctness (the run's error rate kept), in their order."""
    if n <= 0 or n >= len(run):
        return run
    correct = run.logits.argmax(1) == run.labels
    rng = np.random.default_rng(seed)
    wrong, right = np.flatnonzero(~correct), np.flatnonzero(correct)
    n_wrong = round(n * wrong.size / len(run))
    rows = np.sort(np.concatenate([rng.choice(wrong, n_wrong, replace=False), rng.choice(right, n - n_wrong, False)]))
    return Run(
        run_id=f"{run.run_id}-sub{n}",
        logits=run.logits[rows],
        labels=run.labels[rows],
        class_names=run.class_names,
        images=run.images[rows],
        model=run.model,
        model_name=run.model_name,
        mean=run.mean,
        std=run.std,
        source=f"{n:,} of {len(run):,} images (stratified) of {run.source}",
    )


def compare_direct(run: Run, epsilons, n: int, device: str) -> None:
    """Doctor (T = 1) at every ε on ``n`` images, one pass per ε
    (``perturbed_scores``) against one backward pass then one forward pass per ε (``perturbed_scores_grid``)."""
    rows = np.arange(min(n, len(run)))
    doctor = detectors.Doctor(1.0)
    common = {"mean": run.mean, "std": run.std, "indices": rows, "device": device}
    started = time.perf_counter()
    direct = [preprocessing.perturbed_scores(run.model, run.images, doctor, e, **common) for e in epsilons]
    t_direct = time.perf_counter() - started
    started = time.perf_counter()
    grid = preprocessing.perturbed_scores_grid(run.model, run.images, doctor, epsilons, **common)
    t_grid = time.perf_counter() - started
    worst = max(float(np.max(np.abs(d - g))) for d, g in zip(direct, grid, strict=True))
    print(
        f"direct vs two-stage, Doctor at {len(epsilons)} ε on {rows.size:,} images: one pass per ε {t_direct:.1f} s, "
        f"two-stage {t_grid:.1f} s ({t_direct / t_grid:.2f}x); largest difference {worst:.2e}; load now "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--grid", choices=["cpu", "authors"], default="cpu", help="the CPU subset or the authors' grid")
    parser.add_argument("--temperatures", type=floats, default=None, help="override the grid's T values")
    parser.add_argument("--lambdas", type=floats, default=None, help="override the grid's λ values")
    parser.add_argument("--epsilons", type=floats, default=None, help="override the grid's ε values")
    parser.add_argument("--images", type=int, default=None, help="stratified subsample of the images (0: all)")
    parser.add_argument("--folds", type=int, default=None)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument(
        "--compare-direct",
        type=int,
        default=0,
        metavar="N",
        help="also time, on N images, Doctor's scores at every ε of the grid one pass per ε against the two-stage pass",
    )
    args = parser.parse_args()
    grid = (
        dict(CPU_SUBSET)
        if args.grid == "cpu"
        else {
            "temperatures": AUTHORS_TEMPERATURES,
            "lambdas": detectors.LAMBDA_GRID,
            "epsilons": preprocessing.AUTHORS_EPSILONS,
            "images": 0,
            "folds": 5,
        }
    )
    for knob in ("temperatures", "lambdas", "epsilons", "images", "folds"):
        if getattr(args, knob) is not None:
            grid[knob] = getattr(args, knob)

    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, device {args.device}")
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    started = time.perf_counter()
    full = runs.logits_for(args.model, None, args.dataset, device=args.device)
    print(f"run: {full.source} ({len(full):,} images; logits in {time.perf_counter() - started:.1f} s, cached after)")
    run = subsample(full, grid["images"])
    print(
        f"grid: T ∈ {{{', '.join(f'{t:g}' for t in grid['temperatures'])}}}, "
        f"λ ∈ {{{', '.join(f'{v:g}' for v in grid['lambdas'])}}}, {protocol.describe_eps_grid(grid['epsilons'])}; "
        f"{len(run):,} images, {grid['folds']} folds, {args.seeds} seed(s), tuning fraction 0.5"
    )
    # the perturbed passes go to a fresh cache folder: a second run times the work again, not cache reads
    fresh = tempfile.mkdtemp(prefix="bench-eps-")
    os.environ["RELU_STUDIO_CACHE"] = fresh
    atexit.register(shutil.rmtree, fresh, True)
    if args.compare_direct:
        compare_direct(run, grid["epsilons"], args.compare_direct, args.device)
    perturbation = preprocessing.make_perturbation(run, device=args.device)
    started = time.perf_counter()
    result = protocol.evaluate_with_selection(
        run.logits,
        run.labels,
        ["relu", "doctor"],
        temperatures=grid["temperatures"],
        lambdas=grid["lambdas"],
        n_folds=grid["folds"],
        seeds=args.seeds,
        epsilons=grid["epsilons"],
        perturbation=perturbation,
        n_resamples=args.bootstrap,
    )
    wall = time.perf_counter() - started
    print(f"selection + evaluation: {wall:.1f} s (in the model: {perturbation.seconds:.1f} s)")
    print(
        f"work: {perturbation.calls} perturbation calls, {perturbation.backward_images:,} images through a backward "
        f"pass, {perturbation.forward_images:,} through a forward pass; one pass per ε would have taken "
        f"{perturbation.backward_images_per_eps:,} backward passes "
        f"({perturbation.backward_images_per_eps / max(perturbation.backward_images, 1):.1f}x the gradients)"
    )
    print("load average after: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"hyperparameters: {result.selection}; {result.eps_label}")
    table = result.to_dict()
    for key in result.methods:
        row = table[key]
        print(
            f"  {result.names[key]}: T {row['temperature']}, λ {row.get('lambda')}, ε {row['eps']}; "
            f"FPR95 {row['fpr95']:.4f}, AUROC {row['auroc']:.4f}"
        )
    paired = result.paired_summary()
    if paired is not None:
        print(f"  Rel-U − Doctor FPR95: {paired['fpr95']['verdict']}")


if __name__ == "__main__":
    main()
