"""The ladder (``study paper-protocol``) with ε searched from rung 3 on, on a real model, bounded for 2 CPU cores.

The ladder's rungs 3-6 then search (T, λ, ε) where the logits-only ladder searches (T, λ): rung 3 inside each
seed's tuning split, rung 4 on its evaluation split (oracle), rungs 5-6 as rows. On two CPU cores the whole thing
(10,000 images, the authors' 9 ε, 10 seeds) is hours, so this script runs a **bounded** ladder and says so: a
stratified subsample of the images (the error rate kept, ``bench_eps_selection.subsample``), the CPU subset of the
ε grid (``preprocessing.CPU_EPSILONS``) and a few seeds. Prints the date, the machine, its load before and after,
the bounds, the wall clock and the ladder as ``study paper-protocol`` prints it.

    RELU_STUDIO_DATA=../shared/data .venv/bin/python bench/bench_ladder_eps.py \
        [--model resnet20] [--images 2000] [--seeds 3] [--epsilons 0,0.001,0.002,0.004] [--json FILE]

``--images 0`` takes every image, ``--epsilons authors`` the authors' whole grid (a GPU: ``--device cuda``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_eps_selection import subsample  # noqa: E402
from relu_core import paper_protocol, preprocessing, runs  # noqa: E402
from relu_core.studies import ladder  # noqa: E402


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--images", type=int, default=2000, help="stratified subsample of the images (0: all)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilons", default="cpu", help="'cpu' (0, 0.001, 0.002, 0.004), 'authors' or values")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=None, help="also write the rungs' JSON objects to this file")
    args = parser.parse_args()
    if args.epsilons == "cpu":
        epsilons = preprocessing.CPU_EPSILONS
    elif args.epsilons == "authors":
        epsilons = paper_protocol.EPSILONS
    else:
        epsilons = tuple(float(v) for v in args.epsilons.split(","))

    import torch

    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, device {args.device}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"load average (1, 5, 15 min) before: {load()}")
    started = time.perf_counter()
    run = runs.logits_for(args.model, None, args.dataset, device=args.device)
    print(f"logits of {run.source}: {time.perf_counter() - started:.0f} s")
    run = subsample(run, args.images)
    accuracy = float((run.logits.argmax(1) == run.labels).mean())
    print(
        f"bounds: {len(run):,} images ({run.source}; accuracy {accuracy:.1%}), {args.seeds} seeds, "
        f"ε ∈ {{{', '.join(f'{e:g}' for e in epsilons)}}}, {args.bootstrap} resamples"
    )

    last = [0.0, ""]

    def progress(done, total, message):  # a line a rung, and every 30 s within one
        now = time.perf_counter()
        rung = message.split(":")[0]
        if now - last[0] > 30 or rung != last[1]:
            last[0], last[1] = now, rung
            print(f"  {now - started:6.0f} s  {done / max(total, 1):5.1%}  {message}  (load {load()})", flush=True)

    started = time.perf_counter()
    result = ladder.run_study(
        run,
        epsilons=epsilons,
        device=args.device,
        seeds=args.seeds,
        n_resamples=args.bootstrap,
        progress=progress,
        use_cache=False,
    )
    elapsed = time.perf_counter() - started
    print(f"ladder with ε: {elapsed:.0f} s wall clock; load average after: {load()}")
    print(ladder.ladder_text(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.settings["rungs"], indent=1, default=str))
        print(f"rungs written to {args.json}")


if __name__ == "__main__":
    main()
