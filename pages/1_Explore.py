"""Explore: Rel-U against Doctor (and the baselines) on the current run, live as λ, T, ε and the split move."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import streamlit as st

import ui_common as ui
from relu_core import detectors, figures, jobs, metrics, protocol, stats
from relu_core.errors import Cancelled, InputError
from relu_core.registry import LRURegistry

st.set_page_config(page_title="Explore · Rel-U Studio", layout="wide")
ui.open_run_from_query()  # a shared link names its run: open it before anything else is prepared
run = ui.sidebar_run_picker()
ui.init_from_query_params()

st.title("Explore: Rel-U vs Doctor")
st.caption(f"Run: {ui.run_label(run)}")
ui.query_run_notice()

DEFAULTS = {"lam": 0.5, "lam_auto": False, "temperature": 1.0, "eps": 0.0, "tune_fraction": 0.5, "seed": 0,
            "detectors": list(ui.DEFAULT_DETECTORS), "op_kind": "target TPR", "op_target": 0.95}
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)


def _download_row(fig, stem: str, extra: list[tuple[str, bytes, str, str]] = ()) -> None:
    """CSV of the figure's data (+ extra files); the PNG is the chart's camera button."""
    cols = st.columns(1 + len(extra))
    cols[0].download_button(f"{stem} data (CSV)", figures.figure_csv(fig), file_name=f"{stem}.csv",
                            mime="text/csv", on_click="ignore", key=f"dl_{stem}")
    for col, (label, payload, name, mime) in zip(cols[1:], extra, strict=True):
        col.download_button(label, payload, file_name=name, mime=mime, on_click="ignore", key=f"dl_{name}")


def _chart(fig, stem: str, **kwargs):
    return st.plotly_chart(fig, config=figures.chart_config(stem), key=f"chart_{stem}", **kwargs)


def _eps_inputs(run_id: str, temperature: float, lam, tune_fraction: float, seed: int, eps: float):
    """What the panels show under input pre-processing, never blocking: ``(perturbed, subset, note, job)``.

    The ε pass runs as background jobs (``ui.eps_job``): on CPU a stated subsample of the evaluation split
    first, then the whole split. ``perturbed`` is the best finished result for this setting (None: none yet,
    the previous result of this view is kept, else the clean scores), ``note`` says what is shown and ``job``
    is the pass still running (None when all is done)."""
    settings = (run_id, temperature, lam, tune_fraction, seed)
    subset = ui.eps_subsample(run_id, tune_fraction, seed)
    shown, pending = None, None
    for stage in ([subset] if subset is not None else []) + [None]:
        job = ui.eps_job(run_id, temperature, lam, tune_fraction, seed, eps, stage)
        if job.state == jobs.DONE:
            shown = (job.result, stage, eps)
            continue
        if job.state == jobs.FAILED:
            ui.show_error(InputError(job.error))
            jobs.MANAGER.forget(job.key)
        else:
            pending = job
        break
    last = st.session_state.get("eps_last")
    if shown is not None:
        st.session_state["eps_last"] = (settings, shown)
    elif last is not None and last[0] == settings:
        shown = last[1]
    if shown is None:
        return None, None, f"ε = {eps:g} is being computed; shown meanwhile: clean scores (ε = 0)", pending
    perturbed, stage, shown_eps = shown
    where = "the whole evaluation split" if stage is None else f"a subsample of {stage.size:,} evaluation images"
    note = f"ε = {shown_eps:g} on {where}"
    if shown_eps != eps:
        note = f"ε = {eps:g} is being computed; shown meanwhile: {note}"
    return perturbed, stage, note, pending


def _view(run_id: str, temperature: float, lam, tune_fraction: float, seed: int, keys: list[str], perturbed,
          subset) -> ui.ExploreView:
    """``ui.explore`` for this setting, kept for the session when it uses the clean scores: the widgets that
    leave the setting alone (operating point, galleries, toggles) reuse its curves and paired bootstrap."""
    if perturbed is not None:  # ε results arrive in stages from background jobs: always recomputed
        return ui.explore(run_id, temperature, lam, tune_fraction, seed, keys, perturbed, subset)
    store = st.session_state.setdefault("explore_views", LRURegistry(4))
    key = (run_id, temperature, lam, tune_fraction, seed, tuple(keys))
    if key not in store:
        store[key] = ui.explore(run_id, temperature, lam, tune_fraction, seed, keys)
    return store[key]


#: How long the tables wait for the paired bootstrap before showing it when it lands instead.
PAIRED_WAIT_S = 0.3


@st.fragment(run_every=0.5)
def _paired_watch(key: str) -> None:
    """"computing" in place of the paired table; reruns the page once the bootstrap has landed."""
    job = jobs.MANAGER.get(key)
    if job is None or not job.running:
        st.rerun()
    st.caption("computing the paired bootstrap interval of Rel-U − Doctor …")


@st.fragment(run_every=1.0)
def _eps_watch(key: str) -> None:
    """The "updating" mark of a running ε pass; reruns the page once the pass has ended."""
    job = jobs.MANAGER.get(key)
    if job is None or not job.running:
        st.rerun()
    st.progress(job.fraction, text=f"updating: {job.label} ({job.message})")


def _gallery(indices: np.ndarray, view: ui.ExploreView, keys: list[str], class_names, limit: int = 24,
             columns: int = 8) -> None:
    """Images (or a table for logits-only runs) with true / predicted class and each detector's score."""
    run_ = ui.get_run(view.run_id)
    if indices.size == 0:
        st.info("No samples here.")
        return
    shown = indices[:limit]
    labels = run_.labels
    if run_.images is None:
        table = pd.DataFrame({"sample": shown, "true": [class_names[labels[i]] for i in shown],
                              "predicted": [class_names[view.predictions[i]] for i in shown]})
        for key in keys:
            table[view.detectors[key].name] = view.detectors[key].uncertainty[shown]
        st.dataframe(table, hide_index=True)
        return
    grid = st.columns(columns)
    for n, i in enumerate(shown):
        scores = " · ".join(f"{view.detectors[k].name} {view.detectors[k].uncertainty[i]:.3g}" for k in keys)
        grid[n % columns].image(ui.thumbnail(run_.images[i]),
                                caption=f"#{i} true {class_names[labels[i]]} → {class_names[view.predictions[i]]}"
                                        f" · {scores}")
    if indices.size > limit:
        st.caption(f"showing {limit} of {indices.size}")


