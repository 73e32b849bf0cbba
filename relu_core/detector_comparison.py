"""Comparing detectors: the metrics table, the Rel-U − Doctor rows in words (one split, or the mean over seeds),
the operating-point table and the errors one detector catches that another misses. Plain numpy / pandas (no
Streamlit): Explore, the report and the study pages show these, the tests check them against direct computations.

Conventions as in :mod:`relu_core.metrics`: uncertainty higher = more likely wrong, positives are the correctly
classified samples, a detector *catches* an error when it rejects it (uncertainty above its threshold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from relu_core import metric_info, metrics, stats

#: The header of the seeds' Rel-U − Doctor interval (:func:`paired_table`).
MEAN_INTERVAL = "95 % CI of the mean"
#: CSS classes of a significant difference's cell (the tables' style sheets colour them): the first detector
#: better / worse.
BETTER_CLASS = "better"
WORSE_CLASS = "worse"


def paired_rows(paired: Mapping[str, stats.PairedDifference]) -> pd.DataFrame:
    """One row per metric of a paired comparison (metric key -> difference): the metric, the difference
    (first detector − second), its interval and the verdict in words (the numbers are in the columns before)."""
    return pd.DataFrame(
        [
            {
                "metric": metric_info.get(m).label,
                "Rel-U − Doctor": metric_info.signed(d.estimate),
                f"{100 * d.confidence:g} % CI (paired bootstrap)": _interval(d.low, d.high)
                + (f" ({d.condition})" if d.conditional else ""),
                "verdict": d.outcome(),
            }
            for m, d in paired.items()
        ]
    )


def paired_table(frame: pd.DataFrame, **leading: Sequence) -> pd.DataFrame:
    """Rows of Rel-U − Doctor over seeds (a frame of :data:`stats.PAIRED_ROW_COLUMNS`, e.g. a study's or the
    corruption study's ``paired``) in words: the ``leading`` columns (header -> values, e.g. the corruption), the
    metric, mean ± std over seeds, the interval of the mean ("–" without a bootstrap; its header says so when the
    rows' intervals are :data:`stats.CONDITIONAL_LABEL`, as their verdicts do) and the short verdict."""
    conditional = any(stats.CONDITIONAL_LABEL in verdict for verdict in frame["verdict"])
    return pd.DataFrame(
        {
            **{header: list(values) for header, values in leading.items()},
            "metric": [metric_info.get(m).label for m in frame["metric"]],
            "Rel-U − Doctor (mean ± std over seeds)": [
                f"{metric_info.signed(m)} ± {s:.4f}" for m, s in zip(frame["mean"], frame["std"])
            ],
            MEAN_INTERVAL + (f" ({stats.CONDITIONAL_LABEL})" if conditional else ""): [
                "–" if np.isnan(low) else _interval(low, high) for low, high in zip(frame["ci_low"], frame["ci_high"])
            ],
            "verdict": outcome_column(frame),
        }
    )


def _interval(low: float, high: float) -> str:
    return f"{metric_info.signed(low)} to {metric_info.signed(high)}"


def outcome_column(frame: pd.DataFrame) -> list[str]:
    """The short verdict ("Rel-U better", "Doctor better", "no significant difference") of each row of a paired
    frame (``metric``, ``estimate``, ``ci_low``, ``ci_high``, ``verdict``; one sign convention per table: the
    numbers are in the columns before). A row without an interval keeps its verdict's words."""
    return [
        verdict.split(": ", 1)[1]
        if np.isnan(low)
        else stats.PairedDifference(metric, estimate, low, high, metric_info.get(metric).higher_is_better, 0).outcome()
        for metric, estimate, low, high, verdict in zip(
            frame["metric"], frame["estimate"], frame["ci_low"], frame["ci_high"], frame["verdict"], strict=True
        )
    ]


def difference_label(a: str, b: str) -> str:
    """The name of the difference row ``a − b`` (e.g. "Rel-U − Doctor")."""
    return f"{a} − {b}"


def metrics_table(
    summaries: Mapping[str, Mapping[str, float]], accuracy: float, difference: tuple[str, str] | None = None
) -> pd.DataFrame:
    """One row per detector (display name -> ``metrics.summary``): FPR95, AUROC, AURC, E-AURC, AUGRC and the
    classifier's accuracy (shared by every detector). With ``difference = (a, b)`` and both rows present, a last
    row ``a − b`` holds the differences (0 for the accuracy: one classifier) and the table is float."""
    table = pd.DataFrame(
        {
            name: {**{m.header: summary[m.key] for m in metric_info.METRICS}, "accuracy": accuracy}
            for name, summary in summaries.items()
        }
    ).T
    if difference is not None and difference[0] in table.index and difference[1] in table.index:
        table.loc[difference_label(*difference)] = table.loc[difference[0]] - table.loc[difference[1]]
        table = table.astype(float)
    return table


def significant_columns(paired: Mapping[str, stats.PairedDifference]) -> dict[str, stats.PairedDifference]:
    """The metrics-table headers whose paired difference is significant (its interval excludes 0)."""
    return {metric_info.get(m).header: d for m, d in paired.items() if d.significant}


def difference_classes(
    table: pd.DataFrame, paired: Mapping[str, stats.PairedDifference], row: str
) -> dict[tuple[int, int], str]:
    """(row, column) position -> CSS class of the cells of ``table`` to colour: only the difference ``row``'s
    cells whose paired interval excludes 0 (:data:`BETTER_CLASS` where the first detector is better,
    :data:`WORSE_CLASS` where worse); the rest is noise and stays plain."""
    if row not in table.index:
        return {}
    r = list(table.index).index(row)
    columns = list(table.columns)
    return {
        (r, columns.index(column)): BETTER_CLASS if diff.a_is_better() else WORSE_CLASS
        for column, diff in significant_columns(paired).items()
        if column in columns
    }


def operating_table(points: Mapping[str, metrics.OperatingPoint], correct: np.ndarray) -> pd.DataFrame:
    """One row per detector (display name -> its operating point on the evaluation split): threshold, TPR, FPR,
    coverage, risk and the accepted / rejected / errors caught / errors missed counts."""
    return pd.DataFrame.from_dict(
        {
            name: {
                "threshold": p.threshold,
                "TPR": p.tpr,
                "FPR": p.fpr,
                "coverage": p.coverage,
                "risk": p.risk,
                **p.counts(correct),
            }
            for name, p in points.items()
        },
        orient="index",
    )


def threshold_format(thresholds: Sequence[float]) -> str:
    """One printf format for a column of thresholds (detectors' scales differ: Rel-U's lie in [0, 1], energy's
    are negative, a sharp model's Rel-U thresholds can be 1e-5): four decimals when every non-zero finite value
    has a magnitude in [0.001, 100 000), else scientific notation with four significant digits."""
    values = np.abs(np.asarray(thresholds, dtype=float))
    values = values[np.isfinite(values) & (values > 0)]
    return "%.4f" if np.all((values >= 1e-3) & (values < 1e5)) else "%.3e"


def caught_by_one(
    indices: np.ndarray, correct: np.ndarray, accepted_a: np.ndarray, accepted_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The errors detector a catches (rejects) and b misses (accepts), and the reverse, as entries of
    ``indices`` (the samples that ``correct`` and both acceptance masks describe, in that order)."""
    errors = ~np.asarray(correct, dtype=bool)
    reject_a, reject_b = ~np.asarray(accepted_a, dtype=bool), ~np.asarray(accepted_b, dtype=bool)
    indices = np.asarray(indices)
    return indices[errors & reject_a & ~reject_b], indices[errors & reject_b & ~reject_a]
