"""Deploying with a guarantee (``relu_core.risk_control``): Rel-U against Doctor by how many predictions each lets
you act on at a guaranteed risk, on the default run (Fashion-MNIST + cnn28, 1 epoch, trained here on first use)
and on the pretrained CIFAR-10 ResNet-56 on the JPEG test folder; then how often the guarantee is exceeded.

The table (README, "Deploying with a guarantee"): for r* = 2 % and 5 % at δ = 0.1, ``risk_control.at_risk`` over
10 seeds (Rel-U λ = 0.5 and Doctor at T = 1, fitted on the stratified 50 % tuning split; each threshold certified
on a random half of the rest, the coverage and risk read on the other half); Rel-U − Doctor in coverage with the
95 % paired bootstrap interval for the certified thresholds (1,000 resamples of the evaluation samples, once for
all seeds) and the range over the 10 seeds' calibration draws.

The validity check (``--validity``, ResNet-56, seed 0's tuning split): over 300 calibration draws, how often the
risk among accepted exceeds r* (a) for calibration splits of 1,000 drawn i.i.d. from the held-out half, the
population being that half (the guarantee's own event: at most about δ), and (b) on the evaluation part of seeded
random cuts of the held-out half, with a calibration half (the protocol's cut) and a calibration fifth.

Run (about 2 minutes cold for the default run's training and the ResNet-56 logits, then cached):

    RELU_STUDIO_DATA=../shared/data .venv/bin/python bench/bench_guarantee.py [--validity]

Nothing here is timed: the figures are statistics, the same on any machine up to the trained weights of the
default run (another CPU trains other weights).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import detectors, protocol, risk_control, runs  # noqa: E402

RISKS = (0.02, 0.05)
DELTA = 0.1
SEEDS = 10


def _runs() -> dict[str, runs.Run]:
    os.environ["RELU_STUDIO_DEFAULT"] = "fashion-mnist"
    default = runs.default_run()
    resnet = runs.logits_for("resnet56", None, "cifar10", device="cpu")
    return {"Fashion-MNIST + cnn28 (default run)": default, "CIFAR-10 JPEG + ResNet-56": resnet}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def table(found: dict[str, runs.Run]) -> None:
    print(
        "| run (errors) | r* | Rel-U: coverage cert. / eval., risk eval. | Doctor: coverage cert. / eval., risk eval."
        " | Rel-U − Doctor, coverage [95 % CI for the certified thresholds] | over the seeds |"
    )
    print("|---|---:|---|---|---|---|")
    for name, run in found.items():
        error_rate = 1 - float(np.mean(run.logits.argmax(1) == run.labels))
        for risk in RISKS:
            result = risk_control.at_risk(run.logits, run.labels, risk=risk, delta=DELTA, seeds=SEEDS)
            cells = []
            for key in protocol.PAIRED:
                s = result.summary(key)
                refused = f", refused on {SEEDS - s['certified']} seeds" if s["certified"] < SEEDS else ""
                cells.append(
                    f"{_pct(s['certified_coverage'])} / {_pct(s['evaluation_coverage'])}, "
                    f"{_pct(s['evaluation_risk'])} (above r* on {s['evaluation_risk_above_target']}){refused}"
                )
            d = result.minus_doctor
            verdict = "no significant difference" if not d.significant else d.outcome()
            print(
                f"| {name} ({_pct(error_rate)}) | {_pct(risk)} | {cells[0]} | {cells[1]} | "
                f"{100 * d.estimate:+.1f} points [{100 * d.low:+.1f}, {100 * d.high:+.1f}]: {verdict} | "
                f"{100 * d.draw_low:+.1f} to {100 * d.draw_high:+.1f} |"
            )


def validity(run: runs.Run, draws: int = 300) -> None:
    correct = run.logits.argmax(1) == run.labels
    tune, held_out = protocol.split_indices(len(run), 0.5, 0, stratify=correct)
    relu = detectors.RelU(lam=0.5).fit(run.logits[tune], run.labels[tune])
    scores = {"Rel-U": relu.score(run.logits[held_out]), "Doctor": detectors.Doctor().score(run.logits[held_out])}
    c = correct[held_out]
    print(
        f"\nValidity, δ = {DELTA}, {draws} draws each (a valid guarantee exceeds r* in at most about δ = "
        f"{int(DELTA * draws)} of them):"
    )
    print("| detector | r* | i.i.d. calibration of 1,000, population risk | evaluation half | evaluation 4/5 |")
    print("|---|---:|---:|---:|---:|")
    for name, u in scores.items():
        order = np.argsort(u)
        cum_errors = np.cumsum(~c[order])
        for risk in RISKS:
            rng = np.random.default_rng(1)
            population = 0
            for _ in range(draws):
                idx, other = rng.integers(0, u.size, 1000), rng.integers(0, u.size, 1000)
                start = risk_control.start_threshold(u[other], 1000, risk, DELTA)  # fixed before calibration
                g = risk_control.guaranteed_risk(u[idx], c[idx], risk, DELTA, start=start)
                if g.certified:
                    k = int(np.searchsorted(u[order], g.threshold, side="right"))
                    population += cum_errors[k - 1] / k > risk
            cuts = []
            for fraction in (0.5, 0.2):
                exceeded = 0
                for seed in range(draws):
                    cal, ev = risk_control.calibration_split(np.arange(u.size), seed, fraction)
                    start = risk_control.start_threshold(u[ev], cal.size, risk, DELTA)  # as the protocol's
                    g = risk_control.guaranteed_risk(u[cal], c[cal], risk, DELTA, start=start)
                    exceeded += bool(g.certified and risk_control.realised(g, u[ev], c[ev]).risk > risk)
                cuts.append(exceeded)
            print(f"| {name} | {_pct(risk)} | {population} | {cuts[0]} | {cuts[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validity", action="store_true", help="also count how often r* is exceeded")
    args = parser.parse_args()
    found = _runs()
    table(found)
    if args.validity:
        validity(found["CIFAR-10 JPEG + ResNet-56"])


if __name__ == "__main__":
    main()
