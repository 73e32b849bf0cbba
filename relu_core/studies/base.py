"""What every study shares: the result type, the per-point collector, seeds, cancellation and the result cache.

A study sweeps one setting (λ, T, ε, the tuning fraction, ...) and, at every point and on every seeded split,
fits the detectors on the tuning part only and scores the evaluation part only. :class:`Collector` gathers
the per-seed metrics and the (Rel-U, Doctor, correct) triples of each point; :meth:`Collector.finish` turns
them into the mean ± std curves and the paired Rel-U − Doctor difference per point (mean ± std over seeds
and the 95 % pooled paired bootstrap interval of :func:`relu_core.stats.pooled_bootstrap`).

Results are cached on disk (:mod:`relu_core.cache`, namespace ``studies``) under an explicit key: the study,
the content of the run (logits and labels digests, and the model's weights hash where the study runs the
model), every setting, and :data:`CACHE_VERSION`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from relu_core import cache, detectors, metrics, protocol, stats
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress, report

#: Bump when a study's numbers change for the same key (invalidates the cached results).
CACHE_VERSION = 2  # 2: the pooled bootstrap draws the seeds' shared samples once
NAMESPACE = "studies"
DEFAULT_SEEDS = 10
METRICS = ("fpr95", "auroc", "aurc", "eaurc")
METRIC_LABELS = {"fpr95": "FPR at 95 % TPR", "auroc": "AUROC", "aurc": "AURC", "eaurc": "E-AURC"}
#: Where higher is better (for the verdict and the plot titles).
HIGHER_IS_BETTER = {"fpr95": False, "auroc": True, "aurc": False, "eaurc": False}
CURVE_COLUMNS = ("series", "x", "detector", "metric", "mean", "std", "n_seeds")
PAIRED_COLUMNS = ("series", "x", "metric", "mean", "std", "estimate", "ci_low", "ci_high", "significant", "verdict")
PER_SEED_COLUMNS = ("series", "x", "detector", "metric", "seed", "value")
#: The display labels of the paired detectors (``protocol.PAIRED``), the studies' series names.
RELU, DOCTOR = (detectors.label(key) for key in protocol.PAIRED)


@dataclass
class StudyResult:
    """The numbers of one study, as tidy frames (every frame also goes to CSV as it is).

    ``curves``: :data:`CURVE_COLUMNS`, one row per series x point x detector x metric: mean and population
    std (``ddof=0``) over ``n_seeds`` seeds. ``series`` names the sweep (e.g. ``"lambda"``), ``x`` the point.
    ``paired``: :data:`PAIRED_COLUMNS`, Rel-U − Doctor per series x point x metric (fpr95, auroc, aurc): mean
    and std over seeds, the estimate and 95 % pooled paired bootstrap interval (NaN when ``n_resamples`` = 0),
    whether the interval excludes 0, and the verdict in words.
    ``per_seed``: :data:`PER_SEED_COLUMNS`. ``settings``: every setting used (JSON-able), including
    ``seeds``. ``series``: per series ``{"x_label", "log_x", "marks": {label: x}}`` for the figures.
    ``tables``: study-specific extra frames (calibration summary, reliability bins, ...).
    ``notes``: plain-language remarks (fallbacks, subsampling, shapes) shown with the result.
    """

    study: str
    title: str
    curves: pd.DataFrame
    paired: pd.DataFrame
    per_seed: pd.DataFrame
    settings: dict
    series: dict[str, dict] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self, strict_json: bool = False) -> dict:
        """Every frame as a list of records, plus settings, series, notes (exact floats; NaN where undefined,
        or None with ``strict_json`` for a strict JSON writer)."""

        def records(frame: pd.DataFrame) -> list[dict]:
            return [{k: _plain(v, strict_json) for k, v in row.items()} for row in frame.to_dict(orient="records")]

        return {
            "study": self.study,
            "title": self.title,
            "settings": _plain(self.settings, strict_json),
            "series": _plain(self.series, strict_json),
            "notes": self.notes,
            "curves": records(self.curves),
            "paired": records(self.paired),
            "per_seed": records(self.per_seed),
            "tables": {k: records(v) for k, v in self.tables.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> StudyResult:
        def frame(rows: list[dict], columns: Sequence[str] | None = None) -> pd.DataFrame:
            return pd.DataFrame(rows, columns=list(columns) if columns is not None and not rows else None)

        return cls(
            study=data["study"],
            title=data["title"],
            settings=data["settings"],
            series=data["series"],
            notes=list(data["notes"]),
            curves=frame(data["curves"], CURVE_COLUMNS),
            paired=_numeric(frame(data["paired"], PAIRED_COLUMNS), ("ci_low", "ci_high")),
            per_seed=frame(data["per_seed"], PER_SEED_COLUMNS),
            tables={k: frame(v) for k, v in data["tables"].items()},
        )

    def csv_files(self) -> dict[str, str]:
        """``{file name: CSV text}`` of every frame (``curves.csv``, ``paired.csv``, ``per_seed.csv``, tables)."""
        files = {
            "curves.csv": self.curves,
            "paired.csv": self.paired,
            "per_seed.csv": self.per_seed,
            **{f"{name}.csv": table for name, table in self.tables.items()},
        }
        out = {}
        for name, table in files.items():
            buffer = io.StringIO()
            table.to_csv(buffer, index=False)
            out[name] = buffer.getvalue()
        return out


def _plain(value, strict_json: bool):
    """numpy scalars as Python ones (recursively); NaN as None with ``strict_json``."""
    if isinstance(value, dict):
        return {str(k): _plain(v, strict_json) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, strict_json) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if strict_json and isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """JSON writes NaN as null: bring the interval columns back to floats."""
    for column in columns:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column]).astype(float)
    return frame


# ------------------------------------------------------------------------------------------ options
def resolve_seeds(seeds: int | Sequence[int] | None, default: int = DEFAULT_SEEDS) -> tuple[int, ...]:
    """``range(seeds)`` for a count (``default`` when None), else the given seeds (1..:data:`protocol.MAX_SEEDS`,
    no repeats)."""
    resolved = protocol.resolve_seeds(default if seeds is None else seeds)
    if len(set(resolved)) != len(resolved):
        raise InputError("give each seed once")
    return resolved


def checkpoint(cancel: Cancel | None, what: str) -> None:
    """Raise :class:`Cancelled` when ``cancel()`` says so (called between points and seeds)."""
    if cancel is not None and cancel():
        raise Cancelled(f"{what} cancelled")


@dataclass(frozen=True, eq=False)
class SeededSplits:
    """Samples' correctness and their seeded tuning/evaluation splits: ``parts[i]`` is ``(tune, evaluation)``
    for ``seeds[i]``; iterating gives ``(seed, tune, evaluation)``."""

    correct: np.ndarray
    seeds: tuple[int, ...]
    parts: tuple[tuple[np.ndarray, np.ndarray], ...]

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        return ((seed, tune, evaluation) for seed, (tune, evaluation) in zip(self.seeds, self.parts))


def splits_for(correct: np.ndarray, tune_fraction: float, seeds: Sequence[int]) -> SeededSplits:
    """The protocol's seeded splits, stratified by correctness (the same ones :func:`protocol.evaluate` uses)."""
    parts = tuple(protocol.split_indices(len(correct), tune_fraction, seed, stratify=correct) for seed in seeds)
    return SeededSplits(correct, tuple(seeds), parts)


