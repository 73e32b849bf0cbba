"""What this machine allows: the measurements behind the speed targets that issue 27 could not meet on the CPU.

Three parts, each printed as it finishes:

1. **Two threads, one core's arithmetic.** The same second-moment work (BLAS ``syrk``, 10,000 x 1000 float64) on
   one thread, then split over two threads; torch's float64 ``exp`` the same way for contrast. Where two BLAS
   threads take as long as one, the CPUs share their floating-point units (SMT siblings), and no row-block
   scheme can make dense float64 algebra faster than one thread does. Then the library's second moments in row
   blocks of any size against blocks of at least ``threads.MIN_BLOCK_ROWS`` rows.
2. **The floor of a 10,000 x 100 update.** ``bench_core``'s slider update (three softmaxes, Rel-U's fit and
   scores, Doctor, MSP, ODIN, FPR95 / AUROC / AURC of each) written with nothing but the arithmetic it needs, on
   one thread: a fused torch softmax, numpy's ``syrk`` for the moments, one triangular product for the
   scores, one sort per detector and no input checks, no curves, no caches. It must give the library's metrics
   (checked here to 1e-9); its time is the least a single thread can do, against the library's.
3. **Exact truncation of the 50,000 x 1000 scores.** Each evaluation row ``p`` is split into its ``k`` largest
   entries ``a`` and the rest ``r``. Then ``p D p = 2 (a D) . p - (a D) . a + r D r`` and ``0 <= r D r <=
   lambda_max(D) |r|^2`` (D is symmetric and non-negative), so the first two terms give each score to within a
   known width at ``k / C`` of the dense cost. A sample whose interval overlaps the interval of a sample of the
   other kind (correct / wrong) has an undetermined order against it, hence undetermined FPR95, AUROC and AURC:
   it would need its dense score. Printed: the share of such samples for several ``k`` and two temperatures,
   on :func:`bench_scale.imagenet_like_run`'s logits, Rel-U fitted on a fifth of them at λ = 0.5.

Run: ``.venv/bin/python bench/bench_limits.py`` (``--quick``: part 3 on 10,000 x 1000).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.linalg.blas as blas
import threadpoolctl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_core import fast_update, synthetic_split  # noqa: E402
from bench.bench_scale import imagenet_like_run  # noqa: E402
from relu_core import detectors, threads  # noqa: E402


def median_ms(function: Callable[[], object], repeats: int) -> float:
    function()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def on_threads(*functions: Callable[[], object]) -> Callable[[], None]:
    """A callable that runs ``functions`` at once, one Python thread each, and returns when all are done."""

    def run() -> None:
        workers = [threading.Thread(target=function) for function in functions]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    return run


def thread_scaling(repeats: int = 3) -> None:
    rng = np.random.default_rng(0)
    rows = rng.random((10_000, 1000))
    exponents = torch.from_numpy(rng.standard_normal((10_000, 1000)))

    def syrk(block: np.ndarray) -> Callable[[], object]:
        return lambda: blas.dsyrk(1.0, block.T, trans=0, lower=0)

    def exp(block: torch.Tensor) -> Callable[[], object]:
        def one_thread_exp() -> torch.Tensor:
            torch.set_num_threads(1)  # torch's intra-op setting is the calling thread's
            return torch.exp(block)

        return one_thread_exp

    print("1. The same float64 work on one thread, then split over two (each thread one BLAS / torch thread):")
    kept = torch.get_num_threads()
    try:
        with threadpoolctl.threadpool_limits(1):
            for name, make, data in (("syrk, 10,000 x 1000", syrk, rows), ("torch exp, 10,000 x 1000", exp, exponents)):
                one = median_ms(make(data), repeats)
                two = median_ms(on_threads(make(data[:5000]), make(data[5000:])), repeats)
                print(f"   {name}: one thread {one:.0f} ms, two threads {two:.0f} ms (speed-up {one / two:.2f}x)")
    finally:
        torch.set_num_threads(kept)


def block_rows(repeats: int = 5) -> None:
    """The library's second moments of 10,000 x 1000 rows (77 % correct, as the 50k x 1000 benchmark's tuning fifth)
    in row blocks of any size against blocks of at least ``threads.MIN_BLOCK_ROWS`` rows."""
    rng = np.random.default_rng(1)
    probs = detectors.softmax(rng.standard_normal((10_000, 1000)) * 3.0)
    correct = rng.random(10_000) < 0.77
    kept = threads.MIN_BLOCK_ROWS
    times = {}
    try:
        for rows in (1, kept):
            threads.configure(min_block_rows=rows)
            times[rows] = median_ms(lambda: detectors.second_moments(probs, correct), repeats)
    finally:
        threads.configure(min_block_rows=kept)
    print(
        f"   the library's moments of 10,000 x 1000 rows: blocks of any size {times[1]:.0f} ms, of at least "
        f"{kept:,} rows (threads.MIN_BLOCK_ROWS) {times[kept]:.0f} ms"
    )


def _sorted_metrics(uncertainty: np.ndarray, correct: np.ndarray) -> tuple[float, float, float]:
    """FPR95 (correct samples positive), AUROC and AURC from one sort, for scores without ties."""
    order = np.argsort(uncertainty)
    accepted = np.arange(1, uncertainty.shape[0] + 1)
    correct_accepted = np.cumsum(correct[order])
    errors_accepted = accepted - correct_accepted
    n_correct, n_errors = int(correct_accepted[-1]), int(errors_accepted[-1])
    fpr95 = errors_accepted[np.searchsorted(correct_accepted, 0.95 * n_correct)] / n_errors
    auroc = (n_errors - errors_accepted[correct[order]]).sum() / (n_correct * n_errors)
    return float(fpr95), float(auroc), float(np.mean(errors_accepted / accepted))


def floor_update(tune_logits, tune_labels, eval_logits, eval_labels) -> dict[str, tuple[float, float, float]]:
    """``bench_core.fast_update`` with nothing but its arithmetic (see the module docstring, part 2)."""
    tune, evaluation = torch.from_numpy(tune_logits), torch.from_numpy(eval_logits)
    tune_correct = tune_logits.argmax(1) == tune_labels
    eval_correct = eval_logits.argmax(1) == eval_labels
    tune_probs = torch.softmax(tune.to(torch.float64), -1).numpy()
    eval_probs = torch.softmax(evaluation.to(torch.float64), -1).numpy()
    odin_probs = torch.softmax(evaluation.to(torch.float64) / 1000.0, -1).numpy()
    positives, negatives = tune_probs[tune_correct], tune_probs[~tune_correct]
    matrix = 0.5 * (negatives.T @ negatives) / len(negatives) - 0.5 * (positives.T @ positives) / len(positives)
    np.maximum(matrix, 0.0, out=matrix)
    np.fill_diagonal(matrix, 0.0)
    matrix /= np.linalg.norm(matrix)
    lower = np.tril(matrix, -1)  # the diagonal is zero
    half_scores = np.einsum("nc,nc->n", blas.dtrmm(1.0, lower, eval_probs.T, side=0, lower=1, trans_a=1).T, eval_probs)
    scores = {
        "relu": 2.0 * half_scores,
        "doctor": 1.0 - np.einsum("nc,nc->n", eval_probs, eval_probs),
        "msp": -eval_probs.max(1),
        "odin": -odin_probs.max(1),
    }
    return {name: _sorted_metrics(uncertainty, eval_correct) for name, uncertainty in scores.items()}


def update_floor(repeats: int = 51) -> None:
    split = synthetic_split(10_000, 100)
    with threadpoolctl.threadpool_limits(1):
        kept = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            floor, library = floor_update(*split), fast_update(*split)
            for name, values in floor.items():
                if not np.allclose(values, library[name], rtol=0.0, atol=1e-9):
                    raise SystemExit(f"the floor update disagrees with the library on {name}: {values} {library[name]}")
            times = [median_ms(lambda: floor_update(*split), repeats), median_ms(lambda: fast_update(*split), repeats)]
        finally:
            torch.set_num_threads(kept)
    print(
        f"2. One 10,000 x 100 update on one thread: the arithmetic alone {times[0]:.1f} ms, relu_core "
        f"{times[1]:.1f} ms (same metrics to 1e-9)."
    )


def ambiguous_share(lower: np.ndarray, upper: np.ndarray, correct: np.ndarray) -> float:
    """The share of samples whose interval ``[lower, upper]`` overlaps the interval of at least one sample of the
    other kind (``correct`` True / False)."""
    ambiguous = np.zeros(correct.shape[0], dtype=bool)
    for kind in (True, False):
        mine, theirs = correct == kind, correct != kind
        order = np.argsort(lower[theirs])
        their_lower = lower[theirs][order]
        their_upper_so_far = np.maximum.accumulate(upper[theirs][order])
        # the other kind's intervals that start at or below each of mine's end; one of them reaches my start?
        starting = np.searchsorted(their_lower, upper[mine], side="right")
        reaches = their_upper_so_far[np.maximum(starting - 1, 0)] >= lower[mine]
        ambiguous[mine] = (starting > 0) & reaches
    return float(ambiguous.mean())


def truncation(n: int, ks: tuple[int, ...] = (8, 16, 32, 64, 128)) -> None:
    run = imagenet_like_run(n, 1000)
    correct = run.logits.argmax(1) == run.labels
    order = np.random.default_rng(0).permutation(n)
    tune, evaluation = order[: n // 5], order[n // 5 :]
    print(f"3. Exact truncation, {n:,} x 1000 ImageNet-like logits, {evaluation.size:,} evaluation rows:")
    for temperature in (1.0, 2.0):
        probs = detectors.softmax(run.logits, temperature)
        matrix = detectors.RelU(0.5).fit_probs(probs[tune], correct[tune]).matrix_
        largest_eigenvalue = float(np.linalg.eigvalsh(matrix)[-1])
        rows, labels_correct = probs[evaluation], correct[evaluation]
        exact = detectors.quadratic_score(rows, matrix)
        by_size = np.argsort(-rows, axis=1)
        shares = []
        for k in ks:
            top = np.zeros_like(rows)
            columns = by_size[:, :k]
            np.put_along_axis(top, columns, np.take_along_axis(rows, columns, axis=1), axis=1)
            spread = top @ matrix
            lower = 2.0 * np.einsum("nc,nc->n", spread, rows) - np.einsum("nc,nc->n", spread, top)
            rest = rows - top
            upper = lower + largest_eigenvalue * np.einsum("nc,nc->n", rest, rest)
            slack = 1e-12 * max(1.0, float(exact.max()))  # rounding of the two ways of summing
            if not (np.all(exact >= lower - slack) and np.all(exact <= upper + slack)):
                raise SystemExit(f"the bound does not hold at k={k}, T={temperature}")
            shares.append(f"k={k}: {100 * ambiguous_share(lower, upper, labels_correct):.0f} %")
        print(f"   T = {temperature:g}: samples that would need their dense score: " + ", ".join(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="part 3 on 10,000 rows")
    args = parser.parse_args()
    thread_scaling()
    block_rows()
    update_floor(11 if args.quick else 51)
    truncation(10_000 if args.quick else 50_000)
    print(f"\nLoad average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")


if __name__ == "__main__":
    main()