def _report_buttons(run_, view: ui.ExploreView, figs: list, table: pd.DataFrame, settings: dict) -> None:
    """"Download report": the current view as one self-contained HTML file (built on demand: it holds
    plotly.js, about 5 MB, so it is not rebuilt on every slider move)."""
    from relu_core import report

    wanted = (view.run_id, tuple(settings.items()))
    if st.button("Download report", key="build_report", help="One HTML file of this view (interactive figures, "
                 "metrics with intervals, settings, provenance) that opens offline."):
        paired = view.paired or ui.paired_for(view, int(settings["split seed"]))
        verdict = "Rel-U vs Doctor: " + "; ".join(paired[m].verdict() for m in ("auroc", "fpr95", "aurc")) + "."
        st.session_state["report_html"] = (wanted, report.render_html(
            title=f"Rel-U Studio report: {run_.source or run_.run_id}", verdict=verdict, settings=settings,
            provenance_info=report.provenance(run_), figs=figs, metrics_table=table, paired=paired))
    built = st.session_state.get("report_html")
    if built is not None and built[0] == wanted:
        st.download_button("Save report (HTML)", built[1], file_name="relu_studio_report.html", mime="text/html",
                           on_click="ignore", key="dl_report", type="primary")


@st.fragment
def explore_panel(run_id: str) -> None:
    run_ = ui.get_run(run_id)
    class_names = list(run_.class_names)
    has_model = run_.model is not None and run_.images is not None

    # ---------------------------------------------------------------- controls
    with st.container(border=True):
        c_lam, c_t, c_eps, c_split, c_det = st.columns([2, 2.4, 2, 2, 2.6])
        with c_lam:
            lam_auto = st.checkbox("λ auto = N+ / (N+ + N−)", key="lam_auto")
            st.slider("λ (weight of the errors in D*)", 0.0, 1.0, step=0.01, key="lam", disabled=lam_auto)
        with c_t:
            st.select_slider("T (softmax temperature, log scale)", options=ui.TEMPERATURES, key="temperature",
                             format_func=lambda t: f"{t:g}",
                             help="Applies to Rel-U and Doctor; MSP (T=1), ODIN (T=1000), Entropy and Energy "
                                  "(T=1) keep their standard settings. The paper's values 0.5, 1, 1.1, 1.2, 1.5, "
                                  "2, 5, 10, 100, 1000 are all steps.")
        with c_eps:
            if not has_model:  # the slider shows the ε actually used
                st.session_state["eps"] = 0.0
            st.select_slider("ε (input pre-processing)", options=ui.EPSILONS, key="eps",
                             format_func=lambda e: f"{e:g}", disabled=not has_model)
            if not has_model:
                st.caption("ε needs the model and the images; this run has logits only.")
        with c_split:
            st.select_slider("tuning split fraction", options=protocol.TUNE_FRACTION_PRESETS, key="tune_fraction",
                             format_func=lambda f: f"{f:.0%}")
            st.number_input("split seed", min_value=0, max_value=10_000, step=1, key="seed")
        with c_det:
            st.multiselect("detectors", list(ui.DETECTOR_LABELS), format_func=ui.DETECTOR_LABELS.get,
                           key="detectors")
            o1, o2 = st.columns(2)
            o1.radio("operating point", ["target TPR", "coverage"], key="op_kind")
            o2.slider("target", 0.05, 1.0, step=0.01, key="op_target")

    lam = "auto" if lam_auto else float(st.session_state["lam"])
    temperature = float(st.session_state["temperature"])
    eps = float(st.session_state["eps"]) if has_model else 0.0
    tune_fraction = float(st.session_state["tune_fraction"])
    seed = int(st.session_state["seed"])
    keys = list(st.session_state["detectors"]) or list(ui.DEFAULT_DETECTORS)
    ui.write_query_params(lam, temperature, eps, tune_fraction, seed, run_)

    perturbed, subset, eps_note = None, None, ""
    if eps > 0:
        perturbed, subset, eps_note, eps_pending = _eps_inputs(run_id, temperature, lam, tune_fraction, seed, eps)
        with c_eps:
            st.caption(eps_note)
            if eps_pending is not None:
                _eps_watch(eps_pending.key)
    try:
        view = _view(run_id, temperature, lam, tune_fraction, seed, keys, perturbed, subset)
    except Exception as exc:  # noqa: BLE001 - one line for the user; show_error logs anything unexpected
        ui.show_error(exc, "Explore")
        return
    # The paired bootstrap (~100 ms at 10k) runs beside the figures in a background job; the tables below
    # wait for it briefly, else show it when it lands (_paired_watch).
    paired_job = None if view.paired else ui.paired_job(view, seed)
    correct_eval = view.correct[view.eval_idx]
    kind = "tpr" if st.session_state["op_kind"] == "target TPR" else "coverage"
    target = float(st.session_state["op_target"])
    points = {k: metrics.operating_point(d.eval_uncertainty, correct_eval, kind, target) for k, d in view.detectors.items()}
    heat, roc, rc = ui.view_figures(view, class_names, {k: points[k] for k in keys}, keys)

    # ---------------------------------------------------------------- D* and the confusion matrix
    left, right = st.columns(2)
    with left:
        doctor_matrix = st.toggle("Show Doctor's implicit matrix instead (ones off the diagonal)", key="show_doctor")
        if doctor_matrix:
            heat = figures.dstar_heatmap(detectors.hamming_matrix(len(class_names)), class_names,
                                         title="Doctor's implicit matrix (ones off the diagonal, unit norm)")
        _chart(heat, "dstar")
        npy = io.BytesIO()
        np.save(npy, view.dstar)
        _download_row(heat, "dstar", [("D* (CSV)", figures.matrix_csv(view.dstar, class_names).encode(),
                                       "dstar_matrix.csv", "text/csv"),
                                      ("D* (.npy)", npy.getvalue(), "dstar.npy", "application/octet-stream")])
        st.caption(f"Fitted on the tuning split ({view.tune_idx.size} samples) at T = {temperature:g}, "
                   f"λ = {view.lam_used:.3g}; normalised to unit Frobenius norm."
                   + (f" {protocol.FALLBACK_LABEL}: D* is empty at this λ, so Rel-U ranks exactly like Doctor."
                      if view.fallback else ""))
    with right:
        cm, cm_fig = ui.confusion_figure(run_id, tune_fraction, seed)
        event = _chart(cm_fig, "confusion", on_select="rerun", selection_mode="points")
        _download_row(cm_fig, "confusion")
        st.caption("Rows: true class, columns: predicted class (tuning split). Grey: correct predictions. "
                   "Click a cell to see its samples below.")
    if st.session_state.get("_pair_run") != run_id:  # a new run opens its gallery on its most frequent confusion
        st.session_state["_pair_run"] = run_id
        st.session_state["pair_true"], st.session_state["pair_pred"] = (
            int(v) for v in np.unravel_index(np.argmax(np.where(np.eye(len(cm), dtype=bool), -1, cm)), cm.shape))
    points_selected = (event or {}).get("selection", {}).get("points", []) if event else []
    if points_selected and "customdata" in points_selected[0]:
        pair = tuple(int(v) for v in points_selected[0]["customdata"][:2])
        if st.session_state.get("_applied_pair") != pair:
            st.session_state["_applied_pair"] = pair
            st.session_state["pair_true"], st.session_state["pair_pred"] = pair

    # ---------------------------------------------------------------- curves and metrics
    c_roc, c_rc = st.columns(2)
    with c_roc:
        _chart(roc, "roc")
        _download_row(roc, "roc")
    with c_rc:
        _chart(rc, "risk_coverage")
        _download_row(rc, "risk_coverage")

    rows = {view.detectors[k].name: {"FPR95 ↓": view.detectors[k].summary["fpr95"],
                                     "AUROC ↑": view.detectors[k].summary["auroc"],
                                     "AURC ↓": view.detectors[k].summary["aurc"],
                                     "E-AURC ↓": view.detectors[k].summary["eaurc"],
                                     "accuracy": view.accuracy_eval} for k in keys}
    table = pd.DataFrame(rows).T
    relu_row, doctor_row = ui.DETECTOR_LABELS["relu"], ui.DETECTOR_LABELS["doctor"]
    if relu_row in table.index and doctor_row in table.index:
        table.loc["Rel-U − Doctor"] = table.loc[relu_row] - table.loc[doctor_row]
        table = table.astype(float)

    if paired_job is not None and paired_job.wait(PAIRED_WAIT_S):
        if paired_job.state == jobs.DONE:
            view.paired = paired_job.result  # kept with the view for the widgets that do not change it
        else:  # failed (shown once) or cancelled from the jobs panel: asking again retries
            if paired_job.state == jobs.FAILED:
                ui.show_error(InputError(paired_job.error), "the paired bootstrap")
            jobs.MANAGER.forget(paired_job.key)
    significant = {f"{stats.METRIC_LABELS[m]} {'↑' if d.higher_is_better else '↓'}": d
                   for m, d in view.paired.items() if d.significant}

    def _highlight(row: pd.Series) -> list[str]:
        # Only a difference whose paired interval excludes 0 is coloured: the rest is noise.
        if row.name != "Rel-U − Doctor":
            return [""] * len(row)
        return ["" if column not in significant else
                f"background-color: {'#c7e9c0' if significant[column].a_is_better() else '#fcbba1'}; font-weight: bold"
                for column in row.index]

    st.subheader("Metrics on the evaluation split")
    st.dataframe(table.style.apply(_highlight, axis=1).format("{:.4f}", na_rep=""))
    st.caption(f"{protocol.FPR_CONVENTION}. Accuracy is the classifier's, shared by every detector. "
               f"Evaluation split: {view.eval_idx.size} samples; "
               + (f"{eps_note} (Rel-U and Doctor pre-processed)." if perturbed is not None
                  else f"ε = {eps:g}." if eps == 0 else "clean scores while the ε pass runs."))
    st.download_button("metrics (CSV)", table.to_csv(), file_name="metrics.csv", mime="text/csv",
                       on_click="ignore", key="dl_metrics")
    _report_buttons(run_, view, [heat, cm_fig, roc, rc], table,
                    {"T (Rel-U, Doctor)": f"{temperature:g}", "λ": lam if isinstance(lam, str) else f"{lam:g}",
                     "λ used": f"{view.lam_used:.4g}",
                     "D*": protocol.FALLBACK_LABEL if view.fallback else "learned on the tuning split",
                     "ε (input pre-processing)": eps_note or f"{eps:g}", "tuning split fraction": f"{tune_fraction:g}",
                     "split seed": seed, "tuning / evaluated samples": f"{view.tune_idx.size:,} / {view.eval_idx.size:,}",
                     "detectors": ", ".join(view.detectors[k].name for k in keys),
                     "operating point": f"{st.session_state['op_kind']} {target:g}",
                     "selection": "fixed settings (no search)"})
    st.markdown("**Is Rel-U better than Doctor here?** Paired differences on this evaluation split:")
    if view.paired:
        st.dataframe(ui.paired_rows(view.paired), hide_index=True)
        st.caption(f"95 % percentile interval over {next(iter(view.paired.values())).n_resamples} paired "
                   "bootstrap resamples of the evaluation samples (the same resample scores both detectors). The "
                   "difference row above is coloured only where the interval excludes 0.")
    elif paired_job is not None and paired_job.running:
        _paired_watch(paired_job.key)

    # ---------------------------------------------------------------- operating point
    st.subheader("Operating point")
    op_rows = {}
    for k in keys:
        p = points[k]
        op_rows[view.detectors[k].name] = {"threshold": p.threshold, "TPR": p.tpr, "FPR": p.fpr,
                                           "coverage": p.coverage, "risk": p.risk, **p.counts(correct_eval)}
    st.dataframe(pd.DataFrame.from_dict(op_rows, orient="index").style.format(
        {"threshold": "{:.4g}", "TPR": "{:.4f}", "FPR": "{:.4f}", "coverage": "{:.4f}", "risk": "{:.4f}"}))
    what = f"TPR ≥ {target:.0%}" if kind == "tpr" else f"coverage ≥ {target:.0%}"
    st.caption(f"Each detector's threshold is the lowest reaching {what} on the evaluation split; it accepts "
               "the predictions with uncertainty ≤ threshold. Errors caught = misclassified and rejected. "
               "Marked with × on both curves.")

    # ---------------------------------------------------------------- galleries
    st.subheader("Samples of a confusion-matrix cell")
    g1, g2, g3 = st.columns([2, 2, 3])
    true_class = g1.selectbox("true class", range(len(class_names)), format_func=class_names.__getitem__,
                              key="pair_true")
    pred_class = g2.selectbox("predicted class", range(len(class_names)), format_func=class_names.__getitem__,
                              key="pair_pred")
    split_name = g3.radio("from", ["tuning split (as the matrix)", "evaluation split"], horizontal=True,
                          key="gallery_split")
    pool = view.tune_idx if split_name.startswith("tuning") else view.eval_idx
    labels = run_.labels
    cell = pool[(labels[pool] == true_class) & (view.predictions[pool] == pred_class)]
    st.caption(f"{cell.size} samples with true class {class_names[true_class]} predicted as "
               f"{class_names[pred_class]}; clean uncertainty scores (higher = more likely wrong).")
    _gallery(cell, view, keys, class_names)

    st.subheader("Errors one detector catches and the other misses")
    errors = ~correct_eval
    relu_reject, doctor_reject = ~points["relu"].accepted, ~points["doctor"].accepted
    only_relu = view.eval_idx[errors & relu_reject & ~doctor_reject]
    only_doctor = view.eval_idx[errors & doctor_reject & ~relu_reject]
    a, b = st.columns(2)
    with a:
        st.markdown(f"**Caught by Rel-U, missed by Doctor: {only_relu.size}**")
        _gallery(only_relu, view, ["relu", "doctor"], class_names, limit=12, columns=4)
    with b:
        st.markdown(f"**Caught by Doctor, missed by Rel-U: {only_doctor.size}**")
        _gallery(only_doctor, view, ["relu", "doctor"], class_names, limit=12, columns=4)


try:
    explore_panel(run.run_id)
except Cancelled:
    st.warning("Cancelled.")
