"""Runs compared side by side: two to four runs of one data set (e.g. one architecture trained with several
objectives, or two architectures), every detector's metrics per run on the same seeded splits, ROC and
risk-coverage overlays (one colour per run) and the paired difference of each run from the first. A thin page:
the widgets, one call to ``relu_core.run_comparison.compare_runs`` through the shared job box (progress, Cancel), the
figures of ``relu_core.figures``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from relu_core import csv_text, detectors, explore, figures, limits, metric_info, protocol, run_comparison, runs
from relu_core.progress import count
from studio import jobbox, page, session
from studio.runs import run_label, session_runs
from studio.text import plain

page.page_header(
    "Runs compared side by side",
    "Choose two to four runs of **one data set** (load them in the sidebar: a registered data set with several "
    "models, or uploads). Every run is split with the same seeds (stratified on the runs' joint right and wrong "
    "predictions), D* is fitted on each run's tuning part and every metric is read on the evaluation part. Each "
    "detector judges its own run's predictions, so a difference between runs compares how well each run's "
    "errors can be told apart, beside the runs' accuracies. The difference of each run from the first carries a "
    "95 % paired bootstrap interval (the same resampled samples score both runs). "
    f"{protocol.FPR_CONVENTION}.",
    manual_page="how-to/compare-runs.md",
)

loaded = [rid for rid in session_runs() if rid in runs.RUNS]


def _dropped_runs() -> list[str]:
    """The runs chosen here that the server's bounded run registry has dropped since (said until loaded again);
    a run loaded again goes back into the choice."""
    dropped = st.session_state.setdefault(session.CMP_DROPPED, [])
    chosen = st.session_state.get(
        session.CMP_RUNS, st.session_state.get(session.CMP_KEPT, {}).get(session.CMP_RUNS, [])
    )
    dropped += [rid for rid in chosen if rid not in runs.RUNS and rid not in dropped]
    back = [rid for rid in dropped if rid in loaded]
    if back:
        kept = st.session_state.setdefault(session.CMP_KEPT, {})
        kept[session.CMP_RUNS] = [*[r for r in chosen if r in loaded], *back][: run_comparison.MAX_RUNS]
        st.session_state[session.CMP_RUNS] = kept[session.CMP_RUNS]
    dropped[:] = [rid for rid in dropped if rid not in runs.RUNS and rid in session_runs()]
    return dropped


def _reload(run_id: str) -> None:
    """Reopen a dropped run from this machine's record of it (cached logits), as a background job."""
    jobbox.start_job(
        f"reopen:{run_id}",
        f"Loading the run {run_id[:6]} again",
        lambda progress, cancel: runs.reopen(run_id, progress, cancel),
        select=False,
    )


for run_id in _dropped_runs():
    known = runs.describe(run_id)
    st.warning(
        plain(
            f"{known or 'A run'} ({run_id[:6]}) was dropped from the server's memory (it keeps the "
            f"{limits.MAX_RUNS} most recently used runs of all sessions), so it is no longer compared. "
            + (
                "Load it again with the button (from this machine's cache: quick), or in the sidebar."
                if known
                else "Load it again in the sidebar: the same data set + model, or the same upload."
            )
        )
    )
    if known:
        st.button("Load it again", key=session.item_key(session.CMP_RELOAD, run_id), on_click=_reload, args=(run_id,))

if len(loaded) < run_comparison.MIN_RUNS:
    st.info(
        "Only one run is loaded in this session. Add another run of the same data set in the sidebar "
        "(**Data set + model**, **Upload logits** or **Upload model + data set**): it appears here."
    )
    st.stop()


def _offered(run_ids: list[str]) -> tuple[list[str], list[str]]:
    """The runs offered (those comparable with the current run, or, when it has no partner, with the first run that
    has one) and one line per run not offered saying why; ``([], lines)`` when no two runs are comparable."""
    by_id = {rid: runs.RUNS[rid] for rid in run_ids}
    current = st.session_state.get(session.RUN_ID)
    order = ([current] if current in by_id else []) + [rid for rid in run_ids if rid != current]
    for reference in order:
        fits, others = run_comparison.comparable_with(by_id[reference], list(by_id.values()))
        if len(fits) >= run_comparison.MIN_RUNS:
            first = by_id[reference]
            return [run.run_id for run in fits], [
                f"{run_label(run)}: it and the offered runs "
                + run_comparison.why_not_comparable(first, run).split(":")[0]
                + f" ({run.labels.size:,} samples, {run.logits.shape[1]} classes)"
                for run in others
            ]
    return [], [
        f"{run_label(run)} ({run.labels.size:,} samples, {run.logits.shape[1]} classes)" for run in by_id.values()
    ]


