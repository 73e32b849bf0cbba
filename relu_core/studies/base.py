"""What every study shares: the result type, the per-point collector, seeds, cancellation and the result cache.

A study sweeps one setting (λ, T, ε, the tuning fraction, ...) and, at every point and on every seeded split
(:func:`relu_core.protocol.seeded_splits`), fits the detectors on the tuning part only and scores the evaluation
part only. :class:`Collector` gathers the per-seed metrics and the (Rel-U, Doctor, correct) triples of each point
(:meth:`Collector.add_relu` fits D* with its Hamming fallback, :class:`RelUFit`); :meth:`Collector.finish` turns
them into the mean ± std curves and the paired Rel-U − Doctor rows per point (:func:`relu_core.stats.paired_rows`:
mean ± std over seeds and the 95 % pooled paired bootstrap interval). :meth:`Options.study` is what every
``run_study`` shares: the collector, its frames, the notes, the result and its cache; a study gives its sweep.

Results are cached on disk (:mod:`relu_core.cache`, namespace ``studies``) under an explicit key: the study,
the content of the run (logits and labels digests, and the model's weights hash where the study runs the
model), every setting, and :data:`CACHE_VERSION`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from relu_core import cache, csv_text, detectors, metric_info, metrics, protocol, stats, ties
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress, report

#: Bump when a study's numbers change for the same key (invalidates the cached results).
CACHE_VERSION = 4  # 2: the pooled bootstrap draws the seeds' shared samples once; 3: AUGRC; 4: ties
NAMESPACE = "studies"
DEFAULT_SEEDS = 10
CURVE_COLUMNS = ("series", "x", "detector", "metric", "mean", "std", "n_seeds")
PAIRED_COLUMNS = ("series", "x", *stats.PAIRED_ROW_COLUMNS)
PER_SEED_COLUMNS = ("series", "x", "detector", "metric", "seed", "value")
#: The display labels of the paired detectors (``protocol.PAIRED``), the studies' series names.
RELU, DOCTOR = (detectors.label(key) for key in protocol.PAIRED)


@dataclass
class StudyResult:
    """The numbers of one study, as tidy frames (every frame also goes to CSV as it is).

    ``curves``: :data:`CURVE_COLUMNS`, one row per series x point x detector x metric: mean and population
    std (``ddof=0``) over ``n_seeds`` seeds. ``series`` names the sweep (e.g. ``"lambda"``), ``x`` the point.
    ``paired``: :data:`PAIRED_COLUMNS`, Rel-U − Doctor per series x point x metric (``metric_info.PAIRED_KEYS``):
    the rows of :func:`relu_core.stats.paired_rows` (NaN bounds when ``n_resamples`` = 0).
    ``per_seed``: :data:`PER_SEED_COLUMNS`. ``settings``: every setting used (JSON-able), including
    ``seeds``. ``series``: per series ``{"x_label", "log_x", "x_range", "marks": {label: x}}`` for the figures.
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
        return {name: csv_text.frame_csv(table) for name, table in files.items()}


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


class RelUFit:
    """Rel-U's D* fitted on the ``tune`` rows of ``probs`` (N, C; ``correct`` bool, N): their second moments once
    (:func:`detectors.second_moments`), D* at any λ from them, the Hamming fallback when a side is empty."""

    def __init__(self, probs: np.ndarray, correct: np.ndarray, tune: np.ndarray) -> None:
        self.probs, self.correct = probs, correct
        self.moments = detectors.second_moments(probs, correct[tune], rows=tune)

    def matrix(self, lam: float) -> tuple[np.ndarray, bool]:
        """D* at ``lam`` and whether it is the Hamming fallback (then Rel-U ranks exactly like Doctor)."""
        matrix = self.moments.matrix(lam)
        return matrix, detectors.is_fallback(matrix)