def moments(probs: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(E[p+ p+ᵀ], E[p- p-ᵀ])`` of fitting samples, or None when a side is empty (Rel-U's Hamming fallback)."""
    pos, neg = probs[correct], probs[~correct]
    if len(pos) == 0 or len(neg) == 0:
        return None
    return pos.T @ pos / len(pos), neg.T @ neg / len(neg)


# ------------------------------------------------------------------------------------------ collector
class Collector:
    """Per-seed metrics and paired scores of every (series, x, detector), turned into frames by :meth:`finish`."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.pairs: dict[tuple[str, float], dict[int, dict]] = {}
        self.fallback: dict[tuple[str, float], int] = {}
        self.values: dict[tuple[str, float, str, int], dict[str, float]] = {}

    def add(
        self,
        series: str,
        x: float,
        detector: str,
        seed: int,
        uncertainty: np.ndarray,
        correct: np.ndarray,
        values: dict[str, float] | None = None,
        *,
        samples: np.ndarray,
    ) -> dict[str, float]:
        """Record ``metrics.summary(uncertainty, correct)`` (or the ``values`` already computed from them) of the
        evaluation ``samples`` (their indices: the paired bootstrap resamples samples, which seeds share)."""
        values = metrics.summary(uncertainty, correct) if values is None else values
        self.values[(series, x, detector, seed)] = values
        self.records.extend((series, x, detector, m, seed, float(values[m])) for m in METRICS)
        if detector in (RELU, DOCTOR):
            held = self.pairs.setdefault((series, x), {}).setdefault(seed, {"correct": correct, "samples": samples})
            held[detector] = uncertainty
        return values

    def note_fallback(self, series: str, x: float) -> None:
        """Count a seed on which Rel-U's D* at this point was the Hamming fallback (= Doctor)."""
        self.fallback[(series, x)] = self.fallback.get((series, x), 0) + 1

    def fallback_notes(self, point: Callable[[str, float], str] = lambda series, x: f"{series} {x:g}") -> list[str]:
        """One note per point counted by :meth:`note_fallback`, in order: "<point(series, x)>: D* is the Hamming
        fallback (= Doctor) on n seed(s)"."""
        return [
            f"{point(series, x)}: D* is the {protocol.FALLBACK_LABEL} on {count} seed(s)"
            for (series, x), count in sorted(self.fallback.items())
        ]

    def finish(
        self, n_resamples: int, progress: Progress | None = None, cancel: Cancel | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """``(curves, paired, per_seed)``; the bootstrap runs per point with ``n_resamples`` (0: none)."""
        per_seed = pd.DataFrame(self.records, columns=list(PER_SEED_COLUMNS))
        grouped = per_seed.groupby(["series", "x", "detector", "metric"], sort=False)["value"]
        curves = grouped.agg(mean="mean", std=lambda v: float(np.std(v)), n_seeds="count").reset_index()
        rows = []
        points = [
            (key, seeds) for key, seeds in self.pairs.items() if all(RELU in d and DOCTOR in d for d in seeds.values())
        ]
        for done, ((series, x), seeds) in enumerate(points):
            checkpoint(cancel, "paired bootstrap")
            report(progress, done, len(points), f"paired bootstrap {done + 1}/{len(points)}")
            triples = [(d[RELU], d[DOCTOR], d["correct"]) for d in seeds.values()]
            ids = [d["samples"] for d in seeds.values()]
            pooled = stats.pooled_bootstrap(triples, sample_ids=ids, n_resamples=n_resamples) if n_resamples else {}
            for metric in stats.HIGHER_IS_BETTER:
                diffs = np.array(
                    [
                        self.values[(series, x, RELU, s)][metric] - self.values[(series, x, DOCTOR, s)][metric]
                        for s in seeds
                    ]
                )
                mean, std = float(diffs.mean()), float(diffs.std())
                if metric in pooled:
                    d = pooled[metric]
                    rows.append((series, x, metric, mean, std, d.estimate, d.low, d.high, d.significant, d.verdict()))
                else:
                    rows.append(
                        (
                            series,
                            x,
                            metric,
                            mean,
                            std,
                            mean,
                            np.nan,
                            np.nan,
                            False,
                            f"{stats.METRIC_LABELS[metric]}: no bootstrap interval (0 resamples)",
                        )
                    )
        paired = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
        return curves[list(CURVE_COLUMNS)], paired, per_seed


# ------------------------------------------------------------------------------------------ options and cache
@dataclass(frozen=True)
class Options:
    """The keyword options every study's ``run_study`` takes besides its own settings, checked by
    :func:`options` (where they are documented)."""

    seeds: tuple[int, ...]
    n_resamples: int
    progress: Progress | None
    cancel: Cancel | None
    use_cache: bool

    def finish(self, collector: Collector) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """``collector``'s frames (:meth:`Collector.finish`) with these resamples, progress and cancel."""
        return collector.finish(self.n_resamples, self.progress, self.cancel)

    def cached(self, study: str, run, key: dict, compute: Callable[[], StudyResult]) -> StudyResult:
        """The result stored under the ``study``'s name, the content of the ``run``'s logits and labels, the
        study's own settings ``key``, the seeds, the resample count and :data:`CACHE_VERSION`; or ``compute()``-d
        and stored (``use_cache=False``: always computed)."""
        full_key = {
            "study": study,
            "logits": cache.array_digest(np.asarray(run.logits)),
            "labels": cache.array_digest(np.asarray(run.labels)),
            **key,
            "seeds": self.seeds,
            "n_resamples": self.n_resamples,
            "cache_version": CACHE_VERSION,
        }
        if self.use_cache:
            stored = cache.load(NAMESPACE, full_key)
            if stored is not None:
                return StudyResult.from_dict(json.loads(str(stored["result"])))
        result = compute()
        cache.save(NAMESPACE, full_key, {"result": np.array(json.dumps(result.to_dict()))})  # exact floats, NaN kept
        return result


def options(
    *,
    seeds: int | Sequence[int] | None = None,
    n_resamples: int = 1000,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    use_cache: bool = True,
) -> Options:
    """The keyword options every ``run_study(run, <its own settings>, **options)`` forwards here, checked.

    ``seeds``: a count or the seeds, each once (None: :data:`DEFAULT_SEEDS`). ``n_resamples``: paired bootstrap
    resamples per point (0: mean ± std of Rel-U − Doctor only, no interval). ``progress(done, total, message)``
    reports the work; ``cancel()`` returning True stops it with :class:`Cancelled`. ``use_cache=False``
    recomputes even when a cached result exists.
    """
    return Options(resolve_seeds(seeds), protocol.check_resamples(n_resamples), progress, cancel, use_cache)