offered, not_offered = _offered(loaded)
if not offered:
    st.info(
        plain(
            "No two runs loaded in this session hold the same samples (one data set, in one order), and runs are "
            "compared sample by sample. Add another run of the same data set in the sidebar: it appears here. "
            "Loaded: " + "; ".join(not_offered) + "."
        )
    )
    st.stop()

session.share(session.CMP_SHARED)  # T, λ, the tuning fraction and the seeds every page shares
session.restore(session.cmp_defaults(offered), session.CMP_KEPT)
# only runs that can be compared are chosen: a choice from another data set (kept from an earlier visit) is dropped
st.session_state[session.CMP_RUNS] = [rid for rid in st.session_state[session.CMP_RUNS] if rid in offered]
# a run loaded since the page last offered its runs joins the comparison while there is room; a run the user took
# out stays out
seen = st.session_state.get(session.CMP_SEEN)
if seen is not None:
    room = run_comparison.MAX_RUNS - len(st.session_state[session.CMP_RUNS])
    joining = [rid for rid in offered if rid not in seen and rid not in st.session_state[session.CMP_RUNS]]
    if joining and room > 0:
        st.session_state[session.CMP_RUNS] = [*st.session_state[session.CMP_RUNS], *joining[:room]]
st.session_state[session.CMP_SEEN] = list(loaded)
with st.container(border=True):
    st.multiselect(
        f"runs ({run_comparison.MIN_RUNS} to {run_comparison.MAX_RUNS}; the first is the reference)",
        offered,
        format_func=lambda rid: run_label(runs.RUNS[rid]),
        max_selections=run_comparison.MAX_RUNS,
        key=session.CMP_RUNS,
    )
    if not_offered:  # the runs of other samples, and how to compare them
        st.caption(
            plain(
                "Not offered (runs are compared sample by sample): "
                + "; ".join(not_offered)
                + ". To compare those, make one of them the current run in the sidebar."
            )
        )
    # the detectors' chips need half the width at 1280 x 720 (in a third, the last one was cut)
    c_det, c_t, c_lam, c_split, c_seeds = st.columns([6, 2, 2, 2, 1.2])
    c_det.multiselect(
        "detectors", list(run_comparison.DEFAULT_KEYS), format_func=detectors.label, key=session.CMP_DETECTORS
    )
    c_t.select_slider(
        "T (Rel-U, Doctor)", options=explore.TEMPERATURES, format_func=lambda t: f"{t:g}", key=session.CMP_TEMPERATURE
    )
    c_lam.slider("λ (Rel-U)", 0.0, 1.0, step=explore.LAM_STEP, key=session.CMP_LAM)
    page.fraction_slider(c_split, "tuning split", key=session.CMP_TUNE_FRACTION)
    c_seeds.number_input("seeds", min_value=1, max_value=session.SEEDS_MAX, step=1, key=session.CMP_SEEDS)
session.keep([session.CMP_RUNS, session.CMP_DETECTORS], session.CMP_KEPT)

chosen = [runs.RUNS[rid] for rid in st.session_state[session.CMP_RUNS]]
options = {  # the arguments of run_comparison.compare_runs, and the settings its result is kept for
    "keys": tuple(st.session_state[session.CMP_DETECTORS]),
    "temperature": float(st.session_state[session.CMP_TEMPERATURE]),
    "lam": round(float(st.session_state[session.CMP_LAM]), 2),
    "tune_fraction": float(st.session_state[session.CMP_TUNE_FRACTION]),
    "seeds": tuple(range(int(st.session_state[session.CMP_SEEDS]))),
}
ready = run_comparison.MIN_RUNS <= len(chosen) and bool(options["keys"])
result = jobbox.study_run(
    session.COMPARE_PAGE,
    tuple(run.run_id for run in chosen),
    tuple(options.items()),
    f"Comparing {count(len(chosen), 'run')}",
    lambda progress, cancel: run_comparison.compare_runs(chosen, **options, progress=progress, cancel=cancel),
    ready=ready,
    hint=""
    if ready
    else f"Choose {run_comparison.MIN_RUNS} to {run_comparison.MAX_RUNS} runs and at least one detector.",
)
if result is None:
    st.stop()