# ------------------------------------------------------------------------------------------ collector
class Collector:
    """Per-seed metrics and paired scores of every (series, x, detector), turned into frames by :meth:`finish`."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.pairs: dict[tuple[str, float], dict[int, dict]] = {}
        self.fallback: dict[tuple[str, float], int] = {}
        self.values: dict[tuple[str, float, str, int], dict[str, float]] = {}
        #: The points whose settings were selected (fitted) on the tuning splits: their intervals are
        #: ``stats.CONDITIONAL_LABEL`` (:meth:`mark_selected`).
        self.selected: set[tuple[str, float]] = set()
        self._twins: np.ndarray | None = None  # of the logits the samples of :meth:`add` index (:meth:`tie_on`)

    def tie_on(self, logits: np.ndarray) -> None:
        """Say which logits the ``samples`` of the following :meth:`add` calls index: from then on, samples of
        identical logits get one score (:mod:`relu_core.ties`), as in :func:`relu_core.protocol.evaluate`, so that a
        study's point equals ``evaluate`` at its setting on tied data too. A sweep calls it first."""
        self._twins = ties.twins(np.asarray(logits))

    def tied(self, samples: np.ndarray, uncertainty: np.ndarray) -> np.ndarray:
        """``uncertainty`` of ``samples`` with samples of identical logits given one value (:meth:`tie_on`)."""
        return ties.tied_equal(self._twins, samples, np.asarray(uncertainty, dtype=np.float64))

    def mark_selected(self, series: str, x: float) -> None:
        """Say that the point's settings were selected on the tuning splits (e.g. the calibration temperature):
        its paired interval holds for the selected settings only."""
        self.selected.add((series, x))

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
        perturbed: bool = False,
    ) -> dict[str, float]:
        """Record ``metrics.summary(uncertainty, correct)`` (or the ``values`` already computed from them) of the
        evaluation ``samples`` (their indices: the paired bootstrap resamples samples, which seeds share). Clean
        scores are tied first (:meth:`tied`), unless ``values`` come with them: then the caller tied them, once for
        every point that reuses them; ``perturbed`` ones (inputs moved by ε: identical clean logits need not score
        alike) are not."""
        if values is None:
            if not perturbed:
                uncertainty = self.tied(samples, uncertainty)
            values = metrics.summary(uncertainty, correct)
        self.values[(series, x, detector, seed)] = values
        self.records.extend((series, x, detector, m, seed, float(values[m])) for m in metric_info.KEYS)
        if detector in (RELU, DOCTOR):
            held = self.pairs.setdefault((series, x), {}).setdefault(seed, {"correct": correct, "samples": samples})
            held[detector] = uncertainty
        return values

    def add_relu(self, series: str, x: float, seed: int, fit: RelUFit, lam: float, evaluation: np.ndarray) -> None:
        """Rel-U with ``fit``'s D* at ``lam``, scored on the ``evaluation`` rows of its probabilities; a seed whose
        D* is the Hamming fallback is noted (:meth:`note_fallback`)."""
        matrix, fallback = fit.matrix(lam)
        if fallback:
            self.note_fallback(series, x)
        uncertainty = detectors.quadratic_score(fit.probs[evaluation], matrix)
        self.add(series, x, RELU, seed, uncertainty, fit.correct[evaluation], samples=evaluation)

    def note_fallback(self, series: str, x: float) -> None:
        """Count a seed on which Rel-U's D* at this point was the Hamming fallback (= Doctor)."""
        self.fallback[(series, x)] = self.fallback.get((series, x), 0) + 1

    def fallback_notes(self, point: Callable[[str, float], str]) -> list[str]:
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
            if (series, x) in self.selected:
                pooled = stats.conditional_on_selection(pooled)
            differences = {
                m: [self.values[(series, x, RELU, s)][m] - self.values[(series, x, DOCTOR, s)][m] for s in seeds]
                for m in metric_info.PAIRED_KEYS
            }
            rows += [
                {"series": series, "x": x, **{k: row[k] for k in stats.PAIRED_ROW_COLUMNS}}
                for row in stats.paired_rows(differences, pooled)
            ]
        paired = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
        return curves[list(CURVE_COLUMNS)], paired, per_seed


# ------------------------------------------------------------------------------------------ options and cache
@dataclass
class Sweep:
    """What a study's sweep gives besides the collected numbers: its ``settings`` (the seeds and resamples are
    added), ``series`` (see :class:`StudyResult`), ``notes``, ``tables`` made from the curves, and ``point``, how
    a fallback note names a point (:meth:`Collector.fallback_notes`)."""

    settings: dict
    series: dict[str, dict]
    notes: list[str] = field(default_factory=list)
    tables: Callable[[pd.DataFrame], dict[str, pd.DataFrame]] | None = None
    point: Callable[[str, float], str] = lambda series, x: f"{series} {x:g}"


@dataclass(frozen=True)
class Options:
    """The keyword options every study's ``run_study`` takes besides its own settings, checked by
    :func:`options` (where they are documented)."""

    seeds: tuple[int, ...]
    n_resamples: int
    progress: Progress | None
    cancel: Cancel | None
    use_cache: bool

    def study(self, name: str, title: str, run, key: dict, sweep: Callable[[Collector], Sweep]) -> StudyResult:
        """The study ``name`` on ``run``: ``sweep(collector)`` fills a :class:`Collector` and says what else the
        result holds; its frames (:meth:`Collector.finish`, with these resamples, progress and cancel), the
        seeds and resamples in the settings, the sweep's notes then one per fallback point make the result,
        cached under the study's own settings ``key`` (:meth:`cached`)."""

        def compute() -> StudyResult:
            collector = Collector()
            swept = sweep(collector)
            curves, paired, per_seed = collector.finish(self.n_resamples, self.progress, self.cancel)
            report(self.progress, 1, 1, "done")
            settings = {"seeds": list(self.seeds), **swept.settings, "n_resamples": self.n_resamples}
            notes = [*swept.notes, *collector.fallback_notes(swept.point)]
            tables = swept.tables(curves) if swept.tables is not None else {}
            return StudyResult(name, title, curves, paired, per_seed, settings, swept.series, tables, notes)

        return self.cached(name, run, key, compute)

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