st.caption(
    f"T = {result.temperature:g} · λ = {result.lam} · tuning split {result.tune_fraction:.0%} · "
    f"{count(len(result.seeds), 'seed')} · {result.n_tune:,} tuning / {result.n_eval:,} evaluation samples "
    "per seed"
)

# ------------------------------------------------------------------------------------------- tables
# the runs by number and colour: the table and the charts' legends name a run by its number (its name, often
# longer than a column, was cut there)
st.markdown(
    "  \n".join(
        f"**{label.split('.', 1)[0]}.** {plain(label.split('. ', 1)[1])}"
        f" · {figures.RUN_COLOR_NAMES[i % len(figures.RUN_COLOR_NAMES)]} in the charts"
        for i, label in enumerate(result.run_labels)
    )
)
st.subheader("Each run's detectors (mean ± std over seeds)")
number = {label: label.split(".", 1)[0] for label in result.run_labels}
shown = pd.DataFrame({"run": result.table["run"].map(number), "detector": result.table["detector"]})
shown["accuracy"] = [f"{a:.2%}" for a in result.table["accuracy"]]
for m in metric_info.PAIRED_KEYS:
    metric = metric_info.BY_KEY[m]
    shown[metric.header] = [
        metric.mean_std(mean, std) for mean, std in zip(result.table[m], result.table[f"{m}_std"], strict=True)
    ]
st.dataframe(shown, hide_index=True, column_config={"run": st.column_config.TextColumn("run", width="small")})

# the verdicts are sentences: static tables wrap them (an interactive grid cut them at its edge); the metric by its
# label ("FPR95"), as the verdict and the table above name it, not by its key ("fpr95")
words = ["run", "metric", "verdict"]


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(metric=frame["metric"].map(lambda key: metric_info.BY_KEY[key].label))


if not result.relu_minus_doctor.empty:
    st.subheader("Rel-U − Doctor within each run")
    st.table(_labelled(result.relu_minus_doctor[words]).set_index("run"))
st.subheader(plain(f"Each run − run 1 ({result.run_labels[0].split('. ', 1)[-1]})"))
st.table(_labelled(result.differences[["detector", *words]]).set_index("detector"))
st.caption(
    "Verdicts: the 95 % percentile interval of the paired bootstrap, pooled over the seeds; "
    '"no significant difference" when it covers 0.'
)

# ------------------------------------------------------------------------------------------- figures
roc = figures.runs_curves_figure(
    {key: (fpr, tpr, auc) for key, (fpr, tpr, auc, *_) in result.curves.items()}, "roc", max_points=400
)
rc = figures.runs_curves_figure(
    {key: (cov, risk, area) for key, (*_, cov, risk, area) in result.curves.items()}, "risk_coverage", max_points=400
)
left, right = st.columns(2)
with left:
    page.chart(st, roc, "runs_roc", key=session.CMP_ROC)
with right:
    page.chart(st, rc, "runs_risk_coverage", key=session.CMP_RISK_COVERAGE)
st.caption(
    "Curves on the first seed's evaluation split; colour: run (numbered as above), dash: detector (Rel-U solid, "
    "Doctor dashed, MSP dotted, ODIN dash-dot). Hover a curve for its run's name."
)

row = st.columns(3)
for column, (name, label, frame) in zip(
    row,
    (
        ("runs_table", "Each run's detectors (CSV)", result.table),
        ("runs_differences", "Each run − run 1 (CSV)", result.differences),
        ("runs_relu_doctor", "Rel-U − Doctor within each run (CSV)", result.relu_minus_doctor),
    ),
    strict=True,
):
    page.download_button(
        column,
        label,
        csv_text.frame_csv(frame),
        f"{name}.csv",
        key=session.item_key(session.CMP_DOWNLOAD, name),
    )
